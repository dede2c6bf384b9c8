"""A ``<table>``'s rows on a node, and the node's tables by name: the state Borealis's table boxes share.

:class:`KeyedRows` is the one owner of a table's rows: the boxes that
access the table (``insert``, ``update``, ``delete``, ``select``,
node/operators/table.py) hold the same object and change it only through
its methods.  Rows are kept by key, in the order their keys entered (a
replaced row keeps its place), which is the order a select emits them in.

Durability: a table box's ``state()`` is its table's :meth:`KeyedRows.state`
(the rows and a version, counting every change), so the table is in every
snapshot and travels with every box that moves.  :meth:`KeyedRows.adopt`
takes a copy that is newer than the rows held: restoring each of a
table's boxes from one snapshot restores the table once, and the boxes of
a table moved together leave it, on the target, as the last of them left
the source.

:class:`TableStore` is a node's tables by name, kept by whoever builds the
node's operators (node/operator_host.py): the boxes built for a table get
its rows.

>>> store = TableStore()
>>> rows = store.table("T", (0,))
>>> rows.put((1, "a")); rows.put((2, "b")); rows.put((1, "c"))
>>> rows.rows(), rows.version
([(1, 'c'), (2, 'b')], 3)
>>> again = TableStore().table("T", (0,))
>>> again.adopt(rows.state()); again.rows()
[(1, 'c'), (2, 'b')]
>>> store.table("T", (0,)) is rows
True
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


class KeyedRows:
    """One table's rows by key (the key: the values of the fields at ``keys``)."""

    def __init__(self, keys: tuple[int, ...]):
        self.keys = keys
        self._rows: dict[tuple, tuple] = {}
        self.version = 0  # changes applied since the table was created, wherever they were applied

    def key(self, row: tuple) -> tuple:
        return tuple(row[i] for i in self.keys)

    def put(self, row: tuple) -> None:
        """Add ``row``, replacing the row of its key (which keeps its place)."""
        self._rows[self.key(row)] = row
        self.version += 1

    def holds(self, row: tuple) -> bool:
        return self._rows.get(self.key(row)) == row

    def remove(self, row: tuple) -> None:
        del self._rows[self.key(row)]
        self.version += 1

    def replace(self, old: tuple, new: tuple) -> None:
        """``old`` becomes ``new``; a new key takes the row to the end (and replaces a row that had it)."""
        if self.key(old) == self.key(new):
            self._rows[self.key(new)] = new
        else:
            del self._rows[self.key(old)]
            self._rows[self.key(new)] = new
        self.version += 1

    def matching(self, test: Callable[[tuple], bool]) -> list[tuple]:
        """The rows ``test`` holds for, in table order (a list: the caller may change the table meanwhile)."""
        return [row for row in self._rows.values() if test(row)]

    def rows(self) -> list[tuple]:
        return list(self._rows.values())

    def __len__(self) -> int:
        return len(self._rows)

    def state(self) -> dict[str, Any]:
        return {"version": self.version, "rows": [list(r) for r in self._rows.values()]}

    def adopt(self, state: dict[str, Any]) -> None:
        """Take a copy of the table (:meth:`state`) when it is newer than what is held."""
        if int(state.get("version", 0)) <= self.version:
            return
        self._rows = {}
        for row in state.get("rows", []):
            self._rows[self.key(tuple(row))] = tuple(row)
        self.version = int(state["version"])


class TableStore:
    """A node's tables by name.  A table is made the first time a box asks for it."""

    def __init__(self) -> None:
        self._tables: dict[str, KeyedRows] = {}

    def table(self, name: str, keys: tuple[int, ...]) -> KeyedRows:
        """Table ``name``'s rows (made empty when new, or when its key changed)."""
        found = self._tables.get(name)
        if found is None or found.keys != keys:
            found = self._tables[name] = KeyedRows(keys)
        return found

    def keep(self, names: Iterable[str]) -> None:
        """Forget the tables no box accesses any more (a table declared again starts empty, like a new box)."""
        wanted = set(names)
        for name in [n for n in self._tables if n not in wanted]:
            del self._tables[name]
