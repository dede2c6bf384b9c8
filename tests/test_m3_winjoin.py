"""Window joins and interval joins in an ``m3`` box (docs/m3.md, "Window joins"), fed by hand, against a
row-at-a-time reference.

The reference keeps each window's on-time rows per stream, with the
watermark rules written out (tests/support/watermark_reference.py; the
box's frontier is the least of its windowed streams' marks), and when a
window closes computes the query over that window's rows directly in Python:
a window join (counts per key of one stream joined with the MAX per key of
the other, on the window), an interval join (the stream's rows joined back
to the window's MAX, ``t BETWEEN end - size AND end``: Nexmark's q7 shape)
and an aggregate of aggregates joined back (the hottest keys per window:
q5's).  Hypothesis draws event times, producers, idle gaps, late rows,
batch boundaries and moves of the box (its state through msgpack into a new
operator); each step's emitted rows, the late count and that no map entry of
a closed window is left are checked.
"""

from __future__ import annotations

from collections import Counter

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.m3.boxtype import infer_m3
from boreas.node.operators.base import OperatorError
from boreas.node.operators.m3windows import WindowedM3Operator
from boreas.node.operators.registry import DEFAULT_REGISTRY
from boreas.wire.columns import Columns, from_rows
from support.watermark_reference import WatermarkReference

P = Schema("PTuple", (Field("k", FieldType.INT), Field("ts", FieldType.INT)))
A = Schema("ATuple", (Field("k", FieldType.INT), Field("v", FieldType.INT), Field("ts", FieldType.INT)))
A_NULL = Schema("ATuple", (Field("k", FieldType.INT), Field("v", FieldType.INT, nullable=True), Field("ts", FieldType.INT)))
SIZE, SLIDE, IDLE = 10, 5, 3.0


def window(kind: str, stream: str) -> str:
    return (f"TABLE(TUMBLE(TABLE {stream}, DESCRIPTOR(ts), {SIZE}))" if kind == "TUMBLE" else
            f"TABLE(HOP(TABLE {stream}, DESCRIPTOR(ts), {SLIDE}, {SIZE}))")


def counts(kind: str, stream: str, alias: str) -> str:
    return (f"(SELECT k, COUNT(*) AS n, window_start AS s, window_end AS e FROM {window(kind, stream)} "
            f"GROUP BY k, window_start, window_end) {alias}")


QUERIES = {
    "window join": lambda kind: (
        f"SELECT X.k, X.n, Y.top FROM {counts(kind, 'P', 'X')} JOIN (SELECT k, MAX(v) AS top, window_start AS s, "
        f"window_end AS e FROM {window(kind, 'A')} GROUP BY k, window_start, window_end) Y "
        "ON X.k = Y.k AND X.s = Y.s AND X.e = Y.e"),
    "interval join": lambda kind: (
        f"SELECT B.k, B.v, B.ts FROM A B JOIN (SELECT MAX(v) AS m, window_end AS e FROM {window(kind, 'A')} "
        f"GROUP BY window_start, window_end) W ON B.v = W.m WHERE B.ts BETWEEN W.e - {SIZE} AND W.e"),
    "interval join by key": lambda kind: (
        f"SELECT B.k, B.v, B.ts FROM A B JOIN (SELECT k, MAX(v) AS m, window_end AS e FROM {window(kind, 'A')} "
        f"GROUP BY k, window_start, window_end) W ON B.v = W.m AND B.k = W.k WHERE B.ts BETWEEN W.e - {SIZE} AND W.e"),
    "hot keys": lambda kind: (
        f"SELECT X.k, X.n FROM {counts(kind, 'A', 'X')} JOIN (SELECT MAX(C.n) AS m, C.s, C.e FROM "
        f"{counts(kind, 'A', 'C')} GROUP BY C.s, C.e) Y ON X.s = Y.s AND X.e = Y.e AND X.n >= Y.m"),
}
#: the brief's shape of an ON over NULLs: arithmetic on a MAX that is NULL where every v of the window is
NULL_QUERIES = dict(QUERIES, **{"interval join or": lambda kind: (
    f"SELECT B.k, B.v, B.ts FROM A B JOIN (SELECT MAX(v) AS m, window_end AS e FROM {window(kind, 'A')} "
    f"GROUP BY window_start, window_end) W ON (B.v = W.m OR B.k = W.m - 1) WHERE B.ts BETWEEN W.e - {SIZE} AND W.e"),
    # an upper-stage aggregate over the MAX that is NULL where every v of the window is: SQL's NULL, not a crash
    "window join aggregate": lambda kind: (
        f"SELECT X.k, MAX(Y.top) AS m, COUNT(*) AS c FROM {counts(kind, 'P', 'X')} JOIN (SELECT k, MAX(v) AS top, "
        f"window_start AS s, window_end AS e FROM {window(kind, 'A')} GROUP BY k, window_start, window_end) Y "
        "ON X.k = Y.k AND X.s = Y.s AND X.e = Y.e GROUP BY X.k, X.s, X.e")})
