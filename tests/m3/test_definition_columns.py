"""Map definitions evaluated over columns (m3/runtime/definition_columns.py: Arrow's join, filter and group-by),
against the row-at-a-time nested loops of test_initial_join.py over random rows: the shapes it takes give the
same entries (same keys, same Python types), and data it cannot take exactly (NULLs, NaN, -0.0, mixed types,
FLOAT factors or join keys, ints beyond 64 bits) is left to the row evaluator, whose answer is the same."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.acero
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_initial_join import _reference

from boreas.m3.runtime.definition_columns import CAP_FACTOR, CAP_SLACK, SMALL, evaluate_columns
from boreas.m3.runtime.initial import _terms, evaluate_definition
from boreas.m3.syntax import parse_program

RELATIONS = "CREATE TABLE R(A INT, B INT); CREATE TABLE S(B INT, C INT);"

#: (keys, definition): every one the shape evaluated over columns.
SHAPES = [
    ("A: INT", "R(A, B) * S(B, C) * C * {C < 10}"),
    ("A: INT", "R(A, A) * S(A, C)"),  # a variable named twice in one atom
    ("A: INT, D: INT", "R(A, B) * S(B, C) * S(C, D) * {D <> A}"),
    ("B: INT", "R(A, B) * S(B, C) * {C = 3} * 2"),
    ("A: INT, B: INT", "R(A, B) * S(C, B) * {C <= A}"),  # q5's num >= maxn per window
    ("", "R(A, B) * S(B, C) * A"),  # no key: one total
    ("A: INT", "R(A, B) * B + S(A, B) * 3"),  # two terms summed
]

rows = st.lists(st.tuples(st.integers(-3, 4), st.integers(-3, 4)), max_size=12)


def _map(keys: str, text: str):
    return parse_program(f"{RELATIONS} DECLARE MAP m[{keys}] : INT := {text};").maps[0]


@pytest.mark.parametrize("keys,text", SHAPES)
@settings(max_examples=25, deadline=None)
@given(r=rows, s=rows)
def test_columns_equal_nested_loops(keys, text, r, s):
    m = _map(keys, text)
    tables = {"R": r, "S": s}
    got = evaluate_columns(m, _terms(m.definition), tables, small=0)
    assert got is not None, "the shape is evaluated over columns"
    want = _reference(m.definition, [k.name for k in m.keys], tables)
    assert got == want
    assert all(type(x) is int for key, v in got.items() for x in (*key, v))  # ints stay ints


@pytest.fixture
def join_sizes(monkeypatch) -> list[int]:
    """The row count of every join Arrow makes (pyarrow's Table.join calls acero's _perform_join)."""
    sizes: list[int] = []
    perform = pyarrow.acero._perform_join

    def spy(*args, **kwargs):
        out = perform(*args, **kwargs)
        sizes.append(len(out))
        return out

    monkeypatch.setattr(pyarrow.acero, "_perform_join", spy)
    return sizes


def test_relations_are_joined_through_their_link_not_as_a_product(join_sizes):
    """R and S, the two smallest, share no variable; T links them.  Joined in a connected order (R, T, S) no
    intermediate is bigger than the inputs: by size alone R x S was built first (n * n rows; 24 s and 2 GB for a
    Runtime.load at 6,000 rows each)."""
    program = parse_program("CREATE TABLE R(A INT, B INT); CREATE TABLE S(C INT, D INT); CREATE TABLE T(B INT, C INT);"
                            " DECLARE MAP m[A: INT] : INT := R(A, B) * S(C, D) * T(B, C);")
    m, n = program.maps[0], 60  # (R x S would be 3,600 rows: far past the n + 1 asserted)
    tables = {"R": [(i, i) for i in range(n)], "S": [(i, i) for i in range(n)], "T": [(i, i) for i in range(n + 1)]}
    got = evaluate_columns(m, _terms(m.definition), tables, small=0)
    assert got == _reference(m.definition, ["A"], tables) == {(i,): 1 for i in range(n)}
    assert join_sizes and max(join_sizes) <= n + 1


@pytest.mark.parametrize("keys,text,tables", [
    # one B shared by every row: R x S on B is n * n rows, then the comparison keeps half
    ("A: INT", "R(A, B) * S(B, C) * {C < A}", {"R": [(i, 7) for i in range(400)], "S": [(7, i) for i in range(400)]}),
    # no shared variable at all: a product
    ("A: INT, C: INT", "R(A, B) * S(D, C) * {A < C}", {"R": [(i, i) for i in range(5)], "S": [(i, i) for i in range(5)]}),
])
def test_a_join_that_outgrows_its_inputs_goes_by_rows(join_sizes, keys, text, tables):
    """Arrow holds a join's rows at once, the row evaluator none: a product, or a join over the cap (counted
    before it is made), is declined and the rows evaluated row at a time, with the same answer."""
    m = _map(keys, text)
    assert evaluate_columns(m, _terms(m.definition), tables, small=0) is None
    assert max(join_sizes, default=0) <= CAP_FACTOR * max(map(len, tables.values())) + CAP_SLACK
    assert evaluate_definition(None, m, tables) == _reference(m.definition, [k.name for k in m.keys], tables)


def test_a_nan_or_signed_zero_group_key_goes_by_rows():
    """Arrow's group-by puts NaNs in one group and -0.0 with 0.0; Python's dict keeps each NaN apart (NaN != NaN)
    and -0.0 == 0.0 under the first seen: a FLOAT key holding either is left to the row evaluator."""
    program = parse_program("CREATE TABLE R(A DOUBLE, B INT); DECLARE MAP m[A: DOUBLE] : INT := R(A, B) * B;")
    m = program.maps[0]
    for tables in ({"R": [(float("nan"), 1), (float("nan"), 2), (1.5, 4)]}, {"R": [(-0.0, 4), (0.0, 8)]}):
        assert evaluate_columns(m, _terms(m.definition), tables, small=0) is None
        want = _reference(m.definition, ["A"], tables)
        got = evaluate_definition(program, m, tables)
        assert [(repr(k), v) for k, v in got.items()] == [(repr(k), v) for k, v in want.items()]
    plain = {"R": [(0.5 * (i % 3), i) for i in range(10)]}
    assert evaluate_columns(m, _terms(m.definition), plain, small=0) == _reference(m.definition, ["A"], plain)


def _table(rows: list[tuple], kind=None) -> pa.Table:
    return pa.table([pa.array([r[0] for r in rows], kind or pa.int64()), pa.array([r[1] for r in rows], pa.int64())],
                    names=["x", "y"])


@pytest.mark.parametrize("keys,text", SHAPES)
@settings(max_examples=15, deadline=None)
@given(r=rows, s=rows)
def test_relations_given_as_columns_equal_nested_loops(keys, text, r, s):
    """A relation given as a table of INT columns (a window join's closed leaf rows: closed_columns.py) is
    joined as it is, a relation of rows beside it made columns; small ones too (no rows to make)."""
    m = _map(keys, text)
    want = _reference(m.definition, [k.name for k in m.keys], {"R": r, "S": s})
    got = evaluate_columns(m, _terms(m.definition), {"R": _table(r), "S": s}, small=0)
    assert got == want and all(type(x) is int for key, v in got.items() for x in (*key, v))
    program = parse_program(f"{RELATIONS} DECLARE MAP m[{keys}] : INT := {text};")
    assert evaluate_definition(program, m, {"R": _table(r), "S": _table(s)}) == want  # (rows where small)


def test_a_table_of_other_columns_is_evaluated_as_rows():
    """A FLOAT column given as a table is declined (Python's equality and sums, not Arrow's): its rows are
    evaluated row at a time, the same answer as given as rows."""
    program = parse_program("CREATE TABLE R(A FLOAT, B INT); CREATE TABLE S(B INT, C INT);"
                            " DECLARE MAP m[A: FLOAT] : INT := R(A, B) * S(B, C);")
    m = program.maps[0]
    r, s = [(0.5 * (i % 7), i % 5) for i in range(600)], [(i % 5, i) for i in range(600)]
    table = _table(r, pa.float64())
    assert evaluate_columns(m, _terms(m.definition), {"R": table, "S": s}, small=0) is None
    assert evaluate_definition(program, m, {"R": table, "S": s}) == evaluate_definition(program, m, {"R": r, "S": s})


def test_strings_join_and_compare_as_python_does():
    program = parse_program("CREATE TABLE R(A VARCHAR, B INT); CREATE TABLE S(A VARCHAR, C VARCHAR);"
                            " DECLARE MAP m[A: VARCHAR, C: VARCHAR] : INT := R(A, B) * S(A, C) * B * {A < C};")
    m = program.maps[0]
    words = ["", "a", "ab", "b", "é", "z", "ä"]
    tables = {"R": [(w, i) for i, w in enumerate(words * 3)], "S": [(w, v) for w in words for v in words]}
    got = evaluate_columns(m, _terms(m.definition), tables, small=0)
    assert got is not None and got == _reference(m.definition, ["A", "C"], tables)


def test_a_window_large_enough_goes_by_columns_and_matches():
    """The size at which :func:`evaluate_definition` takes the columns (q5's per-window join, SMALL rows)."""
    m = _map("A: INT, B: INT", "R(A, B) * S(C, B) * {C <= A}")
    tables = {"R": [(i % 37, i % 5) for i in range(SMALL)], "S": [(3, b) for b in range(5)]}
    assert evaluate_columns(m, _terms(m.definition), tables) is not None
    assert evaluate_definition(None, m, tables) == _reference(m.definition, ["A", "B"], tables)


@pytest.mark.parametrize("r,s", [
    ([(1, None), (2, 1)], [(None, 5), (1, 7)]),  # a NULL: None == None would join in Python's dict
    ([(1, 2.0), (2, 1)], [(2, 5), (1, 7)]),  # a column of two types
    ([(True, 1), (2, 1)], [(1, 7)]),  # a bool (True == 1, but shown as True)
    ([(1, 2 ** 70), (2, 1)], [(2 ** 70, 5), (1, 7)]),  # beyond 64 bits
    ([(2 ** 40, 1)] * 3, [(1, 2 ** 40)] * 3),  # a product that could leave 64 bits
])
def test_data_columns_cannot_hold_exactly_goes_by_rows(r, s):
    m = _map("A: INT", "R(A, B) * S(B, C) * A * C")
    tables = {"R": r, "S": s}
    assert evaluate_columns(m, _terms(m.definition), tables, small=0) is None
    assert evaluate_definition(None, m, tables) == _reference(m.definition, ["A"], tables)


@pytest.mark.parametrize("b", [float("nan"), -0.0, 1.5])
def test_float_join_keys_and_factors_go_by_rows(b):
    """A FLOAT join key joins by Python's equality (0.0 == -0.0, NaN with nothing), a FLOAT sum by its order:
    neither is left to Arrow."""
    program = parse_program("CREATE TABLE R(A INT, B DOUBLE); CREATE TABLE S(B DOUBLE, C INT);"
                            " DECLARE MAP m[A: INT] : INT := R(A, B) * S(B, C);")
    m = program.maps[0]
    tables = {"R": [(1, b), (2, 0.0)], "S": [(b, 5), (0.0, 6), (-0.0, 7)]}
    assert evaluate_columns(m, _terms(m.definition), tables, small=0) is None
    float_factor = _map("A: INT", "R(A, B) * B")
    assert evaluate_columns(float_factor, _terms(float_factor.definition), {"R": [(1, 1.5)]}, small=0) is None


def test_other_factors_go_by_rows():
    for keys, text in [("K: INT", "R(A, B) * {K = (A + B)}"), ("A: INT", "R(A, B) * S(2, C)"),
                       ("A: INT", "R(A, B) * (A + B)")]:
        m = _map(keys, text)
        assert evaluate_columns(m, _terms(m.definition), {"R": [(1, 2)], "S": [(2, 3)]}, small=0) is None


def test_a_string_utf8_cannot_hold_goes_by_rows():
    """A lone surrogate (a str Python holds, e.g. from JSON's ``"\\ud800"``, that no UTF-8 encodes) is left to the
    row evaluator, which compares it as Python does (Arrow's string column raised UnicodeEncodeError through)."""
    program = parse_program("CREATE TABLE R(A VARCHAR, B INT); CREATE TABLE S(A VARCHAR, C INT);"
                            " DECLARE MAP m[A: VARCHAR] : INT := R(A, B) * S(A, C) * B;")
    m = program.maps[0]
    tables = {"R": [("\ud800", 1), ("a", 2)] * 300, "S": [("\ud800", 5), ("a", 7)]}
    assert evaluate_columns(m, _terms(m.definition), tables, small=0) is None
    assert evaluate_definition(program, m, tables) == {("\ud800",): 300, ("a",): 600}
