"""Stateless ``m3`` views on columns (node/operators/m3rows.py) against the same box on its program's row path.

The oracle is the box itself with ``stateless_columns`` off: the M3 program
computing each row's values (Python functions, C triggers).  Random batches
of rows with weights (a changelog's +1/-1 and multiplicities), strings made
of URL pieces with non-ASCII letters and newlines among them, 32-bit ints: every emitted changelog, the view the query
API reads and the snapshot must be the same; a snapshot of one restores into
the other.  Views outside what is translated keep the row path, decided when
the box is built.
"""

from __future__ import annotations

from collections import Counter
from contextlib import contextmanager

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.validate import stream_schemas
from boreas.m3.boxtype import box_types
from boreas.node.operators import build_operator
from boreas.node.operators.m3box import M3Operator
from boreas.wire.columns import Columns

TYPES = box_types()
CHANNEL_ID = "REGEXP_EXTRACT(s, '(&|^)channel_id=([^&]*)', 2)"
VIEWS = {  # translated: runs on columns
    "project": "SELECT k, x, s FROM R",
    "arith": "SELECT k, 0.908 * k AS p, k * 3 - 1 AS q, x + 1.5 AS y FROM R WHERE k > 2 AND x < 50.0",
    "mod": "SELECT k, s FROM R WHERE MOD(k, 7) = 3 OR MOD(k, 5) = -2",
    "case": (f"SELECT k, CASE WHEN lower(s) = 'apple' THEN '0' WHEN upper(s) = 'GOOGLE' THEN '1' ELSE {CHANNEL_ID} "
             f"END AS cid FROM R WHERE {CHANNEL_ID} IS NOT NULL OR lower(s) IN ('apple', 'google')"),
    "split": "SELECT k, SPLIT_INDEX(s, '/', 0) AS d0, SPLIT_INDEX(s, '/', 2) AS d2 FROM R",
    "null_test": f"SELECT k FROM R WHERE {CHANNEL_ID} IS NULL",
}
ROW_PATH = {  # kept on the row path (not translated here)
    "aggregate": "SELECT s, COUNT(*) AS n FROM R GROUP BY s",
    "division": "SELECT k, x / 2.0 AS h FROM R",
    "substring": "SELECT SUBSTRING(s, 1, 2) AS p FROM R",
    "longsep": "SELECT SPLIT_INDEX(s, '=&', 1) AS p FROM R",
}
PIECES = ("&", "channel_id=", "x", "7", "/", "apple", "Google", "É", "\n", "=")


def operator(sql: str, columns: bool, nullable: bool = False, backend: str = "auto"):
    """The box reading stream R(k int, x double, s string) with ``sql``, on columns or on its row path."""
    null = ' nullable="true"' if nullable else ""
    app = (f'<borealis><input stream="R" schema="RT"/><schema name="RT"><field name="k" type="int"{null}/>'
           f'<field name="x" type="double"/><field name="s" type="string" size="40"/></schema>'
           f'<box name="b" type="m3"><in stream="R"/><out stream="O"/><parameter name="sql"><![CDATA['
           f'CREATE STREAM R(k INT{" NULL" if nullable else ""}, x DOUBLE, s VARCHAR);\n{sql}]]></parameter>'
           f'<parameter name="backend">{backend}</parameter></box></borealis>')
    made = plan_submission(Catalog(), [read_document(app, "rows.xml")], TYPES)
    assert made.ok, made.problems
    schemas = stream_schemas(made.catalog, TYPES)
    box = made.catalog.boxes["b"]
    with _columns(columns):
        return build_operator(box, [schemas["R"]], [schemas["O"]])


@contextmanager
def _columns(on: bool):
    before = M3Operator.stateless_columns
    M3Operator.stateless_columns = on
    try:
        yield
    finally:
        M3Operator.stateless_columns = before


