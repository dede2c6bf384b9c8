"""A mapping that shares an older version's entries, so a new version costs what changed.

A :class:`~.index.CatalogIndex` holds dicts the size of the catalog (each
stream's references and state, each box's typing, each stream's schema);
deriving the next index from a one-box change used to copy them whole
(``dict(base.refs)``: 100,000 boxes made about 300,000 names to copy per
commit).  A :class:`Layered` mapping is a frozen *base* dict shared with the
versions before it, plus the few entries this version wrote (removals as a
marker).  :meth:`Layered.over` starts the next version: it copies only the
written entries, and folds everything into a new base once they outgrow
about the square root of the base (so a version costs O(written + sqrt(n)),
and the folding, O(n), comes once every sqrt(n) written entries).  The base
is never written: each version's entries stay what they were.  Unlike a
dict's, the order of the keys is the base's, then the new ones: a key
removed and set again keeps its place (what an index holds is looked up by
key, never read in order).

>>> v1 = Layered.over({"a": 1, "b": 2})
>>> v2 = Layered.over(v1)
>>> v2["c"] = 3; del v2["a"]
>>> sorted(v1.items()), sorted(v2.items()), len(v2), "a" in v2
([('a', 1), ('b', 2)], [('b', 2), ('c', 3)], 2, False)
"""

from __future__ import annotations

import math
from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, MutableMapping, Set, ValuesView
from typing import Any, TypeVar

K = TypeVar("K")
V = TypeVar("V")

_GONE: Any = object()  # a removal written over the base


