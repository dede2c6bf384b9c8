"""Borealis's serializing union (issue 35 item 2): the sunion box against a row-at-a-time reference.

Random histories: rows on two or three in ports, each port's times
non-decreasing, the box's clock moving by nothing, a little, or past every
``max-delay`` (an in port silent that long counts as away), with the node's
polls at every deadline the box names.  The box takes the rows in batches
cut anywhere (runs of one port at one instant); the reference
(tests/support/sunion_reference.py) takes them one at a time.  What goes out
must be the same rows with the same weights in the same order; and, with
plain rows in, every retraction is of a tentative row, the control stream
says "tentative" exactly while tentative rows are out, and once the inputs
end the box's output holds every row that was not late, stable.  A box
moved mid-stream (``state()`` through msgpack onto another clock) goes on
as if it had not moved.
"""

from __future__ import annotations

from collections import Counter

import msgspec
import pytest
from boreas.catalog.boxtypes import builtin_registry
from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.node.operators import OperatorError, build_operator
from hypothesis import given, settings
from hypothesis import strategies as st
from support.changelog import changes
from support.sunion_reference import SUnionReference

TRIVIAL = Schema("TrivialTuple", (Field("time", FieldType.INT), Field("value", FieldType.INT)))
INTERVAL = 10


def sunion(ports: int, merged: bool, stagger: bool, delays: list[int], order: bool = True):
    params = [("interval", str(INTERVAL)), ("stagger", "1" if stagger else "0"), ("tentative-field", "tentative")]
    params += [(f"max-delay.{i}", str(d)) for i, d in enumerate(delays)]
    if order:
        params.append(("order-on-field", "time"))
    outs = ("Control", "Union") if merged else ("Control", *(f"Out{i}" for i in range(ports)))
    box = Box("u", "sunion", tuple(InPort(f"In{i}") for i in range(ports)), outs, tuple(params))
    schemas = builtin_registry().infer(box, [TRIVIAL] * ports)
    return box, schemas


@st.composite
def histories(draw):
    """(ports, merged, stagger, delays in ms, events): an event is ("rows", port, [(time, value)], now),
    ("tick", now) or ("end", port, now), that port's stream ended (no row on it after); each port's times never
    decrease, the clock never goes back."""
    ports = draw(st.integers(1, 3))
    merged = draw(st.booleans())
    delays = [draw(st.sampled_from((0, 500, 2000))) for _ in range(ports)]
    times = [0] * ports
    now = 0.0
    events = []
    value = 0
    live = list(range(ports))
    for _ in range(draw(st.integers(0, 30))):
        now += draw(st.sampled_from((0.0, 0.0, 0.1, 0.7, 3.0)))  # 3 s: past every max-delay
        pick = draw(st.integers(0, 7))
        if pick == 0 or not live:
            events.append(("tick", now))
            continue
        port = draw(st.sampled_from(live))
        if pick == 1:  # its stream ends; the others go on
            live.remove(port)
            events.append(("end", port, now))
            continue
        rows = []
        for _ in range(draw(st.integers(1, 4))):
            times[port] += draw(st.sampled_from((0, 1, 4, 10, 25)))
            rows.append((times[port], value))
            value += 1
        events.append(("rows", port, rows, now))
    return ports, merged, draw(st.booleans()), delays, events


def flat(emitted) -> list[tuple[int, tuple, int]]:
    return [(port, row, weight) for port, batch in emitted for row, weight in changes(batch)]