WINDOWED = {"window join": (0, 1), "interval join": (1,), "interval join by key": (1,), "hot keys": (1,),
            "interval join or": (1,), "window join aggregate": (0, 1)}


def _max(values) -> int | None:
    """SQL's MAX: NULLs skipped, NULL over none."""
    return max((v for v in values if v is not None), default=None)


def answer(query: str, p_rows: list[tuple], a_rows: list[tuple]) -> list[tuple]:
    """The query over one window's rows, computed directly, with SQL's NULLs (``v`` may be None): MAX skips
    them, a NULL equals nothing, arithmetic on NULL is NULL, a row whose ON is not TRUE does not join."""
    if query == "window join":
        n = Counter(k for k, _ in p_rows)
        top = {k: _max(v for k2, v, _ in a_rows if k2 == k) for k, _, _ in a_rows}
        return [(k, n[k], top[k]) for k in n if k in top]
    if query == "window join aggregate":  # one joined row per key and window: (k, its MAX), counted once
        keys = {k for k, _ in p_rows}
        return [(k, _max(v for k2, v, _ in a_rows if k2 == k)) for k in {k for k, _, _ in a_rows} if k in keys]
    if query in ("interval join", "interval join or"):
        m = _max(v for _, v, _ in a_rows)
        if m is None:
            return []
        return [(k, v, t) for k, v, t in a_rows if v == m or (query == "interval join or" and k == m - 1)]
    if query == "interval join by key":
        top = {k: _max(v for k2, v, _ in a_rows if k2 == k) for k, _, _ in a_rows}
        return [(k, v, t) for k, v, t in a_rows if v is not None and v == top[k]]
    n = Counter(k for k, _, _ in a_rows)
    most = max(n.values(), default=0)
    return [(k, c) for k, c in n.items() if c >= most]


def build(query: str, kind: str, delay: int, backend: str = "python", nulls: bool = False) -> WindowedM3Operator:
    """The box of ``query``; ``nulls``: A's ``v`` is nullable."""
    text = (f"CREATE STREAM P(k INT, ts INT, WATERMARK FOR ts AS ts - {delay});\n"
            f"CREATE STREAM A(k INT, v INT{' NULL' if nulls else ''}, ts INT, WATERMARK FOR ts AS ts - {delay});\n"
            + NULL_QUERIES[query](kind))
    box = Box("w", "m3", (InPort("P"), InPort("A")), ("Out",),
              (("sql", text), ("idle-timeout", str(IDLE)), ("backend", backend)))
    a = A_NULL if nulls else A
    op = DEFAULT_REGISTRY.build(box, [P, a], infer_m3(box, [P, a]))
    assert isinstance(op, WindowedM3Operator)
    return op


