"""Top-N and deduplication by ``ROW_NUMBER()`` in an ``m3`` box, against DuckDB, under inserts and deletes.

Hypothesis draws batches of bids (few partitions, few prices: ties and
duplicate rows are common) and deletions of rows present (the in stream's
``sign`` field, or a changelog's weights), cut into batches anywhere; some
batches go in as Arrow columns, some as rows, some as a changelog, and the
box sometimes moves (its state through
msgpack into a new operator).  After every batch the box's changelog, summed
by a reader, and its own result are DuckDB's ``ROW_NUMBER`` over the rows
present, with the tie order docs/m3.md states (the ORDER BY, then the view's
columns ascending) written out by hand.
"""

from __future__ import annotations

from collections import Counter

import duckdb
import msgspec
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boreas.catalog.boxtypes import BoxError
from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.catalog.partition_model import Partition
from boreas.m3.boxtype import infer_m3, plan_m3_partition
from boreas.node.operators.m3topn import TopNM3Operator
from boreas.node.operators.registry import DEFAULT_REGISTRY
from boreas.wire.columns import Columns, from_rows

BID = Schema("BidTuple", (Field("a", FieldType.INT), Field("b", FieldType.INT), Field("p", FieldType.INT),
                          Field("s", FieldType.STRING, 4), Field("sign", FieldType.INT)))

#: (the box's SQL, DuckDB's over table bid with the tie order written out, whether a row is a count)
SHAPES = {
    "top2 by price, rank shown": (
        "SELECT a, b, p, s, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY a ORDER BY p DESC) AS rn "
        "FROM Bid) WHERE rn <= 2",
        "SELECT a, b, p, s, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY a ORDER BY p DESC, a, b, p, s) "
        "AS rn FROM bid) WHERE rn <= 2"),
    "dedup: the last by b, strings descending": (
        "SELECT a, p, s FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY a, p ORDER BY s DESC) AS rn FROM Bid) "
        "WHERE rn = 1",
        "SELECT a, p, s FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY a, p ORDER BY s DESC, a, b, p, s) "
        "AS rn FROM bid) WHERE rn = 1"),
    "top3 over a grouped view, everything selected": (
        "SELECT * FROM (SELECT a, b, SUM(p) AS total, ROW_NUMBER() OVER (PARTITION BY a ORDER BY SUM(p) DESC) "
        "AS rn FROM Bid GROUP BY a, b) WHERE rn < 4",
        "SELECT * FROM (SELECT a, b, total, ROW_NUMBER() OVER (PARTITION BY a ORDER BY total DESC, a, b, total) "
        "AS rn FROM (SELECT a, b, SUM(p) AS total FROM bid GROUP BY a, b)) WHERE rn < 4"),
    "an aggregate in a subquery only: rows keep their multiplicity": (
        "SELECT a, b, p FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY a ORDER BY p DESC) AS rn FROM Bid "
        "WHERE p * 4 > (SELECT SUM(b2.p) FROM Bid b2 WHERE b2.a = Bid.a)) WHERE rn <= 2",
        "SELECT a, b, p FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY a ORDER BY p DESC, a, b, p, s) AS rn "
        "FROM bid WHERE p * 4 > (SELECT SUM(b2.p) FROM bid b2 WHERE b2.a = bid.a)) WHERE rn <= 2"),
    "GROUP BY without aggregates: each group once": (
        "SELECT a, b, rn FROM (SELECT a, b, ROW_NUMBER() OVER (PARTITION BY a ORDER BY b DESC) AS rn FROM Bid "
        "GROUP BY a, b) WHERE rn <= 2",
        "SELECT a, b, rn FROM (SELECT a, b, ROW_NUMBER() OVER (PARTITION BY a ORDER BY b DESC, a, b) AS rn "
        "FROM (SELECT a, b FROM bid GROUP BY a, b)) WHERE rn <= 2"),
    "a self-join's rows, a column repeated (a view of its count map's rows)": (
        "SELECT a, b, a2, p FROM (SELECT X.a, X.b, Y.a AS a2, Y.p, ROW_NUMBER() OVER (PARTITION BY X.a ORDER BY "
        "Y.p DESC) AS rn FROM Bid X, Bid Y WHERE X.a = Y.a AND X.b = Y.b) WHERE rn <= 2",
        "SELECT a, b, a2, p FROM (SELECT X.a, X.b, Y.a AS a2, Y.p, ROW_NUMBER() OVER (PARTITION BY X.a ORDER BY "
        "Y.p DESC, X.a, X.b, Y.a, Y.p) AS rn FROM bid X, bid Y WHERE X.a = Y.a AND X.b = Y.b) WHERE rn <= 2"),
}
ENTRIES = "a self-join's rows, a column repeated (a view of its count map's rows)"

