"""Map storage: hash maps of non-zero entries plus the secondary indexes their slices need.

A map is a ``dict`` of its non-zero entries: an entry that becomes zero is
deleted, so memory is proportional to the non-zero entries.  A statement that
reads a *slice* — some key positions bound by event variables, the others
loop variables — needs a secondary index on the bound positions: a ``dict``
from the bound values to a ``dict`` from the remaining values to the entry's
value (a key prefix → sub-map, stored by value so a slice loop needs no second
lookup).  Which indexes exist follows from the program alone
(:func:`index_specs`).

Keys are *stored* as tuples, except that a key of one column is stored as
that value alone — in the maps, and in the bound and remaining parts of index
entries.  That saves building a tuple per access, and it keeps access to
recent keys cache-local: an ``int`` hashes to itself, so consecutive ids land
in neighbouring slots of the hash table, where a tuple's hash scatters them
over a table that, at millions of entries, is far larger than the CPU cache.
The generated triggers use the stored form directly; everything else goes
through :meth:`MapStore.pack`, :meth:`MapStore.unpack` and friends, and sees
tuples.

A map with indexes is not stored a second time as a flat ``dict``: its first
index (the *primary* one) is its storage, ``data[name] is
indexes[name][primary]``, and an entry is found by its bound part, then its
remaining part.  That halves the work of every update of such a map and its
memory, and the outer lookup is by one column when the slice binds one.

>>> from ..syntax import parse_program
>>> p = parse_program('''CREATE STREAM R(A INT, B INT);
... DECLARE MAP n[A: INT, B: INT] : INT; DECLARE MAP m[B: INT] : INT;
... ON +R(A, B) DO { m[C] += n[A, C] }''')
>>> index_specs(p)
{'n': [(0,)]}
>>> s = MapStore(p, index_specs(p))
>>> s.set("n", (1, 2), 5); s.set("n", (1, 3), 6); s.set("m", (7,), 1)
>>> s.data["n"], s.data["n"] is s.indexes["n"][(0,)], s.data["m"]
({1: {2: 5, 3: 6}}, True, {7: 1})
>>> s.match("n", (1, None)), s.get("n", (1, 3)), list(s.items("m")), s.size("n")
([((1, 2), 5), ((1, 3), 6)], 6, [((7,), 1)], 2)
>>> s.set("n", (1, 2), 0); s.set("n", (1, 3), 0); s.data["n"], s.indexes["n"][(0,)]
({}, {})
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator
from functools import partial
from operator import itemgetter

from ..ast import MapRef, Program, Var, walk
from .keybind import bind_keys
from .keycut import Cut
from .nanorder import canonical


def index_specs(program: Program) -> dict[str, list[tuple[int, ...]]]:
    """For each map, the key positions of the slices some statement reads (neither none nor all), the statements
    read as both code generators read them (:func:`.keybind.bind_keys`)."""
    out: dict[str, list[tuple[int, ...]]] = {}
    for t in program.triggers:
        for s in bind_keys(program, t).statements:
            for node in walk(s.expr):
                if not isinstance(node, MapRef):
                    continue
                bound = tuple(i for i, a in enumerate(node.args) if not (isinstance(a, Var) and a.name not in t.vars))
                if 0 < len(bound) < len(node.args) and bound not in out.setdefault(node.name, []):
                    out[node.name].append(bound)
    return {k: v for k, v in out.items() if v}


def primary_index(specs: dict[str, list[tuple[int, ...]]], name: str) -> tuple[int, ...] | None:
    """The index that stores map ``name`` (its first), or None for a flat map.

    >>> primary_index({"n": [(1,), (0,)]}, "n"), primary_index({"n": [(1,)]}, "m")
    ((1,), None)
    """
    positions = specs.get(name)
    return positions[0] if positions else None


class MapStore:
    """The maps of one program, with their indexes; the generated triggers write ``data``/``indexes`` directly."""

    def __init__(self, program: Program, specs: dict[str, list[tuple[int, ...]]]):
        self.arity = {m.name: len(m.keys) for m in program.maps}
        self.key_types = {m.name: tuple(k.type for k in m.keys) for m in program.maps}
        self.data: dict[str, dict] = {m.name: {} for m in program.maps}
        self.specs = {name: list(specs.get(name, [])) for name in self.data}
        self.indexes: dict[str, dict[tuple[int, ...], dict]] = {
            name: {pos: {} for pos in self.specs[name]} for name in self.data
        }
        self.primary: dict[str, tuple[int, ...] | None] = {name: primary_index(self.specs, name) for name in self.data}
        self.cuts: dict[str, dict[tuple[int, ...], Cut]] = {
            name: {pos: Cut.of(self.arity[name], pos) for pos in self.specs[name]} for name in self.data}
        for name, pos in self.primary.items():
            if pos is not None:
                self.data[name] = self.indexes[name][pos]

    # -- key forms -----------------------------------------------------
    def pack(self, name: str, key: tuple):
        """The stored form of a full key of map ``name``."""
        return key[0] if self.arity[name] == 1 else key

    def unpack(self, name: str, key) -> tuple:
        """The key tuple of a stored key of map ``name``."""
        return (key,) if self.arity[name] == 1 else key

    def split(self, name: str, pos: tuple[int, ...], key: tuple) -> tuple:
        """A key tuple's bound part (positions ``pos``) and remaining part, both in stored form."""
        cut = self.cuts[name].get(pos) or Cut.of(self.arity[name], pos)
        return cut.bound(key), cut.rest(key)

    def join(self, name: str, pos: tuple[int, ...], bound, rest) -> tuple:
        """The key tuple of an index entry: the inverse of :meth:`split`."""
        return (self.cuts[name].get(pos) or Cut.of(self.arity[name], pos)).join(bound, rest)

    # -- entries ---------------------------------------------------------
    def get(self, name: str, key: tuple, default=0):
        return self.get_stored(name, self.pack(name, key), default)

    def get_stored(self, name: str, key, default=0):
        """:meth:`get` for a key in stored form (as the journals hold them)."""
        pos = self.primary[name]
        if pos is None:
            return self.data[name].get(key, default)
        cut = self.cuts[name][pos]  # a map with an index has 2 key columns or more: its stored key is the tuple
        sub = self.data[name].get(cut.bound(key))
        return default if sub is None else sub.get(cut.rest(key), default)

    def getter(self, name: str) -> Callable:
        """``(stored key, default) -> value`` of map ``name``: :meth:`get_stored` specialised for one map.

        For the per-key loops after every batch (view changes, a partitioned
        member's deltas).  Made per use, not kept: it holds the map's dict.

        >>> from ..syntax import parse_program
        >>> st = MapStore(parse_program("CREATE STREAM R(A INT, B INT); DECLARE MAP n[A: INT, B: INT] : INT;"
        ...                             "ON +R(A, B) DO { n[A, B] += 1 }"), {"n": [(1,)]})
        >>> st.set("n", (1, 2), 5); st.getter("n")((1, 2), 0), st.getter("n")((2, 2), 0), st.data["n"]
        (5, 0, {2: {1: 5}})
        """
        data, pos = self.data[name], self.primary[name]
        n = self.arity[name]
        if pos is None:
            return data.get
        if n == 1 or len(pos) == n:
            return partial(self.get_stored, name)
        bound_of = itemgetter(*pos)  # one position: the value itself, as stored() makes it
        rest_of = itemgetter(*(i for i in range(n) if i not in pos))

        def get(key, default=0):
            sub = data.get(bound_of(key))
            return default if sub is None else sub.get(rest_of(key), default)
        return get

    def items(self, name: str) -> Iterator[tuple[tuple, object]]:
        """Every entry of map ``name`` as ``(key tuple, value)``."""
        data, pos = self.data[name], self.primary[name]
        if pos is not None:
            join = self.cuts[name][pos].join
            return ((join(b, r), v) for b, sub in data.items() for r, v in sub.items())
        if self.arity[name] == 1:
            return (((k,), v) for k, v in data.items())
        return iter(data.items())

    def stored_keys(self, name: str) -> Iterator:
        """Every key of map ``name`` in stored form."""
        if self.primary[name] is None:
            return iter(self.data[name])
        return (k for k, _ in self.items(name))

    def column_counts(self, name: str, column: int) -> list[tuple[object, int]]:
        """``(value, entries)`` pairs: how many entries of map ``name`` hold each value at key ``column``
        (a value may repeat).  Read off the primary index without building a key when it is on that column
        alone, so counting a partitioned map's entries per segment costs a step per group, not per entry."""
        data, pos, n = self.data[name], self.primary[name], self.arity[name]
        if pos is None:
            return [(k, 1) for k in data] if n == 1 else [(k[column], 1) for k in data]
        if column in pos:  # a group per bound value: its entries all hold it
            i = pos.index(column)
            return [(b, len(sub)) for b, sub in data.items()] if len(pos) == 1 else \
                [(b[i], len(sub)) for b, sub in data.items()]
        rest = [j for j in range(n) if j not in pos]
        i = rest.index(column)
        return [(r, 1) for sub in data.values() for r in sub] if len(rest) == 1 else \
            [(r[i], 1) for sub in data.values() for r in sub]

    def size(self, name: str) -> int:
        """The number of (non-zero) entries of map ``name``."""
        data = self.data[name]
        return len(data) if self.primary[name] is None else sum(map(len, data.values()))

    def set(self, name: str, key: tuple, value) -> None:
        """Set one entry by key tuple (0 deletes it), keeping the indexes in step.  Not the hot path."""
        self.set_stored(name, self.pack(name, key), value)

    def set_stored(self, name: str, key, value) -> None:
        """:meth:`set` for a key in stored form (as the journals hold them)."""
        data = self.data[name]
        if self.primary[name] is None:  # a flat map has no indexes (its first index would be its storage)
            if value:
                data[key] = value
            elif key in data:
                del data[key]
            return
        cuts = self.cuts[name]  # a map with an index has 2 key columns or more: its stored key is the tuple
        if not value:
            first = cuts[self.primary[name]]
            sub = data.get(first.bound(key))
            if sub is None or first.rest(key) not in sub:
                return
        for pos, idx in self.indexes[name].items():
            cut = cuts[pos]
            b, r = cut.bound(key), cut.rest(key)
            if value:
                sub = idx.get(b)
                if sub is None:
                    idx[b] = {r: value}
                else:
                    sub[r] = value
            else:
                sub = idx[b]
                del sub[r]
                if not sub:
                    del idx[b]

    def add_many(self, name: str, items: list[tuple[object, object]], replace: bool = False) -> None:
        """Add each ``(stored key, value)`` of ``items`` to its entry, in order (a sum of 0 deletes it); with
        ``replace``, set the entry to the value instead (a native mirror catching up: m3/runtime/native/mirror.py).
        A bulk load installs millions of entries: each index's key parts are cut by one ``itemgetter`` each,
        not by :meth:`split`'s general tuple building per entry and index.

        >>> from ..ast import Column, MapDecl
        >>> s = MapStore(Program((), (MapDecl("n", (Column("A", "INT"), Column("B", "INT")), "INT"),), (), ()),
        ...              {"n": [(1,), (0,)]})
        >>> s.add_many("n", [((1, 2), 5), ((1, 3), 1), ((1, 2), -5)]); s.data["n"], s.indexes["n"][(0,)]
        ({3: {1: 1}}, {1: {3: 1}})
        >>> s.add_many("n", [((1, 3), 2)]); s.get("n", (1, 3)), s.match("n", (1, None))
        (3, [((1, 3), 3)])
        >>> s.add_many("n", [((1, 3), 7), ((2, 2), 0)], replace=True); s.data["n"], s.indexes["n"][(0,)]
        ({3: {1: 7}}, {1: {3: 7}})
        """
        if self.primary[name] is None:
            data = self.data[name]
            for key, value in items:
                total = value if replace else data.get(key, 0) + value
                if total:
                    data[key] = total
                else:
                    data.pop(key, None)
            return
        arity = self.arity[name]
        cut = [(idx, itemgetter(*pos), itemgetter(*[i for i in range(arity) if i not in pos]))
               for pos, idx in self.indexes[name].items()]
        primary = self.data[name]
        bound0, rest0 = next((b, r) for idx, b, r in cut if idx is primary)
        for key, value in items:
            if replace:
                total = value
            else:
                sub = primary.get(bound0(key))
                total = (0 if sub is None else sub.get(rest0(key), 0)) + value
            for idx, bound, rest in cut:
                b = bound(key)
                if total:
                    idx.setdefault(b, {})[rest(key)] = total
                elif (sub := idx.get(b)) is not None:
                    sub.pop(rest(key), None)
                    if not sub:
                        del idx[b]

    def match(self, name: str, pattern: tuple) -> list[tuple[tuple, object]]:
        """The entries whose key matches ``pattern`` (``None`` = any value), as ``(key tuple, value)``.

        A fully bound pattern is one lookup; a pattern bound exactly on an
        index's positions reads that index's sub-map; a pattern bound on all of
        an index's positions and more reads that sub-map and filters it; anything
        else scans, the sub-maps of the primary index whose bound part cannot
        match skipped whole, and a key built only for an entry that matches.

        >>> from ..ast import Column, MapDecl
        >>> s = MapStore(Program((), (MapDecl("n", tuple(Column(c, "INT") for c in "ABC"), "INT"),), (), ()),
        ...              {"n": [(0, 1)]})
        >>> s.add_many("n", [((1, 2, 3), 5), ((1, 2, 4), 6), ((1, 3, 3), 7), ((2, 2, 3), 8)])
        >>> s.match("n", (None, 2, 3)), s.match("n", (1, None, 3)), s.match("n", (None, None, 4))
        ([((1, 2, 3), 5), ((2, 2, 3), 8)], [((1, 2, 3), 5), ((1, 3, 3), 7)], [((1, 2, 4), 6)])
        """
        n = self.arity[name]
        if len(pattern) > n:
            raise ValueError(f"pattern has {len(pattern)} keys but map {name} has {n}")
        pattern = tuple(pattern) + (None,) * (n - len(pattern))
        bound = tuple(i for i, k in enumerate(pattern) if k is not None)
        if len(bound) == n:
            v = self.get_stored(name, self.pack(name, pattern), None)
            return [] if v is None else [(pattern, v)]
        if not bound:
            return list(self.items(name))
        index = self.indexes[name].get(bound)
        if index is not None:
            cut = self.cuts[name][bound]
            b = cut.bound(pattern)
            sub = index.get(b)
            if not sub:
                return []
            join = cut.join
            return [(join(b, r), v) for r, v in sub.items()]
        return list(self._scan(name, pattern, bound))

    def has(self, name: str, pattern: tuple) -> bool:
        """Whether some entry's key matches ``pattern``: :meth:`match`, stopped at the first entry found (a
        view asks this of every row it evaluates, often of a pattern no index serves).

        >>> from ..ast import Column, MapDecl
        >>> s = MapStore(Program((), (MapDecl("n", (Column("A", "INT"), Column("B", "INT")), "INT"),), (), ()), {})
        >>> s.set("n", (1, 2), 5); s.has("n", (None, 2)), s.has("n", (None, 3)), s.has("n", ())
        (True, False, True)
        """
        n = self.arity[name]
        pattern = tuple(pattern) + (None,) * (n - len(pattern))
        bound = tuple(i for i, k in enumerate(pattern) if k is not None)
        if not bound:
            return self.size(name) > 0
        if len(bound) == n:
            return self.get_stored(name, self.pack(name, pattern), None) is not None
        index = self.indexes[name].get(bound)
        if index is not None:
            return bool(index.get(self.cuts[name][bound].bound(pattern)))
        return next(self._scan(name, pattern, bound), None) is not None

    def _scan(self, name: str, pattern: tuple, bound: tuple[int, ...]) -> Iterator[tuple[tuple, object]]:
        """:meth:`match` for a pattern bound on no index's positions exactly (``bound``: its bound positions)."""
        def test(positions: tuple[int, ...]):
            """A predicate on a stored key part over ``positions``: its bound ones equal the pattern's (None:
            none of them is bound)."""
            at = [j for j, i in enumerate(positions) if pattern[i] is not None]
            if not at:
                return None
            if len(positions) == 1:
                want = pattern[positions[0]]
                return lambda part: part == want
            get = itemgetter(*at)
            want = get(tuple(pattern[i] for i in positions))
            return lambda part: get(part) == want

        pos = self.primary[name]
        if pos is None:  # a flat map of 2 key columns or more (one of 1 is bound whole or not at all)
            ok = test(tuple(range(self.arity[name])))
            return ((k, v) for k, v in self.data[name].items() if ok(k))
        for p, idx in self.indexes[name].items():  # an index bound whole: one sub-map, filtered
            if all(pattern[i] is not None for i in p):
                cut = self.cuts[name][p]
                sub = idx.get(cut.bound(pattern))
                ok = test(cut.rest_pos)
                b = cut.bound(pattern)
                return iter(()) if not sub else ((cut.join(b, r), v) for r, v in sub.items() if ok(r))
        cut = self.cuts[name][pos]
        ok_b, ok_r = test(cut.pos), test(cut.rest_pos)
        join = cut.join
        return ((join(b, r), v) for b, sub in self.data[name].items() if ok_b is None or ok_b(b)
                for r, v in sub.items() if ok_r is None or ok_r(r))

    def clear(self) -> None:
        for name in self.data:
            self.data[name].clear()
            for idx in self.indexes[name].values():
                idx.clear()

    def entries(self) -> int:
        """Total number of (non-zero) entries over all maps."""
        return sum(self.size(name) for name in self.data)

    # -- state transfer: plain lists, dates as ISO strings -------------
    def encode(self) -> dict[str, list[list]]:
        out = {}
        for name in self.data:
            dates = [i for i, t in enumerate(self.key_types[name]) if t == "DATE"]
            rows = []
            for key, value in self.items(name):
                row = list(key)
                for i in dates:
                    row[i] = row[i].isoformat()
                row.append(value)
                rows.append(row)
            out[name] = rows
        return out

    def decode(self, maps: dict[str, list[list]]) -> None:
        self.clear()
        for name, rows in maps.items():
            if name not in self.data:
                raise KeyError(name)
            dates = [i for i, t in enumerate(self.key_types[name]) if t == "DATE"]
            floats = [i for i, t in enumerate(self.key_types[name]) if t == "FLOAT"]  # (one NaN key: nanorder)
            n = self.arity[name]
            for row in rows:
                if len(row) != n + 1:
                    raise ValueError(f"entry of map {name} has {len(row) - 1} keys, expected {n}")
                key = list(row[:n])
                for i in dates:
                    key[i] = datetime.date.fromisoformat(key[i])
                for i in floats:
                    key[i] = canonical(key[i])
                self.set(name, tuple(key), row[n])