class Reference:
    """Each window's on-time rows per stream; a window's answer when the least watermark passes its end."""

    def __init__(self, query: str, kind: str, delay: int):
        self.query, self.slide = query, SIZE if kind == "TUMBLE" else SLIDE
        self.marks = {port: WatermarkReference(delay, IDLE) for port in WINDOWED[query]}
        self.rows: dict[int, tuple[list, list]] = {}  # window start -> (P rows, A rows)
        self.closed = float("-inf")
        self.late = 0

    def batch(self, port: int, producer: str, rows: list[tuple], now: float) -> Counter:
        if port in self.marks:
            for row in rows:
                t = row[-1]
                starts = [s for s in range(t - t % self.slide, t - SIZE, -self.slide) if s + SIZE > self.closed]
                self.late += not starts
                for s in starts:
                    self.rows.setdefault(s, ([], []))[port].append(row)
            self.marks[port].heard_from(producer, [row[-1] for row in rows], now)
        return self.close(now)

    def close(self, now: float) -> Counter:
        for mark in self.marks.values():
            mark.advance(now)
        frontier = min(mark.mark for mark in self.marks.values())
        out: Counter = Counter()
        if frontier <= self.closed:
            return out
        self.closed = frontier
        for s in sorted(s for s in self.rows if s + SIZE <= frontier):
            out.update(answer(self.query, *self.rows.pop(s)))
        return out

    def end(self, now: float, port: int | None = None) -> Counter:
        """The stream on ``port`` ended (None: both): its mark is +infinity, the other's still holds windows."""
        for at, mark in self.marks.items():
            if port is None or at == port:
                mark.ended = True
        return self.close(now)


def emitted(out) -> Counter:
    got: Counter = Counter()
    for port, batch in out:
        assert port == 0
        for row in (batch.rows() if isinstance(batch, Columns) else batch):
            got[tuple(row[:-1])] += int(row[-1])  # the last column is the row's count
    return got


a_row = st.tuples(st.integers(1, 3), st.integers(-2, 3), st.integers(0, 80))  # MAX 0 and below: a row (issue 34)


def steps_of(rows: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        st.tuples(st.sampled_from(["batch", "columns"]), st.sampled_from([0, 1]), st.sampled_from(["p", "q"]),
                  st.lists(rows, max_size=6), st.floats(0, 2)),
        st.tuples(st.just("poll"), st.just(0), st.just(""), st.just([]), st.floats(0, 4)),
        st.tuples(st.just("move"), st.just(0), st.just(""), st.just([]), st.just(0.0)),
        st.tuples(st.just("end"), st.sampled_from([0, 1]), st.just(""), st.just([]), st.floats(0, 2)),
    )


step = steps_of(a_row)
#: v NULL half the time (NULL-heavy: windows whose every v is NULL, so their MAX is)
null_step = steps_of(st.tuples(st.integers(1, 3), st.one_of(st.none(), st.integers(1, 3)), st.integers(0, 80)))


@pytest.mark.slow  # about a minute: a box built per example
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query=st.sampled_from(sorted(QUERIES)), kind=st.sampled_from(["TUMBLE", "HOP"]), delay=st.integers(0, 12),
       steps=st.lists(step, max_size=20))
def test_window_joins_match_a_row_at_a_time_reference(query, kind, delay, steps):
    run_against_reference(query, kind, delay, steps, "python")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query=st.sampled_from(["interval join", "interval join by key"]), kind=st.sampled_from(["TUMBLE", "HOP"]),
       delay=st.integers(0, 12), steps=st.lists(step, max_size=14))
def test_semi_joined_leaves_match_the_reference_on_the_native_backend(query, kind, delay, steps):
    """The interval joins read their stream's leaf only where it meets the MAX (``SemiJoin``): on the native
    backend by the keys' codes.  Ties at the MAX, several keys, HOP's windows, late rows, moves."""
    run_against_reference(query, kind, delay, steps, "native")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query=st.sampled_from(["hot keys", "window join"]), kind=st.sampled_from(["TUMBLE", "HOP"]),
       delay=st.integers(0, 12), steps=st.lists(step, max_size=14))
def test_window_joins_match_the_reference_on_the_native_backend(query, kind, delay, steps):
    """On the native backend the hot keys' leaves (counts: one map's entries each) are read from C's dump as
    columns (m3/runtime/closed_columns.py), the window join's MAX leaf as rows: both give the reference's rows,
    several windows closing at once, late rows, moves."""
    run_against_reference(query, kind, delay, steps, "native")


