"""READ_STABLE for a partitioned box: each member's maps as they were at the end of a stable epoch (§4.2-4.3).

A member applies versions of several epochs (in ordered execution, in
epoch order; for all-LOCAL plans, as they arrive), so its maps are "now",
not "at the end of epoch S".  Because every map entry is a sum, the value at
the end of ``S`` is the current value minus what versions of later epochs
added: :class:`EpochDeltas` keeps, per epoch, the net change each version of
that epoch made to each entry, and :class:`StableView` reads the maps at
``S`` through them.  Epochs at or before the previous stable epoch are
dropped whenever the leader announces a new one (a reader that learned the
stable epoch just before the next one was announced still gets its answer),
so a member keeps the entries touched in the last few epochs only, and none
once the input stops and two more epochs pass.

>>> from boreas.m3 import Runtime
>>> rt = Runtime("CREATE STREAM R(a INT, b INT); SELECT a, SUM(b) AS total FROM R GROUP BY a")
>>> d = EpochDeltas()
>>> _ = rt.apply_grouped([("R", 1, [(1, 10)])]); d.record(0, "Q1_total", 1, 10)
>>> _ = rt.apply_grouped([("R", 1, [(1, 5), (2, 7)])]); d.record(1, "Q1_total", 1, 5); d.record(1, "Q1_total", 2, 7)
>>> at0 = StableView(rt, d, 0)
>>> at0.read_slice("Q1_total"), at0.view("Q1"), StableView(rt, d, 1).read_sum("Q1_total")
([((1,), 10)], {(1,): 10}, 22)
>>> d.forget_through(0); d.epochs(), d.entries()
([1], 2)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from .. import query

_EPSILON = 1e-9


class EpochDeltas:
    """Per epoch, per map, the net change versions of that epoch made to each entry (stored keys)."""

    def __init__(self) -> None:
        self._by_epoch: dict[int, dict[str, dict]] = {}
        # epoch -> [(map, {stored key: value}, sign)]: whole segments moved in (+1) or out (-1) at an epoch's
        # start, kept as the dicts the move built (no per-entry copy on the flip's critical path)
        self._bulk: dict[int, list[tuple[str, dict, int]]] = {}
        # epoch -> [(map, keys, deltas, decode)]: what a native member's batches changed, as the C side's key codes
        # and value changes (numpy arrays, no Python object per key); ``decode(map, keys)`` gives their stored
        # keys, asked only when a stable read, a snapshot or a count wants them
        self._coded: dict[int, list[tuple[str, object, object, Callable]]] = {}

    def record(self, epoch: int, name: str, stored_key, delta) -> None:
        maps = self._by_epoch.setdefault(epoch, {})
        entries = maps.setdefault(name, {})
        total = entries.get(stored_key, 0) + delta
        if total:
            entries[stored_key] = total
        else:
            entries.pop(stored_key, None)

    def bulk(self, epoch: int, name: str, entries: dict, sign: int) -> None:
        """Record ``sign`` times every value of ``entries`` (``{stored key: value}``) as changes of ``epoch``.

        A segment that moves records a million entries at once: they are
        kept as the ``dict`` itself (which the caller no longer changes), so
        recording costs nothing, and they sum with the other deltas of the
        epoch wherever deltas are read.
        """
        if entries:
            self._bulk.setdefault(epoch, []).append((name, entries, sign))

    def coded(self, epoch: int, name: str, keys, deltas, decode: Callable) -> None:
        """Record the changes ``deltas`` (a numpy array) at ``keys`` (the native maps' codes, one row per key, each
        key once) as changes of ``epoch``; decoded by ``decode(name, keys) -> [stored key]`` when read."""
        if len(deltas):
            self._coded.setdefault(epoch, []).append((name, keys, deltas, decode))

    def epoch_maps(self, epoch: int) -> dict[str, dict]:
        """``{map: {stored key: delta}}`` of ``epoch``, to add to in place (a delta that sums to 0 is removed)."""
        return self._by_epoch.setdefault(epoch, {})

    def forget_through(self, epoch: int) -> None:
        """Drop the deltas of epochs up to ``epoch``: nobody reads before its end any more."""
        for e in [e for e in self._by_epoch if e <= epoch]:
            del self._by_epoch[e]
        for e in [e for e in self._bulk if e <= epoch]:
            del self._bulk[e]
        for e in [e for e in self._coded if e <= epoch]:
            del self._coded[e]

    def after(self, epoch: int, name: str) -> Iterator[tuple[object, object]]:
        """``(stored key, delta)`` of ``name`` made by versions of epochs after ``epoch``."""
        for e, maps in self._by_epoch.items():
            if e > epoch:
                yield from maps.get(name, {}).items()
        for e, moved in self._bulk.items():
            if e > epoch:
                for n, entries, sign in moved:
                    if n == name:
                        yield from entries.items() if sign > 0 else ((k, -v) for k, v in entries.items())
        for e, chunks in self._coded.items():
            if e > epoch:
                for n, keys, deltas, decode in chunks:
                    if n == name:
                        yield from zip(decode(n, keys), deltas.tolist())

    def epochs(self) -> list[int]:
        return sorted({*self._by_epoch, *self._bulk, *self._coded})

    def entries(self) -> int:
        """How many (epoch, map, key) deltas are kept: the memory READ_STABLE costs."""
        return (sum(len(entries) for maps in self._by_epoch.values() for entries in maps.values())
                + sum(len(entries) for moved in self._bulk.values() for _, entries, _ in moved)
                + sum(len(deltas) for chunks in self._coded.values() for _, _, deltas, _ in chunks))

    # -- plain data (snapshots) ---------------------------------------------------
    def _summed(self) -> dict[int, dict[str, dict]]:
        """Every epoch's deltas per map, moved segments added in (what a snapshot holds)."""
        out = {e: {name: dict(entries) for name, entries in maps.items()} for e, maps in self._by_epoch.items()}
        coded = {e: [(name, dict(zip(decode(name, keys), deltas.tolist())), 1) for name, keys, deltas, decode in chunks]
                 for e, chunks in self._coded.items()}
        for e, moved in [*self._bulk.items(), *coded.items()]:
            maps = out.setdefault(e, {})
            for name, entries, sign in moved:
                into = maps.setdefault(name, {})
                for k, v in entries.items():
                    total = into.get(k, 0) + sign * v
                    if total:
                        into[k] = total
                    else:
                        into.pop(k, None)
        return out

    def state(self, encode) -> list:
        by_epoch = self._summed() if self._bulk or self._coded else self._by_epoch
        return [[e, [[name, [[encode(name, k), v] for k, v in entries.items()]] for name, entries in maps.items()]]
                for e, maps in by_epoch.items()]

    def restore(self, data: list, decode) -> None:
        self._by_epoch = {int(e): {name: {decode(name, k): v for k, v in entries} for name, entries in maps}
                          for e, maps in data}
        self._bulk = {}
        self._coded = {}