STREAM = "CREATE STREAM Bid(a INT, b INT, p INT, s VARCHAR);\n"
#: Bid with NULLs in a partition, an ORDER BY and a tie column (b stays NOT NULL)
NULL_BID = Schema("BidTuple", (Field("a", FieldType.INT, nullable=True), Field("b", FieldType.INT),
                               Field("p", FieldType.INT, nullable=True), Field("s", FieldType.STRING, 4, nullable=True),
                               Field("sign", FieldType.INT)))
NULL_STREAM = "CREATE STREAM Bid(a INT NULL, b INT, p INT NULL, s VARCHAR NULL);\n"
#: NULL order values rank last unless NULLS FIRST is written (DuckDB's default for ASC and DESC); a NULL
#: partition key is a partition of its own; the oracles write the tie order out, NULLs last as the box ranks them
NULL_SHAPES = {
    "top2 by price descending, NULLs last": (
        "SELECT a, b, p, s, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY a ORDER BY p DESC) AS rn "
        "FROM Bid) WHERE rn <= 2",
        "SELECT a, b, p, s, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY a ORDER BY p DESC NULLS LAST, "
        "a NULLS LAST, b, p NULLS LAST, s NULLS LAST) AS rn FROM bid) WHERE rn <= 2"),
    "top2 by price ascending, NULLs first written": (
        "SELECT a, b, p, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY a ORDER BY p NULLS FIRST) AS rn "
        "FROM Bid) WHERE rn <= 2",
        "SELECT a, b, p, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY a ORDER BY p NULLS FIRST, "
        "a NULLS LAST, b, p NULLS LAST, s NULLS LAST) AS rn FROM bid) WHERE rn <= 2"),
    "dedup by strings descending NULLs first, two columns": (
        "SELECT a, p, s FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY a, p ORDER BY s DESC NULLS FIRST, "
        "b DESC) AS rn FROM Bid) WHERE rn = 1",
        "SELECT a, p, s FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY a, p ORDER BY s DESC NULLS FIRST, "
        "b DESC NULLS LAST, a NULLS LAST, b, p NULLS LAST, s NULLS LAST) AS rn FROM bid) WHERE rn = 1"),
    "top2 of a grouped view by a nullable group column": (
        "SELECT a, p, n, rn FROM (SELECT a, p, COUNT(*) AS n, ROW_NUMBER() OVER (PARTITION BY a ORDER BY p) "
        "AS rn FROM Bid GROUP BY a, p) WHERE rn <= 2",
        "SELECT a, p, n, rn FROM (SELECT a, p, n, ROW_NUMBER() OVER (PARTITION BY a ORDER BY p NULLS LAST, "
        "a NULLS LAST, p NULLS LAST, n) AS rn FROM (SELECT a, p, COUNT(*) AS n FROM bid GROUP BY a, p)) "
        "WHERE rn <= 2"),
}


def build(text: str, backend: str = "auto", schema: Schema = BID) -> TopNM3Operator:
    box = Box("t", "m3", (InPort("Bid"),), ("Out",), (("sql", text), ("sign-field", "sign"), ("backend", backend)))
    op = DEFAULT_REGISTRY.build(box, [schema], infer_m3(box, [schema]))
    assert isinstance(op, TopNM3Operator)
    return op


_DUCK = [duckdb.connect()]


def duckdb_top(sql: str, present: Counter) -> Counter:
    rows = list(present.elements())
    table = pa.table({n: pa.array([r[i] for r in rows], t) for i, (n, t) in
                      enumerate((("a", pa.int32()), ("b", pa.int32()), ("p", pa.int32()), ("s", pa.string())))})
    con = _DUCK[0]
    con.register("bid", table)
    return Counter(tuple(r) for r in con.execute(sql).fetchall())


