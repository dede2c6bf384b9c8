"""The native (C) backend and INT values beyond 64 bits: the runtime moves to the Python backend for good.

C's ``int64_t`` would wrap silently where Python's ints do not; the generated
C checks every INT update and, on overflow, the runtime continues on the Python
backend with the state it had, exact against DuckDB (docs/m3_native.md, "INT
values beyond 64 bits").  Split from ``test_native.py``, the backend's other
properties.
"""

from __future__ import annotations

import datetime
import logging

import pytest
from boreas.m3 import Runtime
from support.native import native, norm, skip_without_native

GROUPED = "CREATE STREAM R(a INT, b INT, c DOUBLE, s VARCHAR, d DATE);\n"
DATES = [datetime.date(1995, 3, 1), datetime.date(1995, 4, 1)]
BIG = 2**62


@pytest.fixture(autouse=True)
def _needs_the_native_backend():
    """Every test here needs the compiled backend: skipped, with the reason, on a machine without it."""
    skip_without_native()



def _duckdb_sums(rows: list, with_product: bool = False) -> dict:
    """DuckDB's view over the live rows: SUM over BIGINT is a HUGEINT there, exact as Python's ints."""
    import duckdb
    con = duckdb.connect()
    con.execute("CREATE TABLE R(a BIGINT, b BIGINT, c BIGINT)")
    if rows:
        con.executemany("INSERT INTO R VALUES (?, ?, ?)", rows)
    col = "SUM(b::HUGEINT * c::HUGEINT)" if with_product else "SUM(b)"
    return {(a,): (int(t), n) for a, t, n in con.execute(f"SELECT a, {col}, COUNT(*) FROM R GROUP BY a").fetchall()}


def _exact_sums(rows: list, product: bool = False) -> dict:
    out: dict = {}
    for a, b, c in rows:
        t, n = out.get((a,), (0, 0))
        out[(a,)] = (t + (b * c if product else b), n + 1)
    return out


def _overflow_records(caplog) -> list:
    return [r for r in caplog.records if r.levelno == logging.WARNING
            and "INT value beyond 64 bits: continuing on the Python backend" in r.getMessage()]


@pytest.mark.parametrize("product", [False, True], ids=["sum", "product"])
def test_an_int_sum_beyond_64_bits_moves_the_runtime_to_python_and_stays_exact(product, caplog):
    """SUM(b) over values near 2**62 (or SUM(b*c) with b*c beyond 2**63) outgrows int64 mid-stream and mid-batch:
    the batch is rolled back in C, the runtime continues on Python with the C state, the batch is applied once."""
    col = "b * c" if product else "b"
    sql = f"CREATE STREAM R(a INT, b INT, c INT); SELECT a, SUM({col}) AS t, COUNT(*) AS n FROM R GROUP BY a"
    py, nat = Runtime(sql, backend="python"), native(sql)
    small = 3 * 10**9 if product else 1  # b * c: a product beyond int64 (3e9 * 4e9 = 1.2e19) with c = 4e9 below
    c_big = 4 * 10**9 if product else 1
    batches = [
        [("R", 1, (1, 5, 1)), ("R", 1, (2, 7, 1))],
        [("R", 1, (1, BIG if not product else 2 * 10**9, c_big if product else 1)), ("R", 1, (2, 1, 1))],
        [("R", 1, (2, 2, 1)), ("R", 1, (1, 3, 1)),  # in range, then the row whose sum (or product) is not
         ("R", 1, (1, BIG if not product else small, c_big)), ("R", 1, (1, BIG if not product else 1, 1))],
        [("R", -1, (1, 5, 1)), ("R", 1, (3, -BIG if not product else -small, c_big))],
        [("R", -1, (1, BIG if not product else small, c_big)), ("R", 1, (2, 9, 1))],
    ]
    live: list = []
    switched_at = None
    with caplog.at_level(logging.INFO, logger="boreas.m3.runtime.program"):
        for i, batch in enumerate(batches):
            for _, sign, row in batch:
                if sign > 0:
                    live.append(row)
                else:
                    live.remove(row)
            assert nat.apply_batch(batch) == py.apply_batch(batch) == i + 1
            if switched_at is None and nat.backend == "python":
                switched_at = i
            if i != 1:  # the batch before the overflow is not read: its changes come from C as it is left
                assert nat.changes() == py.changes(), i
            want = _exact_sums(live, product)
            assert nat.view("Q1") == py.view("Q1") == want == _duckdb_sums(live, product), i
    assert switched_at == 2  # the third batch outgrew int64 (its first rows fit: they were rolled back and re-run)
    peak = _exact_sums([row for batch in batches[:3] for _, sign, row in batch if sign > 0], product)
    assert max(t for t, _ in peak.values()) >= 2**63
    assert nat.backend == "python" and nat.backend_reason.startswith(
        "INT value beyond 64 bits: continuing on the Python backend (map Q1_t, trigger +R")
    assert nat._native is None and nat.version == len(batches)
    records = _overflow_records(caplog)
    assert len(records) == 1 and "Q1" in records[0].getMessage() and "map Q1_t" in records[0].getMessage()
    assert norm(nat.state()) == norm(py.state()) and nat.entries() == py.entries()
    more = [("R", 1, (4, BIG, 1)), ("R", 1, (4, BIG, 1)), ("R", 1, (4, BIG, 1))]  # and on, on Python
    nat.apply_batch(more)
    py.apply_batch(more)
    assert nat.view("Q1") == py.view("Q1") and nat.view("Q1")[(4,)][0] == 3 * BIG