class Layered(MutableMapping[K, V]):
    """A version of a mapping: a shared, never written base dict and this version's own writes."""

    __slots__ = ("_base", "_own", "_len")

    def __init__(self, base: dict[K, V], own: dict[K, Any] | None = None, length: int | None = None):
        self._base = base
        self._own: dict[K, Any] = own if own is not None else {}
        self._len = len(base) if length is None else length

    @classmethod
    def over(cls, other: Mapping[K, V]) -> Layered[K, V]:
        """The next version of ``other``: equal to it, and written without changing it.

        ``other``, if a plain dict, becomes the shared base: it must not be
        written after this (an index's dicts are not, once it is derived)."""
        if isinstance(other, Layered):
            if len(other._own) > 64 + math.isqrt(len(other._base)):
                return cls(other.flat())
            return cls(other._base, dict(other._own), other._len)
        return cls(other if type(other) is dict else dict(other))

    def flat(self) -> dict[K, V]:
        """The entries as a new plain dict (the base's order, then new keys in the order written)."""
        if not self._own:
            return dict(self._base)
        # Copied and updated in C, then the removals taken out: the same entries in the same order as a walk
        # (a key of the base keeps its place, new keys follow in the order written), at the cost of the
        # writes in Python rather than the base (a deployment's part folds 100,000-entry bases: issue 37).
        own = self._own
        out = dict(self._base)
        out.update(own)
        for key in [k for k, v in own.items() if v is _GONE]:
            del out[key]  # (only a key of the base is ever marked removed)
        return out

    def __getitem__(self, key: K) -> V:
        own = self._own
        if key in own:
            value = own[key]
            if value is _GONE:
                raise KeyError(key)
            return value
        return self._base[key]

    def get(self, key: K, default: Any = None) -> Any:
        value = self._own.get(key, self)
        if value is self:
            return self._base.get(key, default)
        return default if value is _GONE else value

    def __contains__(self, key: object) -> bool:
        value = self._own.get(key, self)  # type: ignore[call-overload]
        if value is self:
            return key in self._base
        return value is not _GONE

    def __setitem__(self, key: K, value: V) -> None:
        own = self._own
        was = own.get(key, self)  # (inlined __contains__: a set per box typed in a deployment's part)
        if was is _GONE or (was is self and key not in self._base):
            self._len += 1
        own[key] = value

    def __delitem__(self, key: K) -> None:
        if key not in self:
            raise KeyError(key)
        self._len -= 1
        if key in self._base:
            self._own[key] = _GONE
        else:
            del self._own[key]

    def pop(self, key: K, default: Any = _GONE) -> Any:
        """As ``dict.pop``; without the exception MutableMapping's raises and catches for a missing key (a
        deployment's part pops every new stream's state before typing it)."""
        own = self._own
        value = own.get(key, self)
        if value is self:
            value = self._base.get(key, _GONE)
        if value is _GONE:
            if default is _GONE:
                raise KeyError(key)
            return default
        del self[key]  # (through __delitem__, which a tracking subclass notes: catalog/tracked.py)
        return value

    def __iter__(self) -> Iterator[K]:
        if not self._own:
            return iter(self._base)
        return self._walk()

    def _walk(self) -> Iterator[K]:
        own = self._own
        for key in self._base:
            if own.get(key) is not _GONE:
                yield key
        for key, value in own.items():
            if value is not _GONE and key not in self._base:
                yield key

    def __reversed__(self) -> Iterator[K]:
        """The keys from the last (new keys from the last written, then the base's from its end)."""
        own, base = self._own, self._base
        for key in reversed(own):
            if own[key] is not _GONE and key not in base:
                yield key
        for key in reversed(base):
            if own.get(key) is not _GONE:
                yield key

    # -- views: always live over this version (a view taken before its first write sees that write, as a
    # dict's does), read through without copying (a walk that stops at its first find, as a patched
    # slice's look for a schema still used does, costs what it reads, not a copy of the whole)

    def keys(self) -> KeysView[K]:  # type: ignore[override]
        return KeysView(self)

    def items(self) -> ItemsView[K, V]:  # type: ignore[override]
        return _Items(self)

    def values(self) -> ValuesView[V]:  # type: ignore[override]
        return _Values(self)

    def _pairs(self) -> Iterator[tuple[K, V]]:
        own, base = self._own, self._base
        if not own:
            yield from base.items()
            return
        for key, value in base.items():
            value = own.get(key, value)
            if value is not _GONE:
                yield key, value
        for key, value in own.items():
            if value is not _GONE and key not in base:
                yield key, value

    def _whole(self) -> dict[K, V]:
        """The entries as one plain dict, this version's own folded into a base of its own first if any
        (for a whole compare, which costs the size of the mapping anyway)."""
        if self._own:
            self._base, self._own = self.flat(), {}
        return self._base

    def copy(self) -> Layered[K, V]:
        """A version equal to this one whose writes leave it alone (as ``dict.copy``)."""
        return Layered.over(self)

    def __eq__(self, other: object) -> bool:
        """Equal entries; two versions over the same base compare only what either wrote."""
        if isinstance(other, Layered):
            if other._base is self._base:
                if self._len != other._len:
                    return False
                return all(self.get(k, _GONE) == other.get(k, _GONE) for k in (*self._own, *other._own))
            return self._whole() == other._whole()
        if isinstance(other, Mapping):
            return self._whole() == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def written_since(self, other: Mapping[K, Any]) -> set[K] | None:
        """The keys where this version may differ from ``other`` when both are versions over one base
        (what either wrote over it); None when they share none (compare them whole)."""
        if isinstance(other, Layered) and other._base is self._base:
            return {*self._own, *other._own}
        if other is self._base:
            return set(self._own)
        return None

    def __len__(self) -> int:
        return self._len

    def __repr__(self) -> str:
        return f"Layered({self.flat()!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled (and deep-copied) flat: the removal marker is this process's object."""
        return (Layered, (self.flat(),))


class _Items(ItemsView):
    """A layered version's items, read through (:meth:`Layered.items`)."""

    def __init__(self, layered: Layered) -> None:
        super().__init__(layered)
        self.layered = layered

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        return self.layered._pairs()


class _Values(ValuesView):
    """A layered version's values, read through (:meth:`Layered.values`)."""

    def __init__(self, layered: Layered) -> None:
        super().__init__(layered)
        self.layered = layered

    def __iter__(self) -> Iterator[Any]:
        return (value for _, value in self.layered._pairs())


