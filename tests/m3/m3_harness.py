"""Differential testing of the M3 runtime against DuckDB.

A workload is a list of batches of operations: ``("ins", relation, row)`` or
``("del", relation, i)`` (delete the i-th live row modulo their number).
After every batch, each view must agree with DuckDB evaluating the view's
SELECT over the rows inserted and not yet deleted, and every map must equal
its defining query evaluated over those rows.

Equality: every DuckDB group with a non-zero aggregate is in the view with
equal values (floats: 1e-9 tolerance; AVG as SUM/COUNT); every view row is a
DuckDB group.  A group whose aggregates are all zero may be absent from the
view only where its query reads no nullable column (:func:`zero_groups_kept`:
compiled as DBToaster's, its maps hold non-zero entries only and no COUNT(*)
of its groups is kept); a query reading one keeps its groups' COUNT(*)
(docs/m3.md "NULLs"), so its group of zeros is there.  A view with a condition (HAVING,
DISTINCT), a fold (MIN, MAX, COUNT DISTINCT) or of rows (no aggregates) must
hold exactly DuckDB's rows; a view of rows compares its ``count`` column with
the number of times DuckDB's result holds the row.  A query without GROUP BY
declared ``ALWAYS`` (an aggregate over relations, sqlO) has its one row always, as SQL's; one not
declared so (over a derived table, with HAVING) while it reads rows.  DuckDB's NULL (an AVG of
no rows) and NaN (0 / 0) are compared as 0, the M3 runtime's value for both.
DuckDB names the columns as it names a view's (``SELECT * FROM (query)``:
``b``, ``b_1``).  A view with internal keys (GROUP BY columns not selected)
is compared as DuckDB returns it: a bag of the selected columns
(:func:`compare_rows`).  Float data is drawn from multiples of 0.25, so sums are
exact and deleting every row empties every map.
"""

from __future__ import annotations

import datetime
import math
from collections import Counter
from collections.abc import Callable
import os
import re

from support.duck import TYPES, duck_tables, load_tables
from boreas.m3 import Runtime, compile_sql
from boreas.m3.nullable import declared, expand_row, shown_columns
from boreas.m3.runtime.initial import evaluate_definition
from hypothesis import strategies as st

#: ``BOREAS_PROPERTY_SCALE`` (as in tests/support/property_scale.py) multiplies the example counts of the M3 property
#: tests: ``make test`` runs them at 1, ``make test-fast`` at 0.25.
SCALE = float(os.environ.get("BOREAS_PROPERTY_SCALE", "1"))


class Unmemoized(Runtime):
    """A reference runtime that keeps no memo (row memo, slice folds: only ``Runtime`` itself keeps them), so
    each batch's ``changes()`` are evaluated afresh (tests/m3/test_rowmemo.py, test_slicefolds.py)."""

    keeps_native = True  # (a subclass runs on Python unless it says it builds on nothing of it)


def changed_rows(rt: Runtime) -> dict:
    """``rt.changes()`` with each view's rows in one order."""
    return {name: sorted(rows, key=repr) for name, rows in rt.changes().items()}


def fold_changes(into: dict, changes: list) -> None:
    """Fold one batch's ``changes()`` of a view into its rows so far (0 or an all-zero tuple: removed)."""
    for key, value in changes:
        if value == 0 or (isinstance(value, tuple) and not any(value)):
            into.pop(key, None)
        else:
            into[key] = value


#: Random workloads per shape and backend in ``make test``: 15 on each of the two backends, so 30 of up to five
#: batches per shape (25 each made the DuckDB modules half of the suite's time; ``BOREAS_PROPERTY_SCALE=20``
#: hunts deeper).
EXAMPLES = 15


def scaled(n: int, floor: int = 5) -> int:
    """``n`` examples times :data:`SCALE`, at least ``floor`` (or ``n`` when smaller): a quarter of the examples
    still draws inserts, deletes and several batches, so the inner loop reaches the same triggers."""
    return max(min(n, floor), round(n * SCALE))


#: The runtime backend Harness.run uses: "python" or "native" (set per test by conftest's ``m3_backend``).
BACKEND = "python"

DUCK_TYPES = TYPES  # (M3's column types as DuckDB's: support/duck.py)
DATES = [datetime.date(1993, 12, 31), datetime.date(1994, 1, 1), datetime.date(1994, 6, 1),
         datetime.date(1995, 3, 14), datetime.date(1995, 3, 15), datetime.date(1995, 3, 16), datetime.date(1996, 1, 1)]


def value_strategy(t: str):
    if t == "INT":
        return st.integers(0, 3)
    if t == "FLOAT":
        return st.integers(-8, 8).map(lambda i: i / 4)
    if t == "STRING":
        return st.sampled_from(["A", "B", "BUILDING", "R", "ASIA"])
    return st.sampled_from(DATES)


