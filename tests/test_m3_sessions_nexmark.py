"""Nexmark's q11 (user sessions, in the suite's own group-window form) on Boreas, against DuckDB's sessions.

The oracle is DuckDB over the same generated bids: a bid starts a new
session of its bidder when it is 10 s or more after the bidder's previous
one (``LAG`` over the bidder's bids in event-time order), and a session is
its bids' count, first event time and last + 10 s.  The box is fed the
bench's Arrow batches (bench/nexmark_boreas.py), several of them, so
sessions span batches (at 500 events a second of event time, so
many close before the end); its emitted rows, with the end of input's, must be
exactly DuckDB's, none late, no state left.
"""

from __future__ import annotations

import pytest
from support.bench import bench_importable

pytestmark = pytest.mark.slow  # benchmark code, as tests/test_nexmark.py

SESSIONS = """
WITH o AS (SELECT bidder, datetime AS t, CASE WHEN datetime - LAG(datetime) OVER (PARTITION BY bidder
                  ORDER BY datetime) < 10000 THEN 0 ELSE 1 END AS fresh FROM bid),
     s AS (SELECT bidder, t, SUM(fresh) OVER (PARTITION BY bidder ORDER BY t ROWS UNBOUNDED PRECEDING) AS sid FROM o)
SELECT bidder, CAST(MIN(t) AS BIGINT), CAST(MAX(t) + 10000 AS BIGINT), COUNT(*) FROM s GROUP BY bidder, sid
"""


def test_q11_emits_duckdbs_sessions(monkeypatch):
    for _ in bench_importable(monkeypatch, ("nexmark_gen", "nexmark_boreas", "nexmark_queries")):
        import duckdb
        import nexmark_gen
        import pyarrow as pa
        from nexmark_boreas import boreas_batch, plan
        from nexmark_queries import BY_NAME

        from boreas.wire.columns import Columns

        blocks = list(nexmark_gen.blocks(nexmark_gen.GeneratorConfig(20_000, seed=4, rate=500)))  # 40 s
        batches = [boreas_batch("bid", b["bid"]).slice(i, 1500) for b in blocks if b["bid"].num_rows
                   for i in range(0, b["bid"].num_rows, 1500)]
        planned = plan(BY_NAME["q11"])
        assert not isinstance(planned, str), planned
        op, got = planned.operator, []
        for i, batch in enumerate(batches):
            got.extend(row for _, out in op.process_from(0, Columns(batch), i * 0.01, ("bid", "gen", i + 1))
                       for row in out)
        closed_early = len(got)
        got.extend(row for _, out in op.end_of_input(len(batches) * 0.01) for row in out)
        assert planned.out_fields == ["bidder", "starttime", "endtime", "bid_count"]
        bid = pa.Table.from_batches(batches)  # noqa: F841 - DuckDB reads it by name
        want = duckdb.sql(SESSIONS).fetchall()
        assert sorted(tuple(int(v) for v in r) for r in got) == sorted(want)
        assert 0 < closed_early < len(got)  # sessions closed by the watermark, and the rest by the end
        assert op.counters()["late_tuples"] == 0 and op.state_entries() == 0
