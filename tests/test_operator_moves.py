"""The move property of every stateful operator: a moved box continues exactly.

Run part of a stream, ``state()`` through msgpack, ``restore()`` into a new
operator, run the rest: the output must equal one uninterrupted run.  This is
what moving a box between nodes and recovering it rely on, whatever the
operator, so it is tested across operators here rather than per operator in
``test_operators.py``.
"""

from __future__ import annotations

import pytest
from boreas.node.operators import Operator
from hypothesis import given, settings
from hypothesis import strategies as st
from support.operators import AVG, T, make, msgpack_trip

# -- moving a box: state() -> msgpack -> restore() ------------------------------------


def run(op: Operator, events: list, end: float) -> list:
    """Feed ``(now, port, rows)`` events, polling when due, then at ``end``; everything emitted."""
    return run_head(op, events) + op.poll(end)


def run_head(op: Operator, events: list) -> list:
    out = []
    for now, port, rows in events:
        deadline = op.next_deadline()
        if deadline is not None and deadline <= now:
            out += op.poll(now)
        out += op.process(port, rows, now)
    return out


def stream(n: int, ports: int = 1) -> list:
    return [(float(i) * 0.7, i % ports, [(float(i % 3), i * 2 + (i % 4)), (float(i % 2), i * 2 + 1)])
            for i in range(n)]


STATEFUL = {
    "aggregate sliding values, groups, timeout": lambda: make("aggregate", {
        **AVG, "window-size-by": "VALUES", "window-size": "6", "advance": "2", "order-by": "FIELD",
        "order-on-field": "time", "group-by": "value", "timeout": "3"}, T),
    "aggregate tuples": lambda: make("aggregate", {
        "aggregate-function.0": "max(time)", "aggregate-function.1": "firstval(value)",
        "window-size-by": "TUPLES", "window-size": "5", "advance": "2", "group-by": "value"}, T),
    "join values + tuples with timeout": lambda: make("join", {
        "predicate": "left.value = right.value", "left-buffer-size": "9", "left-order-by": "VALUES",
        "left-order-on-field": "time", "right-buffer-size": "3", "timeout": "4"}, T, T),
    "delay": lambda: make("delay", {"delay-ms": "2000"}, T),
    "random_drop": lambda: make("random_drop", {"drop_rate": "0.4", "seed": "11"}, T),
    "window_drop": lambda: make("window_drop", {"drop_rate": "0.5", "window-size": "7",
                                                "order-on-field": "time", "group-by": "value", "seed": "5"}, T),
    "filter": lambda: make("filter", {"expression.0": "time % 3 = 0"}, T),
}


@pytest.mark.parametrize("name", sorted(STATEFUL))
@pytest.mark.parametrize("split", [0, 1, 7, 20])
def test_state_round_trip_continues_exactly(name, split):
    ports = 2 if name.startswith("join") else 1
    events = stream(30, ports)
    end = events[-1][0] + 1000.0
    whole = run(STATEFUL[name](), events, end)
    assert whole, "the stream must produce output for the test to mean anything"
    first = STATEFUL[name]()
    head = run_head(first, events[:split])
    second = STATEFUL[name]()
    second.restore(msgpack_trip(first.state()))
    assert head + run(second, events[split:], end) == whole


@settings(max_examples=40, deadline=None)
@given(times=st.lists(st.integers(0, 40), min_size=1, max_size=40), split=st.integers(0, 40),
       size=st.integers(1, 6), advance=st.integers(1, 6))
def test_aggregate_moves_exactly_on_any_stream(times, split, size, advance):
    def factory():
        return make("aggregate", {"aggregate-function.0": "count()", "aggregate-function.1": "sum(time)",
                                  "window-size-by": "VALUES", "window-size": str(size),
                                  "advance": str(advance), "order-by": "FIELD",
                                  "order-on-field": "time", "group-by": "value", "timeout": "5"}, T)
    events = [(i * 1.5, 0, [(float(t % 2), t)]) for i, t in enumerate(times)]
    split = min(split, len(events))
    end = events[-1][0] + 1000.0
    whole = run(factory(), events, end)
    first = factory()
    head = run_head(first, events[:split])
    second = factory()
    second.restore(msgpack_trip(first.state()))
    assert head + run(second, events[split:], end) == whole


def test_restore_on_another_clock_keeps_the_time_left():
    op = make("delay", {"delay-ms": "1000"}, T)
    op.process(0, [(1.0, 1)], now=5000.0)
    saved = msgpack_trip(op.state())
    explicit = make("delay", {"delay-ms": "1000"}, T)
    explicit.restore(saved, now=10.25)  # the new node says what time it is; 1 s was left
    assert explicit.next_deadline() == pytest.approx(11.25)
    implicit = make("delay", {"delay-ms": "1000"}, T)
    implicit.restore(saved)  # same clock assumed until the clock is seen to go backwards
    assert implicit.poll(3.0) == [] and implicit.next_deadline() == pytest.approx(4.0)
    assert implicit.poll(4.0) == [(0, [(1.0, 1)])]
