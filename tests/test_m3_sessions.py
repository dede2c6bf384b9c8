"""``SESSION`` windows in an ``m3`` box, fed by hand, against a row-at-a-time reference.

The reference (:class:`Reference`) keeps every on-time row of an open
session in a plain list per key and finds the sessions by sorting them and
cutting at every gap of ``GAP`` or more, each time it closes; the box keeps
sorted intervals and merges them as rows arrive (node/operators/m3sessions.py).
Its watermark rules are written out as in tests/test_m3_windows.py.
Hypothesis draws event times, keys, producers, idle gaps, late rows, ends
and moves of the box (its state through msgpack into a new operator), so
sessions grow and merge across batch boundaries and moves.
"""

from __future__ import annotations

import msgspec
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.m3.boxtype import infer_m3
from boreas.m3.compiler.pipeline import compile_sql
from boreas.m3.errors import CompileError
from boreas.node.operators.base import OperatorError
from boreas.node.operators.m3windows import WindowedM3Operator
from boreas.node.operators.registry import DEFAULT_REGISTRY
from boreas.wire.columns import Columns, from_rows
from support.watermark_reference import WatermarkReference

BID = Schema("BidTuple", (Field("bidder", FieldType.INT), Field("price", FieldType.INT),
                          Field("ts", FieldType.LONG)))
IDLE = 3.0


def sql(gap: int, delay: int) -> str:
    return (f"CREATE STREAM Bid(bidder INT, price INT, ts INT, WATERMARK FOR ts AS ts - {delay});\n"
            f"SELECT bidder, window_start, window_end, COUNT(*) AS n, SUM(price) AS total, MAX(price) AS top\n"
            f"FROM TABLE(SESSION(TABLE Bid PARTITION BY bidder, DESCRIPTOR(ts), {gap}))\n"
            f"GROUP BY bidder, window_start, window_end")


def build(gap: int, delay: int, text: str | None = None) -> WindowedM3Operator:
    box = Box("s", "m3", (InPort("Bid"),), ("Out",),
              (("sql", text or sql(gap, delay)), ("idle-timeout", str(IDLE))))
    op = DEFAULT_REGISTRY.build(box, [BID], infer_m3(box, [BID]))
    assert isinstance(op, WindowedM3Operator)
    return op


def sessions_of(times: list[int], gap: int) -> list[tuple[int, int, list[int]]]:
    """``(start, end, indexes)`` of the sessions of event ``times``: sorted, cut where two are ``gap`` apart."""
    order = sorted(range(len(times)), key=lambda i: times[i])
    out: list[tuple[int, int, list[int]]] = []
    for i in order:
        if out and times[i] - (out[-1][1] - gap) < gap:
            out[-1] = (out[-1][0], times[i] + gap, out[-1][2] + [i])
        else:
            out.append((times[i], times[i] + gap, [i]))
    return out


class Reference(WatermarkReference):
    """Every open session's rows, per bidder, one row at a time; sessions found anew on each close."""

    def __init__(self, gap: int, delay: int):
        super().__init__(delay, IDLE)
        self.gap = gap
        self.rows: dict[int, list[tuple[int, int]]] = {}  # bidder -> (price, ts) of its open sessions

    def on_time(self, bidder: int, t: int) -> bool:
        if t >= self.closed:
            return True
        held = self.rows.get(bidder, [])
        return any(s <= t < e for s, e, _ in sessions_of([ts for _, ts in held], self.gap))

    def batch(self, producer: str, rows: list[tuple], now: float) -> list[tuple]:
        for bidder, price, t in rows:
            if self.on_time(bidder, t):
                self.rows.setdefault(bidder, []).append((price, t))
            else:
                self.late += 1
        self.heard_from(producer, [t for _, _, t in rows], now)
        return self.close(now)

    def close(self, now: float) -> list[tuple]:
        if not self.advance(now):
            return []
        out = []
        for bidder, held in self.rows.items():
            kept = []
            for s, e, idx in sessions_of([t for _, t in held], self.gap):
                prices = [held[i][0] for i in idx]
                if e <= self.closed:
                    out.append((bidder, s, e, len(prices), sum(prices), max(prices)))
                else:
                    kept.extend(held[i] for i in idx)
            self.rows[bidder] = kept
        return sorted(out)