@pytest.mark.parametrize("kind", ["TUMBLE", "HOP"])
def test_closed_count_leaves_are_read_as_columns_not_decoded_entries(monkeypatch, kind):
    """q5's shape on the native backend: every leaf is one map's entries, so a closing reads the dump's columns
    and never decodes a closed entry (``entries_at_most``); the window join's MAX leaf is a view computed when
    read (a fold), so its box reads rows; on the Python backend there is no dump to read."""
    from boreas.m3.runtime.program import Runtime

    assert build("window join", kind, 0, "native")._stages.columns is None
    assert build("hot keys", kind, 0, "python")._stages.columns is None
    op = build("hot keys", kind, 0, "native")
    monkeypatch.setattr(Runtime, "entries_at_most", lambda *a, **k: pytest.fail("closed entries decoded"))
    rows = [(k, 1, t) for t in range(0, 60, 3) for k in range(1, 1 + t % 4)]  # ties and a single winner
    ref = Reference("hot keys", kind, 0)
    got = emitted(op.process_from(1, rows[:30], 0.0, ("A", "a", 1)))
    want = ref.batch(1, "a", rows[:30], 0.0)
    got += emitted(op.process_from(1, rows[30:], 0.1, ("A", "a", 2)))
    want += ref.batch(1, "a", rows[30:], 0.1)
    early = sum(got.values())  # (windows closed by the watermark as the rows came)
    got += emitted(op.end_of_input(0.2))
    assert got == want + ref.end(0.2) and 0 < early < sum(got.values())
    assert op.state_entries() == 0


def test_which_leaves_are_read_only_where_they_meet_the_other():
    """A leaf joined on equal INT columns with a narrower leaf is semi-joined on them (both columns for the
    join by key: its window's key and the MAX's); the window join's leaves are as wide (no side read first),
    the hot keys' join on a comparison (nothing to semi-join)."""
    for kind in ("TUMBLE", "HOP"):
        joins = {q: build(q, kind, 0).plan.stages.semijoins for q in QUERIES}
        assert joins["window join"] == joins["hot keys"] == ()
        (one,), (two,) = joins["interval join"], joins["interval join by key"]
        assert len(one.keys) == len(one.columns) == 1 and len(two.keys) == len(two.columns) == 2
        assert one.leaf != one.other and two.leaf != two.other


@pytest.mark.parametrize("backend", ["python", "native"])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query=st.sampled_from(sorted(NULL_QUERIES)), kind=st.sampled_from(["TUMBLE", "HOP"]),
       delay=st.integers(0, 12), steps=st.lists(null_step, max_size=14))
def test_window_joins_over_nulls_follow_three_valued_logic(backend, query, kind, delay, steps):
    """A nullable ``v``, NULL-heavy: the upper stages join as SQL does (a NULL equals nothing, MAX of NULLs is
    NULL and ``W.m - 1`` of it NULL, an ON that is NULL joins nothing), semi-joined leaves included."""
    run_against_reference(query, kind, delay, steps, backend, nulls=True)


@pytest.mark.parametrize("backend", ["python", "native"])
def test_an_upper_stage_aggregate_of_only_nulls_is_null(backend):
    """Key 1's window holds only a NULL v: its MAX(Y.top) above the join is NULL, emitted as None (main crashed
    the window's close on ``int(None)``); key 2's is 7."""
    op = build("window join aggregate", "TUMBLE", 0, backend, nulls=True)
    got = emitted(op.process_from(0, [(1, 3), (2, 4)], 0.0, ("P", "p", 1)))
    got += emitted(op.process_from(1, [(1, None, 5), (2, 7, 6)], 0.1, ("A", "a", 1)))
    got += emitted(op.end_of_input(0.2))
    assert got == Counter({(1, None): 1, (2, 7): 1})
    assert op.outputs[0].fields[1].nullable


