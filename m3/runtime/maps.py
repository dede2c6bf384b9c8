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

>>> from ..syntax import parse_program
>>> p = parse_program('''CREATE STREAM R(A INT, B INT);
... DECLARE MAP n[A: INT, B: INT] : INT; DECLARE MAP m[B: INT] : INT;
... ON +R(A, B) DO { m[C] += n[A, C] }''')
>>> index_specs(p)
{'n': [(0,)]}
>>> s = MapStore(p, index_specs(p))
>>> s.set("n", (1, 2), 5); s.set("n", (1, 3), 6); s.set("m", (7,), 1)
>>> s.indexes["n"][(0,)], s.data["m"]
({1: {2: 5, 3: 6}}, {7: 1})
>>> s.match("n", (1, None)), s.match("m", (7,)), list(s.items("m"))
([((1, 2), 5), ((1, 3), 6)], [((7,), 1)], [((7,), 1)])
>>> s.set("n", (1, 2), 0); s.set("n", (1, 3), 0); s.data["n"], s.indexes["n"][(0,)]
({}, {})
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator

from ..ast import MapRef, Program, Var, walk


def index_specs(program: Program) -> dict[str, list[tuple[int, ...]]]:
    """For each map, the key positions of the slices some statement reads (neither none nor all)."""
    out: dict[str, list[tuple[int, ...]]] = {}
    for t in program.triggers:
        for s in t.statements:
            for node in walk(s.expr):
                if not isinstance(node, MapRef):
                    continue
                bound = tuple(i for i, a in enumerate(node.args) if not (isinstance(a, Var) and a.name not in t.vars))
                if 0 < len(bound) < len(node.args) and bound not in out.setdefault(node.name, []):
                    out[node.name].append(bound)
    return {k: v for k, v in out.items() if v}


def stored(values: tuple):
    """The stored form of a key or key part: the value itself when there is one, else the tuple.

    >>> stored((4,)), stored((4, 5)), stored(())
    (4, (4, 5), ())
    """
    return values[0] if len(values) == 1 else values


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

    # -- key forms -----------------------------------------------------
    def pack(self, name: str, key: tuple):
        """The stored form of a full key of map ``name``."""
        return key[0] if self.arity[name] == 1 else key

    def unpack(self, name: str, key) -> tuple:
        """The key tuple of a stored key of map ``name``."""
        return (key,) if self.arity[name] == 1 else key

    def split(self, name: str, pos: tuple[int, ...], key: tuple) -> tuple:
        """A key tuple's bound part (positions ``pos``) and remaining part, both in stored form."""
        rest = tuple(key[i] for i in range(self.arity[name]) if i not in pos)
        return stored(tuple(key[i] for i in pos)), stored(rest)

    # -- entries ---------------------------------------------------------
    def get(self, name: str, key: tuple, default=0):
        return self.data[name].get(self.pack(name, key), default)

    def items(self, name: str) -> Iterator[tuple[tuple, object]]:
        """Every entry of map ``name`` as ``(key tuple, value)``."""
        data = self.data[name]
        if self.arity[name] == 1:
            return (((k,), v) for k, v in data.items())
        return iter(data.items())

    def set(self, name: str, key: tuple, value) -> None:
        """Set one entry by key tuple (0 deletes it), keeping the indexes in step.  Not the hot path."""
        self.set_stored(name, self.pack(name, key), value)

    def set_stored(self, name: str, key, value) -> None:
        """:meth:`set` for a key in stored form (as the journals hold them)."""
        data = self.data[name]
        indexes = self.indexes[name].items()
        if value:
            data[key] = value
            for pos, idx in indexes:
                b, r = self.split(name, pos, self.unpack(name, key))
                idx.setdefault(b, {})[r] = value
        elif key in data:
            del data[key]
            for pos, idx in indexes:
                b, r = self.split(name, pos, self.unpack(name, key))
                sub = idx[b]
                del sub[r]
                if not sub:
                    del idx[b]

    def match(self, name: str, pattern: tuple) -> list[tuple[tuple, object]]:
        """The entries whose key matches ``pattern`` (``None`` = any value), as ``(key tuple, value)``.

        A fully bound pattern is one lookup; a pattern bound exactly on an
        index's positions reads that index's sub-map; anything else scans.
        """
        n = self.arity[name]
        if len(pattern) > n:
            raise ValueError(f"pattern has {len(pattern)} keys but map {name} has {n}")
        pattern = tuple(pattern) + (None,) * (n - len(pattern))
        bound = tuple(i for i, k in enumerate(pattern) if k is not None)
        data = self.data[name]
        if len(bound) == n:
            v = data.get(self.pack(name, pattern))
            return [] if v is None else [(pattern, v)]
        if not bound:
            return list(self.items(name))
        index = self.indexes[name].get(bound)
        if index is not None:
            sub = index.get(stored(tuple(pattern[i] for i in bound)))
            if not sub:
                return []
            free = [i for i in range(n) if i not in bound]
            out = []
            for r, v in sub.items():
                key = list(pattern)
                for i, x in zip(free, (r,) if len(free) == 1 else r):
                    key[i] = x
                out.append((tuple(key), v))
            return out
        want = [(i, pattern[i]) for i in bound]
        return [(k, v) for k, v in self.items(name) if all(k[i] == x for i, x in want)]

    def clear(self) -> None:
        for name in self.data:
            self.data[name].clear()
            for idx in self.indexes[name].values():
                idx.clear()

    def entries(self) -> int:
        """Total number of (non-zero) entries over all maps."""
        return sum(len(d) for d in self.data.values())

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
            n = self.arity[name]
            for row in rows:
                if len(row) != n + 1:
                    raise ValueError(f"entry of map {name} has {len(row) - 1} keys, expected {n}")
                key = list(row[:n])
                for i in dates:
                    key[i] = datetime.date.fromisoformat(key[i])
                self.set(name, tuple(key), row[n])
