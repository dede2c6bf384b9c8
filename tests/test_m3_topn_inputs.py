"""A ranked view that counts its port's rows (node/operators/m3topn_inputs.py): an inserting batch's changes told by
the batch are the native journal's, batches it cannot tell are read from the journal, and the box keeps DuckDB's
top-N on both backends with rows arriving again (a row's count growing: no row leaves, so no ranking of the whole
view), zeros and strings."""

from __future__ import annotations

import math
from collections import Counter

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.m3.boxtype import infer_m3
from boreas.node.operators.m3topn import TopNM3Operator
from boreas.node.operators.registry import DEFAULT_REGISTRY
from boreas.wire.columns import Columns, from_rows

BID = Schema("BidTuple", (Field("a", FieldType.INT), Field("b", FieldType.INT), Field("f", FieldType.DOUBLE),
                          Field("s", FieldType.STRING, 4), Field("sign", FieldType.INT)))
STREAM = "CREATE STREAM Bid(a INT, b INT, f FLOAT, s VARCHAR);\n"
#: (the box's SQL, DuckDB's with the tie order written out)
LAST = ("SELECT a, b, f, s FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY b, a ORDER BY f DESC) AS rn FROM Bid) "
        "WHERE rn <= 1",
        "SELECT a, b, f, s FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY b, a ORDER BY f DESC, a, b, f, s) AS rn "
        "FROM bid) WHERE rn <= 1")
TOP2 = ("SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY a ORDER BY b DESC) AS rn FROM Bid) WHERE rn <= 2",
        "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY a ORDER BY b DESC, a, b, f, s) AS rn FROM bid) "
        "WHERE rn <= 2")


def build(text: str, backend: str = "auto") -> TopNM3Operator:
    box = Box("t", "m3", (InPort("Bid"),), ("Out",), (("sql", STREAM + text), ("sign-field", "sign"),
                                                      ("backend", backend)))
    op = DEFAULT_REGISTRY.build(box, [BID], infer_m3(box, [BID]))
    assert isinstance(op, TopNM3Operator)
    return op


def duckdb_top(sql: str, present: Counter) -> Counter:
    rows = list(present.elements())
    con = duckdb.connect()
    con.register("bid", pa.table({n: pa.array([r[i] for r in rows], t) for i, (n, t) in enumerate(
        (("a", pa.int32()), ("b", pa.int32()), ("f", pa.float64()), ("s", pa.string())))}))
    return Counter(tuple(r) for r in con.execute(sql).fetchall())


def multiplicities(changed: Columns) -> Counter:
    """A view changelog's change of each row's multiplicity (its weight times its count)."""
    out: Counter = Counter()
    weights = changed.weight_list()
    for row, w in zip(changed.rows(), weights):
        out[row[:-1]] += w * row[-1]
    return +out


bid = st.tuples(st.integers(0, 2), st.integers(0, 3), st.sampled_from([0.5, -1.25, 3.0, 0.0, -0.0]),
                st.sampled_from(["x", "zz", "é", ""]))
batches = st.lists(st.tuples(st.lists(bid, max_size=10), st.lists(st.integers(0, 1000), max_size=3),
                             st.sampled_from(["columns", "rows", "weights"])), min_size=1, max_size=10)


@settings(max_examples=60, deadline=None)
@given(batches)
def test_the_changes_told_by_an_inserting_batch_are_the_journals(steps):
    """After each batch the native box applied, the changes told by the batch (where it tells them: every row
    inserted, no FLOAT zero) add to each row's multiplicity what the journal's changelog adds; a batch with a
    deletion, a zero or weights other than 1 in columns is told only where the batch says it exactly."""
    op = build(TOP2[0])
    assert op.backend == "native" and op.inputs is not None
    present: Counter = Counter()
    for inserts, deletes, how in steps:
        held = sorted(present.elements(), key=repr)
        gone = list((Counter([held[i % len(held)] for i in deletes]) & present).elements()) if held else []
        if not inserts and not gone:
            continue
        if how == "weights":  # a changelog of another box: each row with weight 2 (inserted twice), deletions -1
            rows = [r + (1,) for r in inserts + gone]
            fed = Columns(from_rows(rows, BID).batch, weights=pa.array([2] * len(inserts) + [-1] * len(gone),
                                                                       pa.int64()))
            present.update(inserts * 2)
        else:
            fed = from_rows([r + (1,) for r in inserts] + [r + (-1,) for r in gone], BID)
            present.update(inserts)
        present.subtract(gone)
        present = +present
        op.process(0, fed, 0.0)
        journal = op.entries.read(op.runtime.native_maps()) if op.entries is not None else None
        changed = op.inputs.changes(fed)
        zero = any(r[2] == 0 for r in inserts)
        assert (changed is not None) == (not gone and not zero)
        if changed is not None:
            assert multiplicities(changed) == (Counter() if journal is None else multiplicities(journal))