def interval_box(columns: str, a: Schema, group: str, on: str, backend: str, semijoin: bool) -> WindowedM3Operator:
    """An interval join of A's rows with their window's MAX(v) (grouped by ``group`` too), on ``on``; without the
    semi-join (``semijoin`` False), the stages evaluated as a partitioned member evaluates them."""
    from boreas.node.operators.m3winjoin import StageEmit

    keys = f"{group}, " if group else ""
    text = ("CREATE STREAM P(k INT, ts INT, WATERMARK FOR ts AS ts);\n"
            f"CREATE STREAM A({columns}, WATERMARK FOR ts AS ts);\n"
            f"SELECT B.k, B.v, B.ts FROM A B JOIN (SELECT {keys}MAX(v) AS m, window_end AS e FROM "
            f"{window('TUMBLE', 'A')} GROUP BY {keys}window_start, window_end) W ON {on} "
            f"WHERE B.ts BETWEEN W.e - {SIZE} AND W.e")
    box = Box("w", "m3", (InPort("P"), InPort("A")), ("Out",), (("sql", text), ("backend", backend)))
    op = DEFAULT_REGISTRY.build(box, [P, a], infer_m3(box, [P, a]))
    assert isinstance(op, WindowedM3Operator)
    if not semijoin:
        op._stages = StageEmit(op.plan.stages, op.outputs[0])  # noqa: SLF001 - the member's evaluation
    return op


@pytest.mark.parametrize("backend", ["python", "native"])
@pytest.mark.parametrize("on", ["B.v = W.m", "(B.v = W.m OR B.k = W.m + 100)"])
@pytest.mark.parametrize("semijoin", [True, False])
def test_a_null_matches_no_null_in_an_upper_stage(backend, on, semijoin):
    """The concrete rows: (1, NULL, 31) alone in its window (its MAX is NULL) and (2, 5, 42); only the second
    joins (main emitted (1, None, 31) where no semi-join filtered the leaf, and crashed on ``W.m + 100``).
    Without the semi-join (as a partitioned member evaluates the stages) the stage alone decides."""
    op = interval_box("k INT, v INT NULL, ts INT", A_NULL, "", on, backend, semijoin)
    got = emitted(op.process_from(1, [(1, None, 31), (2, 5, 42)], 0.0, ("A", "a", 1)))
    got += emitted(op.process_from(1, [(3, 1, 60)], 0.1, ("A", "a", 2)))
    assert got == Counter({(2, 5, 42): 1})


@pytest.mark.parametrize("backend", ["python", "native"])
@pytest.mark.parametrize("semijoin", [True, False])
def test_a_nullable_column_before_the_join_column_keeps_the_semi_join_on_it(backend, semijoin):
    """``v`` nullable and declared before ``k``: an upper stage's relation holds ``v``'s NULL indicator after it,
    and the semi-join's columns are counted without it (it read ``ts`` for ``k`` and dropped every row)."""
    a = Schema("A", (Field("v", FieldType.INT, nullable=True), Field("k", FieldType.INT), Field("ts", FieldType.INT)))
    op = interval_box("v INT NULL, k INT, ts INT", a, "k", "B.k = W.k", backend, semijoin)
    got = emitted(op.process_from(1, [(5, 1, 3), (6, 2, 4)], 0.0, ("A", "a", 1)))
    got += emitted(op.end_of_input(0.1))
    assert got == Counter({(1, 5, 3): 1, (2, 6, 4): 1})


def run_against_reference(query, kind, delay, steps, backend, nulls=False):
    op, ref, now, ended = build(query, kind, delay, backend, nulls), Reference(query, kind, delay), 0.0, set()
    for what, port, producer, rows, gap in steps:
        now += gap
        if what == "end" or what in ("batch", "columns") and port in ended:  # (nothing comes on it after)
            ended.add(port)
            got, want = op.end_of_input(now, port), ref.end(now, port)
        elif what in ("batch", "columns"):
            rows = [(k, t) for k, _, t in rows] if port == 0 else list(rows)
            schema = P if port == 0 else A_NULL if nulls else A
            batch = (from_rows(rows, schema) or []) if what == "columns" else rows
            got = op.process_from(port, batch, now, ("P" if port == 0 else "A", producer, 1))
            want = ref.batch(port, producer, rows, now)
        elif what == "poll":
            got, want = op.poll(now), ref.close(now)
        else:  # the box moves: its state, through msgpack, into a new operator
            moved = build(query, kind, delay, backend, nulls)
            moved.restore(msgspec.msgpack.decode(msgspec.msgpack.encode(op.state())), now)
            op, got, want = moved, [], Counter()
        assert emitted(got) == want
        assert op.counters()["late_tuples"] == ref.late
        assert op.state_entries() == 0 or ref.rows, "state left with every window closed"
    assert emitted(op.end_of_input(now)) == ref.end(now)
    assert op.state_entries() == 0