#: A set this large changed by a few elements becomes a :class:`LayeredSet` over it rather than a new
#: frozenset (tests set it to 0 to take that path with small sets).
SET_FROM = 256


class LayeredSet(Set):
    """A frozen set written as a shared *base* frozenset, the elements added to it and those removed.

    An index's references name, per node, every box on it (5,000 at 100,000 boxes over 20 nodes): a
    move or a one-box submission made that set again, a copy the size of the node.  :meth:`moved` gives
    the next version sharing the base, its delta folded into a new base once it outgrows about the square
    root of the base, as :class:`Layered` does.  Unordered, as a frozenset (iterated: added, then the base).

    >>> v1 = LayeredSet.moved(frozenset(range(300)), {0}, {500})
    >>> v2 = LayeredSet.moved(v1, {500, 1}, {0})
    >>> len(v1), 0 in v1, 500 in v1, len(v2), sorted(v2) == [0, *range(2, 300)]
    (300, False, True, 299, True)
    """

    __slots__ = ("_base", "_added", "_removed", "_hash")

    def __init__(self, base: frozenset[Any], added: frozenset[Any], removed: frozenset[Any]):
        self._base, self._added, self._removed = base, added, removed  # (added ∩ base and removed - base: empty)
        self._hash: int | None = None

    # -- a drop-in frozenset: operators give frozensets (``Set``'s mixins build the result with
    # ``_from_iterable``, by default ``cls(iterable)``, which this constructor does not take), equal
    # LayeredSets and frozensets hash alike, and the named methods a frozenset has exist

    @classmethod
    def _from_iterable(cls, it: Iterable[Any]) -> frozenset[Any]:
        return frozenset(it)

    def __hash__(self) -> int:
        """As the equal frozenset's (computed once: the set never changes)."""
        if self._hash is None:
            self._hash = hash(frozenset(self))
        return self._hash

    def union(self, *others: Iterable[Any]) -> frozenset[Any]:
        return frozenset(self).union(*others)

    def intersection(self, *others: Iterable[Any]) -> frozenset[Any]:
        return frozenset(self).intersection(*others)

    def difference(self, *others: Iterable[Any]) -> frozenset[Any]:
        return frozenset(self).difference(*others)

    def symmetric_difference(self, other: Iterable[Any]) -> frozenset[Any]:
        return frozenset(self).symmetric_difference(other)

    def issubset(self, other: Iterable[Any]) -> bool:
        return frozenset(self).issubset(other)

    def issuperset(self, other: Iterable[Any]) -> bool:
        return all(item in self for item in other)

    def copy(self) -> LayeredSet:
        return self

    @classmethod
    def moved(cls, old: Iterable[Any] | None, removed: Iterable[Any], added: Iterable[Any]) -> Set[Any]:
        """``old`` less ``removed`` plus ``added`` (``old`` left as it is), sharing ``old``'s base when
        the change is small against it; a plain frozenset when ``old`` is small."""
        removed, added = frozenset(removed), frozenset(added)
        if isinstance(old, LayeredSet):
            base, plus, minus = old._base, old._added, old._removed
        elif old is not None and len(old) >= SET_FROM:  # type: ignore[arg-type]
            base, plus, minus = frozenset(old), frozenset(), frozenset()
        else:
            return (frozenset(old or ()) - removed) | added
        plus = (plus - removed) | (added - base)
        minus = (minus | (removed & base)) - added  # (removed, then added: as ``(old - removed) | added``)
        if len(plus) + len(minus) > 64 + math.isqrt(len(base)):
            return (base - minus) | plus
        return cls(base, plus, minus) if plus or minus else base

    def __contains__(self, item: object) -> bool:
        return item in self._added or (item in self._base and item not in self._removed)

    def __iter__(self) -> Iterator[Any]:
        yield from self._added
        removed = self._removed
        if not removed:
            yield from self._base
            return
        for item in self._base:
            if item not in removed:
                yield item

    def __len__(self) -> int:
        return len(self._base) - len(self._removed) + len(self._added)

    def __repr__(self) -> str:
        return f"LayeredSet({set(self)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (frozenset, (frozenset(self),))
