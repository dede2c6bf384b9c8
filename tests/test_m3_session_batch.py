"""A SESSION port's batch held a run per key at a time (node/operators/m3session_batch.py) against the same rows
added one at a time (``SessionSet.add``): the same sessions, each with the same rows, after every batch."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from boreas.m3.compiler.sessionfn import Session
from boreas.node.operators.m3session_batch import runs
from boreas.node.operators.m3session_held import held_rows
from boreas.node.operators.m3sessions import SessionBuffer, SessionPort
from boreas.wire.columns import Columns

GAP = 10


def port() -> SessionPort:
    return SessionPort(Session("Bid", "t", GAP, ("k",)), time=1, partition=(0,))


def sessions_of(sp: SessionPort) -> dict:
    return {key: [(a, b, Counter(held_rows(rows))) for a, b, rows in zip(s.starts, s.ends, s.rows)]
            for key, s in sp.keys.items()}


row = st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 80), st.integers(0, 3))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(row, min_size=1, max_size=15), max_size=5))
def test_runs_hold_the_sessions_rows_added_one_at_a_time_hold(batches):
    by_runs, by_rows = port(), port()
    buffer = SessionBuffer({0: by_runs})
    for batch in batches:
        rows = [(k, t, v) for k, t, v in batch]
        columns = Columns(pa.record_batch([pa.array([r[0] for r in rows]), pa.array([r[1] for r in rows], pa.int64()),
                                           pa.array([r[2] for r in rows], pa.int64())], names=["k", "t", "v"]))
        assert buffer.admit_columns(0, columns, closed=-1) == (0, max(r[1] for r in rows))
        kept, late, _ = by_rows.take(rows, closed=-1)
        assert late == 0 and len(kept) == len(rows)
        assert sessions_of(by_runs) == sessions_of(by_rows)
    reference = SessionBuffer({0: by_rows})
    for frontier in (30, 60, 200):  # the sessions closed, each row with its bounds, and those left open agree
        assert Counter(buffer.close(frontier).get(0, [])) == Counter(reference.close(frontier).get(0, []))
        assert sessions_of(by_runs) == sessions_of(by_rows)


def test_a_batch_that_may_hold_a_late_row_or_a_null_time_goes_row_by_row():
    batch = pa.record_batch([pa.array(["a", "a"]), pa.array([5, 20], pa.int64())], names=["k", "t"])
    assert runs(batch, 1, (0,), GAP, closed=10) is None  # 5 is before the closed frontier: late unless held
    assert runs(batch, 1, (0,), GAP, closed=0) is not None
    nulls = pa.record_batch([pa.array(["a", "a"]), pa.array([5, None], pa.int64())], names=["k", "t"])
    assert runs(nulls, 1, (0,), GAP, closed=0) is None
    # a NaN time: the row path refuses that row and keeps the key's others (a run would end at NaN, lost)
    nan = pa.record_batch([pa.array(["a", "a"]), pa.array([5.0, float("nan")])], names=["k", "t"])
    assert runs(nan, 1, (0,), GAP, closed=0) is None


def test_runs_are_cut_per_key_where_neighbours_are_a_gap_apart_and_keep_arrival_order():
    batch = pa.record_batch([pa.array(["b", "a", "a", "b", "a", "a"]), pa.array([3, 25, 0, 12, 9, 40], pa.int64())],
                            names=["k", "t"])
    cut = runs(batch, 1, (0,), GAP, closed=0)
    assert cut is not None
    got = [cut.order[cut.bounds[i]:cut.bounds[i + 1]].tolist() for i in range(len(cut.low))]
    # a: 0, 9 (less than 10 apart: one run, in arrival order 2 then 4), 25, 40; b: 3, 12
    assert got == [[2, 4], [1], [5], [0, 3]]
    assert cut.low.tolist() == [0, 25, 40, 3] and cut.high.tolist() == [9, 25, 40, 12]