bid = st.tuples(st.integers(0, 2), st.integers(0, 3), st.integers(1, 5), st.sampled_from(["x", "y", "zz", "é"]))
steps = st.lists(st.tuples(st.lists(bid, max_size=8), st.lists(st.integers(0, 1000), max_size=4),
                           st.sampled_from(["columns", "rows", "changelog", "move"])), min_size=1, max_size=12)
null_bid = st.tuples(st.one_of(st.none(), st.integers(0, 1)), st.integers(0, 3),
                     st.one_of(st.none(), st.integers(1, 3)), st.one_of(st.none(), st.sampled_from(["x", "zz"])))
null_steps = st.lists(st.tuples(st.lists(null_bid, max_size=8), st.lists(st.integers(0, 1000), max_size=4),
                                st.sampled_from(["columns", "rows", "changelog", "move"])), min_size=1, max_size=10)


@pytest.mark.slow
@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("backend", ["auto", "python"])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=steps)
def test_the_box_keeps_duckdbs_top_n_under_inserts_and_deletes(shape, backend, steps):
    keeps_duckdbs_top_n(shape, backend, steps)


@settings(max_examples=15, deadline=None)
@given(steps=steps)
def test_a_view_of_a_maps_rows_is_ranked_from_its_journal_on_the_native_backend(steps):
    """The native backend reads the changes of a view whose rows are its count map's (``EntryChanges``: no
    tuple, no memo); ties, deletes, N=2, partitions appearing and leaving, moves, against DuckDB."""
    assert build("CREATE STREAM Bid(a INT, b INT, p INT, s VARCHAR);\n" + SHAPES[ENTRIES][0]).entries is not None
    assert build("CREATE STREAM Bid(a INT, b INT, p INT, s VARCHAR);\n" + SHAPES[ENTRIES][0], "python").entries is None
    keeps_duckdbs_top_n(ENTRIES, "auto", steps)


