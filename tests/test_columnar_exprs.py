"""Expressions that used to keep filter and map on rows, now on columns, against the row path (issue 30).

The row code stays the definition: the same operator fed ``Columns.rows()``
is the oracle.  Three mechanisms are checked here, with Hypothesis batches
full of the edge values each one is about:

* nullable fields (SQL's three-valued logic, ``node/null_logic.py``),
  ``coalesce``, ``null`` literals, ``is true``, ``and``/``or``/``not`` of
  non-comparisons, math functions, ``%`` of doubles, casts of text;
* flagged rows (a zero divisor, an int64 overflow, ``sqrt(-1)``, text that
  is not a plain number, a None where Python raises): those rows alone get
  the row code's value and the batch stays columns;
* what still falls back for the whole batch: a value its out field cannot
  hold (a Python int beyond int64), and a translator without row code (the
  join, table and aggregate callers) on a flagged row.
"""

from __future__ import annotations

from functools import lru_cache

import pyarrow as pa
import pytest
from boreas.catalog.model import Field, FieldType, Schema
from boreas.node.operators import arrow_exprs, arrow_logic, arrow_ops
from boreas.node.operators.arrow_nodes import Eval, Node
from boreas.node.operators.size_choice import SizeChoice
from boreas.wire.columns import Columns, arrow_schema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlglot import expressions as exp
from support.property_scale import examples
from test_columnar_operators import build, check

N = Schema("N", (
    Field("x", FieldType.INT, nullable=True), Field("y", FieldType.LONG), Field("z", FieldType.DOUBLE, nullable=True),
    Field("w", FieldType.DOUBLE), Field("s", FieldType.STRING, 8, nullable=True), Field("t", FieldType.STRING, 8),
))
TEXTS = ["", "0", "12", "-7", "+3", " 4 ", "1.5", "-0.25", "1e3", "1e400", "inf", "nan", "1_0", "abc", "٣",
         "007", "9" * 19, ".5", "5.", "-", "1e"]
EDGE_INTS = [0, 1, -1, 2, -2, 3, 2**31 - 1, -(2**31), 2**53 + 1, 2**62, -(2**63), 2**63 - 1]
EDGE_DOUBLES = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 1e300, -1e300, 710.0, float("inf"), float("-inf"), float("nan")]


@st.composite
def nullable_batches(draw, max_rows: int = 16) -> Columns:
    """Batches of :data:`N`: its nullable fields often NULL, every field drawing its edge values."""
    n = draw(st.integers(0, max_rows))
    target = arrow_schema(N)
    ints32 = st.one_of(st.integers(-5, 5), st.sampled_from([0, 2**31 - 1, -(2**31)]))
    doubles = st.one_of(st.floats(-10, 10), st.sampled_from(EDGE_DOUBLES))
    texts = st.one_of(st.sampled_from(TEXTS), st.text(alphabet="ab1-.", max_size=4))
    values = [st.one_of(st.none(), ints32), st.one_of(st.integers(-5, 5), st.sampled_from(EDGE_INTS)),
              st.one_of(st.none(), doubles), doubles, st.one_of(st.none(), texts), texts]
    arrays = [pa.array(draw(st.lists(v, min_size=n, max_size=n)), type=f.type) for v, f in zip(values, target)]
    return Columns(pa.RecordBatch.from_arrays(arrays, schema=target))


