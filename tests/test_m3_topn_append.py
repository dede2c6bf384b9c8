"""The append-only top-N (node/operators/m3topn_append.py): each partition's first N alone while rows only arrive,
a batch ranked in columns, against :class:`RankedRows` (every row ranked) on the same batches; and the box's
switch to ranking every row at the first row that leaves its view."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from boreas.m3.compiler.rownumber import TopN
from boreas.node.operators.m3topn import RankedRows
from boreas.node.operators.m3topn_append import AppendTops
from boreas.wire.columns import Columns

from test_m3_topn import SHAPES, build

COLUMNS = ("a", "b", "s", "f")
row = st.tuples(st.integers(0, 3), st.integers(0, 5), st.sampled_from(["x", "y", "zz", "é"]),
                st.sampled_from([0.5, -1.0, 2.25]))


def changes(merged) -> tuple[list[tuple], list[tuple]]:
    """A merge's out rows that left and entered, the new partitions' columns read as rows."""
    fresh = [] if merged.fresh is None else list(zip(*(c.to_pylist() for c in merged.fresh.columns)))
    return merged.gone, merged.came + fresh


def changelog(rows: list[tuple], counts: list[int] | None) -> Columns:
    """A view's changelog of added rows (each with its count when the view counts rows), weights all +1."""
    names = COLUMNS + (("count",) if counts is not None else ())
    values = [list(c) for c in zip(*rows)] if rows else [[] for _ in COLUMNS]
    types = (pa.int64(), pa.int64(), pa.string(), pa.float64())
    arrays = [pa.array(v, t) for v, t in zip(values, types)]
    if counts is not None:
        arrays.append(pa.array(counts, pa.int64()))
    return Columns(pa.record_batch(arrays, names=list(names)), weights=pa.array([1] * len(rows), pa.int64()))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.lists(st.tuples(row, st.integers(1, 3)), max_size=12), st.booleans()), max_size=6),
       st.integers(1, 3),
       st.sampled_from([(("s", True), ("b", False)), (("b", True),), (("f", False),), (("s", False),)]),
       st.sampled_from([("a",), ("a", "s"), ()]), st.booleans(), st.booleans())
def test_the_first_n_kept_while_rows_arrive_are_every_row_ranked(batches, limit, order, partition, counted, rank):
    """After every batch, the append-only top-N's changelog summed (its new partitions' columns read as rows) and
    its rows are :class:`RankedRows`' over the same rows (ties, strings descending, floats, duplicates, a row
    counted n times), and a partition keeps N rows at most.  The rows are read only after the batches drawn
    ``look`` and the last (reading makes every partition Python rows): so a partition still kept in columns
    is merged into by a later batch too."""
    spec = TopN(partition, order, limit, None, "rn" if rank else None, counted=counted)
    out = COLUMNS + (("rn",) if rank else ())
    numbers = frozenset({"a", "b", "f"})
    every = RankedRows(spec, COLUMNS, out, numbers)
    tops = AppendTops(RankedRows(spec, COLUMNS, out, numbers))
    summed: Counter = Counter()
    for i, (batch, look) in enumerate(batches):
        rows = list({r: n for r, n in batch}.items())  # a view's changelog names a row once
        deltas = {r: (n if counted else 1) for r, n in rows}
        every.apply(deltas)
        added = tops.multiplicities(changelog([r for r, _ in rows], [n for _, n in rows] if counted else None))
        assert added is not None
        gone, came = changes(tops.apply(added))
        summed.subtract(gone)
        summed.update(came)
        assert all(n >= 0 for n in summed.values())
        if look or i == len(batches) - 1:
            assert +summed == Counter(tops.rows()) == Counter(every.rows())
            assert all(len(rows) <= limit for rows in tops.held.values())


