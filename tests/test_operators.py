"""Data-plane operators against hand-computed expectations.

Filter, map, union, aggregate, join, delay, random_drop and window_drop, and
the errors and registry that build them.  The expression compiler they use is
``test_compiled_expressions.py``; the move property of every stateful operator
(``state()`` through msgpack, ``restore()``, run on) is ``test_operator_moves.py``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import msgspec
import pytest
from boreas.catalog import Catalog, plan_submission, read_document, stream_schemas
from boreas.catalog.boxtypes import BoxError
from boreas.catalog.expressions import ExpressionError
from boreas.catalog.model import Box, InPort, Schema
from boreas.catalog.schemas_of import BoxTyping
from boreas.node.operators import Operator, OperatorError, OperatorRegistry, build_operator, builtin_operators
from boreas.node.operators.base import typed_by
from support.operators import AVG, CATALOG_TYPES, EXAMPLES, PACKET, D, I, S, T, make, rows_of, schema

# -- filter, map, union ----------------------------------------------------------------


def test_filter_routes_to_first_true_predicate_and_false_port():
    op = make("filter", {"expression.0": "time < 10", "expression.1": "time < 20",
                         "pass-on-false-port": "1"}, T, outs=3)
    out = op.process(0, [(1.0, 5), (1.0, 15), (1.0, 25), (1.0, 8)], 0.0)
    assert out == [(0, [(1.0, 5), (1.0, 8)]), (1, [(1.0, 15)]), (2, [(1.0, 25)])]


def test_filter_without_false_port_drops_and_failures_are_false():
    op = make("filter", {"expression.0": "value / time > 1"}, T)
    out = op.process(0, [(5.0, 0), (5.0, 2), (1.0, 2)], 0.0)
    assert out == [(0, [(5.0, 2)])]
    assert op.process(0, [], 0.0) == [] and op.state() == {}


def test_filter_borealis_constant_predicates():
    assert rows_of(make("filter", {"expression.0": "1=1"}, T).process(0, [(1.0, 1)], 0)) == [(1.0, 1)]
    assert rows_of(make("filter", {"expression.0": "true"}, T).process(0, [(1.0, 1)], 0)) == [(1.0, 1)]


def test_map_computes_typed_fields_and_none_per_failing_field():
    op = make("map", {"expression.0": "time", "output-field-name.0": "t",
                      "expression.1": "value * 9.0 / 5.0 + 32.0", "output-field-name.1": "f",
                      "expression.2": "value / time", "output-field-name.2": "ratio",
                      "expression.3": "time > 1", "output-field-name.3": "big"}, T)
    out = rows_of(op.process(0, [(100.0, 2), (0.0, 0)], 0.0))
    assert out == [(2, 212.0, 50.0, 1), (0, 32.0, None, 0)]
    assert [type(v) for v in out[0]] == [int, float, float, int]


def test_union_merges_in_arrival_order():
    op = make("union", {}, T, T, T)
    seen = []
    for port, batch in [(0, [(1.0, 1)]), (2, [(2.0, 2), (3.0, 3)]), (1, [(4.0, 4)]), (0, [])]:
        seen += rows_of(op.process(port, batch, 0.0))
    assert seen == [(1.0, 1), (2.0, 2), (3.0, 3), (4.0, 4)]


# -- aggregate --------------------------------------------------------------------------


def from_xml(path: Path) -> tuple[Catalog, dict[str, Schema]]:
    plan = plan_submission(Catalog(), [read_document(path.read_bytes(), path.name)])
    assert plan.ok, plan.problems
    return plan.catalog, stream_schemas(plan.catalog)


def build_from(catalog: Catalog, schemas: dict[str, Schema], name: str) -> Operator:
    box = catalog.boxes[name]
    return build_operator(box, [schemas[p.stream] for p in box.inputs], [schemas[s] for s in box.outputs])


def test_paper_figure_1_counts_packets_per_time_unit():
    catalog, schemas = from_xml(EXAMPLES / "packet_aggregate.xml")
    op = build_from(catalog, schemas, "mybox")
    packets = [(0, "tcp"), (0, "udp"), (0, "tcp"), (1, "tcp"), (1, "udp"), (4, "tcp"), (4, "tcp"), (5, "x")]
    out = [r for t in packets for r in rows_of(op.process(0, [t], 0.0))]
    # [0,1) closes when time 1 arrives; time 4 closes [1,2) and the empty [2,3), [3,4); 5 closes [4,5).
    assert out == [(0, 3), (1, 2), (2, 0), (3, 0), (4, 2)]


def test_sliding_value_windows():
    op = make("aggregate", {**AVG, "window-size-by": "VALUES", "window-size": "4", "advance": "2",
                            "order-by": "FIELD", "order-on-field": "time"}, T)
    out = rows_of(op.process(0, [(float(t), t) for t in range(10)], 0.0))
    # Windows [0,4), [2,6), [4,8) close when 4, 6, 8 arrive; [6,10) and [8,12) stay open.
    assert out == [(0, 1.5, 4), (2, 3.5, 4), (4, 5.5, 4)]


def test_groups_with_two_fields_and_all_functions():
    s = schema("G", ("a", I), ("b", S), ("x", D), ("time", I))
    op = make("aggregate", {
        "aggregate-function.0": "sum(x)", "aggregate-function.1": "min(x)", "aggregate-function.2": "max(x)",
        "aggregate-function.3": "firstval(x)", "aggregate-function.4": "lastval(x)",
        "aggregate-function.5": "count(x / (x - 2.0))", "aggregate-function.6": "sum(time * 2)",
        "window-size-by": "VALUES", "window-size": "10", "order-by": "FIELD", "order-on-field": "time",
        "group-by": "a, b"}, s)
    rows = [(1, "p", 3.0, 0), (2, "p", 5.0, 1), (1, "p", 2.0, 2), (1, "q", 7.0, 3), (1, "p", 4.0, 9),
            (1, "p", 1.0, 10), (2, "p", 1.0, 12), (1, "q", 1.0, 25), (1, "q", 1.0, 26)]
    out = rows_of(op.process(0, rows, 0.0))
    assert out == [
        (1, "p", 0, 9.0, 2.0, 4.0, 3.0, 4.0, 2, 22),  # x=2.0 fails x/(x-2) so count(expr) is 2
        (2, "p", 1, 5.0, 5.0, 5.0, 5.0, 5.0, 1, 2),   # the first window of group (2,p) starts at 1
        # (1,q) starts at 3: 25 closes [3,13); the empty [13,23) once 26 confirms the gap
        (1, "q", 3, 7.0, 7.0, 7.0, 7.0, 7.0, 1, 6),
        (1, "q", 13, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0),  # empty: zeros, tuples carry no nulls
    ]
    assert CATALOG_TYPES.infer(op.box, [s])[0].same_shape(op.outputs[0])


def test_tuple_windows_tumbling_and_sliding():
    op = make("aggregate", {"aggregate-function.0": "sum(time)", "window-size-by": "TUPLES",
                            "window-size": "3", "order-by": "FIELD", "order-on-field": "time"}, T)
    out = rows_of(op.process(0, [(0.0, t) for t in (10, 11, 12, 13, 14, 15, 16)], 0.0))
    assert out == [(10, 33), (13, 42)]
    op = make("aggregate", {"aggregate-function.0": "count()", "aggregate-function.1": "lastval(time)",
                            "window-size-by": "TUPLES", "window-size": "3", "advance": "1"}, T)
    out = rows_of(op.process(0, [(0.0, t) for t in range(5)], 0.0))
    assert out == [(3, 2), (3, 3), (3, 4)]  # TUPLENUM: no start field


def test_values_by_tuplenum_alignment_and_empty_outputs():
    base = {"aggregate-function.0": "count()", "window-size-by": "VALUES", "window-size": "10",
            "order-on-field": "time"}
    rows = [(0.0, 7), (0.0, 12), (0.0, 17), (0.0, 40), (0.0, 41)]  # 41 confirms the gap [27,37)
    op = make("aggregate", base, T)
    assert rows_of(op.process(0, rows, 0.0)) == [(2,), (1,), (0,)]
    op = make("aggregate", {**base, "independent-window-alignment": "true", "drop-empty-outputs": "1",
                            "order-by": "FIELD"}, T)
    assert rows_of(op.process(0, rows, 0.0)) == [(0, 1), (10, 2)]


def test_late_tuples_are_in_no_window():
    op = make("aggregate", {"aggregate-function.0": "count()", "window-size-by": "VALUES",
                            "window-size": "10", "order-by": "FIELD", "order-on-field": "time"}, T)
    out = rows_of(op.process(0, [(0.0, 10), (0.0, 21), (0.0, 15), (0.0, 25), (0.0, 31)], 0.0))
    assert out == [(10, 1), (20, 2)] and op.ignored == 1


def test_huge_gap_skips_empty_windows():
    op = make("aggregate", {"aggregate-function.0": "count()", "window-size-by": "VALUES",
                            "window-size": "1", "order-by": "FIELD", "order-on-field": "time"}, T)
    out = rows_of(op.process(0, [(0.0, 0), (0.0, 10**9), (0.0, 10**9 + 1)], 0.0))
    assert out[0] == (0, 1) and out[-1] == (10**9, 1) and len(out) < 10


def test_aggregate_timeout_closes_old_windows_via_poll():
    op = make("aggregate", {"aggregate-function.0": "count()", "window-size-by": "VALUES",
                            "window-size": "10", "order-by": "FIELD", "order-on-field": "time",
                            "group-by": "value", "timeout": "2.5"}, T)
    assert op.next_deadline() is None
    assert op.process(0, [(1.0, 0), (2.0, 0)], now=100.0) == []
    assert op.process(0, [(1.0, 1), (3.0, 5)], now=101.0) == []
    assert op.next_deadline() == 102.5
    assert op.poll(102.4) == []
    assert op.poll(102.5) == [(0, [(1.0, 0, 2), (2.0, 0, 1)])]
    assert op.next_deadline() == 103.5
    # A tuple arriving after the deadline sees the expiry first; its window is gone, so it is
    # in no window (as in Borealis), while a later value opens the next window.
    assert op.process(0, [(3.0, 6), (3.0, 16)], now=104.0) == [(0, [(3.0, 5, 1)])]
    assert op.ignored == 1 and op.next_deadline() == 106.5


def test_sensor_chain_example_through_three_operators():
    catalog, schemas = from_xml(EXAMPLES / "sensor_chain.xml")
    valid, convert, summarise = (build_from(catalog, schemas, n) for n in ("valid", "to_fahrenheit", "per_sensor"))
    readings = [(1, 0, 20.0), (2, 10, -100.0), (1, 30, 30.0), (2, 50, 10.0), (1, 60, 0.0), (2, 61, 0.0),
                (2, 110, 5.0)]
    out = []
    for r in readings:
        for _, a in valid.process(0, [r], 0.0):
            for _, b in convert.process(0, a, 0.0):
                out += rows_of(summarise.process(0, b, 0.0))
    # -100 C is filtered out; per_sensor aligns every sensor's windows to multiples of 60
    # (independent-window-alignment), so sensor 2's first minute [0, 60) holds only its value at 50
    # and closes when 61 arrives.
    assert out == [(1, 0, 77.0, 2), (2, 0, 50.0, 1)]


# -- join ------------------------------------------------------------------------------------


def test_trade_join_example():
    catalog, schemas = from_xml(EXAMPLES / "trade_join.xml")
    op = build_from(catalog, schemas, "match")
    assert op.process(1, [(1, "IBM", 99.0), (2, "HP", 20.0)], 0.0) == []
    assert op.process(0, [(3, "IBM", 100.5)], 0.0) == [(0, [(3, "IBM", 1.5)])]
    # A quote joins the buffered trade (max(left.time, right.time) = 4).
    assert op.process(1, [(4, "IBM", 100.0)], 0.0) == [(0, [(4, "IBM", 0.5)])]
    assert op.process(0, [(5, "IBM", 101.0)], 0.0) == [(0, [(5, "IBM", 2.0), (5, "IBM", 1.0)])]


def test_join_tuple_buffers_are_bounded():
    op = make("join", {"predicate": "left.time <= right.time", "left-buffer-size": "2",
                       "right-buffer-size": "0"}, T, T)
    op.process(0, [(1.0, 1), (2.0, 2), (3.0, 3)], 0.0)  # the left buffer keeps the newest 2
    assert rows_of(op.process(1, [(9.0, 5)], 0.0)) == [(2.0, 2, 9.0, 5), (3.0, 3, 9.0, 5)]
    assert op.process(0, [(4.0, 4)], 0.0) == []  # the right side keeps nothing
    assert [len(b) for b in op.state()["buffers"]] == [2, 0]


def test_join_value_buffers_are_bounded_by_range():
    op = make("join", {"predicate": "1=1", "left-buffer-size": "10", "left-order-by": "VALUES",
                       "left-order-on-field": "time", "right-buffer-size": "5",
                       "out-field.0": "left.time", "out-field-name.0": "lt",
                       "out-field.1": "right.time", "out-field-name.1": "rt"}, T, T)
    op.process(0, [(0.0, 0), (0.0, 5), (0.0, 10), (0.0, 14)], 0.0)  # 14 - 0 >= 10 drops 0
    assert rows_of(op.process(1, [(0.0, 99)], 0.0)) == [(5, 99), (10, 99), (14, 99)]
    op.process(0, [(0.0, 20)], 0.0)  # 20 - 5 and 20 - 10 >= 10 drop 5 and 10
    assert rows_of(op.process(1, [(0.0, 100)], 0.0)) == [(14, 100), (20, 100)]


def test_join_symmetric_order_and_failing_fields():
    op = make("join", {"predicate": "left.time = right.time", "left-buffer-size": "10",
                       "right-buffer-size": "10", "out-field.0": "left.value / right.value",
                       "out-field-name.0": "ratio"}, T, T)
    op.process(0, [(1.0, 1), (2.0, 1)], 0.0)
    assert rows_of(op.process(1, [(0.0, 1), (4.0, 1)], 0.0)) == [(None,), (None,), (0.25,), (0.5,)]


def test_join_timeout_drops_old_buffered_tuples():
    op = make("join", {"predicate": "1=1", "left-buffer-size": "10", "right-buffer-size": "10",
                       "timeout": "5"}, T, T)
    op.process(0, [(1.0, 1)], now=0.0)
    op.process(0, [(2.0, 2)], now=3.0)
    assert rows_of(op.process(1, [(9.0, 9)], now=6.0)) == [(2.0, 2, 9.0, 9)]


# -- delay, random_drop, window_drop ---------------------------------------------------


def test_delay_releases_in_order_after_the_delay():
    op = make("delay", {"delay-ms": "1500"}, T)
    assert op.next_deadline() is None
    assert op.process(0, [(1.0, 1), (2.0, 2)], now=10.0) == []
    assert op.process(0, [(3.0, 3)], now=11.0) == []
    assert op.next_deadline() == 11.5
    assert op.poll(11.4) == []
    assert op.poll(11.5) == [(0, [(1.0, 1), (2.0, 2)])]
    assert op.next_deadline() == 12.5
    assert op.process(0, [(4.0, 4)], now=13.0) == [(0, [(3.0, 3)])]
    assert op.poll(20.0) == [(0, [(4.0, 4)])] and op.next_deadline() is None
    assert make("delay", {"delay-ms": "0"}, T).process(0, [(1.0, 1)], 5.0) == [(0, [(1.0, 1)])]


def test_random_drop_is_seeded_and_respects_the_rate():
    rows = [(0.0, i) for i in range(10_000)]
    a = make("random_drop", {"drop_rate": "0.3", "seed": "7"}, T)
    b = make("random_drop", {"drop_rate": "0.3", "seed": "7"}, T)
    kept = rows_of(a.process(0, rows, 0.0))
    assert kept == rows_of(b.process(0, rows, 0.0))
    assert 6700 < len(kept) < 7300 and a.dropped == 10_000 - len(kept)
    assert rows_of(make("random_drop", {"drop_rate": "0"}, T).process(0, rows, 0.0)) == rows
    assert make("random_drop", {"drop_rate": "1"}, T).process(0, rows, 0.0) == []


def test_window_drop_keeps_or_drops_whole_windows():
    op = make("window_drop", {"drop_rate": "0.5", "window-size": "10", "order-on-field": "time",
                              "seed": "3"}, T)
    rows = [(0.0, t) for t in range(0, 200, 3)]
    kept = rows_of(op.process(0, rows, 0.0))
    windows = {t // 10 for _, t in rows}
    kept_windows = {t // 10 for _, t in kept}
    assert 0 < len(kept_windows) < len(windows)
    assert kept == [r for r in rows if r[1] // 10 in kept_windows]  # every window whole or gone
    op = make("window_drop", {"drop_rate": "0.5", "window-size": "4", "window-size-by": "TUPLES",
                              "group-by": "value", "seed": "1"}, T)
    rows = [(float(g), i) for i in range(40) for g in (0, 1)]
    kept = rows_of(op.process(0, rows, 0.0))
    for g in (0.0, 1.0):
        positions = [i // 4 for v, i in kept if v == g]
        assert all(positions.count(w) == 4 for w in set(positions))
    assert rows_of(make("window_drop", {"drop_rate": "0", "window-size": "5"}, T).process(0, rows, 0.0)) == rows


# -- errors and the registry ------------------------------------------------------------


@pytest.mark.parametrize("type_, params, inputs, message", [
    ("nonesuch", {}, [T], "type 'nonesuch', which has no operator"),
    ("filter", {}, [T], "expression.0"),
    ("filter", {"expression.0": "nope > 1"}, [T], "unknown field 'nope'"),
    ("map", {"expression.0": "time", "output-field-name.0": "t", "expression.1": "count(time)",
             "output-field-name.1": "c"}, [T], "aggregate box"),
    ("aggregate", {"aggregate-function.0": "median(time)", "window-size-by": "TUPLES",
                   "window-size": "2"}, [T], "median"),
    ("aggregate", {"aggregate-function.0": "count()", "window-size-by": "TUPLES",
                   "window-size": "0"}, [T], "greater than 0"),
    ("aggregate", {"aggregate-function.0": "count()", "window-size-by": "TUPLES",
                   "window-size": "2.5"}, [T], "whole number"),
    ("aggregate", {"aggregate-function.0": "count()", "window-size-by": "VALUES",
                   "window-size": "2"}, [T], "order-on-field"),
    ("aggregate", {"aggregate-function.0": "count()", "window-size-by": "WEEKS",
                   "window-size": "2"}, [T], "VALUES, TUPLES"),
    ("aggregate", {"aggregate-function.0": "sum(protocol)", "window-size-by": "TUPLES",
                   "window-size": "2"}, [PACKET], "numeric"),
    ("aggregate", {"aggregate-function.0": "count()", "window-size-by": "TUPLES", "window-size": "2",
                   "timeout": "soon"}, [T], "not a number"),
    ("join", {"predicate": "left.x = right.time", "left-buffer-size": "1", "right-buffer-size": "1"},
     [T, T], "unknown field 'left.x'"),
    ("join", {"predicate": "1=1", "left-buffer-size": "1", "right-buffer-size": "1",
              "left-order-by": "VALUES"}, [T, T], "left-order-on-field"),
    ("delay", {"delay-ms": "-5"}, [T], "delay-ms"),
    ("random_drop", {"drop_rate": "1.5"}, [T], "drop_rate"),
    ("window_drop", {"drop_rate": "0.5", "window-size": "3", "window-size-by": "VALUES"}, [T], "order-on-field"),
])
def test_bad_parameters_are_operator_errors(type_, params, inputs, message):
    box = Box("bad", type_, tuple(InPort(f"i{n}") for n in range(len(inputs))), ("o",), tuple(params.items()))
    try:  # the schemas validation would give, where it can tell them
        outputs = CATALOG_TYPES.infer(box, inputs)
    except (BoxError, ExpressionError, KeyError):  # KeyError: a type the catalog lacks
        outputs = [inputs[0]]
    with pytest.raises(OperatorError) as caught:
        build_operator(box, inputs, outputs)
    assert message in str(caught.value) and "'bad'" in str(caught.value)


def test_output_schemas_must_match_the_inferred_layout():
    box = Box("m", "map", (InPort("i"),), ("o",), (("expression.0", "value"), ("output-field-name.0", "v")))
    with pytest.raises(OperatorError, match="out port 0 would carry"):
        build_operator(box, [T], [schema("Wrong", ("v", S))])
    with pytest.raises(OperatorError, match="output schemas"):
        build_operator(box, [T], [])


def test_a_box_typed_by_the_catalog_index_is_checked_against_that_typing():
    """Built with typed_by (node/operator_host.py), an operator reads the index's typing of that very box
    object and in schemas instead of inferring it again: a wrong out schema is still refused, and a typing of
    another box object or other in schemas is not used."""
    box = Box("m", "map", (InPort("i"),), ("o",), (("expression.0", "value"), ("output-field-name.0", "v")))
    (right,) = CATALOG_TYPES.infer(box, [T])
    wrong = schema("Wrong", ("v", S))
    typed = {"m": BoxTyping(box, (T,), (wrong,), ())}  # (a typing that says otherwise than inference)
    with typed_by(typed):
        assert build_operator(box, [T], [wrong]).outputs == [wrong]  # its typing was read, not inferred again
        with pytest.raises(OperatorError, match="out port 0 would carry"):
            build_operator(box, [T], [right])  # checked against the typing
        with pytest.raises(OperatorError, match="out port 0 would carry"):
            build_operator(replace(box, node="n"), [T], [wrong])  # another box object: inferred
    with pytest.raises(OperatorError, match="out port 0 would carry"):
        build_operator(box, [T], [wrong])  # outside typed_by: inferred


def test_registry_builds_custom_types_without_touching_the_default():
    class Echo(Operator):
        def process(self, port, rows, now):
            return [(0, rows)]

    registry = builtin_operators()
    registry.register("echo", Echo)
    box = Box("e", "echo", (InPort("i"),), ("o",))
    assert registry.build(box, [T], [T]).process(0, [(1.0, 1)], 0.0) == [(0, [(1.0, 1)])]
    with pytest.raises(OperatorError, match="'echo'"):
        build_operator(box, [T], [T])
    assert "aggregate" in OperatorRegistry(list({"aggregate": None}.items()))
    assert Echo(box, [T], [T]).poll(0.0) == [] and Echo(box, [T], [T]).next_deadline() is None




def test_count_distinct_counts_each_value_once_per_window_and_survives_a_move():
    """Borealis's count_distinct(field): the Head infers an int field, the node counts distinct values."""
    params = {"aggregate-function.0": "count_distinct(value)", "aggregate-function-output-name.0": "kinds",
              "aggregate-function.1": "count()", "window-size-by": "VALUES", "window-size": "10",
              "order-by": "FIELD", "order-on-field": "time"}
    op = make("aggregate", params, T)
    assert rows_of(op.process(0, [(1.0, 1), (1.0, 2), (2.0, 3)], 0.0)) == []
    moved = make("aggregate", params, T)
    moved.restore(msgspec.msgpack.decode(msgspec.msgpack.encode(op.state())))
    assert rows_of(moved.process(0, [(3.0, 4), (1.0, 5), (9.0, 12)], 0.0)) == [(1, 3, 5)]  # window [1, 11)
