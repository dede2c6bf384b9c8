"""The expression compiler (``boreas.node.compile``) against hand-computed values.

Expressions are compiled to Python once per box; these tests check values,
failures that yield None, types that follow the catalog, join expressions,
that code is generated once, and compile errors.  They are apart from the
operators that use the compiled code (``test_operators.py``).
"""

from __future__ import annotations

import doctest
import importlib

import pytest
from boreas.catalog.expressions import ExpressionError, Scope
from boreas.catalog.model import Schema
from boreas.node import compile as compiler
from boreas.node.compile import CompileError, compile_expression, compile_join_expression
from support.operators import QUOTE, TRADE, T, make, rows_of

# -- the expression compiler ----------------------------------------------------------


def ev(text: str, row: tuple = (2.5, 4), s: Schema = T):
    return compile_expression(text, Scope.single(s))(row)


@pytest.mark.parametrize("text, expected", [
    ("time * 2 + 1", 9), ("value / 2", 1.25), ("time / 8", 0.5), ("-time", -4), ("-(time - 10)", 6),
    ("(time + 1) * 2", 10), ("7 % 3", 1), ("-7 % 3", -1), ("7.5 % 2", 1.5), ("time - value", 1.5),
    ("time = 4", 1), ("time == 4", 1), ("time <> 4", 0), ("time != 4", 0), ("time < 5", 1),
    ("time <= 4", 1), ("time > 4", 0), ("time >= 5", 0), ("1=1", 1), ("true", 1), ("false", 0),
    ("time > 1 and value < 2", 0), ("time > 1 or value < 2", 1), ("not time > 1", 0),
    ("min(time, value)", 2.5), ("max(time, 10)", 10), ("abs(-time)", 4), ("greatest(1, time, 3)", 4),
    ("least(value, 1.5)", 1.5), ("sqrt(time)", 2.0), ("pow(time, 2)", 16.0), ("power(2, 3)", 8.0),
    ("ln(exp(2))", 2.0), ("log(100)", 2.0), ("log(2, 8)", 3.0), ("floor(value)", 2), ("ceil(value)", 3),
    ("round(value)", 3), ("round(-value)", -3), ("round(0.49999999999999994)", 0), ("round(1.5)", 2), ("round(time)", 4), ("cast(value as int)", 2),
    ("cast(time as double)", 4.0), ("cast(time as varchar)", "4"), ("cast('12' as int)", 12),
    ("concat('t', time)", "t4"), ("concat('a', 'b', 'c')", "abc"), ("'x'", "x"), ("1.5e1", 15.0),
    ("time between 1 and 4", 1), ("time in (1, 2, 3)", 0), ("time is null", 0), ("time is not null", 1),
    ("'abc' like 'a%'", 1), ("'abc' like 'a_'", 0),
])
def test_compiled_values(text, expected):
    got = ev(text)
    assert got == pytest.approx(expected) if isinstance(expected, float) else got == expected
    assert type(got) is type(expected), f"{text}: {got!r} is {type(got).__name__}"


@pytest.mark.parametrize("text", ["value / (time - 4)", "time % 0", "sqrt(-time)", "ln(0)",
                                  "cast('abc' as int)", "exp(100000)", "(value / 0) > 1",
                                  "concat('a', cast('x' as int))"])
def test_failing_expressions_yield_none(text):
    assert ev(text) is None


def test_none_inputs_yield_none_not_crash():
    assert ev("time + 1", (2.5, None)) is None
    assert ev("time > 1", (2.5, None)) is None
    assert ev("time is null", (2.5, None)) == 1


def test_compiled_types_follow_the_catalog():
    # The catalog types a predicate int and min(int, double) double; values follow.
    assert ev("time > 1") == 1 and type(ev("time > 1")) is int
    assert type(ev("min(time, 10.0)")) is float


def test_join_expression():
    f = compile_join_expression("max(left.time, right.time)", TRADE, QUOTE)
    assert f((5, "IBM", 10.0), (7, "IBM", 9.5)) == 7
    g = compile_join_expression("left.symbol = right.symbol and left.price > right.bid", TRADE, QUOTE)
    assert g((5, "IBM", 10.0), (7, "IBM", 9.5)) and not g((5, "IBM", 10.0), (7, "HP", 9.5))
    assert compile_join_expression("left.price / (right.bid - 9.5)", TRADE, QUOTE)(
        (5, "IBM", 10.0), (7, "IBM", 9.5)) is None


def test_code_is_generated_once_and_never_walks_the_tree(monkeypatch):
    f = compile_expression("value * 2 > time and time % 2 = 0", Scope.single(T))
    source = f.__boreas_source__
    assert "row[0]" in source and "row[1]" in source and "sqlglot" not in source

    def boom(*args, **kwargs):
        raise AssertionError("sqlglot used per tuple")

    monkeypatch.setattr(compiler, "parse_expression", boom)
    monkeypatch.setattr(compiler, "infer_type", boom)
    monkeypatch.setattr("sqlglot.parse_one", boom)
    monkeypatch.setattr("sqlglot.expressions.Expression.find_all", boom)
    assert [f((v, t)) for v, t in [(3.0, 4), (1.0, 4), (9.0, 3)]] == [True, False, False]
    assert type(f.__code__).__name__ == "code" and "row" in f.__code__.co_varnames


def test_operators_compile_once(monkeypatch):
    op = make("filter", {"expression.0": "value > 1.0"}, T)

    def boom(*args, **kwargs):
        raise AssertionError("compiled per batch")

    monkeypatch.setattr("builtins.compile", boom)
    monkeypatch.setattr(compiler, "parse_expression", boom)
    for _ in range(100):
        assert rows_of(op.process(0, [(2.0, 1), (0.5, 2)], 0.0)) == [(2.0, 1)]


@pytest.mark.parametrize("text, error", [
    ("bogus > 1", ExpressionError), ("count(time)", CompileError), ("round(value, 2)", CompileError),
    ("sum(time)", CompileError), ("time >", ExpressionError), ("a.b.c", ExpressionError),
])
def test_compile_errors(text, error):
    with pytest.raises(error):
        compile_expression(text, Scope.single(T))


@pytest.mark.parametrize("name", ["boreas.node.compile", "boreas.node.operators"])
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