@st.composite
def workloads(draw, relations: dict, max_batches: int = 4, max_ops: int = 10, value=None, delete_one_in: int = 4):
    """Batches of ``("ins", relation, row)`` and ``("del", relation, i)``; ``value(column, type)`` is a column's
    strategy (default: :func:`value_strategy` of its type), one operation in ``delete_one_in`` a delete."""
    value = value or (lambda column, t: value_strategy(t))
    names = sorted(relations)
    batches = []
    for _ in range(draw(st.integers(1, max_batches))):
        ops = []
        for _ in range(draw(st.integers(1, max_ops))):
            rel = draw(st.sampled_from(names))
            if draw(st.integers(0, delete_one_in - 1)) == 0:
                ops.append(("del", rel, draw(st.integers(0, 50))))
            else:
                ops.append(("ins", rel, tuple(draw(value(c, t)) for c, t in relations[rel])))
        batches.append(ops)
    return batches


def selects(sql: str) -> list[str]:
    """The SELECT statements of a script (views are named Q1, Q2, ... in order)."""
    out = []
    for stmt in sql.split(";"):
        s = stmt.strip()
        m = re.match(r"CREATE\s+VIEW\s+\w+\s+AS\s+(SELECT.*)", s, re.IGNORECASE | re.DOTALL)
        if m:
            out.append(m.group(1))
        elif s.upper().startswith(("SELECT", "WITH")):
            out.append(s)
    return out


def exact_rows(view) -> bool:
    """Whether a view's rows are exactly its query's groups (a condition, a fold, ``ALWAYS AT``), not only non-zero."""
    from boreas.m3.ast import walk
    from boreas.m3.viewnodes import Fold

    return view.where is not None or bool(view.fixed) or any(isinstance(n, Fold) for c in view.columns if c.expr is not None
                                         for n in walk(c.expr))


def zero_groups_kept(program, select: str) -> bool:
    """Whether a view's query (its SQL ``select``) reads a column declared NULL, or lists one by ``*``: then the
    three-valued rewrite compiles it and a grouped view keeps its group's COUNT(*) (an item, or the hidden
    ``__rows__null``), so a group whose every value is 0 (``COUNT(b)`` over only NULLs, a FILTER matching none,
    a SUM of 0s) is a row of the view as it is of SQL's result (docs/m3.md "NULLs").  Read from the SQL text
    and the declared streams, not from what the compiler made of it (the oracle does not ask the compiled
    program); a name shared with a column of a stream without NULLs counts as nullable (stricter)."""
    import sqlglot
    from boreas.m3.nullable import SUFFIX
    from sqlglot import exp

    names = {c.name[:-len(SUFFIX)].lower() for r in program.relations for c in r.columns if c.name.endswith(SUFFIX)}
    if not names:
        return False
    tree = sqlglot.parse_one(select)
    return any((type(n) is exp.Column and n.name.lower() in names) or
               (type(n) is exp.Star and type(n.parent) is not exp.Count) for n in tree.walk())