def emitted_rows(out) -> list[tuple]:
    rows = []
    for port, batch in out:
        assert port == 0
        rows.extend(batch.rows() if isinstance(batch, Columns) else batch)
    return sorted(rows)


row = st.tuples(st.integers(1, 3), st.integers(0, 50), st.integers(0, 150))
step = st.one_of(
    st.tuples(st.sampled_from(["batch", "columns"]), st.sampled_from(["p", "q"]), st.lists(row, max_size=6),
              st.floats(0, 2)),
    st.tuples(st.just("poll"), st.just(""), st.just([]), st.floats(0, 4)),
    st.tuples(st.just("move"), st.just(""), st.just([]), st.just(0.0)),
)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gap=st.integers(1, 30), delay=st.integers(0, 15), steps=st.lists(step, max_size=25))
def test_sessions_match_a_row_at_a_time_reference(gap, delay, steps):
    op, ref, now = build(gap, delay), Reference(gap, delay), 0.0
    for what, producer, rows, pause in steps:
        now += pause
        if what in ("batch", "columns"):  # as rows, or as Arrow columns (a publisher's batch)
            batch = (from_rows(rows, BID) or []) if what == "columns" else list(rows)
            got, want = op.process_from(0, batch, now, ("Bid", producer, 1)), ref.batch(producer, rows, now)
        elif what == "poll":
            got, want = op.poll(now), ref.close(now)
        else:  # the box moves: its state, open sessions and all, through msgpack, into a new operator
            moved = build(gap, delay)
            moved.restore(msgspec.msgpack.decode(msgspec.msgpack.encode(op.state())), now)
            op, got, want = moved, [], []
        assert emitted_rows(got) == want
        assert op.counters()["late_tuples"] == ref.late
        assert op.runtime.entries() == 0, "a closed session's map entry is left"
        assert op.state_entries() == sum(len(held) for held in ref.rows.values())
    ref.ended = True
    assert emitted_rows(op.end_of_input(now)) == ref.close(now)
    assert op.state_entries() == 0


def test_a_row_bridging_two_sessions_in_a_later_batch_merges_them():
    op = build(10, 20)
    assert op.process_from(0, [(1, 5, 100), (1, 7, 115), (2, 1, 101)], 0.0, ("Bid", "p", 1)) == []
    assert op.process_from(0, [(1, 3, 108)], 0.1, ("Bid", "p", 2)) == []  # 108 is within 10 of 100 and 115
    assert emitted_rows(op.process_from(0, [(3, 1, 200)], 0.2, ("Bid", "p", 3))) == [
        (1, 100, 125, 3, 15, 7), (2, 101, 111, 1, 1, 1)]
    assert op.process_from(0, [(1, 9, 120)], 0.3, ("Bid", "p", 4)) == []  # its session closed: late
    assert op.counters()["late_tuples"] == 1
    assert emitted_rows(op.end_of_input(0.4)) == [(3, 200, 210, 1, 1, 1)]
    assert op.state_entries() == 0


def test_a_session_without_partition_by_is_one_over_the_whole_stream():
    text = ("CREATE STREAM Bid(bidder INT, price INT, ts INT);\n"
            "SELECT window_start, window_end, COUNT(*) AS n FROM TABLE(SESSION(TABLE Bid, DESCRIPTOR(ts), "
            "INTERVAL '10' MILLISECOND)) GROUP BY window_start, window_end")
    op = build(10, 0, text)
    assert emitted_rows(op.process_from(0, [(1, 1, 0), (2, 1, 5), (3, 1, 30)], 0.0, ("Bid", "p", 1))) == [(0, 15, 2)]
    assert emitted_rows(op.end_of_input(1.0)) == [(30, 40, 1)]


