"""The data plane's fast paths give exactly what the general code gives (docs/dataplane.md).

* the value-window aggregate's generated loop with hot windows
  (``node/operators/aggregate_loop.py``) against the same operator built with
  ``fast=False``, where every tuple goes through the general per-tuple code:
  outputs batch by batch, ``state()`` and counters, on random streams (out of
  order, None order values, several groups, sliding windows, slack,
  alignment, timeouts fired by ``poll`` and by the next batch, moves through
  msgpack in the middle);
* filter and map's list comprehensions against their per-tuple loops, and
  against each expression evaluated on its own tuple by tuple, on random rows
  including ones where an expression fails (division by zero).
"""

from __future__ import annotations

import msgspec
from boreas.catalog.boxtypes import builtin_registry
from boreas.catalog.expressions import Scope
from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.node.compile import compile_expression
from boreas.node.operators.aggregate import AggregateOperator
from boreas.node.operators.filter import FilterOperator
from boreas.node.operators.map import MapOperator
from hypothesis import given, settings
from hypothesis import strategies as st

TYPES = builtin_registry()
I, D = FieldType.INT, FieldType.DOUBLE
ROW = Schema("R", (Field("g", I), Field("h", I), Field("time", I), Field("x", D)))


def box(type_: str, params: dict[str, str], outs: int = 1) -> tuple[Box, list[Schema]]:
    b = Box("b", type_, (InPort("in"),), tuple(f"out{i}" for i in range(outs)), tuple(params.items()))
    return b, TYPES.infer(b, [ROW])


def aggregate(params: dict[str, str], fast: bool) -> AggregateOperator:
    b, outs = box("aggregate", params)
    return AggregateOperator(b, [ROW], outs, fast=fast)


def moved(op: AggregateOperator, params: dict[str, str], now: float) -> AggregateOperator:
    """``op`` continued elsewhere: its state through msgpack into a new operator of its kind (a move
    rebases pending timeouts to the new node's clock, so both sides of a comparison move together)."""
    state = msgspec.msgpack.decode(msgspec.msgpack.encode(op.state()))
    new = aggregate(params, fast=op._loop is not None)
    new.restore(state, now=now)
    return new


rows = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 1),
                          st.one_of(st.integers(-5, 60), st.none()),
                          st.one_of(st.floats(-1e6, 1e6, allow_nan=False), st.none())),
                max_size=120)


@st.composite
def in_order_mostly(draw) -> list[tuple]:
    """Rows whose time mostly rises (so the hot path runs), with some going back."""
    out, t = [], 0
    for g, h, back, x in draw(rows):
        t += draw(st.integers(0, 3))
        time = t - 7 if back is not None and back % 9 == 0 else (None if back is None and x is None else t)
        out.append((g, h, time, x))
    return out


params_strategy = st.fixed_dictionaries({
    "window-size": st.sampled_from(["1", "3", "5", "10"]),
    "advance": st.sampled_from([None, "1", "2", "5", "10", "15"]),
    "slack": st.sampled_from([None, "0", "1", "3"]),
    "group-by": st.sampled_from(["", "g", "g, h"]),
    "independent-window-alignment": st.sampled_from([None, "1"]),
    "drop-empty-outputs": st.sampled_from([None, "1"]),
    "timeout": st.sampled_from([None, "0.5", "2"]),
    "functions": st.sampled_from([["avg(x)", "count()"], ["sum(x)", "min(x)", "max(x)", "count(x)"],
                                  ["firstval(x)", "lastval(time)", "count_distinct(g)", "sum(x / (x - 1.0))"]]),
})


def as_params(drawn: dict) -> dict[str, str]:
    p = {"window-size-by": "VALUES", "order-by": "FIELD", "order-on-field": "time"}
    for i, f in enumerate(drawn["functions"]):
        p[f"aggregate-function.{i}"] = f
    p.update({k: v for k, v in drawn.items() if k != "functions" and v})
    return p


@settings(max_examples=150, deadline=None)
@given(drawn=params_strategy, data=in_order_mostly(), cuts=st.lists(st.integers(0, 120), max_size=6),
       gaps=st.lists(st.sampled_from([0.0, 0.3, 1.0, 2.5]), min_size=8, max_size=8), move_at=st.integers(-1, 7))