def test_one_streams_end_leaves_the_other_streams_windows_open():
    """P ends first; A's rows keep coming, into the windows P's rows are in: they close when A's watermark
    passes them, as the reference says, not at P's end (which would count A's later rows late).  A snapshot
    taken between the two ends restores P's end."""
    for moved in (False, True):
        op, ref = build("window join", "TUMBLE", 0), Reference("window join", "TUMBLE", 0)
        for port, producer, rows, now in ((0, "p", [(1, 1), (1, 2)], 0.0), (1, "a", [(1, 3, 1)], 0.1)):
            assert emitted(op.process_from(port, rows, now, ("PA"[port], producer, 1))) == \
                ref.batch(port, producer, rows, now) == Counter()
        assert emitted(op.end_of_input(0.2, 0)) == ref.end(0.2, 0) == Counter()  # A's mark holds window [0, 10)
        if moved:
            again = build("window join", "TUMBLE", 0)
            again.restore(msgspec.msgpack.decode(msgspec.msgpack.encode(op.state())), 0.2)
            op = again
        assert emitted(op.process_from(1, [(1, 5, 4)], 0.3, ("A", "a", 2))) == Counter()
        want = ref.batch(1, "a", [(1, 5, 4)], 0.3) + ref.batch(1, "a", [(2, 1, 15)], 0.4)
        assert emitted(op.process_from(1, [(2, 1, 15)], 0.4, ("A", "a", 3))) == want == Counter({(1, 2, 5): 1})
        assert op.counters()["late_tuples"] == ref.late == 0
        assert emitted(op.end_of_input(0.5, 1)) == ref.end(0.5, 1) == Counter()  # (A's window [10, 20): no P)
        assert op.state_entries() == 0


@pytest.mark.parametrize("query, why", [
    (f"SELECT X.k FROM {counts('TUMBLE', 'P', 'X')} JOIN {counts('TUMBLE', 'A', 'Y')} ON X.k = Y.k",
     "the query joins windowed derived tables (x / y) without equal windows"),
    (f"SELECT MAX(X.n) AS m FROM {counts('TUMBLE', 'P', 'X')} JOIN {counts('TUMBLE', 'A', 'Y')} ON X.s = Y.s",
     "aggregates windowed derived tables without GROUP BY their window_start or window_end"),
    (f"SELECT X.k FROM {counts('TUMBLE', 'P', 'X')} JOIN A ON X.k = A.k",
     "which is read without the window: its rows would be kept forever"),
    (f"SELECT X.k FROM {counts('TUMBLE', 'P', 'X')} JOIN (SELECT k, window_start AS s FROM "
     f"TABLE(TUMBLE(TABLE A, DESCRIPTOR(ts), 20)) GROUP BY k, window_start) Y ON X.s = Y.s",
     "a window join joins windows of one size and slide"),
    (f"SELECT B.k FROM A B JOIN (SELECT MAX(v) AS m, window_end AS e FROM {window('TUMBLE', 'A')} GROUP BY "
     f"window_end) W ON B.v = W.m WHERE B.ts BETWEEN W.e - 5 AND W.e",
     "without equal windows"),
])
def test_other_joins_over_windows_are_refused_by_name(query, why):
    text = ("CREATE STREAM P(k INT, ts INT);\nCREATE STREAM A(k INT, v INT, ts INT);\n" + query)
    box = Box("w", "m3", (InPort("P"), InPort("A")), ("Out",), (("sql", text),))
    with pytest.raises(Exception) as caught:
        DEFAULT_REGISTRY.build(box, [P, A], infer_m3(box, [P, A]))
    assert why in str(caught.value) and "m3 box 'w'" in str(caught.value)
    assert isinstance(caught.value, (OperatorError, Exception))
