"""A view's compiled row evaluation (m3/runtime/viewcode.py) against the interpreter, row by row.

The oracle is the interpreter (``interpreted_row_value``, m3/runtime/evaluate.py), itself checked against
DuckDB by every ``*_vs_duckdb`` module (which now run the compiled code).  Every general view of TPC-H's 22
queries and of the view shapes of ``test_views_vs_duckdb``, ``test_nested_totals``, ``test_sql_derived_vs_duckdb``
``test_sql_suite_shapes_vs_duckdb`` (aggregates over grouped derived tables) and
``test_sql_constant_views_vs_duckdb`` (views reading no map: their one row) runs random insert and
delete batches on the Python backend; after each, every row any batch so far named (rows that left the view
included) is evaluated both ways, through the store's reader and through a plain ``Reader`` of ``get`` and
``entries``, and the two must be equal (NaN equal to NaN).  The reader of the maps before a batch
(``OldReader``) is exercised by ``changes()`` where a test rebuilds a view from them (the modules that call
``changes_rebuild_view``, and the lifted and suite-shape modules' ``changes()`` tests).  The bound form
(``ViewForm.bind``: each map's accessor taken from the reader once, what ``changes()`` runs after a batch) is
compared with the interpreter through both readers too.
"""

from __future__ import annotations

import pytest
from boreas.m3 import Runtime, compile_sql
from boreas.m3.ast import RelAtom, walk
from boreas.m3.runtime.evaluate import Reader
from boreas.m3.runtime.viewchanges import current_reader
from boreas.m3.runtime.views import candidate_rows, interpreted_row_value, row_value, same, view_form
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from m3_harness import scaled, workloads
from test_nested_totals import SHAPES as NESTED
from test_sql_constant_views_vs_duckdb import SHAPES as CONSTANT
from test_sql_derived_vs_duckdb import SHAPES as DERIVED
from test_sql_suite_shapes_vs_duckdb import SHAPES as SUITE
from test_views_vs_duckdb import SHAPES
from tpch_schema import QUERIES, SCHEMA, tpch_workloads

def _shapes() -> dict[str, tuple[str, bool]]:
    """name -> (SQL, whether TPC-H's workloads suit it), the shapes with a general view (a plain view reads
    its maps positionally, not through ``row_value``)."""
    out = {f"tpch_q{n}": (SCHEMA + QUERIES[n] + ";", True) for n in range(1, 23)}
    for name, sql in SHAPES.items():
        out[f"views_{name}"] = (sql, False)
    for prefix, shapes in (("nested", NESTED), ("derived", DERIVED), ("suite", SUITE), ("constant", CONSTANT)):
        for name, sql in shapes.items():
            out[f"{prefix}_{name}"] = (sql, False)
    return {k: v for k, v in out.items() if any(view.general for view in compile_sql(v[0]).views)}


SHAPES_ALL = _shapes()


def _compare(rt: Runtime, forms: list, rows: dict) -> None:
    """Every row known so far of every general view, compiled against interpreted, through two readers."""
    store = rt.store
    readers = [current_reader(store), Reader(store.get, store.match)]  # the second answers ``has`` by listing
    for form in forms:
        rows[form.name].update(dict.fromkeys(candidate_rows(form, store.match)))
        for reader in readers:
            bound = form.bind(reader)  # the accessors taken once per reader, as changes() runs it
            for row in rows[form.name]:
                got, want = row_value(form, row, reader), interpreted_row_value(form, row, reader)
                assert got[0] == want[0] and same(got[1], want[1]), (form.name, row, got, want)
                got = bound(row)
                assert got[0] == want[0] and same(got[1], want[1]), (form.name, row, "bound", got, want)