def batch_of(rows: list[tuple], weights: list[int] | None) -> Columns:
    k, x, s = zip(*rows)
    batch = pa.record_batch([pa.array(k, pa.int32()), pa.array(x, pa.float64()), pa.array(s, pa.string())],
                            names=["k", "x", "s"])
    return Columns(batch, weights=None if weights is None else pa.array(weights, pa.int64()))


def emitted(op, batch) -> Counter | str:
    """The changelog a batch makes (as a bag), or the error it raises (a value beyond its out field, say)."""
    try:
        out = op.process(0, batch, 0.0)
    except Exception as exc:  # noqa: BLE001 - both paths must fail alike
        return type(exc).__name__
    return Counter((tuple(r), w) for _, c in out for r, w in zip(c.rows(), c.weight_list()))


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_translated_views_run_on_columns(name):
    assert operator(VIEWS[name], True).rows is not None
    assert operator(VIEWS[name], False).rows is None


@pytest.mark.parametrize("name", sorted(ROW_PATH))
def test_other_views_keep_the_row_path(name):
    assert operator(ROW_PATH[name], True).rows is None


def test_a_nullable_stream_keeps_the_row_path():
    assert operator(VIEWS["project"], True, nullable=True).rows is None


ints = st.one_of(st.integers(-20, 20), st.integers(-20, 20), st.integers(-2 ** 31, 2 ** 31 - 1))
row = st.tuples(ints, st.floats(-100, 100, allow_nan=False).map(lambda v: round(v, 1)),
                st.lists(st.sampled_from(PIECES), max_size=5).map("".join))
batches = st.lists(st.tuples(st.lists(row, min_size=1, max_size=12),
                             st.one_of(st.none(), st.lists(st.sampled_from([1, -1, 2, -2]), min_size=12,
                                                           max_size=12))), min_size=1, max_size=6)


@pytest.mark.parametrize("name", sorted(VIEWS))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=batches)
def test_columns_are_the_row_path(name, steps):
    fast, slow = operator(VIEWS[name], True), operator(VIEWS[name], False)
    assert fast.rows is not None
    for rows, weights in steps:
        batch = batch_of(rows, None if weights is None else weights[:len(rows)])
        assert emitted(fast, batch) == emitted(slow, batch)
        assert fast.runtime.view("Q1") == slow.runtime.view("Q1")
        assert fast.failed_batches == slow.failed_batches
    assert same_order(fast.state()) == same_order(slow.state())



@pytest.mark.parametrize("name", ["split", "case", "null_test"])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pool=st.lists(st.lists(st.sampled_from(PIECES), max_size=5).map("".join), min_size=1, max_size=20),
       picks=st.lists(st.integers(0, 19), min_size=64, max_size=160))
def test_repeated_strings_split_and_matched_once_each_are_the_row_path(name, pool, picks):
    """A batch whose strings repeat (64 rows or more, at least two of each on average) splits and matches each
    distinct string once (``m3rows_exprs.per_distinct``) and takes the results back to the rows: as the row
    path computes them row by row."""
    fast, slow = operator(VIEWS[name], True), operator(VIEWS[name], False)
    batch = batch_of([(i, 1.0, pool[p % len(pool)]) for i, p in enumerate(picks)], None)
    assert emitted(fast, batch) == emitted(slow, batch)
    assert fast.runtime.view("Q1") == slow.runtime.view("Q1")

def same_order(state: dict) -> dict:
    """A box's state with each map's entries sorted: C's hash map lists them in the order they were made, which
    differs where one batch went the row path and the other's did not; the entries are the snapshot's content."""
    runtime = state["runtime"]
    maps = {name: sorted(entries, key=repr) for name, entries in runtime["maps"].items()}
    return {**state, "runtime": {**runtime, "maps": maps}}