def run_box(op, events, cuts: set[int], moved_at: int | None = None, box=None, schemas=None, ports=0):
    """Feed the box: each event's rows as batches cut after the rows whose index is in ``cuts``; polls at every
    deadline before each event; optionally moved (state through msgpack, onto a clock 1000 s later) before one
    event, at the instant it last saw (a move takes no time)."""
    out = []
    shift = 0.0
    k = 0
    last = 0.0
    for i, event in enumerate(events):
        if i == moved_at:
            state = msgspec.msgpack.decode(msgspec.msgpack.encode(op.state()))
            op = build_operator(box, [TRIVIAL] * ports, schemas)
            shift = 1000.0
            op.restore(state, now=last + shift)
        now = event[-1] + shift
        last = event[-1]
        while (due := op.next_deadline()) is not None and due <= now:
            out += flat(op.poll(due))
        if event[0] == "tick":
            out += flat(op.poll(now))
            continue
        if event[0] == "end":
            out += flat(op.end_of_input(now, event[1]))
            continue
        _, port, rows, _ = event
        batch: list[tuple] = []
        for row in rows:
            batch.append(row)
            if k in cuts:
                out += flat(op.process(port, batch, now))
                batch = []
            k += 1
        if batch:
            out += flat(op.process(port, batch, now))
    return op, out + flat(op.end_of_input((events[-1][-1] if events else 0.0) + shift))


def run_reference(ref: SUnionReference, events, order: bool = True):
    """The reference fed a row at a time; without an order field a row's time is ms since the first row's instant."""
    out = []
    origin = next((e[-1] for e in events if e[0] == "rows"), 0.0)
    for event in events:
        now = event[-1]
        while (due := ref.deadline()) is not None and due[1] <= now:
            out += ref.instant(due[1])
        if event[0] == "tick":
            out += ref.instant(now)
            continue
        if event[0] == "end":
            out += ref.end_port(event[1], now)
            continue
        _, port, rows, _ = event
        for t, value in rows:
            out += ref.row(port, t if order else (now - origin) * 1000.0, (t, value), 1, now)
    return out + ref.end()


@settings(max_examples=40, deadline=None)
@given(histories(), st.sets(st.integers(0, 120)), st.booleans())
def test_sunion_matches_the_row_at_a_time_reference(history, cuts, order):
    """With the rows' own times (order-on-field) or their arrival on the box's clock."""
    ports, merged, stagger, delays, events = history
    box, schemas = sunion(ports, merged, stagger, delays, order=order)
    _, got = run_box(build_operator(box, [TRIVIAL] * ports, schemas), events, cuts)
    want = run_reference(SUnionReference(INTERVAL, [d / 1000 for d in delays], stagger, merged), events, order)
    assert got == want


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(histories(), st.sets(st.integers(0, 120)))
def test_only_tentative_rows_are_retracted_and_all_rows_end_stable(history, cuts):
    ports, merged, stagger, delays, events = history
    box, schemas = sunion(ports, merged, stagger, delays)
    op, got = run_box(build_operator(box, [TRIVIAL] * ports, schemas), events, cuts)
    net: Counter = Counter()
    control = 0
    for port, row, weight in got:
        if port == 0:
            control += weight
            assert control in (0, 1), "the control stream says tentative (1) or stable (0)"
            continue
        if weight < 0:
            assert row[-1] == 1, f"stable row {row} retracted"
        if row[-1] == 1:
            assert control == 1, f"tentative row {row} while the control stream says stable"
        net[row] += weight
    assert control == 0
    sent = [(t, v) for e in events if e[0] == "rows" for t, v in e[2]]
    held = Counter({row: n for row, n in net.items() if n})
    assert all(row[-1] == 0 and n == 1 for row, n in held.items()), "everything ends stable, once"
    assert sum(held.values()) == len(sent) - op.counters()["late_tuples"]


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(histories(), st.data())
def test_a_moved_sunion_goes_on_as_if_it_had_not_moved(history, data):
    ports, merged, stagger, delays, events = history
    box, schemas = sunion(ports, merged, stagger, delays)
    _, whole = run_box(build_operator(box, [TRIVIAL] * ports, schemas), events, set())
    at = data.draw(st.integers(0, len(events)))
    _, moved = run_box(build_operator(box, [TRIVIAL] * ports, schemas), events, set(), moved_at=at, box=box,
                       schemas=schemas, ports=ports)
    assert moved == whole