PREDICATES = [
    "x > 1", "x <> 3 or y = 1", "x = 2 and z > 0.0", "not (x < 0)", "x + y > 0", "x * 2 = y", "x / 2 > 0.5",
    "x % 3 = 1", "-x < 0", "x between -1 and 2", "x in (1, 2, -1)", "s like 'a%'", "s = t", "s + t = 'ab'",
    "z * 2.0 < w", "x is null", "x is not null", "coalesce(x, y) > 0", "coalesce(z, w, 0.0) < 1.0",
    "coalesce(s, t) = ''", "x is true", "z is false", "(x > 1) is true", "not x", "x and z", "s or t",
    "abs(x) > 1", "sqrt(z) > 1.0", "cast(s as int) = 12", "cast(s as double) > 0.0", "y = null", "z % w > 0.0",
    "y * y > 0", "y + y < 0", "y - 1 < y", "y / 3 > 2.0", "y % w >= 0.0", "pow(w, 2.0) > 2.0", "exp(w) > 1.0",
    "ln(w) < 0.0", "log(2, w) > 1.0", "floor(w) = 0", "round(z) = 1", "cast(w as bigint) > 0", "t and y",
    "(w > 0.0) and (10 / y > 1.0)", "y between 0 and 10 / y", "x = 1 or 1 / y > 0", "not (3 / y > 1.0)",
    "(w < 0.0) or sqrt(w) > 1.0",
]
VALUES = [
    "x", "x + 1", "x * y", "z / w", "-x", "x % 2", "x = 1", "x > 1 and z < 0.0", "not (x = 1)", "coalesce(x, 0)",
    "coalesce(z, w)", "coalesce(s, t)", "sqrt(w)", "ln(z)", "exp(w)", "pow(w, 0.5)", "w % 3.0", "y % 0",
    "cast(t as int)", "cast(t as double)", "x is true", "y and y", "s or t", "y * 2", "y - -1", "y / 7",
    "abs(y)", "-y", "cast(w as int)", "round(w)", "y + 0.5", "x between 1 and 3", "x in (1, null)",
    "(10 / y) is null", "cast(x as int) is null", "coalesce(x / y, 7.5)", "y and y * 2", "(y <> 0) and (10 / y > 1.0)",
    "min(y, w)", "concat(t, w)",  # (rows before: tests/test_columnar_text.py)
]
ON_ROWS = ["y and w"]  # the row value's type differs per row


@lru_cache(maxsize=None)
def built(kind: str, expression: str):
    """One operator per expression (filter and map keep no state between batches; compiling per example
    would be most of the test's time)."""
    if kind == "filter":
        return build("filter", {"expression.0": expression}, N)
    return build("map", {"expression.0": expression, "output-field-name.0": "v"}, N)


