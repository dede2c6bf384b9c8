"""The native backend's Python mirror: only the maps Python-side code reads per batch are kept up to date.

A general view is evaluated in Python over the mirror of the maps it reads;
a trigger's helper maps (a join's per-row maps) are read by no view, so
``changes()`` brings only the former up to date, from the batch's changes
read from C in bulk (m3/runtime/native/mirror.py ``last_changes``); the
others lag, their keys pending in C, until the whole store is read.  Every
test compares with the Python backend through inserts, deletes, FLOAT sums
and batches whose changes nobody read.
"""

from __future__ import annotations

import random

import pytest
from boreas.m3 import Runtime
from support.native import native, norm, skip_without_native

# a general view (MAX, HAVING) over a join: the trigger keeps per-row maps of R and S that the view does not read
JOINED = """CREATE STREAM R(a INT, b INT, x DOUBLE); CREATE STREAM S(a INT, c INT);
SELECT R.a, MAX(S.c) AS hi, SUM(R.x) AS fs, COUNT(*) AS n FROM R, S WHERE R.a = S.a GROUP BY R.a HAVING COUNT(*) > 1"""
GENERAL = """CREATE STREAM R(a INT, b INT, x DOUBLE, s VARCHAR);
SELECT a, s, MIN(b) AS lo, SUM(x) AS fs FROM R GROUP BY a, s HAVING COUNT(*) > 1"""


@pytest.fixture(autouse=True)
def _needs_native():
    skip_without_native()


def _batches(seed: int, n: int):
    """Random batches of inserts and deletes of rows inserted before (R with a DOUBLE column, S)."""
    rnd = random.Random(seed)
    live: list[tuple] = []
    for _ in range(n):
        batch = []
        for _ in range(rnd.randint(1, 40)):
            if live and rnd.random() < 0.3:
                batch.append(live.pop(rnd.randrange(len(live))))
                batch[-1] = (batch[-1][0], -1, batch[-1][2])
            elif rnd.random() < 0.5:
                row = ("R", 1, (rnd.randint(0, 6), rnd.randint(0, 9), rnd.choice([0.1, 0.2, 0.7, 1e-3])))
                batch.append(row)
                live.append(row)
            else:
                row = ("S", 1, (rnd.randint(0, 6), rnd.randint(0, 50)))
                batch.append(row)
                live.append(row)
        yield batch


def _with_s(sql: str, batch: list) -> list:
    """``batch`` for a program with R(a, b, x, s) and no S: S's rows dropped, R's given a string."""
    return [(rel, sign, (*row, f"s{row[0] % 2}")) for rel, sign, row in batch if rel == "R"] if "S(" not in sql \
        else batch


def _unread(rt: Runtime) -> set[str]:
    """The maps no view of ``rt`` reads."""
    return {m.name for m in rt.program.maps} - set().union(*(rt.view_reads(v.name) for v in rt.program.views))


@pytest.mark.parametrize("sql", [JOINED, GENERAL], ids=["join", "general"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_changes_read_each_batch_equal_the_python_backend(sql, seed):
    py, nat = Runtime(sql, backend="python"), native(sql)
    for batch in _batches(seed, 30):
        batch = _with_s(sql, batch)
        py.apply_batch(batch)
        nat.apply_batch(batch)
        assert sorted(nat.changes().get("Q1", [])) == sorted(py.changes().get("Q1", []))
    assert sorted(nat.view("Q1").items()) == sorted(py.view("Q1").items())
    assert norm(nat.state()) == norm(py.state())


def test_the_maps_no_view_reads_lag_until_the_store_is_read():
    nat = native(JOINED)
    unread = _unread(nat)
    assert unread, "the join's helper maps are read by no view"
    batches = list(_batches(5, 4))
    for batch in batches:
        nat.apply_batch(batch)
        nat.changes()
    c = nat.native_maps()
    # the view's maps caught up from the batch's changes (their pending keys dropped); the helper maps' wait
    assert all(c.pending(m) == [] for m in nat.view_reads("Q1"))
    assert any(c.pending(m) for m in unread)
    py = Runtime(JOINED, backend="python")
    for batch in batches:
        py.apply_batch(batch)
    assert norm(nat.state()) == norm(py.state())  # the whole store read: every map caught up
    assert all(c.pending(m) == [] for m in unread)


@pytest.mark.parametrize("sql", [JOINED, GENERAL], ids=["join", "general"])
def test_batches_whose_changes_nobody_read_then_changes(sql):
    """A mirror that lags by several batches catches up from C's pending keys, not from the last batch's."""
    py, nat = Runtime(sql, backend="python"), native(sql)
    for i, batch in enumerate(_batches(7, 40)):
        batch = _with_s(sql, batch)
        py.apply_batch(batch)
        nat.apply_batch(batch)
        if i % 4 == 3:  # three batches unread, then one read
            assert sorted(nat.changes().get("Q1", [])) == sorted(py.changes().get("Q1", []))
            assert sorted(nat.view("Q1").items()) == sorted(py.view("Q1").items())
    assert norm(nat.state()) == norm(py.state())


def test_a_key_written_back_to_its_value_still_names_its_rows():
    """A TRACK map's entry at ``a`` is written by every insert and delete at ``a`` and may end a batch at its old
    value (one insert and one delete at ``a``): the rows it names must still be evaluated (here ``(0, 0, 2)``
    enters the view because the sum at ``a = 0`` fell), so the journals keep keys whose values did not change."""
    sql = ("CREATE STREAM Bid(a INT, b INT, p INT, s VARCHAR);\n"
           "SELECT a, b, p, s FROM Bid WHERE p * 4 > (SELECT SUM(b2.p) FROM Bid b2 WHERE b2.a = Bid.a)")
    first = [(0, 0, 2, "x"), (2, 0, 1, "x"), (1, 0, 1, "x"), (0, 0, 1, "x"), (1, 0, 1, "x"), (0, 0, 5, "x")]
    batches = [[("Bid", 1, r) for r in first], [("Bid", 1, (1, 0, 1, "x")), ("Bid", 1, (0, 0, 1, "x")),
                                                ("Bid", -1, (0, 0, 5, "x"))]]
    py, nat = Runtime(sql, backend="python"), native(sql)
    for batch in batches:
        py.apply_batch(batch)
        nat.apply_batch(batch)
        assert sorted(nat.changes().get("Q1", [])) == sorted(py.changes().get("Q1", []))
    assert ((0, 0, 2, "x"), 1) in nat.changes()["Q1"]