def _run(sql: str, batches) -> None:
    rt = Runtime(compile_sql(sql), backend="python")
    forms = [view_form(rt.program, v) for v in rt.program.views if v.general]
    rows: dict[str, dict] = {f.name: {} for f in forms}
    live: dict[str, list] = {}
    for ops in batches:
        events = []
        for op in ops:
            if op[0] == "ins":
                live.setdefault(op[1], []).append(op[2])
                events.append((op[1], 1, op[2]))
            elif live.get(op[1]):
                events.append((op[1], -1, live[op[1]].pop(op[2] % len(live[op[1]]))))
        rt.apply_batch(events)
        _compare(rt, forms, rows)


def _relations(program) -> dict:
    used = {a.name for m in program.maps if m.definition is not None for a in walk(m.definition)
            if isinstance(a, RelAtom)}
    return {k: v for k, v in Runtime(program, backend="python").relations.items() if k in used}


@pytest.mark.parametrize("shape", sorted(SHAPES_ALL))
def test_compiled_row_value_equals_the_interpreter(shape):
    sql, tpch = SHAPES_ALL[shape]
    program = compile_sql(sql)
    relations = _relations(program)
    strategy = tpch_workloads(relations) if tpch else workloads(relations, max_batches=4, max_ops=12)

    @settings(max_examples=scaled(6), deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(strategy)
    def check(batches):
        _run(sql, batches)

    check()


@pytest.mark.parametrize("indexed", [True, False])
@settings(max_examples=80, deadline=None)
@given(before=st.dictionaries(st.tuples(st.integers(0, 2), st.integers(0, 5)), st.integers(-2, 2), max_size=12),
       batch=st.dictionaries(st.tuples(st.integers(0, 2), st.integers(0, 5)), st.integers(-2, 2), max_size=8))
def test_a_slices_values_and_count_now_and_before_a_batch_are_its_entries(indexed, before, batch):
    """A fold's reads of a slice (``values``, ``count``: from an index's keys, and before the batch the slice now
    with the batch's changes put back) equal the values of the slice's entries, read as the interpreter reads
    them, now and before the batch; with no index on the bound positions too."""
    from boreas.m3.runtime.evaluate import items
    from boreas.m3.runtime.maps import MapStore
    from boreas.m3.runtime.viewchanges import OldReader
    from boreas.m3.syntax import parse_program

    p = parse_program("DECLARE MAP m[A: INT, B: INT] : INT; DECLARE VIEW v[a := A](n := COUNT(B : m[A, B]));")
    store = MapStore(p, {"m": [(0,)]} if indexed else {})
    for k, n in before.items():
        store.set("m", k, n)
    old: dict = {}
    for k, n in batch.items():
        old.setdefault(store.pack("m", k), store.get("m", k))
        store.set("m", k, n)
    readers = {"before": OldReader(store, {"m": old}), "now": current_reader(store)}
    truth = {"before": before, "now": {**before, **batch}}
    for when, reader in readers.items():
        for a in range(3):
            want = sorted(b for (x, b), n in truth[when].items() if x == a and n)
            assert sorted(k[1] for k, n in items(reader.entries("m", (a, None))) if n) == want
            assert sorted(reader.values("m", (a, None), 1)) == want, when
            assert reader.count("m", (a, None), 1) == len(want), when


@pytest.mark.parametrize("sql", [
    "CREATE STREAM r(a INT, b DOUBLE); SELECT a, SUM(DISTINCT b) AS s FROM r GROUP BY a",
    "CREATE STREAM r(a INT, b DOUBLE); SELECT a, SUM(b) AS s FROM (SELECT DISTINCT a, b FROM r) t GROUP BY a",
])
def test_a_batch_that_changes_nothing_lists_no_change_of_a_float_sum_over_a_slice(sql):
    """The slice's values before the batch are read in the order of the read now: a float SUM over them adds
    them alike, so a row written back to its value is not listed (a set's order rounded it one ulp off)."""
    import random

    rng = random.Random(1)
    rt = Runtime(compile_sql(sql), backend="python")
    rt.apply_batch([("r", 1, (1, rng.random() * 1000)) for _ in range(30)])
    rt.changes()
    rt.apply_batch([("r", 1, (1, 0.5)), ("r", -1, (1, 0.5))])
    assert rt.changes() == {}