def test_one_streams_end_leaves_the_others_buckets_open():
    """In port 0's stream ends first: the bucket port 1 passed goes out stable at once, the next one waits
    for port 1 (its rows keep coming, on time, not late), all of it stable once port 1's ends too.  A snapshot
    taken between the two ends restores port 0's end."""
    for moved in (False, True):
        box, schemas = sunion(2, True, True, [5000, 2000])
        op = build_operator(box, [TRIVIAL] * 2, schemas)
        assert flat(op.process(0, [(1, 1)], 0.0)) == []
        assert flat(op.process(1, [(2, 2), (12, 3)], 0.0)) == []  # port 0 has not passed bucket 0
        assert flat(op.end_of_input(0.1, 0)) == [(1, (1, 1, 0), 1), (1, (2, 2, 0), 1)]
        if moved:
            state = msgspec.msgpack.decode(msgspec.msgpack.encode(op.state()))
            op = build_operator(box, [TRIVIAL] * 2, schemas)
            op.restore(state, now=0.1)
        assert flat(op.process(1, [(15, 4)], 0.2)) == []  # bucket 1: port 1 is in it still
        assert op.next_deadline() == pytest.approx(2.0)  # bucket 1 waits for port 1's delay, not port 0's
        assert flat(op.process(1, [(25, 5)], 0.3)) == [(1, (12, 3, 0), 1), (1, (15, 4, 0), 1)]
        assert op.counters()["late_tuples"] == 0
        assert flat(op.end_of_input(0.4, 1)) == [(1, (25, 5, 0), 1)]


def test_a_state_from_before_ports_ended_one_by_one_restores_with_none_ended():
    box, schemas = sunion(2, True, True, [2000, 2000])
    op = build_operator(box, [TRIVIAL] * 2, schemas)
    op.process(0, [(1, 1), (12, 2)], 0.0)
    state = op.state()
    del state["buckets"]["ended"]
    again = build_operator(box, [TRIVIAL] * 2, schemas)
    again.restore(state, now=0.0)
    assert flat(again.process(1, [(15, 3)], 0.1)) == [(1, (1, 1, 0), 1)]  # both ports past bucket 0
    assert flat(again.end_of_input(0.2, 0)) == []  # bucket 1 waits for port 1
    assert flat(again.end_of_input(0.3, 1)) == [(1, (12, 2, 0), 1), (1, (15, 3, 0), 1)]


def test_arrival_time_without_an_order_field():
    """Without order-on-field a row's time is when it came: a port silent past its max-delay lets the bucket go
    out tentative, and the port's next row (a later bucket) makes it stable."""
    box, schemas = sunion(2, True, True, [1000, 1000], order=False)
    op = build_operator(box, [TRIVIAL] * 2, schemas)
    assert flat(op.process(0, [(1, 1)], 0.0)) == []
    assert op.next_deadline() == pytest.approx(1.0)
    assert flat(op.poll(1.0)) == [(0, (), 1), (1, (1, 1, 1), 1)]
    assert flat(op.process(1, [(2, 2)], 1.5)) == []  # bucket 150: port 0 not past it yet
    assert flat(op.process(0, [(3, 3)], 1.5)) == [(1, (1, 1, 1), -1), (1, (1, 1, 0), 1), (0, (), -1)]


def test_plain_benchmark_is_a_union_and_parameters_are_checked():
    box = Box("u", "sunion", (InPort("A"),), ("C", "U"), (("interval", "5"), ("max-delay.0", "10"),
                                                          ("benchmark", "none")))
    schemas = builtin_registry().infer(box, [TRIVIAL])
    op = build_operator(box, [TRIVIAL], schemas)
    assert flat(op.process(0, [(9, 1), (2, 2)], 0.0)) == [(1, (9, 1), 1), (1, (2, 2), 1)]
    refused = Box("u", "sunion", (InPort("A"),), ("C", "U"), (("interval", "5"), ("max-delay.0", "10"),
                                                              ("should-reconcile", "0")))
    with pytest.raises(OperatorError, match="Boreas always corrects"):
        build_operator(refused, [TRIVIAL], schemas)