@pytest.mark.parametrize("backend", ["auto", "python"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=st.sampled_from(sorted(NULL_SHAPES)), steps=null_steps)
def test_nulls_rank_last_or_as_written_and_partition_apart_as_in_duckdb(backend, shape, steps):
    """NULL-heavy bids (NULL partition keys, order values and tie columns), inserts, deletes and moves: the box's
    top N is DuckDB's (NULLs last by default, NULLS FIRST where written), on both backends."""
    keeps_duckdbs_top_n(shape, backend, steps, NULL_SHAPES, NULL_STREAM, NULL_BID)


@pytest.mark.parametrize("backend", ["auto", "python"])
@pytest.mark.parametrize("order, first", [("p DESC", (1, 5, 7)), ("p", (1, 5, 7)), ("p NULLS FIRST", (1, 1, None)),
                                          ("p DESC NULLS FIRST", (1, 1, None))])
def test_a_null_order_value_ranks_last_by_default_and_first_when_written(backend, order, first):
    """The concrete crash: a partition's rows with a NULL price (``int < None`` in the sort key) and a NULL
    partition key."""
    text = (NULL_STREAM + f"SELECT a, b, p, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY a ORDER BY {order}) "
            "AS rn FROM Bid) WHERE rn <= 2")
    op = build(text, backend, NULL_BID)
    op.process(0, [(1, 1, None, "x", 1), (1, 5, 7, "q", 1), (None, 3, 4, "y", 1), (None, 4, None, "z", 1)], 0.0)
    second = (1, 1, None) if first != (1, 1, None) else (1, 5, 7)
    nulls = [(None, 3, 4), (None, 4, None)] if "FIRST" not in order else [(None, 4, None), (None, 3, 4)]
    assert sorted(op.top_rows(), key=repr) == sorted([first + (1,), second + (2,), nulls[0] + (1,),
                                                      nulls[1] + (2,)], key=repr)


def keeps_duckdbs_top_n(shape, backend, steps, shapes=SHAPES, stream=STREAM, schema=BID):
    box_sql, oracle = shapes[shape]
    op = build(stream + box_sql, backend, schema)
    present: Counter = Counter()
    seen: Counter = Counter()  # what a reader of the changelog holds
    for inserts, deletes, how in steps:
        held = sorted(present.elements(), key=repr)
        gone = [held[i % len(held)] for i in deletes] if held else []
        gone = list((Counter(gone) & present).elements())  # a row is deleted at most as often as it is there
        batch = [r + (1,) for r in inserts] + [r + (-1,) for r in gone]
        present.update(inserts)
        present.subtract(gone)
        present = +present
        if how == "move":  # the box moves before the batch: its state through msgpack into a new operator
            moved = build(stream + box_sql, backend, schema)
            moved.restore(msgspec.msgpack.decode(msgspec.msgpack.encode(op.state())))
            assert Counter(moved.top_rows()) == Counter(op.top_rows())
            op = moved
        if not batch:
            continue
        if how == "changelog":  # another box's changelog: the deletions are weights -1, the sign field 1
            plain = from_rows([r[:4] + (1,) for r in batch], schema)
            fed = Columns(plain.batch, weights=pa.array([r[4] for r in batch], pa.int64()))
        else:
            fed = from_rows(batch, schema) if how == "columns" else batch
        emitted = op.process(0, fed, 0.0)
        for port, out in emitted:
            assert port == 0
            rows, weights = (out.rows(), out.weight_list()) if isinstance(out, Columns) else (out, [1] * len(out))
            for row, w in zip(rows, weights):
                seen[row] += w
        assert all(n >= 0 for n in seen.values())
        want = duckdb_top(oracle, present)
        assert +seen == want
        assert Counter(op.top_rows()) == want


@pytest.mark.parametrize("backend", ["auto", "python"])
def test_a_deletion_before_its_insertion_cancels_as_in_the_view_and_a_moved_box_agrees(backend):
    text = "CREATE STREAM Bid(a INT, b INT, p INT, s VARCHAR);\n" + SHAPES["top2 by price, rank shown"][0]
    op = build(text, backend)
    seen: Counter = Counter()
    for batch in ([(1, 1, 10, "x", -1)], [(1, 1, 10, "x", 1)], [(1, 2, 5, "y", 1)]):
        for _, out in op.process(0, batch, 0.0):
            rows, weights = (out.rows(), out.weight_list()) if isinstance(out, Columns) else (out, [1] * len(out))
            seen.update({row: w for row, w in zip(rows, weights)})
    moved = build(text, backend)
    moved.restore(msgspec.msgpack.decode(msgspec.msgpack.encode(op.state())))
    assert +seen == Counter(op.top_rows()) == Counter(moved.top_rows()) == Counter([(1, 2, 5, "y", 1)])


def test_the_out_stream_of_a_grouped_view_without_aggregates_has_no_count():
    text = ("SELECT * FROM (SELECT a, b, ROW_NUMBER() OVER (PARTITION BY a ORDER BY b DESC) AS rn FROM Bid "
            "GROUP BY a, b) WHERE rn <= 2")
    box = Box("t", "m3", (InPort("Bid"),), ("Out",), (("sql", text), ("sign-field", "sign")))
    (out,) = infer_m3(box, [BID])
    assert [f.name for f in out.fields] == ["a", "b", "rn"]


def test_the_out_stream_is_the_selected_columns_and_the_rank():
    box = Box("t", "m3", (InPort("Bid"),), ("Out",), (("sql", SHAPES["top2 by price, rank shown"][0]),
                                                        ("sign-field", "sign")))
    (out,) = infer_m3(box, [BID])
    assert [(f.name, f.type) for f in out.fields] == [("a", FieldType.INT), ("b", FieldType.INT),
                                                      ("p", FieldType.INT), ("s", FieldType.STRING),
                                                      ("rn", FieldType.LONG)]


@pytest.mark.parametrize("text, why", [
    ("SELECT * FROM (SELECT *, RANK() OVER (PARTITION BY a ORDER BY p) AS r FROM Bid) WHERE r <= 2",
     "window function RANK OVER (...) is not supported"),
    ("SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY a ORDER BY p) AS r FROM Bid) WHERE r > 2",
     "only read filtered as WHERE r <= N or WHERE r = 1"),
    ("SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY a ORDER BY p) AS r FROM Bid) WHERE r = 2",
     "only read filtered as WHERE r <= N or WHERE r = 1"),
    ("SELECT *, ROW_NUMBER() OVER (PARTITION BY a ORDER BY p) AS r FROM Bid", "is supported as SELECT ..."),
    ("SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY a) AS r FROM Bid) WHERE r <= 2",
     "needs an ORDER BY"),
    ("SELECT a, r + 1 FROM (SELECT *, ROW_NUMBER() OVER (ORDER BY p) AS r FROM Bid) WHERE r <= 2",
     "selects columns of its derived table"),
])
def test_other_window_shapes_are_refused_by_name(text, why):
    box = Box("t", "m3", (InPort("Bid"),), ("Out",), (("sql", text), ("sign-field", "sign")))
    with pytest.raises(BoxError, match="parameter 'sql'") as err:
        infer_m3(box, [BID])
    assert why in str(err.value)


def test_a_top_n_partitioned_by_a_column_outside_partition_by_is_refused():
    """Partitioned by a PARTITION BY column it plans (tests/test_cumulus_topn.py runs it); by another, a member
    would rank part of a partition."""
    box = Box("t", "m3", (InPort("Bid"),), ("Out",), (("sql", SHAPES["top2 by price, rank shown"][0]),
                                                        ("sign-field", "sign")))
    assert plan_m3_partition(box, [BID], Partition("t", ("n1", "n2"), key="a")).layout == 1
    with pytest.raises(BoxError, match="ranks its view by ROW_NUMBER.*PARTITION BY a"):
        plan_m3_partition(box, [BID], Partition("t", ("n1", "n2"), key="b"))


def test_a_query_of_the_ranked_out_stream_is_refused_with_what_can_be_read():
    from boreas.node.query import QueryFailed, resolve

    op = build("CREATE STREAM Bid(a INT, b INT, p INT, s VARCHAR);\n" + SHAPES["top2 by price, rank shown"][0])
    op.process(0, [(1, 1, 10, "x", 1)], 0.0)
    with pytest.raises(QueryFailed) as err:
        resolve(op, None)
    assert err.value.status == 422 and "ranks its view by ROW_NUMBER()" in str(err.value)
    assert resolve(op, op.plan.program.maps[0].name).map == op.plan.program.maps[0].name  # (the maps stay readable)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.dictionaries(st.tuples(st.integers(0, 2), st.integers(0, 5), st.sampled_from(["x", "y"])),
                                st.integers(-2, 2), max_size=6), max_size=8),
       st.integers(1, 3), st.booleans())
