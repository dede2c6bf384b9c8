"""A ranked view of rows whose changes are its map's: read from the native journal as columns, not as tuples.

Why: a top-N over a join's rows (Nexmark q9: auctions and their bids, ranked per auction) ranks a view
whose rows are one map's keys and whose value is that map's entry, a general view only because an output
column repeats a row variable (``A.id`` beside ``B.auction``: m3/runtime/entryviews.py).  Its changes went
through ``Runtime.changes()``: the C journal's keys brought into the Python mirror of the wide ``count`` map
and decoded to tuples, a tuple per changed row, the box's row memo (every row of the view) for the -old, and
the out rows made columns again for the top-N stage.  But the view's rows are the map's keys, so its
changelog is the map's: read here as a plain view's (:func:`.m3changes.view_changes`, the map's keys with
their count before and now by one C call, decoded per column), then the map's key columns arranged as the
view's (a repeated variable's column taken twice).  No mirror of the map is brought up to date per batch, no
row is a tuple and no row is memoised.

Only on the native backend, for a view :func:`~boreas.m3.runtime.entryviews.entry_map` names a map for,
every map key in the view's output and no nullable out field; else the box reads ``Runtime.changes()``.
"""

from __future__ import annotations

import pyarrow as pa

from boreas.catalog.model import Field, Schema
from boreas.m3.ast import ViewColumn, ViewDecl
from boreas.m3.boxtype import BoxPlan
from boreas.m3.runtime.entryviews import entry_map
from boreas.m3.runtime.views import view_form
from boreas.wire.columns import Columns, arrow_schema

from . import m3changes


class EntryChanges:
    """The changelog of a view of one map's rows, as the view's out columns (module docstring)."""

    def __init__(self, decl: ViewDecl, keys: tuple[tuple[str, str], ...], schema: Schema, picks: tuple[int, ...],
                 out: Schema):
        self.decl, self.keys, self.schema, self.picks = decl, keys, schema, picks
        self.out = arrow_schema(out)
        self.strings = m3changes.StringTable()

    @classmethod
    def of(cls, plan: BoxPlan) -> EntryChanges | None:
        """For the box's one view when its rows are one map's keys, every key shown, no field nullable; else
        None."""
        if len(plan.views) != 1:
            return None
        view, out = plan.views[0], plan.outputs[0]
        decl = plan.program.view(view.name)
        form = view_form(plan.program, decl)
        name = entry_map(form)
        if name is None or any(f.nullable for f in out.fields) or view.internal:
            return None
        shown = [form.out[j] for j in decl.output_keys]  # per out key column, its map key position
        arity = len(plan.program.map(name).keys)
        if sorted(set(shown)) != list(range(arity)) or len(out.fields) != len(shown) + 1:
            return None
        first = {i: shown.index(i) for i in range(arity)}  # a map key's first out column (its type)
        columns = plan.program.map(name).keys
        plain = ViewDecl(view.name, tuple(c.name for c in columns), (ViewColumn(decl.columns[0].name, name),))
        fields = tuple(Field(c.name, out.fields[first[i]].type) for i, c in enumerate(columns))
        schema = Schema(f"{out.name}.entries", fields + (out.fields[-1],))
        return cls(plain, tuple((c.name, c.type) for c in columns), schema, tuple(shown), out)

    def read(self, native) -> Columns | None:
        """The last batch's changes of the view (-old, +new) as a changelog of the view's out schema; None:
        nothing changed."""
        changed = m3changes.view_changes(native, self.decl, self.keys, self.schema, self.strings)
        if changed is None:
            return None
        batch = changed.batch
        arrays = [batch.column(i) for i in self.picks] + [batch.column(batch.num_columns - 1)]
        return Columns(pa.RecordBatch.from_arrays(arrays, schema=self.out), weights=changed.weights)