def test_bad_session_calls_are_refused_saying_why():
    with pytest.raises(CompileError, match="SESSION's arguments are SESSION\\(TABLE name \\[PARTITION BY"):
        compile_sql("CREATE STREAM B(a INT, ts INT); SELECT a, window_start, COUNT(*) AS n "
                    "FROM TABLE(SESSION(TABLE B, ts, INTERVAL '1' SECOND)) GROUP BY a, window_start")
    with pytest.raises(CompileError, match="SESSION's PARTITION BY c names no column of B"):
        compile_sql("CREATE STREAM B(a INT, ts INT); SELECT a, window_start, COUNT(*) AS n "
                    "FROM TABLE(SESSION(TABLE B PARTITION BY c, DESCRIPTOR(ts), 5)) GROUP BY a, window_start")
    with pytest.raises(CompileError, match="CUMULATE windows are not supported"):
        compile_sql("CREATE STREAM B(a INT, ts INT); SELECT a, COUNT(*) AS n "
                    "FROM TABLE(CUMULATE(TABLE B, DESCRIPTOR(ts), 5, 10)) GROUP BY a")
    text = ("CREATE STREAM Bid(bidder INT, price INT, ts INT);\nSELECT bidder, COUNT(*) AS n FROM TABLE(SESSION("
            "TABLE Bid PARTITION BY bidder, DESCRIPTOR(ts), 10)) GROUP BY bidder")
    with pytest.raises(OperatorError, match="does not GROUP BY window_start or window_end"):
        build(10, 0, text)


def test_a_deletion_on_a_session_stream_is_refused():
    op = build(10, 0)
    with pytest.raises(OperatorError, match="a SESSION window reads insertions only"):
        op.process_from(0, Columns(from_rows([(1, 1, 5)], BID).batch, weights=pa.array([-1], pa.int64())), 0.0,
                        ("Bid", "p", 1))


def test_flinks_group_window_form_is_the_table_function():
    """Nexmark's q11 is written ``GROUP BY k, SESSION(t, gap)`` with ``SESSION_START``/``SESSION_END``."""
    legacy = build(10, 0, "CREATE STREAM Bid(bidder INT, price INT, ts INT);\n"
                          "SELECT B.bidder, SESSION_START(B.ts, 10) AS s, SESSION_END(B.ts, 10) AS e, COUNT(*) AS n,\n"
                          "SUM(B.price) AS total, MAX(B.price) AS top FROM Bid B GROUP BY B.bidder, SESSION(B.ts, 10)")
    table = build(10, 0)
    rows = [(1, 5, 100), (2, 6, 103), (1, 7, 108), (1, 2, 130)]
    assert emitted_rows(legacy.process_from(0, rows, 0.0, ("Bid", "p", 1))) == \
        emitted_rows(table.process_from(0, rows, 0.0, ("Bid", "p", 1))) == [(1, 100, 118, 2, 12, 7),
                                                                            (2, 103, 113, 1, 6, 6)]
    ended = [(1, 130, 140, 1, 2, 2)]
    assert emitted_rows(legacy.end_of_input(1.0)) == emitted_rows(table.end_of_input(1.0)) == ended
    with pytest.raises(CompileError, match="other GROUP BY items are its key, plain columns: 'a [+] 1'"):
        compile_sql("CREATE STREAM B(a INT, ts INT); SELECT a + 1 AS k, COUNT(*) AS n FROM B "
                    "GROUP BY a + 1, SESSION(ts, 5)")
    with pytest.raises(CompileError, match="a session group window reads one relation"):
        compile_sql("CREATE STREAM B(a INT, ts INT); CREATE TABLE T(a INT); SELECT B.a, COUNT(*) AS n "
                    "FROM B JOIN T ON B.a = T.a GROUP BY B.a, SESSION(B.ts, 5)")


def test_a_box_reading_through_sessions_and_fixed_windows_is_refused():
    text = ("CREATE STREAM Bid(bidder INT, price INT, ts INT); CREATE STREAM Ask(bidder INT, price INT, ts INT);\n"
            "SELECT bidder, window_start, window_end, COUNT(*) AS n FROM TABLE(SESSION(TABLE Bid PARTITION BY "
            "bidder, DESCRIPTOR(ts), 10)) GROUP BY bidder, window_start, window_end;\n"
            "SELECT bidder, window_start, window_end, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE Ask, DESCRIPTOR(ts), "
            "10)) GROUP BY bidder, window_start, window_end")
    box = Box("s", "m3", (InPort("Bid"), InPort("Ask")), ("Out", "Out2"), (("sql", text),))
    with pytest.raises(OperatorError, match="reads one stream through SESSION and another through TUMBLE or HOP"):
        DEFAULT_REGISTRY.build(box, [BID, BID], infer_m3(box, [BID, BID]))


