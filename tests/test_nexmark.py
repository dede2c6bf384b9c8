"""bench/nexmark.py on a few thousand events: the queries Boreas runs match DuckDB, the others say why not.

The benchmark's claims rest on these: that an accepted query's box (an
``m3`` operator fed the generated Arrow batches) ends with DuckDB's answer
over the same events, that a refused query prints the refusal ``boreas
submit`` would give (not a crash of the bench), and that the table has a
line per query.
"""

from __future__ import annotations

import pytest
from support.bench import bench_importable

pytestmark = pytest.mark.slow  # benchmark code, as tests/test_bench_m3.py


@pytest.fixture
def bench(monkeypatch):
    for _ in bench_importable(monkeypatch, ("nexmark", "nexmark_gen", "nexmark_boreas", "nexmark_queries",
                                            "nexmark_flink")):
        import nexmark

        yield nexmark


@pytest.fixture
def events(bench):
    import nexmark_gen
    import pyarrow as pa

    blocks = list(nexmark_gen.blocks(nexmark_gen.GeneratorConfig(20_000, seed=4)))
    tables = {k: pa.Table.from_batches([b[k] for b in blocks]) for k in nexmark_gen.KINDS}
    return blocks, tables


@pytest.mark.parametrize("name", ["q0", "q2", "q3", "q20",
                                  "q10", "q22", "q14",  # DATE_FORMAT, SPLIT_INDEX, CASE of HOUR (issue 34 item 2)
                                  "q15", "q17",  # FILTER, COUNT(DISTINCT ...) FILTER, grouped by DATE_FORMAT
                                  "q16",  # MAX of a STRING function, a STRING value column of the box
                                  "q21",  # a CASE of channel and url: a UNION ALL; REGEXP_EXTRACT IS NULL
                                  "q18", "q19", "q9",  # ROW_NUMBER() top-N and deduplication, q9 over a join
                                  "q13"])  # a lookup join of the side input (published first: static, a join)
def test_an_accepted_query_ends_with_duckdbs_answer(bench, events, name):
    from nexmark_queries import BY_NAME

    row = bench.run_boreas(BY_NAME[name], *events)
    assert row.refusal is None
    assert row.check == "matches"
    assert row.boreas_rate > 0 and row.events == sum(events[1][k].num_rows for k in BY_NAME[name].reads)


def test_the_check_finds_a_view_that_differs(bench, events):
    from nexmark_boreas import compare, duckdb_rows, feed, plan, view_rows
    from nexmark_queries import BY_NAME

    blocks, tables = events
    planned = plan(BY_NAME["q3"])
    feed(planned, blocks[:-1])  # the last block's auctions and persons never reach the box
    assert compare(view_rows(planned), duckdb_rows(planned, tables)) is not None
    assert compare([(1, 2.0)], [(1, 2.0 + 1e-12)]) is None
    assert compare([(1, "a", 1)], [(1, "b", 1)]) == "row (1, 'a', 1) where DuckDB has (1, 'b', 1)"


@pytest.mark.parametrize("name", ["q3", "q19"])  # a join's view of rows; a top-N's ranked rows
def test_the_check_fails_a_box_whose_emitted_stream_differs_from_its_view(bench, events, name):
    """The view is DuckDB's, but what the box emitted (a subscriber's copy) is not: the check must say so."""
    from nexmark_boreas import duckdb_check, feed, plan, view_rows
    from nexmark_queries import BY_NAME

    from boreas.wire.columns import Columns

    blocks, tables = events
    planned = plan(BY_NAME[name])
    process = planned.operator.process

    def dropping_one_row(port, rows, now):  # the box's state as ever, one emitted +1 row lost on the way out
        out = process(port, rows, now)
        if out and not dropping_one_row.done:
            at, batch = out[0]
            batch = batch.rows()[1:] if isinstance(batch, Columns) and batch.weights is None else (
                Columns(batch.batch.slice(1), weights=batch.weights.slice(1)) if isinstance(batch, Columns)
                else batch[1:])
            dropping_one_row.done = True
            out = [(at, batch), *out[1:]]
        return out

    dropping_one_row.done = False
    planned.operator.process = dropping_one_row
    feed(planned, blocks)
    assert dropping_one_row.done
    assert compare_view(planned, tables, view_rows) is None  # the view alone passes
    assert duckdb_check(planned, tables).startswith("DIFFERS: emitted stream")


def compare_view(planned, tables, view_rows):
    from nexmark_boreas import compare, duckdb_rows

    return compare(view_rows(planned), duckdb_rows(planned, tables))


def test_the_folded_stream_refuses_a_retraction_of_a_row_never_emitted(bench):
    from nexmark_boreas import folded

    from boreas.catalog.model import Field, FieldType, Schema
    from boreas.wire.columns import weighted

    schema = Schema("R", (Field("k", FieldType.INT), Field("count", FieldType.INT)))
    assert folded([(0, weighted([(1, 1)], [1], schema)), (0, weighted([(1, 1), (1, 2)], [-1, 1], schema))]) == [(1, 2)]
    with pytest.raises(ValueError, match="had not emitted"):
        folded([(0, weighted([(1, 1)], [1], schema)), (0, weighted([(1, 2), (1, 3)], [-1, 1], schema))])


def test_a_query_boreas_cannot_run_is_refused_with_the_reason_boreas_gives(bench, events):
    """q6 (an OVER ROWS window: Flink does not run it either) and q12 (processing time) stay refused."""
    from nexmark_queries import BY_NAME

    row = bench.run_boreas(BY_NAME["q6"], *events)
    assert row.refusal is not None and "m3 box 'q6'" in row.refusal and "parameter 'sql'" in row.refusal
    assert "window function" in row.refusal
    assert row.boreas == f"refused: {row.refusal}" and row.boreas_rate is None
    row = bench.run_boreas(BY_NAME["q12"], *events)
    assert row.refusal is not None and "m3 box 'q12'" in row.refusal


def test_the_table_has_a_line_per_query_and_flink_says_why_it_did_not_run(bench, events):
    import nexmark_gen
    from nexmark_queries import BY_NAME

    rows = [bench.run_boreas(BY_NAME[n], *events) for n in ("q0", "q6")]
    bench.run_flink(rows, nexmark_gen.GeneratorConfig(1_000))
    assert rows[1].flink.startswith("not run: Flink does not run it")
    if bench.available() is not None:
        assert rows[0].flink == f"unavailable: {bench.available()}"
    else:  # PyFlink here (`make bench-setup`): the query ran in Flink over the CSV files
        assert rows[0].flink.endswith(" µs CPU/ev") and rows[0].flink_cpu_us > 0, rows[0].flink
    text = bench.table(rows, markdown=True)
    assert text.count("\n") == 3 and "| q0 pass through |" in text and "refused: " in text