def test_a_row_counted_many_times_is_a_candidate_at_most_n_times():
    """A copy past the N-th is never among the first N: a row counted 10**7 times (a view of a join, or a
    restore) is N candidates, in columns and in rows, not 10**7 Python rows."""
    spec = TopN(("a",), (("b", True),), 2, None, None, counted=True)
    tops = AppendTops(RankedRows(spec, COLUMNS, COLUMNS, frozenset({"a", "b", "f"})))
    added = tops.multiplicities(changelog([(1, 7, "x", 0.5)], [10**7]))
    assert isinstance(added, pa.Table) and added.num_rows == 2
    assert changes(tops.apply(added)) == ([], [(1, 7, "x", 0.5)] * 2)
    rows = AppendTops(RankedRows(spec, COLUMNS, COLUMNS, frozenset({"a", "b", "f"})))
    assert changes(rows.apply(([(1, 7, "x", 0.5)], [10**7]))) == ([], [(1, 7, "x", 0.5)] * 2)


def test_a_row_leaving_is_no_append_and_a_null_ranks_in_python():
    spec = TopN(("a",), (("b", True),), 1, None, None, counted=False)
    tops = AppendTops(RankedRows(spec, COLUMNS, COLUMNS, frozenset({"a", "b", "f"})))
    left = changelog([(1, 1, "x", 0.5)], None)
    assert tops.multiplicities(Columns(left.batch, weights=pa.array([-1], pa.int64()))) is None
    # a null where the columns would sort: every row a candidate, the Python merge ranks them
    batch = pa.record_batch([pa.array([1, 1, 2], pa.int64()), pa.array([3, 5, 4], pa.int64()),
                             pa.array(["x", None, "y"]), pa.array([0.5, 0.5, 0.5])], names=list(COLUMNS))
    added = tops.multiplicities(Columns(batch))
    assert changes(tops.apply(added)) == ([], [(1, 5, None, 0.5), (2, 4, "y", 0.5)])


def test_the_box_ranks_every_row_from_the_first_row_that_leaves_its_view():
    """Inserts keep the first N alone; a deletion ranks the whole view and emits what differs, so a row that
    was below the first N (not kept while rows arrived) comes back into them."""
    op = build("CREATE STREAM Bid(a INT, b INT, p INT, s VARCHAR);\n" + SHAPES["top2 by price, rank shown"][0])
    seen: Counter = Counter()

    def feed(batch):
        for _, out in op.process(0, batch, 0.0):
            rows, weights = (out.rows(), out.weight_list()) if isinstance(out, Columns) else (out, [1] * len(out))
            seen.update({r: w for r, w in zip(rows, weights)})

    feed([(1, 1, 30, "x", 1), (1, 2, 20, "x", 1), (1, 3, 10, "x", 1), (2, 1, 7, "y", 1)])
    assert op.top_rows() and op.tops is not None and len(op.tops.held[(1,)]) == 2  # (1, 3, 10) is not kept
    feed([(1, 1, 30, "x", -1)])
    assert op.tops is None
    want = Counter([(1, 2, 20, "x", 1), (1, 3, 10, "x", 2), (2, 1, 7, "y", 1)])
    assert +seen == Counter(op.top_rows()) == want
    feed([(1, 4, 25, "x", 1)])
    assert +seen == Counter(op.top_rows()) == Counter([(1, 4, 25, "x", 1), (1, 2, 20, "x", 2), (2, 1, 7, "y", 1)])


def test_a_partition_kept_as_columns_is_made_rows_when_a_batch_ranked_in_python_merges_there():
    """Partitions new in a columnar batch stay columns (``held`` says where); a later batch with a null (ranked in
    Python) merging into one of them reads its rows from the columns first, and a partition it leaves alone stays
    columns."""
    spec = TopN(("a",), (("b", True),), 2, None, "rn", counted=False)
    out = COLUMNS + ("rn",)
    tops = AppendTops(RankedRows(spec, COLUMNS, out, frozenset({"a", "b", "f"})))
    first = tops.apply(tops.multiplicities(changelog([(1, 3, "x", 0.5), (1, 5, "y", 0.5), (1, 1, "x", 0.5),
                                                      (2, 4, "x", 0.5)], None)))
    assert first.gone == first.came == [] and first.fresh is not None
    assert changes(first)[1] == [(1, 5, "y", 0.5, 1), (1, 3, "x", 0.5, 2), (2, 4, "x", 0.5, 1)]
    assert all(type(v) is int for v in tops.held.values())  # no Python rows made
    batch = pa.record_batch([pa.array([1], pa.int64()), pa.array([4], pa.int64()), pa.array([None], pa.string()),
                             pa.array([0.5])], names=list(COLUMNS))
    merged = tops.apply(tops.multiplicities(Columns(batch)))
    assert changes(merged) == ([(1, 3, "x", 0.5, 2)], [(1, 4, None, 0.5, 2)])
    assert tops.held[(1,)] == [(1, 5, "y", 0.5), (1, 4, None, 0.5)] and type(tops.held[(2,)]) is int
    assert Counter(tops.rows()) == Counter([(1, 5, "y", 0.5, 1), (1, 4, None, 0.5, 2), (2, 4, "x", 0.5, 1)])


