"""Nexmark's window joins (q8, q7, q5) on Boreas, against DuckDB running Flink's semantics over the same events.

The oracle is the suite's query as Flink runs it, written out for DuckDB:
TUMBLE's window of an event time ``t`` starts at ``t - t % size``; HOP's
windows are every multiple ``s`` of the slide with ``s <= t < s + size``;
a join of grouped windowed tables is an ordinary join of their groups.
q7's interval ``B.t BETWEEN w_end - 10 s AND w_end`` is read as the window
``[w_end - 10 s, w_end)`` (docs/m3.md, "Window joins": a bid at exactly a
window's end is the next window's), which the oracle says explicitly.  The
box is fed the bench's Arrow batches, several per window, so windows close
as the stream goes; its emitted rows (each ``count`` times), with the end of
input's, must be exactly DuckDB's, none late, no state left.
"""

from __future__ import annotations

from collections import Counter

import pytest
from support.bench import bench_importable

pytestmark = pytest.mark.slow  # benchmark code, as tests/test_nexmark.py

TUMBLE = "CAST(datetime - datetime % 10000 AS BIGINT)"
Q5_COUNTS = """WITH H AS (SELECT auction, CAST(datetime - datetime % 2000 AS BIGINT) - 2000 * k AS s, datetime
                       FROM bid, range(0, 5) r(k)),
                 AB AS (SELECT auction, s, COUNT(*) AS num FROM H WHERE s > datetime - 10000 GROUP BY auction, s)"""
ORACLES = {
    "q8": f"""WITH P AS (SELECT DISTINCT id, name, {TUMBLE} AS ws FROM person),
                   A AS (SELECT DISTINCT seller, {TUMBLE} AS ws FROM auction)
              SELECT P.id, P.name, P.ws FROM P JOIN A ON P.id = A.seller AND P.ws = A.ws""",
    "q7": f"""WITH B1 AS (SELECT MAX(price) AS maxprice, {TUMBLE} + 10000 AS we FROM bid GROUP BY 2)
              SELECT B.auction, B.price, B.bidder, B.datetime, B.extra FROM bid B JOIN B1 ON B.price = B1.maxprice
              AND B.datetime >= B1.we - 10000 AND B.datetime < B1.we""",
    "q5": f"""{Q5_COUNTS},
                  MB AS (SELECT s, MAX(num) AS maxn FROM AB GROUP BY s)
             SELECT AB.auction, AB.num FROM AB JOIN MB ON AB.s = MB.s AND AB.num >= MB.maxn""",
}
WIDEST = f"{Q5_COUNTS} SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM AB GROUP BY s)"  # q5's most auctions in a window


OUT = {"q8": ["id", "name", "starttime", "count"], "q7": ["auction", "price", "bidder", "datetime", "extra", "count"],
       "q5": ["auction", "num", "count"]}


@pytest.mark.parametrize("name", ["q8", "q7", "q5"])
def test_window_join_emits_flinks_rows_as_windows_close(monkeypatch, name):
    _check(monkeypatch, name, 12_000, 200)


def test_q5_over_windows_its_stages_evaluate_over_columns(monkeypatch):
    """Windows of more auctions than m3/runtime/definition_columns.py's SMALL_COLUMNS: the leaves' closed rows
    read as columns (m3/runtime/closed_columns.py, on the native backend), the upper stages' join and sums
    through Arrow's columns (counted: a definition answered by them from leaf rows given as columns), and the
    rows are still Flink's."""
    import pyarrow as pa

    from boreas.m3.runtime import initial
    from boreas.m3.runtime.definition_columns import SMALL_COLUMNS

    answered = []
    evaluate = initial.evaluate_columns

    def counted(m, terms, tables, *args, **kwargs):
        out = evaluate(m, terms, tables, *args, **kwargs)
        if out is not None and any(isinstance(t, pa.Table) for t in tables.values()):
            answered.append(m.name)
        return out

    monkeypatch.setattr(initial, "evaluate_columns", counted)
    assert _check(monkeypatch, "q5", 40_000, 2_000) >= SMALL_COLUMNS
    assert answered, "no stage's definition went through the columns"


def _check(monkeypatch, name: str, events: int, rate: int) -> int:
    """Feed the bench's q-box ``events`` at ``rate`` in slices of 700 rows; assert its rows are DuckDB's
    oracle's as windows close; the most leaf rows (q5: auctions) of one window."""
    for _ in bench_importable(monkeypatch, ("nexmark_gen", "nexmark_boreas", "nexmark_queries")):
        import duckdb
        import nexmark_gen
        import pyarrow as pa
        from nexmark_boreas import boreas_batch, plan
        from nexmark_queries import BY_NAME

        from boreas.wire.columns import Columns

        q = BY_NAME[name]
        blocks = list(nexmark_gen.blocks(nexmark_gen.GeneratorConfig(events, seed=3, rate=rate)))  # 60 s at 200/s
        fed = [(port, boreas_batch(kind, b[kind]).slice(i, 700)) for b in blocks
               for port, kind in enumerate(q.reads) for i in range(0, b[kind].num_rows, 700)]
        planned = plan(q)
        assert not isinstance(planned, str), planned
        assert planned.out_fields == OUT[name]  # the query's columns, then the row's count
        op, got = planned.operator, Counter()
        for i, (port, batch) in enumerate(fed):
            for _, out in op.process_from(port, Columns(batch), i * 0.01, (q.reads[port], "gen", i + 1)):
                got.update(tuple(r[:-1]) for r in out for _ in range(int(r[-1])))
        closed_early = sum(got.values())
        for _, out in op.end_of_input(len(fed) * 0.01):
            got.update(tuple(r[:-1]) for r in out for _ in range(int(r[-1])))
        tables = {k: pa.Table.from_batches([b for p, b in fed if q.reads[p] == k]) for k in q.reads}
        con = duckdb.connect()
        for kind, table in tables.items():
            con.register(kind, table)
        want = Counter(con.sql(ORACLES[name]).fetchall())
        assert got == want
        assert 0 < closed_early < sum(got.values())  # windows closed by the watermark, and the rest by the end
        assert op.counters()["late_tuples"] == 0 and op.state_entries() == 0
        if name != "q5":
            return 0
        return con.sql(WIDEST).fetchall()[0][0]
