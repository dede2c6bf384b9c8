"""Map storage: hash maps of non-zero entries plus the secondary indexes their slices need.

A map is a ``dict`` from key tuples to non-zero values: an entry that becomes
zero is deleted, so memory is proportional to the non-zero entries.  A
statement that reads a *slice* — some key positions bound by event
variables, the others loop variables — needs a secondary index on the bound
positions: ``dict`` from the bound values to a ``dict`` from the remaining
values to the entry's value (a key prefix → sub-map, stored by value so a
slice loop needs no second lookup).  Which indexes exist follows from the
program alone (:func:`index_specs`).

>>> from ..syntax import parse_program
>>> p = parse_program('''CREATE STREAM R(A INT, B INT);
... DECLARE MAP n[A: INT, B: INT] : INT; DECLARE MAP m[B: INT] : INT;
... ON +R(A, B) DO { m[C] += n[A, C] }''')
>>> index_specs(p)
{'n': [(0,)]}
>>> s = MapStore(p, index_specs(p))
>>> s.set("n", (1, 2), 5); s.indexes["n"][(0,)]
{(1,): {(2,): 5}}
>>> s.set("n", (1, 2), 0); s.data["n"], s.indexes["n"][(0,)]
({}, {})
"""

from __future__ import annotations

import datetime

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


class MapStore:
    """The maps of one program, with their indexes; the generated triggers write ``data``/``indexes`` directly."""

    def __init__(self, program: Program, specs: dict[str, list[tuple[int, ...]]]):
        self.arity = {m.name: len(m.keys) for m in program.maps}
        self.key_types = {m.name: tuple(k.type for k in m.keys) for m in program.maps}
        self.data: dict[str, dict[tuple, object]] = {m.name: {} for m in program.maps}
        self.specs = {name: list(specs.get(name, [])) for name in self.data}
        self.indexes: dict[str, dict[tuple[int, ...], dict]] = {
            name: {pos: {} for pos in self.specs[name]} for name in self.data
        }

    def split(self, name: str, pos: tuple[int, ...], key: tuple) -> tuple[tuple, tuple]:
        rest = tuple(key[i] for i in range(self.arity[name]) if i not in pos)
        return tuple(key[i] for i in pos), rest

    def set(self, name: str, key: tuple, value) -> None:
        """Set one entry (0 deletes it), keeping the indexes in step.  Not the hot path."""
        data = self.data[name]
        if value:
            data[key] = value
            for pos, idx in self.indexes[name].items():
                b, r = self.split(name, pos, key)
                idx.setdefault(b, {})[r] = value
        elif key in data:
            del data[key]
            for pos, idx in self.indexes[name].items():
                b, r = self.split(name, pos, key)
                sub = idx[b]
                del sub[r]
                if not sub:
                    del idx[b]

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
        for name, data in self.data.items():
            dates = [i for i, t in enumerate(self.key_types[name]) if t == "DATE"]
            rows = []
            for key, value in data.items():
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