@pytest.mark.parametrize("shape", [LAST, TOP2], ids=["last per (b, a)", "top2 per a, rank shown"])
@pytest.mark.parametrize("backend", ["auto", "python"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches)
def test_the_box_keeps_duckdbs_top_n_with_rows_arriving_again(shape, backend, steps):
    """What a reader of the box's changelog holds and the box's rows are DuckDB's top-N after every batch: rows
    sent again (in a batch and across batches, inserted twice by a weight), deletions, 0.0 and -0.0."""
    box_sql, oracle = shape
    op = build(box_sql, backend)
    present: Counter = Counter()
    seen: Counter = Counter()
    for inserts, deletes, how in steps:
        held = sorted(present.elements(), key=repr)
        gone = list((Counter([held[i % len(held)] for i in deletes]) & present).elements()) if held else []
        if not inserts and not gone:
            continue
        if how == "weights":
            fed = Columns(from_rows([r + (1,) for r in inserts + gone], BID).batch,
                          weights=pa.array([2] * len(inserts) + [-1] * len(gone), pa.int64()))
            present.update(inserts * 2)
        else:
            batch = [r + (1,) for r in inserts] + [r + (-1,) for r in gone]
            fed = from_rows(batch, BID) if how == "columns" else batch
            present.update(inserts)
        present.subtract(gone)
        present = +present
        for _, out in op.process(0, fed, 0.0):
            rows, weights = (out.rows(), out.weight_list()) if isinstance(out, Columns) else (out, [1] * len(out))
            for row, w in zip(rows, weights):
                seen[row] += w
        assert all(n >= 0 for n in seen.values())
        want = duckdb_top(oracle, present)
        assert +seen == want == Counter(op.top_rows())


def test_a_nan_a_null_sign_and_views_other_than_a_count_of_the_rows_are_read_from_the_journal():
    """NaN (and 0.0) may be one key to the runtime and many rows in the batch; a WHERE, a grouped view, a column
    computed or left out make a view whose changes are not the batch's rows: none of them is told."""
    op = build(LAST[0])
    nan = from_rows([(1, 1, math.nan, "x", 1), (1, 2, 0.5, "x", 1)], BID)
    op.process(0, nan, 0.0)
    assert op.inputs.changes(nan) is None
    signs = from_rows([(1, 1, 0.5, "x", 1)], BID)
    null_sign = pa.RecordBatch.from_arrays(signs.batch.columns[:4] + [pa.array([None], pa.int32())],
                                           schema=signs.batch.schema)
    assert op.inputs.changes(Columns(null_sign)) is None
    for text in ("SELECT a, b, f, s FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY a ORDER BY f DESC) AS rn "
                 "FROM Bid WHERE b > 1) WHERE rn <= 1",
                 "SELECT * FROM (SELECT a, b, SUM(f) AS t, ROW_NUMBER() OVER (PARTITION BY a ORDER BY SUM(f) DESC) "
                 "AS rn FROM Bid GROUP BY a, b) WHERE rn <= 2",
                 "SELECT a, b FROM (SELECT a, b, ROW_NUMBER() OVER (PARTITION BY a ORDER BY b DESC) AS rn FROM Bid "
                 "GROUP BY a, b) WHERE rn <= 2"):
        assert build(text).inputs is None
    assert build(LAST[0], "python").inputs is None  # (the Python backend reads its changes as before)