def _m3_value(v):
    """DuckDB's value as the M3 runtime writes it: NULL (AVG of no rows) and NaN (0 / 0) are 0."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return 0
    return v


def _float_key(key: tuple) -> tuple:
    """A key with its floats to 9 significant digits: a FLOAT key column (an aggregate shown as a key, TPC-H
    Q15's ``total_revenue``) is summed in another order than DuckDB's, so compared as values are."""
    return tuple(float(f"{x:.9g}") if isinstance(x, float) else x for x in key)


def close(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return a == b


class Harness:
    """``to_duckdb``: the SELECTs as DuckDB reads them (Flink's function names: bench/nexmark_boreas.duckdb_sql)."""

    def __init__(self, sql: str, to_duckdb: Callable[[str], str] | None = None):
        self.sql = sql
        self.program = compile_sql(sql)
        self.queries = [to_duckdb(q) for q in selects(sql)] if to_duckdb else selects(sql)
        self.zeros_kept = {v.name for v, q in zip(self.program.views, selects(sql))
                           if zero_groups_kept(self.program, q)}  # (:func:`zero_groups_kept`)

    def run(self, batches, *, check_maps: bool = True, delete_all: bool = True,
            moves: dict[int, str] | None = None) -> Runtime:
        """Apply ``batches``, comparing with DuckDB after each; ``moves``: after batch i, continue on a runtime
        of backend ``moves[i]`` restored from the state of the one before (a box moving between nodes)."""
        rt = new_runtime(self.program)
        rels = rt.relations
        con = duck_tables(rels)
        live: dict[str, list[tuple[int, tuple]]] = {name: [] for name in rels}
        next_id = 0
        moves_done: list = []  # one per batch applied
        for ops in batches:
            events = []
            for op in ops:
                if op[0] == "ins":
                    _, rel, row = op
                    next_id += 1
                    live[rel].append((next_id, row))
                    events.append((rel, 1, row))
                elif live[op[1]]:
                    _, rel, i = op
                    _, row = live[rel].pop(i % len(live[rel]))
                    events.append((rel, -1, row))
            load_tables(con, live, {rel for rel, _, _ in events})
            rt.apply_batch(events)
            self.compare(rt, con, live, check_maps)
            if moves and len(moves_done) in moves:
                target = new_runtime(self.program, moves[len(moves_done)])
                target.restore(rt.state())
                rt = target
                self.compare(rt, con, live, check_maps)
            moves_done.append(None)
        if delete_all:
            rt.apply_batch([(rel, -1, row) for rel, rows in live.items() for _, row in rows])
            assert rt.entries() == 0, {n: d for n, d in rt.store.data.items() if d}
        return rt

    def compare(self, rt: Runtime, con, live, check_maps: bool) -> None:
        for view, select in zip(self.program.views, self.queries):
            if view.internal:
                compare_rows(view, rt.view(view.name), con.execute(f"SELECT * FROM ({select})"),
                             zeros_kept=view.name in self.zeros_kept)
                continue
            got = {_float_key(k): v for k, v in rt.view(view.name).items()}
            cur = con.execute(f"SELECT * FROM ({select})")
            cols = [d[0].lower() for d in cur.description]
            rows = cur.fetchall()
            key_idx = [cols.index(k.lower()) for k in view.keys]
            columns = _shown(view)  # a NULL-skipping aggregate's hidden count is no output column
            counted = [c.name for c in columns if c.name.lower() not in cols]
            assert counted in ([], [columns[-1].name]), f"{view.name}: columns {counted} not in DuckDB's {cols}"
            val_idx = [cols.index(c.name.lower()) for c in columns if c.name not in counted]
            expected: dict = {}
            for row in rows:
                key = _float_key(tuple(row[i] for i in key_idx))
                if counted:  # a view of rows: its count column is the number of times the row occurs (after the
                    # row's constant columns, SELECT 6 AS k, a: the same in every row of the key)
                    values = tuple(_m3_value(row[i]) for i in val_idx)
                    expected[key] = values + (expected.get(key, values + (0,))[-1] + 1,)
                else:
                    expected[key] = tuple(_m3_value(row[i]) for i in val_idx)
            strict = exact_rows(view) or bool(counted) or view.name in self.zeros_kept
            for key, vals in expected.items():
                mine = got.get(key)
                if key not in got:  # (a view of one value column reads None where that value is NULL: present)
                    # Excused, each a documented limitation, nothing else: a row with only zero values of a query
                    # reading no nullable column whose rows are not exact (compiled as DBToaster's: no COUNT(*)
                    # of its groups, maps of non-zero entries: docs/m3.md "NULLs", the last open item; a query
                    # reading one keeps its groups' COUNT(*), never excused), and the one row of a query without
                    # GROUP BY not declared ALWAYS while it reads no rows (SQL: NULLs and COUNT 0; docs/m3.md
                    # "Rows": over a derived table, with HAVING).  An ALWAYS view's one row is never missing.
                    assert not view.always and (not strict or not view.keys) and all(v == 0 for v in vals), (
                        f"{view.name}: missing row {key} = {vals}")
                    continue
                mine = tuple(_m3_value(v) for v in (mine if isinstance(mine, tuple) else (mine,)))  # NULL as 0
                assert len(mine) == len(vals) and all(close(a, b) for a, b in zip(mine, vals)), f"{view.name}[{key}]: got {mine}, expected {vals}"
            extra = set(got) - set(expected)
            assert not extra, f"{view.name}: rows not in DuckDB's result: {sorted(extra)[:5]}"
        if check_maps:
            nullable = {r.name: declared(r.columns) for r in self.program.relations}  # None: value and indicator
            tables = {rel: [expand_row(row, nullable[rel]) for _, row in rows] for rel, rows in live.items()}
            for m in self.program.maps:
                want = evaluate_definition(self.program, m, tables)
                have = dict(rt.store.items(m.name))
                assert set(want) == set(have) and all(close(want[k], have[k]) for k in want), (
                    f"map {m.name} differs from its definition: {want} vs {have}")
                for pos, idx in rt.store.indexes[m.name].items():
                    rebuilt: dict = {}
                    for k, v in have.items():
                        b, r = rt.store.split(m.name, pos, k)
                        rebuilt.setdefault(b, {})[r] = v
                    assert idx == rebuilt, f"index {pos} of map {m.name} is out of step"


def _shown(view) -> list:
    """The view's value columns an output row holds (:func:`boreas.m3.nullable.shown_columns`)."""
    return [view.columns[i] for i in shown_columns([c.name for c in view.columns])]


def compare_rows(view, rows: dict, cur, zeros_kept: bool = False) -> None:
    """A view with internal keys (GROUP BY columns not selected) against DuckDB's result, as bags of output rows.

    DuckDB's rows hold the selected columns only, so two groups may give equal
    rows: the view's rows, internal keys dropped, must be DuckDB's rows with
    their multiplicities.  A view that selects no value has a ``count`` of 1
    per group, which DuckDB does not show (a row per group).  Rows whose
    values are all 0 are left out of both where rows are not exact and the
    query reads no nullable column (``zeros_kept`` False: see the module doc).
    """
    cols = [d[0].lower() for d in cur.description]
    shown = [view.keys[i] for i in view.output_keys]
    columns = _shown(view)
    counted = [c.name for c in columns if c.name.lower() not in cols]
    assert counted in ([], [columns[-1].name]), f"{view.name}: columns {counted} not in DuckDB's {cols}"
    idx = [cols.index(k.lower()) for k in shown] + [cols.index(c.name.lower()) for c in columns
                                                    if c.name not in counted]
    strict = exact_rows(view) or bool(counted) or zeros_kept

    def out_row(row: tuple) -> tuple:
        return _float_key(tuple(_m3_value(v) for v in row))

    width = len(shown)
    expected: Counter = Counter()
    for row in cur.fetchall():
        r = out_row(tuple(row[i] for i in idx))
        if strict or any(v != 0 for v in r[width:]):
            expected[r] += 1
    got: Counter = Counter()
    for key, value in rows.items():
        value = value if isinstance(value, tuple) else (value,)
        r = out_row(tuple(key[i] for i in view.output_keys) + (value[:-1] if counted else value))
        got[r] += value[-1] if counted else 1  # a view of rows with a NULL key's indicator: each row's count
        assert strict or any(v != 0 for v in r[width:]), f"{view.name}[{key}]: a row with only zero values"
    assert got == expected, (f"{view.name}: rows (internal keys dropped) differ from DuckDB's: missing "
                             f"{sorted((expected - got).items())[:5]}, extra {sorted((got - expected).items())[:5]}")


def new_runtime(program, backend: str | None = None) -> Runtime:
    """A runtime on ``backend`` (default: :data:`BACKEND`); a program the native backend refuses is skipped, named."""
    import pytest

    backend = backend or BACKEND
    if backend == "python":
        return Runtime(program, backend="python")
    rt = Runtime(program, backend="auto")
    if rt.backend != "native":
        pytest.skip(f"the native backend refuses this program: {rt.backend_reason}")
    return rt


_HARNESSES: dict[str, Harness] = {}


def shared_harness(sql: str, to_duckdb: Callable[[str], str] | None = None) -> Harness:
    """One :class:`Harness` per SQL text for the whole session (compiled and prepared once)."""
    found = _HARNESSES.get(sql)
    if found is None:
        found = _HARNESSES[sql] = Harness(sql, to_duckdb)
    return found


def check_against_duckdb(sql: str, max_batches: int = 5, max_ops: int | None = None, examples: int = EXAMPLES,
                         value=None, to_duckdb: Callable[[str], str] | None = None) -> None:
    """Random insert/delete batches into the relations the view reads; after each, the runtime equals DuckDB.

    ``max_ops``: events per batch at most (default 12, 20 for views over four relations or more); ``value``:
    as :func:`workloads`' (a column whose constants lie outside the default domain); ``to_duckdb``: each SELECT
    as DuckDB reads it (:class:`Harness`).
    """
    from boreas.m3.ast import RelAtom, walk
    from hypothesis import HealthCheck, given, settings

    h = shared_harness(sql, to_duckdb)
    used = {n.name for m in h.program.maps if m.definition is not None for n in walk(m.definition)
            if isinstance(n, RelAtom)}
    relations = {k: v for k, v in Runtime(h.program, backend="python").relations.items() if k in used}
    ops = max_ops if max_ops is not None else (12 if len(relations) < 4 else 20)

    @settings(max_examples=scaled(examples), deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(workloads(relations, max_batches=max_batches, max_ops=ops, value=value))
    def check(batches):
        h.run(batches)

    check()


def shape_params(shapes: dict[str, str], fast: int = 2) -> list:
    """``shapes`` as pytest params: every ``len // fast``-th in the quick tier, the rest marked ``slow``.

    ``make test`` runs them all; ``make test-fast`` keeps a spread of them so
    a front-end or runtime change still meets DuckDB in the inner loop (two or
    three a module, each on one backend, alternating: conftest.py).
    """
    import pytest

    names = sorted(shapes)
    step = max(1, len(names) // fast)
    return [name if i % step == 0 else pytest.param(name, marks=pytest.mark.slow) for i, name in enumerate(names)]
