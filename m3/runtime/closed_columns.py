"""A window join's closed leaf rows as Arrow columns, cut from the native backend's dump of a map: no row built.

Why: a closing of a window join (node/operators/m3winjoin.py) read each
leaf's closed entries from C as a dict of decoded keys, made them view rows,
sorted them into windows, made them ``(end, key, value)`` triples, grouped
them per window and made them stage relation rows -- six Python passes over
every closed row (Nexmark q5: ~6,000 rows per window, two thirds of the
query's CPU) before the stages (m3/winstages.py) joined them, by then
with Arrow (:mod:`.definition_columns`).  A leaf whose view is one map's
entries (a plain view of one map, or a view computed when read whose one
map's key holds the whole row) has its relation's columns in that map's dump
already: an INT key column's code is its value, an INT map's value bits are
its value.  So the relation is numpy slices of the dump, cut per window by
one sort, handed to the stages as a ``pyarrow.Table``.

Exact, or not used (:func:`leaf_columns` answers None, the row path runs): a
column of another type than INT (a STRING's code is an id, a FLOAT's bits
are not its order), a FLOAT map, a view with NULLs shown (an indicator
key), a view that is not one map read as it is, a leaf whose rows repeat
(not DISTINCT: its count is a multiplicity), and the Python backend (no dump).
An entry whose value is 0 is absent (a map holds no 0), as the row path leaves
it out: the one column of such a leaf is a count (a group's or a row's), never
a SUM, which has its hidden count beside it (m3/compiler/winrows.py) and so two
columns: a window whose SUM is 0 is a row (issue 34).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ..ast import MapRef, Var
from ..nullable import ViewNulls
from .closed import whole_row_entries
from .views import view_form

VALUE = -1  # in :attr:`LeafColumns.columns`: the map's value, not a key column


@dataclass(frozen=True)
class LeafColumns:
    """Where a leaf relation's columns are in one map's dump: ``columns`` per relation column the map's key
    position (or :data:`VALUE`); the window's key position there, and the shift from it to the window's end
    (0 when it holds the end, the window's size when it holds the start)."""

    map: str
    columns: tuple[int, ...]
    window: int
    shift: int

    def per_window(self, keys: np.ndarray, values: np.ndarray) -> dict[int, pa.Table]:
        """The relation's rows of each closed window (by its end) from a dump's ``keys`` (``(n, arity)`` codes)
        and ``values``: present entries only (a value 0 is no row).

        >>> leaf = LeafColumns("m", (0, VALUE), window=1, shift=0)
        >>> got = leaf.per_window(np.array([[7, 20], [8, 10], [9, 20], [6, 10]]), np.array([2, 1, 0, 3]))
        >>> {end: table.to_pylist() for end, table in got.items()}
        {10: [{'c0': 8, 'c1': 1}, {'c0': 6, 'c1': 3}], 20: [{'c0': 7, 'c1': 2}]}
        """
        present = values != 0
        keys, values = keys[present], values[present]
        if not len(values):
            return {}
        ends = keys[:, self.window] + self.shift
        order = np.argsort(ends, kind="stable")
        ends, keys, values = ends[order], keys[order], values[order]
        bounds = np.flatnonzero(np.diff(ends)) + 1
        starts = np.concatenate(([0], bounds))
        stops = np.concatenate((bounds, [len(ends)]))
        columns = [values if c == VALUE else np.ascontiguousarray(keys[:, c]) for c in self.columns]
        names = [f"c{i}" for i in range(len(columns))]
        return {int(ends[a]): pa.table([pa.array(col[a:b]) for col in columns], names=names)
                for a, b in zip(starts, stops)}


def leaf_columns(runtime, view: str, picks: Sequence[tuple[bool, int]], distinct: bool, position: int,
                 is_end: bool, size: int) -> LeafColumns | None:
    """Where leaf view ``view``'s relation columns (a stage reader's ``picks``: per column from the view's key or
    value, at which position) are in one map's dump, the window at view key ``position``; None where this
    module does not apply (module docstring)."""
    native = runtime.native_maps()
    program = runtime.program
    decl = program.view(view)
    if native is None or not distinct or decl.where is not None or len(decl.columns) != 1 or \
            decl.columns[0].denominator is not None or ViewNulls.of(decl.keys, decl.internal, [decl.columns[0].name]):
        return None
    if decl.general:
        at = _general_keys(program, decl)
        if at is None:
            return None
        name, key_at = at
    elif (name := decl.plain_map) is not None and decl.columns[0].numerator == name:
        key_at = tuple(range(native.arity[name]))
    else:
        return None
    if name in native.codec.float_maps or any(t != "INT" for t in native.codec.key_types[name]):
        return None
    if len(key_at) != len(runtime.views[view].keys) or any(kind != "INT" for _, kind in runtime.views[view].keys):
        return None
    if any(not from_key and i != 0 for from_key, i in picks):
        return None
    columns = tuple(key_at[i] if from_key else VALUE for from_key, i in picks)
    return LeafColumns(name, columns, key_at[position], 0 if is_end else size)


def _general_keys(program, decl) -> tuple[str, tuple[int, ...]] | None:
    """A view computed when read that is one map's entries (its one column that map at the row, the map's key
    holding the whole row, no WHERE, no NULL indicator): the map and, per view key column, its key position."""
    form = view_form(program, decl)
    whole = whole_row_entries(form)
    if whole is None:
        return None
    expr = form.columns[0][1]
    if not isinstance(expr, MapRef) or not all(isinstance(a, Var) for a in expr.args):
        return None
    slot_at = {slot: j for j, slot in enumerate(whole.slots)}
    return whole.map, tuple(slot_at[row_var] for row_var in form.out)


def read_windows(native, leaves: Mapping[str, LeafColumns],
                 bounds: Mapping[str, tuple[int, float]]) -> dict[int, dict[str, pa.Table]]:
    """Per closed window (by its end, in order) each leaf relation's rows there (``leaves``: relation -> where
    its columns are; ``bounds``: each windowed map's window position and bound, :meth:`.Closing.bounds`): one
    dump per map, shared by the leaves reading it (and by the removal of the same entries after)."""
    dumps = {name: native.columns_at_most(name, *bounds[name]) for name in {c.map for c in leaves.values()}}
    out: dict[int, dict[str, pa.Table]] = {}
    for relation, where in leaves.items():
        for end, table in where.per_window(*dumps[where.map]).items():
            out.setdefault(end, {})[relation] = table
    return dict(sorted(out.items()))