def test_aggregate_fast_loop_equals_the_general_code(drawn, data, cuts, gaps, move_at):
    params = as_params(drawn)
    fast, plain = aggregate(params, fast=True), aggregate(params, fast=False)
    assert fast._loop is not None and plain._loop is None
    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    now = 0.0
    for k, (a, b) in enumerate(zip(bounds, bounds[1:])):
        now += gaps[k % len(gaps)]
        if k == move_at:
            fast, plain = moved(fast, params, now), moved(plain, params, now)
        if k % 2:  # timers fired between batches too
            assert fast.poll(now) == plain.poll(now)
        assert fast.process(0, data[a:b], now) == plain.process(0, data[a:b], now)
        assert fast.counters() == plain.counters()
    assert fast.state() == plain.state()
    assert fast.poll(now + 10) == plain.poll(now + 10)


def test_a_window_closed_by_its_timeout_takes_no_more_tuples():
    """The hot window of a group whose window timed out is forgotten: the next tuple in it is late."""
    params = as_params({"window-size": "10", "timeout": "0.5", "group-by": "g", "functions": ["avg(x)", "count()"]})
    for fast in (True, False):
        op = aggregate(params, fast)
        assert op.process(0, [(0, 0, 1, 1.0), (0, 0, 2, 1.0)], 0.0) == []
        assert op.process(0, [(0, 0, 3, 1.0)], 1.0) == [(0, [(0, 1, 1.0, 2)])]
        assert op.counters() == {"late_tuples": 1, "ignored_tuples": 1}


def test_the_hot_path_is_taken_for_in_order_tuples():
    """Not only equal: the generated loop really keeps the in-order tuples off the general code."""
    params = as_params({"window-size": "10", "group-by": "g", "functions": ["avg(x)", "count()"]})
    op = aggregate(params, fast=True)
    calls = []
    general = op._windows.place
    op._windows.place = lambda *a: (calls.append(a[0]), general(*a))[1]  # type: ignore[method-assign]
    data = [(t % 2, 0, t, float(t)) for t in range(100)]
    op.process(0, data, 0.0)
    assert 0 < len(calls) <= 2 * 10 + 2  # a group's first tuple and each window's closing tuple
    assert op.process(0, [(0, 0, 200, 1.0), (1, 0, 200, 1.0)], 0.0) == [  # group 1's windows start at 1
        (0, [(0, 90, (90 + 92 + 94 + 96 + 98) / 5, 5), (1, 91, (91 + 93 + 95 + 97 + 99) / 5, 5)])]


# -- filter and map -------------------------------------------------------------------

values = st.one_of(st.floats(-10, 10, allow_nan=False), st.sampled_from([0.0, 1.0, -1.0]))
batches = st.lists(st.tuples(st.integers(-3, 3), st.integers(-3, 3), st.integers(0, 9), values), max_size=60)
PREDICATES = ["x > 0.5", "1.0 / x > 0.2", "g = h or x < 0.0", "g * 1.0 / h >= 0.0"]
EXPRESSIONS = ["g", "x * 9.0 / 5.0 + 32.0", "1.0 / x", "g / h", "x > 0.0 and g < h"]


@settings(max_examples=100, deadline=None)
@given(rows=batches, predicate=st.sampled_from(PREDICATES))
def test_filter_comprehension_equals_the_loop_and_tuple_by_tuple(rows, predicate):
    b, outs = box("filter", {"expression.0": predicate})
    op = FilterOperator(b, [ROW], outs)
    by_row = compile_expression(predicate, Scope.single(ROW))
    expected = [r for r in rows if by_row(r)]  # a failing predicate (None) is false
    assert op._row_loop(rows) == (expected,)
    assert op.process(0, rows, 0.0) == ([(0, expected)] if expected else [])


@settings(max_examples=100, deadline=None)
@given(rows=batches, picked=st.lists(st.sampled_from(EXPRESSIONS), min_size=1, max_size=4))
def test_map_comprehension_equals_the_loop_and_tuple_by_tuple(rows, picked):
    params = {}
    for i, e in enumerate(picked):
        params[f"expression.{i}"], params[f"output-field-name.{i}"] = e, f"f{i}"
    b, outs = box("map", params)
    op = MapOperator(b, [ROW], outs)
    fields = [compile_expression(e, Scope.single(ROW)) for e in picked]
    expected = [tuple(f(r) for f in fields) for r in rows]
    assert op._batch.__globals__["_loop"](rows) == expected
    assert op.process(0, rows, 0.0) == ([(0, expected)] if expected else [])
