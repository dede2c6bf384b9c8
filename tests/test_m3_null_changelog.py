"""An ``m3`` box's changelog of a view over nullable columns, and a top-N over such a view, against DuckDB (issue 34).

Why: a reader of a box's out stream folds its ``-old/+new`` rows; where an aggregate went from NULL to a value
(the first rows of a group all NULL, then a value) the box emitted ``+new`` without ``-NULL``, and where a group
whose MAX/SUM was NULL lost its last row it emitted nothing, so the reader (and a top-N over the view) held the
group twice, or a group that had left.  Hypothesis draws NULL-heavy bids over few groups, inserts and deletes
(the sign field, a changelog's weights, Arrow columns, rows) and moves; after every batch the changelog summed
by a reader is DuckDB's result, on both backends.
"""

from __future__ import annotations

from collections import Counter

import msgspec
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

from boreas.catalog.model import Box, InPort
from boreas.m3.boxtype import infer_m3
from boreas.node.operators.registry import DEFAULT_REGISTRY
from boreas.wire.columns import Columns, from_rows
from test_m3_topn import NULL_BID, NULL_STREAM, duckdb_top, keeps_duckdbs_top_n, null_steps

#: (the box's SQL, DuckDB's over table bid): grouped and not, SUM/MIN/MAX/AVG/COUNT of the nullable ``p``
VIEWS = {
    "max_grouped": ("SELECT a, b, MAX(p) AS m FROM Bid GROUP BY a, b",
                    "SELECT a, b, MAX(p) AS m FROM bid GROUP BY a, b"),
    "sum_grouped": ("SELECT b, SUM(p) AS s FROM Bid GROUP BY b", "SELECT b, SUM(p) AS s FROM bid GROUP BY b"),
    "every_aggregate_grouped": (
        "SELECT b, MIN(p) AS lo, MAX(p) AS hi, AVG(p) AS v, COUNT(p) AS n, SUM(p) AS s FROM Bid GROUP BY b",
        "SELECT b, MIN(p) AS lo, MAX(p) AS hi, AVG(p) AS v, COUNT(p) AS n, SUM(p) AS s FROM bid GROUP BY b"),
    # (issue 33: a group of only NULLs, or none matching the FILTER, is a row of COUNT 0 while it has rows)
    "count_only_grouped": ("SELECT b, COUNT(p) AS n FROM Bid GROUP BY b", "SELECT b, COUNT(p) AS n FROM bid GROUP BY b"),
    "count_filter_grouped": ("SELECT b, COUNT(*) FILTER (WHERE p > 2) AS n FROM Bid GROUP BY b",
                             "SELECT b, COUNT(*) FILTER (WHERE p > 2) AS n FROM bid GROUP BY b"),
    # (issue 33: MIN/MAX of a nullable VARCHAR over a group of only NULLs, or one left so by deletes, is NULL, not
    # '': the out field is nullable)
    "string_extremes_grouped": ("SELECT b, MIN(s) AS lo, MAX(s) AS hi, COUNT(*) AS n FROM Bid GROUP BY b",
                                "SELECT b, MIN(s) AS lo, MAX(s) AS hi, COUNT(*) AS n FROM bid GROUP BY b"),
    "string_max_grouped_by_nullable": ("SELECT a, MAX(s) AS hi FROM Bid GROUP BY a",
                                       "SELECT a, MAX(s) AS hi FROM bid GROUP BY a"),
    "string_min_ungrouped": ("SELECT MIN(s) AS lo FROM Bid", "SELECT MIN(s) AS lo FROM bid"),
    # (a view without GROUP BY has its one row always, as in SQL: sent with the first batch the box applies)
    "max_ungrouped": ("SELECT MAX(p) AS m FROM Bid", "SELECT MAX(p) AS m FROM bid"),
    "sum_and_count_ungrouped": ("SELECT SUM(p) AS s, COUNT(p) AS n FROM Bid",
                                "SELECT SUM(p) AS s, COUNT(p) AS n FROM bid"),
}

