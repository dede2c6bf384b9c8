"""Exact output rows of m3 views over nullable columns against DuckDB's, NULLs as None (docs/m3.md "NULLs").

Why a module of its own: the shared harness (:mod:`m3_harness`) reads both sides' NULL values as 0; the NULL
tests (test_sql_null_keys_vs_duckdb.py, test_sql_null_subqueries_vs_duckdb.py) also compare each output row as a
user reads it, NULL keys and aggregates over only NULLs None, with DuckDB's rows and their multiplicities.
"""

from __future__ import annotations

from collections import Counter

from boreas.m3 import Runtime
from boreas.m3.ast import RelAtom, walk
from boreas.m3.nullable import shown_columns
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from m3_harness import EXAMPLES, Harness, close, exact_rows, scaled, value_strategy, workloads


def null_heavy(column, t):
    """Half NULL for the nullable columns ``b`` and ``c``, else the small default domain (0 among them: the NULL
    group must stay apart from 0's)."""
    return st.one_of(st.none(), value_strategy(t)) if column in ("b", "c") else value_strategy(t)


def _same(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(x is None and y is None or x is not None and y is not None and close(x, y)
                                    for x, y in zip(a, b))


def may_be_missing(values: tuple, width: int, strict: bool, always: bool = False, zeros_kept: bool = True) -> bool:
    """Whether DuckDB's row of ``values`` may be absent from the view, by a documented limitation only: a view
    without GROUP BY not declared ``ALWAYS`` (an aggregate over a derived table, with HAVING, ...: docs/m3.md
    "Rows") has no row while it reads none (SQL: one, of NULLs and COUNT 0); a group of zeros has
    none where rows are not exact and the query reads no nullable column (``zeros_kept`` False: compiled as
    DBToaster's, :func:`m3_harness.zero_groups_kept`).  Anything else missing is a regression, a group whose
    every value is NULL (SUM over only NULLs) or 0 (COUNT(b) over only NULLs) included: its hidden COUNT(*)
    keeps its row (docs/m3.md "NULLs")."""
    if always or not all(v in (None, 0) for v in values):
        return False
    return width == 0 or not strict and not zeros_kept and None not in values


class NullKeyHarness(Harness):
    """The shared harness, and each view's output rows (internal keys dropped, NULL keys None) against DuckDB's."""

    def compare(self, rt: Runtime, con, live, check_maps: bool) -> None:
        super().compare(rt, con, live, check_maps)
        for view, select in zip(self.program.views, self.queries):
            cur = con.execute(f"SELECT * FROM ({select})")
            cols = [d[0].lower() for d in cur.description]
            last = view.columns[shown_columns([c.name for c in view.columns])[-1]]
            counted = last.name.lower() not in cols  # a view of rows: a count per distinct row
            want = Counter(cur.fetchall())
            got: Counter = Counter()
            for key, value in rt.view(view.name).items():
                value = value if isinstance(value, tuple) else (value,)
                shown = tuple(key[i] for i in view.output_keys)
                if counted:
                    got[shown + value[:-1]] += value[-1]
                else:
                    got[shown + value] += 1
            width = len(view.output_keys)
            strict = exact_rows(view) or counted
            kept = view.name in self.zeros_kept
            for row in [w for w in want if not any(_same(g, w) for g in got) and may_be_missing(
                    w[width:], width, strict, view.always, kept)]:
                del want[row]
            assert len(got) == len(want), f"{view.name}: {sorted(got.items(), key=repr)} vs {sorted(want.items(), key=repr)}"
            for row, n in got.items():
                match = [w for w in want if _same(row, w) and want[w] == n]
                assert match, f"{view.name}: row {row} x{n} not in DuckDB's {sorted(want.items(), key=repr)}"


_HARNESSES: dict[tuple[type, str], NullKeyHarness] = {}


def check_rows_against_duckdb(sql: str, examples: int = EXAMPLES, value=null_heavy,
                              harness: type[NullKeyHarness] = NullKeyHarness) -> None:
    """Random NULL-heavy insert/delete batches into the relations the view reads; after each, the maps equal
    their definitions and the output rows DuckDB's (:class:`NullKeyHarness`); deleting every row empties every
    map.  ``value(column, type)``: a column's strategy (default :func:`null_heavy`); ``harness``: the comparison
    (a subclass of :class:`NullKeyHarness`)."""
    h = _HARNESSES.get((harness, sql)) or _HARNESSES.setdefault((harness, sql), harness(sql))
    used = {n.name for m in h.program.maps if m.definition is not None for n in walk(m.definition)
            if isinstance(n, RelAtom)}
    relations = {k: v for k, v in Runtime(h.program, backend="python").relations.items() if k in used}

    @settings(max_examples=scaled(examples), deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(workloads(relations, max_batches=5, max_ops=12, value=value))
    def check(batches):
        h.run(batches)

    check()