def test_ranked_rows_kept_between_batches_are_the_first_n_computed_again(batches, limit, desc):
    """RankedRows keeps each partition's first N between batches and computes them again only where a change
    sorts at or before the N-th ranked row: its changelog, summed, is the first N from scratch after every batch
    (deletions below zero included, as the view has them)."""
    from boreas.m3.compiler.rownumber import TopN
    from boreas.node.operators.m3topn import RankedRows

    spec = TopN(("a",), (("s", desc), ("b", False)), limit, None, "rn")
    ranked = RankedRows(spec, ("a", "b", "s"), ("a", "b", "s", "rn"), frozenset({"a", "b"}))
    counts: Counter = Counter()
    result: Counter = Counter()
    for deltas in batches:
        out, weights = ranked.apply(deltas)
        for r, w in zip(out, weights):
            result[r] += w
        counts.update(deltas)
        want: list[tuple] = []
        for a in sorted({k[0] for k, n in counts.items() if n > 0}):
            rows = sorted((k for k, n in counts.items() if n > 0 and k[0] == a),
                          key=lambda k: ((tuple(-ord(c) for c in k[2]) if desc else k[2]), k[1], k))
            ranks = [r for r in rows for _ in range(counts[r])][:limit]
            want += [(*r, i + 1) for i, r in enumerate(ranks)]
        assert sorted(r for r, n in result.items() for _ in range(n)) == sorted(want)
        assert all(n >= 0 for n in result.values())
        assert sorted(ranked.rows()) == sorted(want)


