"""Order in aggregate (and join) boxes: per-group order, ``slack``, late tuples, gaps, timeouts.

The semantics follow Borealis's AggregateQBox (docs/operators.md, "Order,
slack and late tuples"): each group keeps its own windows; a window closes
on its ``slack + 1``-th tuple at or past its end; a tuple whose window has
closed is late, dropped and counted in ``counters()``.  Boreas adds one
rule: an empty window needs a second tuple past it before it is emitted, so
one out-of-order tuple never emits a run of empty windows (issue 15 item 15:
one sensor reading 30 minutes ahead emitted 30 empty windows and the
readings after it were dropped without a word).
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from boreas.catalog import Catalog, plan_submission, read_document, stream_schemas
from boreas.catalog.boxtypes import BoxError, builtin_registry
from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.node.operators import Operator, OperatorError, build_operator
from hypothesis import given, settings
from hypothesis import strategies as st

EXAMPLES = Path(__file__).parents[1] / "examples" / "xml"
CATALOG_TYPES = builtin_registry()
I, D = FieldType.INT, FieldType.DOUBLE

T = Schema("T", (Field("value", D), Field("time", I)))
CONVERTED = Schema("Converted", (Field("sensor", I), Field("time", I), Field("fahrenheit", D)))


def box_of(type_: str, params: dict[str, str], inputs: int = 1) -> Box:
    return Box("b", type_, tuple(InPort(f"in{i}") for i in range(inputs)), ("out0",), tuple(params.items()))


def make(type_: str, params: dict[str, str], *inputs: Schema) -> Operator:
    box = box_of(type_, params, len(inputs))
    return build_operator(box, list(inputs), CATALOG_TYPES.infer(box, list(inputs)))


def rows_of(emitted: list) -> list[tuple]:
    return [r for _, rows in emitted for r in rows]


def feed(op: Operator, rows: list[tuple], now: float = 0.0) -> list[tuple]:
    """One tuple per batch, as a stream arrives."""
    return [r for row in rows for r in rows_of(op.process(0, [row], now))]


def msgpack_trip(state: dict) -> dict:
    return msgspec.msgpack.decode(msgspec.msgpack.encode(state))


COUNT = {"aggregate-function.0": "count()", "window-size-by": "VALUES", "order-by": "FIELD",
         "order-on-field": "time"}


# -- the sensor scenario of the issue ------------------------------------------------------


def sensor_box(**extra: str) -> Operator:
    """The ``per_sensor`` box of examples/xml/sensor_chain.xml, with extra parameters."""
    path = EXAMPLES / "sensor_chain.xml"
    plan = plan_submission(Catalog(), [read_document(path.read_bytes(), path.name)])
    assert plan.ok, plan.problems
    box = plan.catalog.boxes["per_sensor"]
    box = Box(box.name, box.type, box.inputs, box.outputs, box.params + tuple(extra.items()))
    schemas = stream_schemas(plan.catalog)
    return build_operator(box, [schemas[p.stream] for p in box.inputs], [schemas[s] for s in box.outputs])


def readings(glitch: bool) -> list[tuple]:
    """Four sensors, a reading every 5 s for ten minutes; with ``glitch``, sensor 2's reading
    at 30 s carries 1830 (its clock 30 minutes ahead for one reading)."""
    rows = []
    for time in range(0, 600, 5):
        for sensor in (1, 2, 3, 4):
            stamp = 1830 if glitch and sensor == 2 and time == 30 else time
            rows.append((sensor, stamp, 50.0 + sensor + time / 100))
    return rows


def by_window(out: list[tuple]) -> dict[tuple, tuple]:
    return {(r[0], r[1]): r for r in out}


def test_sensor_glitch_drops_no_other_sensors_reading_and_emits_no_run_of_empty_windows():
    clean = by_window(feed(sensor_box(), readings(glitch=False)))
    op = sensor_box()
    out = feed(op, readings(glitch=True))
    got = by_window(out)
    # No empty window at all: the 29 windows the glitch jumped over stay open for the readings
    # that belong in them (the old code emitted them at once, empty, and dropped those readings).
    assert [r for r in out if r[3] == 0] == []
    assert len(out) == len(got)  # every window once
    # The other sensors' windows are exactly those of the clean stream.
    for sensor in (1, 3, 4):
        mine = {k: v for k, v in got.items() if k[0] == sensor}
        assert mine == {k: v for k, v in clean.items() if k[0] == sensor} and len(mine) == 9
    # Sensor 2: with slack 0 its first window closed on the glitch (Borealis trusts the order it
    # is given), so its readings at 35..55 s came too late for it: dropped, and counted.
    assert got[(2, 0)][3] == 6
    assert op.counters() == {"late_tuples": 5, "ignored_tuples": 5}
    # Its later windows are whole: the windows the glitch opened were filled as time got there.
    assert {k: v for k, v in got.items() if k[0] == 2 and k[1] > 0} == \
        {k: v for k, v in clean.items() if k[0] == 2 and k[1] > 0}


def test_sensor_glitch_with_slack_loses_nothing():
    clean = by_window(feed(sensor_box(), readings(glitch=False)))
    op = sensor_box(slack="1")
    got = by_window(feed(op, readings(glitch=True)))
    assert op.counters() == {"late_tuples": 0, "ignored_tuples": 0}
    assert got[(2, 0)][3] == 11  # every reading of its first minute but the glitched one
    assert {k: v for k, v in got.items() if k != (2, 0)} == {k: v for k, v in clean.items() if k != (2, 0)}


def test_without_group_by_the_order_is_the_whole_streams():
    """Order is per group only where a group-by gives groups: here one stream, one order."""
    op = make("aggregate", {**COUNT, "window-size": "60"}, CONVERTED)
    out = feed(op, [(1, 0, 1.0), (2, 1830, 1.0), (1, 5, 1.0), (3, 6, 1.0), (1, 60, 1.0), (1, 120, 1.0)])
    assert out == [(0, 1), (60, 1)] and op.counters()["late_tuples"] == 2


# -- slack --------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_slack_tolerates_k_out_of_order_tuples(k):
    """Times 0..8, then k tuples past the window [0,10), then 9: slack k still takes it."""
    rows = [(0.0, t) for t in range(9)] + [(0.0, 10 + i) for i in range(k)] + [(0.0, 9), (0.0, 30), (0.0, 31)]
    op = make("aggregate", {**COUNT, "window-size": "10", "slack": str(k)}, T)
    out = feed(op, rows)
    assert out[0] == (0, 10) and op.counters()["late_tuples"] == 0
    if k:
        op = make("aggregate", {**COUNT, "window-size": "10", "slack": str(k - 1)}, T)
        out = feed(op, rows)
        assert out[0] == (0, 9) and op.counters() == {"late_tuples": 1, "ignored_tuples": 1}


@pytest.mark.parametrize("slack", [0, 1, 3])
def test_a_window_closes_on_its_slack_plus_first_closing_tuple(slack):
    op = make("aggregate", {**COUNT, "window-size": "10", "slack": str(slack)}, T)
    assert feed(op, [(0.0, 0), (0.0, 5)]) == []
    for _ in range(slack):
        assert rows_of(op.process(0, [(0.0, 12)], 0.0)) == []
    assert rows_of(op.process(0, [(0.0, 13)], 0.0)) == [(0, 2)]


def test_slack_is_per_group():
    """Group 1's tuples past its window use group 1's slack only."""
    op = make("aggregate", {**COUNT, "window-size": "10", "slack": "1", "group-by": "value"}, T)
    out = feed(op, [(1.0, 0), (2.0, 0), (1.0, 10), (2.0, 5), (1.0, 11), (2.0, 9), (2.0, 10), (2.0, 11)])
    assert out == [(1.0, 0, 1), (2.0, 0, 3)] and op.counters()["late_tuples"] == 0


def test_late_tuple_is_counted_never_opens_windows_and_other_drops_are_ignored_only():
    op = make("aggregate", {**COUNT, "window-size": "10"}, T)
    assert feed(op, [(0.0, 100), (0.0, 111), (0.0, 50), (0.0, 105)]) == [(100, 1)]
    assert op.counters() == {"late_tuples": 2, "ignored_tuples": 2}
    op = make("aggregate", {**COUNT, "window-size": "10", "group-by": "value"}, T)
    feed(op, [(0.0, 100), (0.0, None), (1.0, 3)])  # a NULL order value is in no window, yet not late
    assert op.counters() == {"late_tuples": 0, "ignored_tuples": 1}


# -- gaps -----------------------------------------------------------------------------------------


def test_a_real_gap_still_gives_empty_windows_once_a_second_tuple_confirms_it():
    op = make("aggregate", {**COUNT, "window-size": "1"}, T)
    assert feed(op, [(0.0, 0), (0.0, 1), (0.0, 5)]) == [(0, 1), (1, 1)]
    assert rows_of(op.process(0, [(0.0, 6)], 0.0)) == [(2, 0), (3, 0), (4, 0), (5, 1)]
    # With slack the gap waits for slack + 1 tuples past it, as every window does in Borealis.
    op = make("aggregate", {**COUNT, "window-size": "1", "slack": "2"}, T)
    assert feed(op, [(0.0, 0), (0.0, 3), (0.0, 4)]) == []
    assert rows_of(op.process(0, [(0.0, 5)], 0.0)) == [(0, 1), (1, 0), (2, 0)]


def test_one_tuple_far_ahead_emits_no_run_of_empty_windows_at_any_slack():
    for slack in ("0", "1", "4"):
        op = make("aggregate", {**COUNT, "window-size": "1", "slack": slack}, T)
        out = feed(op, [(0.0, 0), (0.0, 0), (0.0, 30)])
        assert all(r[1] for r in out) and len(out) <= 1


def test_timeout_closes_a_window_slack_holds_and_later_tuples_for_it_are_late():
    op = make("aggregate", {**COUNT, "window-size": "10", "slack": "5", "timeout": "2"}, T)
    assert op.process(0, [(0.0, 0), (0.0, 12)], now=100.0) == []
    assert op.poll(101.9) == [] and op.next_deadline() == 102.0
    assert op.poll(102.0) == [(0, [(0, 1), (10, 1)])]
    assert op.process(0, [(0.0, 3), (0.0, 15), (0.0, 20)], now=103.0) == []
    assert op.counters()["late_tuples"] == 2  # 3 and 15: their windows timed out
    assert op.poll(105.0) == [(0, [(20, 1)])]


# -- state ----------------------------------------------------------------------------------------


def sensor_events() -> list[tuple[float, list[tuple]]]:
    """The glitched sensor stream plus a late reading, in batches of 3, one batch per second."""
    rows = readings(glitch=True)
    rows.insert(200, (3, 100, 60.0))  # sensor 3's reading at 100 s arrives around 250 s
    return [(float(i), rows[i * 3:i * 3 + 3]) for i in range((len(rows) + 2) // 3)]


def run(op: Operator, events: list, end: float | None) -> list:
    out = []
    for now, rows in events:
        deadline = op.next_deadline()
        if deadline is not None and deadline <= now:
            out += rows_of(op.poll(now))
        out += rows_of(op.process(0, rows, now))
    return out + (rows_of(op.poll(end)) if end is not None else [])


@pytest.mark.parametrize("params", [{}, {"slack": "1"}, {"slack": "2", "timeout": "50"}])
@pytest.mark.parametrize("split", [0, 10, 11, 12, 40, 80, 161])
def test_order_state_round_trips_through_msgpack_mid_stream(params, split):
    events = sensor_events()
    whole_op = sensor_box(**params)
    whole = run(whole_op, events, 1e6)
    first = sensor_box(**params)
    head = run(first, events[:split], None)
    second = sensor_box(**params)
    second.restore(msgpack_trip(first.state()))
    assert head + run(second, events[split:], 1e6) == whole
    assert second.counters() == whole_op.counters()
    assert whole_op.counters()["late_tuples"] >= (1 if params.get("slack") != "2" else 0)


@settings(max_examples=60, deadline=None)
@given(times=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 60)), min_size=1, max_size=50),
       split=st.integers(0, 50), size=st.integers(1, 6), advance=st.integers(1, 6),
       slack=st.integers(0, 3))
def test_any_out_of_order_stream_moves_exactly(times, split, size, advance, slack):
    def factory():
        return make("aggregate", {**COUNT, "aggregate-function.1": "sum(time)", "window-size": str(size),
                                  "advance": str(min(size, advance)), "slack": str(slack),
                                  "group-by": "value", "timeout": "7"}, T)
    events = [(i * 1.5, [(float(g), t)]) for i, (g, t) in enumerate(times)]
    split = min(split, len(events))
    whole_op = factory()
    whole = run(whole_op, events, 1e6)
    first = factory()
    head = run(first, events[:split], None)
    second = factory()
    second.restore(msgpack_trip(first.state()))
    assert head + run(second, events[split:], 1e6) == whole
    assert second.counters() == whole_op.counters()
    if advance >= size:  # tumbling: each tuple is in one window or counted as dropped
        assert sum(r[2] for r in whole) + whole_op.counters()["ignored_tuples"] == len(times)


def test_state_saved_before_order_tracking_still_restores():
    op = make("aggregate", {**COUNT, "window-size": "10", "group-by": "value"}, T)
    feed(op, [(1.0, 0), (1.0, 4), (2.0, 7)])
    legacy = msgpack_trip(op.state())
    del legacy["late"]
    legacy["groups"] = [[parts, nxt, [w[:-1] for w in wins]] for parts, nxt, wins, _ in legacy["groups"]]
    again = make("aggregate", {**COUNT, "window-size": "10", "group-by": "value"}, T)
    again.restore(legacy)
    assert feed(again, [(1.0, 11), (1.0, 2), (2.0, 20)]) == [(1.0, 0, 2), (2.0, 7, 1)]
    assert again.counters() == {"late_tuples": 1, "ignored_tuples": 1}


# -- parameters and other operators --------------------------------------------------------------


@pytest.mark.parametrize("value", ["-1", "1.5", "many", ""])
def test_head_refuses_a_bad_slack(value):
    box = box_of("aggregate", {**COUNT, "window-size": "10", "slack": value})
    with pytest.raises(BoxError, match=r"aggregate box 'b': parameter 'slack'=.* must be a whole number"):
        CATALOG_TYPES.infer(box, [T])
    with pytest.raises(OperatorError, match="slack"):
        build_operator(box, [T], [Schema("o", (Field("time", I), Field("count0", I)))])


@pytest.mark.parametrize("value", ["0", "3", " 2 "])
def test_head_accepts_a_whole_slack(value):
    box = box_of("aggregate", {**COUNT, "window-size": "10", "slack": value})
    assert CATALOG_TYPES.infer(box, [T])


def test_join_has_no_slack_and_drops_nothing_for_order():
    """Borealis's JoinQBox has no slack: the Head says so rather than ignore the parameter."""
    params = {"predicate": "left.value = right.value", "left-buffer-size": "10", "left-order-by": "VALUES",
              "left-order-on-field": "time", "right-buffer-size": "10"}
    with pytest.raises(BoxError, match="join box 'b': parameter 'slack' is not a join parameter"):
        CATALOG_TYPES.infer(box_of("join", {**params, "slack": "1"}, 2), [T, T])
    op = make("join", params, T, T)
    op.process(0, [(1.0, 5), (1.0, 3), (1.0, 8)], 0.0)  # 3 is out of order: still buffered
    assert len(rows_of(op.process(1, [(1.0, 0)], 0.0))) == 3
    assert op.counters() == {}


def test_operators_that_drop_nothing_report_no_counters():
    assert make("filter", {"expression.0": "time > 1"}, T).counters() == {}
    op = make("aggregate", {"aggregate-function.0": "count()", "window-size-by": "TUPLES", "window-size": "2"}, T)
    feed(op, [(0.0, 5), (0.0, 1), (0.0, 9)])
    assert op.counters() == {"late_tuples": 0, "ignored_tuples": 0}  # tuple windows take every tuple