def test_a_batch_of_rows_and_a_snapshot_either_way():
    fast, slow = operator(VIEWS["case"], True), operator(VIEWS["case"], False)
    rows = [(1, 1.0, "apple"), (2, 2.0, "a&channel_id=9"), (2, 2.0, "a&channel_id=9"), (3, 0.0, "x")]
    assert emitted(fast, list(rows)) == emitted(slow, list(rows))  # rows, not columns: the row path counts them
    other_fast, other_slow = operator(VIEWS["case"], True), operator(VIEWS["case"], False)
    other_fast.restore(slow.state())  # the row path's snapshot into the columnar box, and back
    other_slow.restore(fast.state())
    more = batch_of([(2, 2.0, "a&channel_id=9"), (1, 1.0, "APPLE")], [-1, 1])
    assert emitted(other_fast, more) == emitted(other_slow, more) == emitted(slow, more)
    assert other_fast.runtime.view("Q1") == other_slow.runtime.view("Q1") == slow.runtime.view("Q1")


def test_a_null_in_a_column_the_view_reads_takes_the_row_path():
    """A null where the view reads (``s``): the batch is the row path's, which refuses it as before."""
    fast, slow = operator(VIEWS["split"], True, nullable=False), operator(VIEWS["split"], False)
    counted = []
    row_path = fast.rows.counted
    fast.rows.counted = lambda *args: counted.append(1) or row_path(*args)
    batch = Columns(pa.record_batch([pa.array([1, 2], pa.int32()), pa.array([1.0, 2.0]), pa.array(["a/b/c", None])],
                                    names=["k", "x", "s"]))
    assert emitted(fast, batch) == emitted(slow, batch)
    assert counted and fast.failed_batches == slow.failed_batches
    assert fast.runtime.view("Q1") == slow.runtime.view("Q1")


@pytest.mark.parametrize("sql", [
    "SELECT k, x + 1.0 + 1.0 AS y FROM R",  # folded to 2.0 + X by the compiler: rounds otherwise near 1e16
    "SELECT k, 3 * (x - 0.1) AS y FROM R",
    "SELECT k FROM R WHERE x + 1.0 + 1.0 > 1e16",
    "SELECT k, REGEXP_EXTRACT(s, '([[:digit:]]+)', 1) AS d FROM R",  # a POSIX class in RE2, a "[" in Python
    "SELECT k, REGEXP_EXTRACT(s, '(a*)+', 1) AS d FROM R",  # the group's capture differs
    "SELECT k, SPLIT_INDEX(s, '/', 1000) AS d FROM R",  # the padding would cost 1001 characters a row
])
def test_shapes_whose_columns_could_differ_keep_the_row_path(sql):
    fast, slow = operator(sql, True), operator(sql, False)
    assert fast.rows is None
    rows = [(1, 1e16, "x7"), (2, 0.5, "aa"), (3, 2.0, "d]/a")]
    batch = batch_of(rows, [1, 1, 1])
    assert emitted(fast, batch) == emitted(slow, batch)


@pytest.mark.parametrize("backend", ["python", "native"])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pool=st.lists(st.lists(st.sampled_from(PIECES), max_size=6).map("".join), min_size=1, max_size=20),
       picks=st.lists(st.tuples(st.integers(0, 19), st.integers(0, 9)), min_size=64, max_size=200))
def test_several_functions_of_one_column_share_its_encoding(backend, pool, picks):
    """Three ``SPLIT_INDEX`` of one column, the column itself and a WHERE that drops some rows: the column is made
    distinct once per batch and each result's encoding is reused to intern it (node/operators/m3rows_distinct.py),
    two batches in a row (the second's encodings are not the first's): as the row path computes them."""
    sql = ("SELECT k, s, SPLIT_INDEX(s, '/', 1) AS d1, SPLIT_INDEX(s, '/', 2) AS d2, SPLIT_INDEX(s, '/', 3) AS d3 "
           "FROM R WHERE k > 2")
    fast, slow = operator(sql, True, backend=backend), operator(sql, False, backend=backend)
    assert fast.rows is not None
    for shift in (0, 1):
        batch = batch_of([(k, 1.0, pool[(p + shift) % len(pool)]) for p, k in picks], None)
        assert emitted(fast, batch) == emitted(slow, batch)
        assert fast.runtime.view("Q1") == slow.runtime.view("Q1")