def test_a_change_after_the_nth_row_leaves_the_partitions_first_n_as_they_were():
    """A row that sorts after a full top N is ranked (it may move up later) but the first N are not computed again."""
    from boreas.m3.compiler.rownumber import TopN
    from boreas.node.operators.m3topn import RankedRows

    ranked = RankedRows(TopN(("a",), (("p", True),), 2, None, "rn"), ("a", "p"), ("a", "p", "rn"), frozenset({"a", "p"}))
    assert ranked.apply({(1, 30): 1, (1, 20): 1}) == ([(1, 30, 1), (1, 20, 2)], [1, 1])
    first = ranked.parts[(1,)].top
    assert ranked.apply({(1, 10): 1, (1, 5): 1}) == ([], [])
    assert ranked.parts[(1,)].top is first  # kept, not computed again
    assert ranked.apply({(1, 30): -1}) == ([(1, 30, 1), (1, 20, 2), (1, 20, 1), (1, 10, 2)], [-1, -1, 1, 1])


def test_a_view_of_a_maps_rows_leaving_the_native_backend_is_ranked_again_from_the_view():
    """A value beyond 64 bits moves the runtime to the Python backend mid-batch: no journal to read, so the
    whole view is ranked again and the difference emitted (the out value that does not fit: null, as the row
    path makes it); later batches' changes come from the runtime."""
    op = build("CREATE STREAM Bid(a INT, b INT, p INT, s VARCHAR);\n" + SHAPES[ENTRIES][0])
    assert op.entries is not None
    op.process(0, [(1, 1, 3, "x", 1), (1, 2, 4, "y", 1)], 0.0)
    ((_, out),) = op.process(0, [(1, 1, 2**70, "x", 1)], 0.0)
    assert op.entries is None and op.runtime.native_maps() is None
    assert Counter(zip(out.rows(), out.weight_list())) == Counter(
        [((1, 2, 1, 4), -1), ((1, 1, 1, 3), -1), ((1, 1, 1, None), 1), ((1, 1, 1, None), 1)])
    assert sorted(op.top_rows()) == [(1, 1, 1, 2**70)] * 2
    ((_, out),) = op.process(0, [(2, 3, 5, "x", 1)], 0.0)  # (a new partition: changes read as any box reads them)
    assert Counter(zip(out.rows(), out.weight_list())) == Counter([((2, 3, 2, 5), 1)])


@pytest.mark.parametrize("backend", ["auto", "python"])
@pytest.mark.parametrize("shape", ["top2 by price, rank shown", "top3 over a grouped view, everything selected"])
def test_a_partition_holding_an_int_past_64_bits_keeps_ranking_its_later_batches(backend, shape):
    """A price of 2**70 enters partition 1 (the runtime holds it on the Python backend; the out stream's LONG
    carries null for it, as any m3 box's); later batches insert into, and delete from, that partition, the big
    row included.  The box ranks by the value itself, as DuckDB's HUGEINT does (main raised a TypeError on
    the null its changelog read, and lost the partition's later changes)."""
    op = build(STREAM + SHAPES[shape][0], backend)
    con = duckdb.connect()
    con.execute("CREATE TABLE bid(a INTEGER, b INTEGER, p HUGEINT, s VARCHAR)")
    present: Counter = Counter()
    summed: Counter = Counter()
    for batch in ([(1, 1, 3, "x", 1), (1, 2, 4, "y", 1)], [(1, 1, 2**70, "x", 1)], [(1, 3, 6, "z", 1)],
                  [(1, 3, 6, "z", -1)], [(2, 3, 5, "x", 1), (1, 4, 1, "y", 1)], [(1, 1, 2**70, "x", -1)]):
        for row in batch:
            present[row[:4]] += row[4]
        for _, out in op.process(0, batch, 0.0):
            for row, weight in zip(out.rows(), out.weight_list()):
                summed[row] += weight
        summed = Counter({r: n for r, n in summed.items() if n})
        con.execute("DELETE FROM bid")
        con.executemany("INSERT INTO bid VALUES (?, ?, ?, ?)", list(present.elements()))
        want = Counter(tuple(r) for r in con.execute(SHAPES[shape][1]).fetchall())
        assert Counter(op.top_rows()) == want
        assert summed == Counter({tuple(None if isinstance(v, int) and abs(v) >= 2**63 else v for v in r): n
                                  for r, n in want.items()})
    assert op.failed_batches == 0
