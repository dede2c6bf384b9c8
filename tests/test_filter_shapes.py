"""Filters of one expression shape share compiled code (node/compile_shapes.py) and still filter as their own text.

A node compiles a filter's row code once per shape (its numbers lifted to
parameters) and gives each box its own numbers.  The oracle is the
expression compiled from the box's own text (``compile_expression``,
tuple by tuple): every box of a shape, built after boxes of the same shape
with other numbers (so it takes the shared code), must route each tuple to
the port of its first true predicate, with numbers of either kind (whole
or decimal: the types depend on it), several predicates, the false port,
a predicate that fails on a row (division by zero: false), and numbers the
compiler folds into other constants (``2.5 + 3``: such a shape's code reads
its numbers as parameters instead of constants).
"""

from __future__ import annotations

import pytest
from boreas.catalog.boxtypes import builtin_registry
from boreas.catalog.expressions import Scope
from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.node.compile import compile_expression
from boreas.node.operators.base import OperatorError
from boreas.node.operators.filter import FilterOperator
from hypothesis import given, settings
from hypothesis import strategies as st

TYPES = builtin_registry()
I, D = FieldType.INT, FieldType.DOUBLE
ROW = Schema("R", (Field("g", I), Field("h", I), Field("x", D)))

#: Shapes with ``{}`` where a number goes.
SHAPES = ["x > {}", "x > {} and g <> {}", "g * {} + h >= {}", "{} / x > {}", "g % {} = {}", "-x < -{}",
          "x between {} and {}", "g in ({}, {}, 7)", "min(g, {}) = h or x * {} < 1", "(g + {}) / (h - {}) > 0",
          "x > {} + {}", "x * {} > -{} - 1"]  # (the last two: numbers Python's compiler folds into one constant)
NUMBERS = st.one_of(st.integers(0, 50).map(str), st.tuples(st.integers(0, 50), st.integers(0, 9)).map(
    lambda t: f"{t[0]}.{t[1]}"))
ROWS = st.lists(st.tuples(st.integers(-5, 5), st.integers(-5, 5),
                          st.one_of(st.floats(-60, 60, allow_nan=False), st.sampled_from([0.0, 1.5, -2.0]))),
                max_size=40)


@st.composite
def predicate(draw) -> str:
    shape = draw(st.sampled_from(SHAPES))
    return shape.format(*(draw(NUMBERS) for _ in range(shape.count("{}"))))


def filter_box(name: str, predicates: list[str], false_port: bool) -> FilterOperator:
    params = {f"expression.{i}": p for i, p in enumerate(predicates)}
    params["pass-on-false-port"] = "1" if false_port else "0"
    outs = len(predicates) + (1 if false_port else 0)
    b = Box(name, "filter", (InPort("in"),), tuple(f"{name}_{i}" for i in range(outs)), tuple(params.items()))
    return FilterOperator(b, [ROW], [ROW] * outs)  # (a filter's out streams have its in stream's schema)


def expected(predicates: list[str], false_port: bool, rows: list[tuple]) -> list[tuple[int, list[tuple]]]:
    tests = [compile_expression(p, Scope.single(ROW)) for p in predicates]
    ports: list[list[tuple]] = [[] for _ in range(len(tests) + (1 if false_port else 0))]
    for row in rows:
        port = next((i for i, t in enumerate(tests) if t(row)), len(tests) if false_port else None)
        if port is not None:
            ports[port].append(row)
    return [(i, out) for i, out in enumerate(ports) if out]


@settings(max_examples=150, deadline=None)
@given(boxes=st.lists(st.lists(predicate(), min_size=1, max_size=3), min_size=1, max_size=4),
       false_port=st.booleans(), rows=ROWS)
def test_boxes_of_one_shape_filter_as_their_own_text(boxes, false_port, rows):
    built = [filter_box(f"b{i}", predicates, false_port) for i, predicates in enumerate(boxes)]
    for op, predicates in zip(built, boxes):
        assert op.process(0, rows, 0.0) == expected(predicates, false_port, rows)


def test_boxes_differing_in_their_numbers_keep_their_own():
    ops = [filter_box(f"b{i}", [f"x > {i}.5 and g <> {i}"], True) for i in range(20)]
    rows = [(g, 0, float(x)) for g in range(3) for x in range(25)]
    for i, op in enumerate(ops):
        passed = [r for r in rows if r[2] > i + 0.5 and r[0] != i]
        assert op.process(0, rows, 0.0) == [(0, passed), (1, [r for r in rows if r not in passed])]


def test_a_refused_expression_is_named_as_written_not_by_its_shape():
    filter_box("ok", ["x > 1.5 and g <> 2"], False)  # the shape is known and trusted
    with pytest.raises(OperatorError) as bad_field:
        filter_box("bad", ["x > 1.5 and nope <> 2"], False)
    assert "'bad'" in str(bad_field.value) and "nope" in str(bad_field.value)
    with pytest.raises(OperatorError) as aggregate:
        filter_box("agg", ["sum(x * 2.5) > 1"], False)
    assert "x * 2.5" in str(aggregate.value) and "7770000001" not in str(aggregate.value)