#: top-N over grouped views of nullable aggregates (NULLs last, the tie order written out as test_m3_topn's)
TOPS = {
    "top2 groups by MAX of a nullable column": (
        "SELECT a, b, m, rn FROM (SELECT a, b, MAX(p) AS m, ROW_NUMBER() OVER (PARTITION BY a ORDER BY MAX(p) DESC) "
        "AS rn FROM Bid GROUP BY a, b) WHERE rn <= 2",
        "SELECT a, b, m, rn FROM (SELECT a, b, m, ROW_NUMBER() OVER (PARTITION BY a ORDER BY m DESC NULLS LAST, "
        "a NULLS LAST, b, m NULLS LAST) AS rn FROM (SELECT a, b, MAX(p) AS m FROM bid GROUP BY a, b)) WHERE rn <= 2"),
    "top2 groups by SUM of a nullable column": (
        "SELECT a, b, s, rn FROM (SELECT a, b, SUM(p) AS s, ROW_NUMBER() OVER (PARTITION BY a ORDER BY SUM(p)) "
        "AS rn FROM Bid GROUP BY a, b) WHERE rn <= 2",
        "SELECT a, b, s, rn FROM (SELECT a, b, s, ROW_NUMBER() OVER (PARTITION BY a ORDER BY s NULLS LAST, "
        "a NULLS LAST, b, s NULLS LAST) AS rn FROM (SELECT a, b, SUM(p) AS s FROM bid GROUP BY a, b)) WHERE rn <= 2"),
}


def build(text: str, backend: str):
    box = Box("v", "m3", (InPort("Bid"),), ("Out",), (("sql", text), ("sign-field", "sign"), ("backend", backend)))
    return DEFAULT_REGISTRY.build(box, [NULL_BID], infer_m3(box, [NULL_BID]))


def _close(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(x == y or x is not None and y is not None and abs(x - y) < 1e-9
                                    for x, y in zip(a, b))


@pytest.mark.parametrize("backend", ["auto", "python"])
@pytest.mark.parametrize("view", sorted(VIEWS))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=null_steps)
def test_a_reader_of_the_changelog_holds_duckdbs_view(view, backend, steps):
    box_sql, oracle = VIEWS[view]
    op = build(NULL_STREAM + box_sql, backend)
    present: Counter = Counter()
    seen: Counter = Counter()  # what a reader of the changelog holds
    for inserts, deletes, how in steps:
        held = sorted(present.elements(), key=repr)
        gone = list((Counter([held[i % len(held)] for i in deletes] if held else []) & present).elements())
        batch = [r + (1,) for r in inserts] + [r + (-1,) for r in gone]
        present.update(inserts)
        present.subtract(gone)
        present = +present
        if how == "move":  # the box moves before the batch: its state through msgpack into a new operator
            moved = build(NULL_STREAM + box_sql, backend)
            moved.restore(msgspec.msgpack.decode(msgspec.msgpack.encode(op.state())))
            op = moved
        if not batch:
            continue
        if how == "changelog":  # another box's changelog: the deletions are weights -1, the sign field 1
            plain = from_rows([r[:4] + (1,) for r in batch], NULL_BID)
            fed = Columns(plain.batch, weights=pa.array([r[4] for r in batch], pa.int64()))
        else:
            fed = from_rows(batch, NULL_BID) if how == "columns" else batch
        for port, out in op.process(0, fed, 0.0):
            rows, weights = (out.rows(), out.weight_list()) if isinstance(out, Columns) else (out, [1] * len(out))
            for row, w in zip(rows, weights):
                seen[tuple(row)] += w
        assert all(n >= 0 for n in seen.values()), seen
        want = duckdb_top(oracle, present)
        got = +seen
        assert sum(got.values()) == sum(want.values()), (sorted(got.items(), key=repr), want)
        assert all(any(_close(row, w) and n == want[w] for w in want) for row, n in got.items()), (got, want)


@pytest.mark.parametrize("backend", ["auto", "python"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=null_steps)
def test_a_top_n_over_a_view_of_nullable_aggregates_never_shows_a_group_twice(backend, steps):
    for shape in TOPS:
        keeps_duckdbs_top_n(shape, backend, steps, TOPS, NULL_STREAM, NULL_BID)


@pytest.mark.parametrize("backend", ["auto", "python"])
def test_a_group_from_null_to_a_value_is_retracted_and_leaves_when_its_rows_do(backend):
    """The concrete case: a group's first bid has no price (MAX NULL), then one has 5; then both leave."""
    op = build(NULL_STREAM + VIEWS["max_grouped"][0], backend)
    seen: Counter = Counter()
    for batch in ([(1, 2, None, "x", 1)], [(1, 2, 5, "x", 1)], [(1, 2, None, "x", -1), (1, 2, 5, "x", -1)]):
        for _, out in op.process(0, batch, 0.0):
            rows, weights = (out.rows(), out.weight_list()) if isinstance(out, Columns) else (out, [1] * len(out))
            for row, w in zip(rows, weights):
                seen[tuple(row)] += w
        if batch[0][2] is None and batch[0][4] == 1:
            assert +seen == Counter({(1, 2, None): 1})
        elif batch[0][4] == 1:
            assert +seen == Counter({(1, 2, 5): 1})
    assert +seen == Counter()