class StableView:
    """A read-only view of a runtime's maps at the end of epoch ``epoch`` (the query API's read methods)."""

    def __init__(self, runtime, deltas: EpochDeltas, epoch: int):
        self.runtime = runtime
        self.deltas = deltas
        self.version = epoch
        self.program = runtime.program
        self.views = runtime.views

    def _entries(self, name: str, keys: tuple) -> dict[tuple, object]:
        store = self.runtime.store
        pattern = tuple(keys)
        found = dict(self.runtime.read_slice(name, *pattern))
        fixed = [(i, k) for i, k in enumerate(pattern) if k is not None]
        for stored, delta in self.deltas.after(self.version, name):
            key = store.unpack(name, stored)
            if all(key[i] == want for i, want in fixed):
                found[key] = found.get(key, 0) - delta
        return {k: v for k, v in found.items() if abs(v) > _EPSILON}

    def read_slice(self, name: str, *keys) -> list[tuple[tuple, object]]:
        return list(self._entries(name, keys).items())

    def read_sum(self, name: str, *keys):
        return query.aggregate("sum", self.read_slice(name, *keys))

    def read_min(self, name: str, *keys):
        return query.aggregate("min", self.read_slice(name, *keys))

    def read_max(self, name: str, *keys):
        return query.aggregate("max", self.read_slice(name, *keys))

    def read_stable(self, name: str, agg: str = "slice", *keys):
        return query.aggregate(agg, self.read_slice(name, *keys))

    def view(self, name: str, *pattern) -> dict[tuple, object]:
        """The view's rows at the epoch's end (its maps share their keys)."""
        v = self.program.view(name)
        maps = {m: self._entries(m, pattern) for m in v.maps}
        keys = dict.fromkeys(k for entries in maps.values() for k in entries)
        out = {}
        for key in keys:
            values = []
            for c in v.columns:
                num = maps[c.numerator].get(key, 0)
                if c.denominator is None:
                    values.append(num)
                else:
                    den = maps[c.denominator].get(key, 0)
                    values.append(num / den if den else 0)
            out[key] = values[0] if len(values) == 1 else tuple(values)
        return out