def test_the_box_emits_new_partitions_as_columns_of_its_out_stream_and_rows_that_do_not_fit_as_nulls():
    """Columns in, one changelog batch out per batch, of the out stream's Arrow schema: the new partitions'
    rows cast to its types, summed by a reader equal to the box's result and DuckDB's; a value the out field
    cannot hold becomes null, as on the row path."""
    from boreas.wire.columns import arrow_schema, from_rows

    from test_m3_topn import BID, duckdb_top

    text, duck = SHAPES["top2 by price, rank shown"]
    op = build("CREATE STREAM Bid(a INT, b INT, p INT, s VARCHAR);\n" + text)
    target = arrow_schema(op.outputs[0])
    seen: Counter = Counter()
    present: Counter = Counter()
    for batch, kind in (([(1, 1, 30, "x"), (1, 2, 20, "x"), (1, 3, 10, "x"), (2, 1, 7, "y")], int),  # new: columns
                        ([(1, 4, 25, "x"), (3, 1, 1, "z"), (3, 2, 1, "z"), (2, 2, 7, "y")], list),  # merged: rows
                        ([(4, 1, 9, "é"), (1, 5, 5, "x")], int)):
        emitted = op.process(0, from_rows([r + (1,) for r in batch], BID), 0.0)
        assert len(emitted) == 1 and isinstance(emitted[0][1], Columns)
        out = emitted[0][1]
        assert out.batch.schema.equals(target)
        for r, w in zip(out.rows(), out.weight_list()):
            seen[r] += w
        present.update(batch)
        assert op.tops is not None and type(op.tops.held[batch[0][:1]]) is kind
        assert +seen == Counter(op.top_rows()) == duckdb_top(duck, present)
    fresh = [pa.table([pa.array([2**40]), pa.array([1]), pa.array([2]), pa.array(["x"]), pa.array([1])],
                      names=["o0", "o1", "o2", "o3", "o4"])]
    (_, too_big), = op._emitted([], [], fresh)
    assert too_big.rows() == [(None, 1, 2, "x", 1)] and too_big.weight_list() == [1]


def test_a_huge_n_and_many_small_batches_compacted_are_every_row_ranked(monkeypatch):
    """A review found N = 2**63 - 1 overflowed the place kept per partition (``start * (N + 1)``), and one table
    kept per batch made a long stream of small batches cost per batch what every earlier batch kept: the places
    now step by at most 2**31 + 1, and every COMPACT tables kept become one; both against RankedRows, partitions
    created in columns in one batch and merged into many batches later."""
    from boreas.node.operators import m3topn_append

    monkeypatch.setattr(m3topn_append, "COMPACT", 3)
    for limit in (2**63 - 1, 10**18, 2):
        spec = TopN(("a",), (("b", True),), limit, None, "rn", counted=False)
        out = COLUMNS + ("rn",)
        numbers = frozenset({"a", "b", "f"})
        every = RankedRows(spec, COLUMNS, out, numbers)
        tops = AppendTops(RankedRows(spec, COLUMNS, out, numbers))
        batches = [[(a, a + 1, "x", 0.5)] for a in range(20)] + [[(a, b, "y", 0.5)] for a in range(0, 20, 3)
                                                                  for b in (7, 0)]
        for rows in batches:
            every.apply({r: 1 for r in rows})
            tops.apply(tops.multiplicities(changelog(rows, None)))
        assert Counter(tops.rows()) == Counter(every.rows())
