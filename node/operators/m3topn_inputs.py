"""A ranked view that counts its one in port's rows by every column: the changes an inserting batch makes are the batch.

Why: a top-N over a stream's own rows (``SELECT * FROM (SELECT *, ROW_NUMBER() OVER (...) FROM Bid) WHERE ...``:
Nexmark's q18 and q19) ranks a view whose one map counts the port's rows keyed by all of their columns, each
shown as it is.  The compiler's trigger adds 1 to the row's entry for each row that enters, so when every row of
a batch enters (no sign field or weight takes one away), the view's multiplicities grow by exactly the batch's
rows, a row once per time it arrived: the delta of a count of rows is the rows.  The box read that change back
from the native journal instead (:class:`.m3topn_entries.EntryChanges`: ``rt_changelog``'s dedupe and a lookup
per changed key in a map that holds every row so far, then each STRING key's intern id decoded to its string
again), about 0.3 µs of q18's 0.94 µs CPU per bid (docs/benchmarks.md, "q18's view changes told by its input").
The triggers still run: the maps stay the box's state (snapshots, moves, the query API, a later deletion's
ranking of the whole view); only the reading back of the changes is skipped.

Not taken (the journal is read as before) where a batch has a row that leaves or is ignored, a null, a FLOAT
value of 0 or NaN (``-0.0`` and ``0.0``, and NaNs, may be one key to the runtime and two to the batch) or a value
that does not cast to the view's field; nor for a view with anything but that one count (a WHERE, a computed
column, a second map or relation, a DATE key: the runtime keeps its day, not the timestamp), nor where a STRING
column is read by no trigger (the map holds ``''`` for it: node/operators/m3columns.py, ``unread_strings``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from boreas.m3.ast import Const, MapRef, Program, Var
from boreas.m3.boxtype import BoxPlan, PortPlan
from boreas.wire.columns import Columns

from . import m3columns
from .m3topn_entries import EntryChanges

#: The key kinds whose Arrow values are the runtime's as they are (a DATE key is a day: not the timestamp).
KINDS = frozenset({"INT", "FLOAT", "STRING"})


def counts_rows(program: Program, relation: str, map_name: str, width: int) -> bool:
    """Whether ``map_name`` is only the count of ``relation``'s rows keyed by its ``width`` columns in order: the
    program's one relation and map, an inserted row adds 1 to its own entry and nothing else runs.

    >>> from boreas.m3.syntax import parse_program
    >>> prog = parse_program("CREATE STREAM B(a INT, s STRING); DECLARE MAP m[a: INT, s: STRING] : INT := 0;"
    ...                      " ON +B(a, s) DO { m[a, s] += 1; }")
    >>> counts_rows(prog, "B", "m", 2), counts_rows(prog, "B", "m", 3)
    (True, False)
    >>> counts_rows(parse_program("CREATE STREAM B(a INT, s STRING); DECLARE MAP m[s: STRING, a: INT] : INT := 0;"
    ...                           " ON +B(a, s) DO { m[s, a] += 1; }"), "B", "m", 2)
    False
    """
    if len(program.relations) != 1 or len(program.maps) != 1 or len(program.relations[0].columns) != width:
        return False
    inserts = [t for t in program.triggers if t.relation.lower() == relation.lower() and t.sign == 1]
    if len(inserts) != 1 or len(inserts[0].vars) != width or len(inserts[0].statements) != 1:
        return False
    trigger = inserts[0]
    statement = trigger.statements[0]
    return (statement.target == MapRef(map_name, tuple(Var(v) for v in trigger.vars))
            and isinstance(statement.expr, Const) and type(statement.expr.value) is int and statement.expr.value == 1)


@dataclass(frozen=True)
class InputRows:
    """Says, per batch of its port, the view's changes when they are the batch's rows (module docstring)."""

    port: PortPlan
    schema: pa.Schema = field(repr=False)  # the view's changelog: the key columns, then the count (EntryChanges' out schema)
    floats: tuple[int, ...]  # positions of the FLOAT columns (0 or NaN there: not taken)

    @classmethod
    def of(cls, plan: BoxPlan, entries: EntryChanges | None) -> InputRows | None:
        """For a box of one in port whose one view's rows are a count of that port's rows by all its columns
        (``entries``: the view read as its map's entries, keys in the map's order); else None."""
        if entries is None or len(plan.ports) != 1 or entries.picks != tuple(range(len(entries.picks))):
            return None
        port = plan.ports[0]
        map_name = entries.decl.columns[0].numerator
        kinds = [kind for _, kind in port.columns]
        if ([kind for _, kind in entries.keys] != kinds or not set(kinds) <= KINDS
                or not counts_rows(plan.program, port.relation, map_name, len(kinds))
                or m3columns.unread_strings(plan.program, port)):
            return None
        return cls(port, entries.out, tuple(i for i, kind in enumerate(kinds) if kind == "FLOAT"))

    def changes(self, columns: Columns) -> Columns | None:
        """The view's changelog after ``columns`` was applied (each row +1, its count 1), or None where the batch
        does not say it (a row leaves or is ignored, a null, a FLOAT 0 or NaN, a value its field cannot hold)."""
        try:
            parts, ignored = m3columns.signed_parts(columns, self.port)
        except ValueError:  # (a null sign or weight)
            return None
        if ignored or len(parts) != 1 or parts[0][0] != 1:
            return None
        batch = parts[0][1]
        picks = [i for i in range(batch.num_columns) if i != self.port.sign_index]
        arrays = [batch.column(i) for i in picks]
        if any(a.null_count for a in arrays):
            return None
        for i in self.floats:
            values = arrays[i].to_numpy(zero_copy_only=False)
            if not (values != 0).all() or np.isnan(values).any():
                return None
        fields = list(self.schema)
        try:
            arrays = [a if a.type == f.type else a.cast(f.type) for a, f in zip(arrays, fields)]
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OverflowError):
            return None
        count = fields[-1]
        arrays.append(pa.array(np.ones(batch.num_rows, np.int64)).cast(count.type))
        return Columns(pa.RecordBatch.from_arrays(arrays, schema=self.schema))
