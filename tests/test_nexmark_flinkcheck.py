"""bench/nexmark.py's check against Flink's collected rows, and its memory mode, on a few thousand events.

The check's claims rest on these: Boreas's result of a windowed query (the
rows its box emits as windows close, and at the end of input) is compared
with Flink's rows whatever order Flink's columns come in and however many
times a row occurs, and a missing row is reported as the first difference.
Flink's rows here are the ones DuckDB computes with Flink's semantics (as
tests/test_nexmark_winjoin.py writes them), written in the file format
``bench/nexmark_flink.py --collect`` writes (Flink's column names and
order, each row's multiplicity last), since PyFlink is not in the test
environment; ``bench/nexmark.py --check-flink`` runs the real one.
"""

from __future__ import annotations

import datetime
import decimal
import json

import pytest
from support.bench import bench_importable

pytestmark = pytest.mark.slow  # benchmark code, as tests/test_nexmark.py

#: q11's sessions (a bid 10 s or more after its bidder's previous one starts a new one), in Flink's column order
SESSIONS = """
WITH o AS (SELECT bidder, datetime AS t, CASE WHEN datetime - LAG(datetime) OVER (PARTITION BY bidder
                  ORDER BY datetime) < 10000 THEN 0 ELSE 1 END AS fresh FROM bid),
     s AS (SELECT bidder, t, SUM(fresh) OVER (PARTITION BY bidder ORDER BY t ROWS UNBOUNDED PRECEDING) AS sid FROM o)
SELECT bidder, COUNT(*), CAST(MIN(t) AS DOUBLE), CAST(MAX(t) + 10000 AS DOUBLE), 1 FROM s GROUP BY bidder, sid
"""
TUMBLE = "datetime - datetime % 10000"
Q8 = f"""WITH P AS (SELECT DISTINCT id, name, {TUMBLE} AS ws FROM person),
              A AS (SELECT DISTINCT seller, {TUMBLE} AS ws FROM auction)
         SELECT P.id, P.name, P.ws, COUNT(*) FROM P JOIN A ON P.id = A.seller AND P.ws = A.ws GROUP BY ALL"""
FLINK_COLUMNS = {"q11": ["bidder", "bid_count", "starttime", "endtime"], "q8": ["id", "name", "starttime"]}


@pytest.fixture
def check(monkeypatch):
    for _ in bench_importable(monkeypatch, ("nexmark_gen", "nexmark_boreas", "nexmark_queries", "nexmark_flink",
                                            "nexmark_flinkcheck", "nexmark_memory")):
        import nexmark_flinkcheck

        yield nexmark_flinkcheck


def _flink_file(tmp_path, name, sql, blocks, drop=0):
    """Flink's result as ``nexmark_flink.py --collect`` writes it, here from DuckDB (``drop``: rows left out)."""
    import duckdb
    import pyarrow as pa
    from nexmark_boreas import boreas_batch
    from nexmark_queries import BY_NAME

    con = duckdb.connect()
    for kind in BY_NAME[name].reads:
        con.register(kind, pa.Table.from_batches([boreas_batch(kind, b[kind]) for b in blocks]))
    rows = sorted(con.sql(sql).fetchall())[drop:]
    path = tmp_path / f"flink_{name}.json"
    path.write_text(json.dumps({"columns": FLINK_COLUMNS[name], "rows": [list(r) for r in rows]}))
    return path


@pytest.mark.parametrize("name,sql", [("q11", SESSIONS), ("q8", Q8)])
def test_a_windowed_query_matches_flinks_rows_in_flinks_column_order(check, tmp_path, name, sql):
    import nexmark_gen
    from nexmark_boreas import plan
    from nexmark_queries import BY_NAME

    blocks = list(nexmark_gen.blocks(nexmark_gen.GeneratorConfig(20_000, seed=4, rate=500)))  # 40 s
    said = check.check(plan(BY_NAME[name]), blocks, _flink_file(tmp_path, name, sql, blocks))
    assert said.startswith("matches Flink (") and not said.startswith("matches Flink (0 rows")
    said = check.check(plan(BY_NAME[name]), blocks, _flink_file(tmp_path, name, sql, blocks, drop=1))
    assert said.startswith("DIFFERS from Flink: ") and "Boreas only: [(" in said and "Flink only: []" in said


def test_flinks_values_are_read_as_boreas_holds_them(check):
    from nexmark_flink import _plain

    assert _plain(datetime.datetime(2015, 7, 15, 0, 0, 1, 227000)) == 1_436_918_401_227.0  # ms since the epoch, UTC
    assert _plain(decimal.Decimal("908.000")) == 908.0 and _plain("x") == "x"


def test_the_memory_mode_samples_a_windowed_box_that_ends_empty(check):
    import nexmark_memory

    got = nexmark_memory.measure("q8", 30_000, 4, 500)  # 60 s of event time: six 10 s windows, sampled per slice
    assert got["samples"] >= 4 and got["rows_out"] > 0 and got["left_at_end"] == 0
    assert 0 < got["state_plateau"] <= got["state_peak"] and got["rss_peak_mb"] >= got["rss_plateau_mb"] > 0


def test_flinks_changelog_is_applied_by_sign_or_for_a_top_n_by_its_key(check):
    from collections import Counter

    from nexmark_flink import _apply

    log = [("+I", (1, "a")), ("+U", (1, "b")), ("+U", (1, "c")), ("+I", (2, "x")), ("-D", (2, "x"))]
    upserts, latest = Counter(), {}
    for kind, row in log:  # upserts: each +U replaces its key's row, no -U before it
        _apply(upserts, latest, (0,), kind, row)
    assert +upserts == Counter({(1, "c"): 1})
    retracts = Counter()
    for kind, row in [("+I", (1, "a")), ("-U", (1, "a")), ("+U", (1, "b")), ("+I", (1, "b"))]:
        _apply(retracts, {}, None, kind, row)
    assert +retracts == Counter({(1, "b"): 2})