@pytest.mark.parametrize("predicate", PREDICATES)
@settings(max_examples=examples(4), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(columns=nullable_batches())
def test_filter_of_nullable_fields_math_and_logic_is_the_row_path(columns, predicate):
    op = built("filter", predicate)
    assert op.columnar
    for _, out in check(op, columns):
        assert isinstance(out, Columns)  # flagged rows were patched in place: no batch went the row path


@pytest.mark.parametrize("expression", VALUES + ON_ROWS)
@settings(max_examples=examples(4), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(columns=nullable_batches())
def test_map_of_nullable_fields_math_and_logic_is_the_row_path(columns, expression):
    op = built("map", expression)
    assert op.columnar == (expression not in ON_ROWS)
    check(op, columns)


def batch_of(**columns: list) -> Columns:
    target = arrow_schema(N)
    n = len(next(iter(columns.values())))
    defaults = {"x": [1] * n, "y": [1] * n, "z": [1.0] * n, "w": [1.0] * n, "s": ["a"] * n, "t": ["b"] * n}
    defaults.update(columns)
    return Columns(pa.RecordBatch.from_arrays([pa.array(defaults[f.name], f.type) for f in target], schema=target))


@pytest.mark.parametrize("expression, column, values, want", [
    ("10 / y", "y", [0, 5, 2], [None, 2.0, 5.0]),                      # a zero divisor: that row's field None
    ("sqrt(w)", "w", [4.0, -1.0, 9.0], [2.0, None, 3.0]),               # a domain error
    ("exp(w)", "w", [0.0, 1000.0], [1.0, None]),                        # an overflow Python raises on
    ("cast(t as int)", "t", ["12", " 3 ", "1.5", "x"], [12, 3, 1, None]),  # Python's int() of text, per row
    ("y + 1", "y", [2**63 - 2, 3], [2**63 - 1, 4]),                    # near int64: the row code computes it
])
def test_flagged_rows_get_the_row_codes_value_and_the_batch_stays_columns(expression, column, values, want):
    op = build("map", {"expression.0": expression, "output-field-name.0": "v"}, N)
    op.sizes = SizeChoice.fixed(False)  # (on columns: a batch this small goes the row code as built)
    [(_, out)] = op.process(0, batch_of(**{column: values}), 0.0)
    assert isinstance(out, Columns)
    assert [r[0] for r in out.rows()] == want


def test_an_int_beyond_int64_in_a_long_field_sends_the_batch_to_the_row_path():
    """The row path's tuple holds Python's int 2**63; no int64 column can: exactness keeps that batch on rows."""
    op = build("map", {"expression.0": "y + 1", "output-field-name.0": "v"}, N)
    [(_, out)] = op.process(0, batch_of(y=[2**63 - 1, 1]), 0.0)
    assert out == [(2**63,), (2,)]


def test_a_translator_without_row_code_falls_back_on_a_flagged_row():
    """A translator without row code (``per_row=False``; every box's has it since branch colJT) keeps the
    whole-batch Fallback."""
    plain = Schema("P", (Field("y", FieldType.LONG),))
    batch = pa.record_batch([pa.array([0, 2], pa.int64())], names=["y"])
    with pytest.raises(arrow_exprs.Fallback):
        arrow_exprs.Translator(plain).value("10 / y", FieldType.DOUBLE)(batch)
    assert arrow_exprs.Translator(plain, per_row=True).value("10 / y", FieldType.DOUBLE)(batch).to_pylist() == [None, 5.0]
    with pytest.raises(arrow_exprs.Unsupported):  # and refuse nullable fields unless they take SQL's logic
        arrow_exprs.Translator(N).predicate("x > 1")


def test_a_certain_failure_is_applied_on_columns_and_one_python_may_skip_is_left_to_the_row_code():
    """``10 / y`` with y = 0 fails the expression wherever Python evaluates it; behind ``w > 0 and`` Python
    evaluates it only where w > 0, so there the row is flagged for the row code instead."""
    batch = pa.record_batch([pa.array([0, 5], pa.int64()), pa.array([-1.0, 1.0])], names=["y", "w"])
    y, w = (Node(k, lambda ev, i=i: ev.column(i), nullable=True) for i, k in enumerate(("int", "float")))
    ten, zero = arrow_ops.literal(exp.Literal.number("10")), arrow_ops.literal(exp.Literal.number("0.0"))
    quotient = arrow_ops.divide(ten, y)
    ev = Eval(batch)
    assert quotient.run(ev).to_pylist() == [10.0, 2.0]  # a stand-in where it fails
    assert ev.redo() is None and ev.failed(None).to_pylist() == [True, False]
    guarded = arrow_logic.both(arrow_ops.order(w, zero, arrow_ops.ORDER[exp.GT]), quotient, False)
    ev = Eval(batch)
    guarded.run(ev)
    assert ev.failed(None) is None and ev.redo().to_pylist() == [True, False]



@pytest.mark.parametrize("kind, expression", [
    ("filter", "10 / x = null or y > 0"), ("filter", "sqrt(x - 1) = null or y > 0"),
    ("map", "(10 / x = null) is null"), ("filter", "(10 / x) in (null) or y > 0"),  # x computed beside NULL
    ("map", "1 and 2.5"), ("map", "0 or 2.5"), ("map", "'' and 1"),  # a truth-only value is no constant
    ("filter", "y = 1 and (1 and 2.5) = (w > 0.0)"),
    ("filter", "not (x = 0 or (y and w))"), ("map", "x = 0 or (y and w)"),  # None of a failed upstream field
    ("filter", "(y and w) = null"), ("filter", "(y and w) <> null"),
])
def test_what_a_review_found_the_columns_computed_otherwise_is_the_row_path(kind, expression):
    """Each was answered otherwise on columns than on rows (a review): an operand beside a NULL under
    three-valued logic not computed, so its failure was lost; a truth-only ``and``/``or`` folded into a bool;
    a truth-only value's None (a failed field upstream, in a field not declared nullable) lost."""
    op = built(kind, expression)
    check(op, batch_of(x=[0, 2, None, 1], y=[1, 1, None, 1], w=[None, 1.0, 1.0, 2.5]))
    check(op, batch_of(x=[1, 1], y=[1, None], w=[None, 1.0]))
