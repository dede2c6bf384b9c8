"""The Cumulus query API (seed 001, Figure 3) over maps: READ_SLICE, READ_SUM, READ_MIN, READ_MAX, READ_STABLE.

A map is a ``dict`` from key tuples to non-zero values.  ``None`` in a key
pattern is a wildcard; a pattern shorter than the key is padded with
wildcards.  Only non-zero entries exist, so every read sees exactly the
"matching nonzero entries" the paper specifies.

>>> m = {(1, "a"): 2, (1, "b"): 5, (2, "a"): -1}
>>> sorted(read_slice(m, 1))
[((1, 'a'), 2), ((1, 'b'), 5)]
>>> read_sum(m, None, "a"), read_min(m), read_max(m, 1), read_max(m, 3)
(1, -1, 5, None)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

AGGREGATES = ("slice", "sum", "min", "max")


def _matches(data: Mapping, keys: tuple):
    pattern = tuple(keys)
    fixed = [(i, k) for i, k in enumerate(pattern) if k is not None]
    if not fixed:
        return data.items()
    if not data:
        return []
    arity = len(next(iter(data)))
    if len(pattern) > arity:
        raise ValueError(f"pattern has {len(pattern)} keys but the map has {arity}")
    if len(fixed) == arity:
        v = data.get(pattern)
        return [] if v is None else [(pattern, v)]
    return [(k, v) for k, v in data.items() if all(k[i] == want for i, want in fixed)]


def read_slice(data: Mapping, *keys) -> list[tuple[tuple, object]]:
    """All non-zero entries matching the pattern, as ``(key, value)`` pairs."""
    return list(_matches(data, keys))


def read_sum(data: Mapping, *keys):
    """The sum of the matching entries (0 when none match)."""
    return sum(v for _, v in _matches(data, keys))


def read_min(data: Mapping, *keys):
    """The least matching value, or None when no entry matches."""
    return min((v for _, v in _matches(data, keys)), default=None)


def read_max(data: Mapping, *keys):
    """The greatest matching value, or None when no entry matches."""
    return max((v for _, v in _matches(data, keys)), default=None)


def aggregate(agg: str, entries: list[tuple[tuple, object]]):
    """READ_STABLE's ``agg_type`` over matching entries: the entries themselves, or their sum, min or max.

    >>> aggregate("sum", [((1,), 2), ((2,), 3)]), aggregate("max", []), aggregate("slice", [((1,), 2)])
    (5, None, [((1,), 2)])
    """
    agg = agg.lower()
    if agg == "slice":
        return list(entries)
    if agg == "sum":
        return sum(v for _, v in entries)
    if agg == "min":
        return min((v for _, v in entries), default=None)
    if agg == "max":
        return max((v for _, v in entries), default=None)
    raise ValueError(f"unknown aggregate {agg!r}; expected one of {', '.join(AGGREGATES)}")


def read(data: Mapping, agg: str, *keys):
    """Dispatch on ``agg`` in ``slice|sum|min|max`` (READ_STABLE's ``agg_type``)."""
    return aggregate(agg, list(_matches(data, keys)))


@dataclass(frozen=True)
class Snapshot:
    """A consistent, immutable copy of every map after one completed batch (READ_STABLE).

    >>> s = Snapshot(3, {"q": {(1,): 4}})
    >>> s.version, s.read_sum("q"), s.read_stable("q", "max", 1)
    (3, 4, 4)
    """

    version: int
    maps: Mapping[str, Mapping[tuple, object]]

    def __post_init__(self):
        frozen = {name: MappingProxyType(dict(m)) for name, m in self.maps.items()}
        object.__setattr__(self, "maps", MappingProxyType(frozen))

    def _map(self, name: str) -> Mapping:
        try:
            return self.maps[name]
        except KeyError:
            raise KeyError(f"no map named {name!r}") from None

    def read_slice(self, name: str, *keys):
        return read_slice(self._map(name), *keys)

    def read_sum(self, name: str, *keys):
        return read_sum(self._map(name), *keys)

    def read_min(self, name: str, *keys):
        return read_min(self._map(name), *keys)

    def read_max(self, name: str, *keys):
        return read_max(self._map(name), *keys)

    def read_stable(self, name: str, agg: str = "slice", *keys):
        return read(self._map(name), agg, *keys)