def test_values_that_stay_in_64_bits_keep_the_native_backend(caplog):
    """Sums near the edge of int64 (up to 2**63 - 1 and down to -2**63) that never leave it stay in C."""
    sql = "CREATE STREAM R(a INT, b INT, c INT); SELECT a, SUM(b) AS t, SUM(b * c) AS p, COUNT(*) AS n FROM R GROUP BY a"
    py, nat = Runtime(sql, backend="python"), native(sql)
    top = 2**63 - 1
    batches = [
        [("R", 1, (1, BIG, 1)), ("R", 1, (1, BIG - 1, 1)), ("R", 1, (2, -BIG, 1)), ("R", 1, (2, -BIG, 1))],
        [("R", -1, (1, BIG, 1)), ("R", 1, (1, BIG, 1))],  # a: 2**63 - 1; b: -2**63
        [("R", 1, (3, top, 1)), ("R", 1, (3, -top, 1)), ("R", -1, (2, -BIG, 1))],
    ]
    with caplog.at_level(logging.INFO, logger="boreas.m3.runtime.program"):
        for batch in batches:
            py.apply_batch(batch)
            nat.apply_batch(batch)
            assert nat.backend == "native" and nat.backend_reason is None
            assert nat.changes() == py.changes() and nat.view("Q1") == py.view("Q1")
    assert nat.view("Q1")[(1,)] == (top, top, 2) and nat.view("Q1")[(2,)] == (-BIG, -BIG, 1)
    assert not _overflow_records(caplog) and norm(nat.state()) == norm(py.state())


def test_input_and_restored_values_beyond_64_bits_move_to_python(caplog):
    """An INT column value int64 cannot hold (nothing runs in C), and a restored state holding one."""
    from array import array
    sql = GROUPED + "SELECT a, SUM(b) AS t FROM R WHERE d < DATE '1995-03-15' GROUP BY a"
    py, nat = Runtime(sql, backend="python"), native(sql)
    first = [(1, 2, 0.5, "x", DATES[0]), (1, 3, 0.5, "y", DATES[1])]
    py.apply_batch([("R", 1, r) for r in first])
    nat.apply_batch([("R", 1, r) for r in first])
    with caplog.at_level(logging.INFO, logger="boreas.m3.runtime.program"):
        cols = [array("q", [1, 2]), [2**70, 4], array("d", [0.0, 0.0]), ["x", "z"],
                array("q", [DATES[0].toordinal(), DATES[0].toordinal()])]  # DATE as day numbers, as C takes it
        nat.apply_columns("R", 1, cols)
    py.apply_batch([("R", 1, (1, 2**70, 0.0, "x", DATES[0])), ("R", 1, (2, 4, 0.0, "z", DATES[0]))])
    assert nat.backend == "python" and "column b of R" in nat.backend_reason and len(_overflow_records(caplog)) == 1
    assert nat.view("Q1") == py.view("Q1") == {(1,): 2 + 2**70, (2,): 4} and nat.changes() == py.changes()
    nat.apply_columns("R", -1, cols)  # later columnar batches go to Python with their dates decoded
    py.apply_batch([("R", -1, (1, 2**70, 0.0, "x", DATES[0])), ("R", -1, (2, 4, 0.0, "z", DATES[0]))])
    assert nat.view("Q1") == py.view("Q1") == {(1,): 2}

    wide = Runtime(sql, backend="python")
    wide.apply_batch([("R", 1, (1, 2**64, 0.0, "x", DATES[0]))])
    moved = Runtime.from_state(wide.state(), backend="native")
    assert moved.backend == "python" and "restored" in moved.backend_reason
    assert moved.view("Q1") == {(1,): 2**64}
