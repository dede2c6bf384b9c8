"""Expressions that differ only in their numbers share one parse (catalog/expressions.py), with sqlglot's result.

``parse_expression`` parses an expression's shape once (its numbers as
placeholders) and fills in each text's numbers; the tree must be the one
sqlglot gives the text itself, for every text, including those a shape
cannot serve (numbers in strings, names, comments, indexes).
"""

from __future__ import annotations

import sqlglot
from boreas.catalog.expressions import ExpressionError, expression_fields, field_references, parse_expression
from hypothesis import given, settings
from hypothesis import strategies as st

NUMBERS = st.one_of(st.integers(0, 10**12).map(str),
                    st.tuples(st.integers(0, 999), st.integers(0, 999)).map(lambda t: f"{t[0]}.{t[1]:03d}"),
                    st.sampled_from(["007", "1.50", "00.5", "3.", "1e5", "7770000001", "0x1F"]))
ATOMS = st.one_of(NUMBERS, st.sampled_from(["value", "sensor", "a1", "left.time", "'12'", "x[1]", "-3"]))
OPS = st.sampled_from([" > ", " <> ", " = ", " == ", " + ", " * ", " / ", " and ", " or ", " between 1 and "])


@st.composite
def expressions(draw) -> str:
    parts = [draw(ATOMS)]
    for _ in range(draw(st.integers(0, 4))):
        parts += [draw(OPS), draw(ATOMS)]
    text = "".join(parts)
    wrap = draw(st.sampled_from(["{}", "min({}, 2)", "cast({} as decimal(10, 2))", "({}) -- 5", "{} in (1, 2)"]))
    return wrap.format(text)


def _sqlglot(text: str):
    try:
        return sqlglot.parse_one(text.replace("==", "="))
    except sqlglot.errors.SqlglotError:
        return None


@settings(max_examples=100, deadline=None)
@given(st.lists(expressions(), min_size=1, max_size=6))
def test_every_text_gets_sqlglots_own_tree(texts: list[str]) -> None:
    for text in texts:
        expected = _sqlglot(text)
        try:
            tree = parse_expression(text)
        except ExpressionError:
            assert expected is None, text
            continue
        assert expected is not None and tree == expected and tree.sql() == expected.sql(), text


def test_a_catalog_of_filters_gets_each_its_own_numbers() -> None:
    texts = [f"value > {i % 97}.5 and sensor <> {i}" for i in range(300)]
    trees = [parse_expression(t) for t in texts]
    assert [t.sql() for t in trees] == [sqlglot.parse_one(t).sql() for t in texts]
    assert len({id(t) for t in trees}) == len(texts)  # no two texts share one tree


@settings(max_examples=100, deadline=None)
@given(st.lists(expressions(), min_size=1, max_size=6))
def test_checking_without_a_tree_reads_the_trees_fields(texts: list[str]) -> None:
    """``expression_fields`` (what checking a box uses: no tree for a known shape) says what the tree says,
    and refuses what ``parse_expression`` refuses, with the same message."""
    for text in texts * 2:  # the second time, the texts' shapes are known
        try:
            expected = field_references(parse_expression(text))
        except ExpressionError as exc:
            try:
                expression_fields(text)
            except ExpressionError as again:
                assert str(again) == str(exc), text
                continue
            raise AssertionError(f"{text!r} was read, but does not parse") from None
        assert expression_fields(text) == expected, text