def test_a_float_event_times_session_bounds_are_rounded_outward():
    text = ("CREATE STREAM Bid(bidder INT, price INT, ts DOUBLE);\n"
            "SELECT bidder, window_start, window_end, COUNT(*) AS n FROM TABLE(SESSION(TABLE Bid PARTITION BY "
            "bidder, DESCRIPTOR(ts), 10)) GROUP BY bidder, window_start, window_end")
    bid = Schema("BidTuple", (Field("bidder", FieldType.INT), Field("price", FieldType.INT),
                              Field("ts", FieldType.DOUBLE)))
    box = Box("s", "m3", (InPort("Bid"),), ("Out",), (("sql", text),))
    op = DEFAULT_REGISTRY.build(box, [bid], infer_m3(box, [bid]))
    op.process_from(0, [(1, 1, 0.5), (1, 1, 9.75)], 0.0, ("Bid", "p", 1))
    assert emitted_rows(op.end_of_input(1.0)) == [(1, 0, 20, 2)]  # [0.5, 19.75)


def test_a_held_rows_unread_strings_are_not_kept():
    """A batch of columns is held with its STRING columns no view reads blanked (as a TUMBLE's copies are): the
    snapshot carries no URL, and the sessions' counts are those of the same rows fed as rows."""
    text = ("CREATE STREAM Bid(bidder INT, url STRING, ts INT);\n"
            "SELECT bidder, window_start, window_end, COUNT(*) AS n FROM TABLE(SESSION(TABLE Bid PARTITION BY "
            "bidder, DESCRIPTOR(ts), 10)) GROUP BY bidder, window_start, window_end")
    bid = Schema("BidTuple", (Field("bidder", FieldType.INT), Field("url", FieldType.STRING),
                              Field("ts", FieldType.LONG)))
    box = Box("s", "m3", (InPort("Bid"),), ("Out",), (("sql", text),))
    rows = [(1, "http://a/x", 0), (2, "http://b/y", 3), (1, "http://a/z", 8), (1, "http://c/w", 30)]
    by_columns, by_rows = (DEFAULT_REGISTRY.build(box, [bid], infer_m3(box, [bid])) for _ in range(2))
    got = {"columns": emitted_rows(by_columns.process_from(0, from_rows(rows, bid), 0.0, ("Bid", "p", 1))),
           "rows": emitted_rows(by_rows.process_from(0, rows, 0.0, ("Bid", "p", 1)))}
    held = msgspec.json.encode(by_columns.state()["sessions"])  # (the session still open: bidder 1's at 30)
    assert b"http" not in held and b"http" in msgspec.json.encode(by_rows.state()["sessions"])
    got["columns"] += emitted_rows(by_columns.end_of_input(1.0))
    got["rows"] += emitted_rows(by_rows.end_of_input(1.0))
    assert sorted(got["columns"]) == sorted(got["rows"]) == [(1, 0, 18, 2), (1, 30, 40, 1), (2, 3, 13, 1)]


@pytest.mark.parametrize("backend", ["python", "native"])
def test_a_string_partition_column_no_view_reads_is_not_blanked(backend):
    """A SESSION partitioned by a STRING column that no view reads (the box cuts the sessions itself, the program
    never sees the column) keeps it: fed as columns, "a", "b" and "c" are separate sessions, as fed as rows."""
    text = ("CREATE STREAM Bid(bidder INT, url STRING, ts INT);\n"
            "SELECT window_start, window_end, COUNT(*) AS n FROM TABLE(SESSION(TABLE Bid PARTITION BY "
            "url, DESCRIPTOR(ts), 10)) GROUP BY window_start, window_end")
    bid = Schema("BidTuple", (Field("bidder", FieldType.INT), Field("url", FieldType.STRING),
                              Field("ts", FieldType.LONG)))
    box = Box("s", "m3", (InPort("Bid"),), ("Out",), (("sql", text), ("backend", backend)))
    rows = [(1, "a", 0), (2, "b", 5), (1, "a", 12), (1, "c", 30)]
    got = {}
    for form in ("columns", "rows"):
        op = DEFAULT_REGISTRY.build(box, [bid], infer_m3(box, [bid]))
        batch = from_rows(rows, bid) if form == "columns" else rows
        got[form] = emitted_rows(op.process_from(0, batch, 0.0, ("Bid", "p", 1))) + emitted_rows(op.end_of_input(1.0))
    assert sorted(got["columns"]) == sorted(got["rows"]) == [(0, 10, 1), (5, 15, 1), (12, 22, 1), (30, 40, 1)]
