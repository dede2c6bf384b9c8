"""The checker: event vs loop variables, and the restricted-M3 rules of seed 001 section 2.1."""

from __future__ import annotations

import re

import pytest
from boreas.m3 import (
    CheckError,
    ParseError,
    check_errors,
    check_program,
    classify,
    parse_program,
)

DECLS = """
CREATE STREAM R(A INT, B INT);
CREATE STREAM S(B INT, C INT);
DECLARE MAP m[A: INT] : INT;
DECLARE MAP n[A: INT, B: INT] : INT;
DECLARE MAP k[B: INT, C: INT] : INT;
"""


def errors(body: str) -> list[str]:
    return [msg for msg, _ in check_errors(parse_program(DECLS + body))]


def test_arithmetic_may_stand_in_a_condition_only():
    """A comparison side may be a sum (``a.price - b.price > 1000``, a loop guard over k's entries); a trigger
    term may not."""
    p = parse_program(DECLS + "ON +R(A, B) DO { m[A] += IF 3 < (A + -1 * C) THEN k[B, C] ELSE 0 }")
    assert check_program(p) is p
    assert any("sums belong in map definitions" in m
               for m in errors("ON +R(A, B) DO { m[A] += IF 3 < (A + B) THEN (A + B) ELSE 0 }"))


def test_valid_program_passes_and_classifies():
    p = parse_program(DECLS + "ON +R(A, B) DO { m[C] += 2 * A * k[B, C]; n[A, B] += IF A < B THEN 1 ELSE 0 }")
    assert check_program(p) is p
    t = p.triggers[0]
    assert classify(t, t.statements[0]) == (["A", "B"], ["C"])
    assert classify(t, t.statements[1]) == (["A", "B"], [])


@pytest.mark.parametrize(
    "body, fragment",
    [
        ("ON +R(A, B) DO { m[A] += k[B, C] }", "loop variable C appears only on the right-hand side"),
        ("ON +R(A, B) DO { n[A, C] += 1 }", "variable C on the left of the statement on n is neither an event variable nor bound"),
        ("ON +S(B, C) DO { n[A, D] += m[A] * n[A, D] }", "loop variable A parametrises 2 maps"),
        ("ON +R(A, B) DO { m[A] += IF C < 3 THEN 1 ELSE 0 }",
         "variable C of the statement on m is neither an event variable nor bound by a right-hand-side map"),
        ("ON +R(A, B) DO { m[A] += IF k[B, B] < 3 THEN 1 ELSE 0 }", "a condition compares variables, constants and arithmetic"),
        ("ON +R(A, B) DO { m[A] += IF (A + k[B, B]) < 3 THEN 1 ELSE 0 }", "a condition compares variables, constants"),
        ("ON +R(A, B) DO { m[A] += m[A] }", "reads the map it updates"),
        ("ON +R(A, B) DO { m[A] += A + B }", "sums belong in map definitions"),
        ("ON +R(A, B) DO { m[A] += R(A, B) }", "relation atom R(...) in a trigger"),
        ("ON +R(A) DO { m[A] += 1 }", "binds 1 event variables but the relation has 2 columns"),
        ("ON +R(A, A) DO { m[A] += 1 }", "repeats an event variable"),
        ("ON +X(A) DO { m[A] += 1 }", "trigger on unknown relation X"),
        ("ON +R(A, B) DO { z[A] += 1 }", "unknown map z"),
        ("ON +R(A, B) DO { m[A, B] += 1 }", "map m takes 1 arguments, not 2"),
        ("ON +R(A, B) DO { m[A] += 1 } ON +R(A, B) DO { m[A] += 2 }", "second trigger for +R"),
        ("DECLARE MAP d[A: INT] : INT := R(A, B) * C;", "variable C of map d is not bound by a relation"),
        ("DECLARE MAP d[A: INT] : INT := S(B, C);", "key A of map d"),
        ("DECLARE MAP d[A: INT] : INT := m[A];", "refers to map m; definitions range over relations only"),
        ("DECLARE MAP m[A: INT] : INT;", "duplicate map m"),
        ("DECLARE VIEW v[a](x := nope);", "names unknown map nope"),
        ("DECLARE VIEW v[a, b](x := m);", "view v has 2 key columns but map m has 1 keys"),
        ("DECLARE MAP s[A: INT] : STRING;", "map values are INT or FLOAT"),
        ("DECLARE VIEW v[a := A](x := m[B]);", "view v reads m at (B); a view reads a map at its key variables (A)"),
        ("DECLARE VIEW v[a := A](x := k[A, A]);", "reads k at (A, A)"),
        ("DECLARE VIEW v[a := A](x := MIN(A : k[A, A]));", "MIN folds A, a key variable of the view"),
        ("DECLARE VIEW v[a := A](x := m[A] + B);", "variable B is not a key variable of the view"),
        ("DECLARE VIEW v[a := A](x := m);", "variable m is not a key variable of the view"),
        ("DECLARE VIEW v[a := A, b := B](x := m[A]);", "key variable B of view v is not a key of any map"),
        ("DECLARE VIEW v[a := A](x := 1);", "view v reads no map"),
    ],
)
def test_rule_violations_are_reported(body, fragment):
    found = errors(body)
    assert any(fragment in m for m in found), found


@pytest.mark.parametrize(
    "body, fragment",
    [
        ("DECLARE VIEW v[a := A](x := m[A]) WHERE m[A] + 1;", "expected a comparison (=, <>, <, <=, >, >=) but found ';'"),
        ("DECLARE VIEW v[a := A](x := MEDIAN(B : k[A, B]));", "expected ')' but found '('"),
        ("DECLARE VIEW v[a := A, b](x := m[A]);", "name the variable of every key column of the view or of none"),
        ("DECLARE VIEW v[a](x := m * 2);", "a view column that is an expression needs the view's key variables"),
        ("DECLARE VIEW v[a](x := m) WHERE m > 1;", "a view with a WHERE condition needs its key variables"),
        ("ON +R(A, B) DO { m[A] += MIN(C : k[A, C]) }", "expected ')' but found ':'"),
    ],
)
def test_view_syntax_errors(body, fragment):
    with pytest.raises(ParseError, match=re.escape(fragment)):
        parse_program(DECLS + body)


def test_view_expressions_outside_views_are_refused():
    from boreas.m3.ast import Const, MapRef, Program, Statement, Trigger, Var
    from boreas.m3.viewnodes import Arith, Fold

    p = parse_program(DECLS)
    bad = Trigger("R", 1, ("A", "B"), (Statement(MapRef("m", (Var("A"),)),
                                                 Arith("/", Const(1), Fold("MIN", "C", MapRef("k", (Var("A"), Var("C")))))),))
    found = [m for m, _ in check_errors(Program(p.relations, p.maps, (), (bad,)))]
    assert any("view expressions (/, -, folds, AND/OR/NOT) belong in views, not triggers" in m for m in found), found


def test_loop_guards_are_accepted():
    """A condition over a loop variable (a comparison between columns) loops over the map's entries and tests each;
    the variable it reads may then be summed out (absent from the left side)."""
    for stmt in ("m[C] += IF C < 3 THEN k[B, C] ELSE 0", "m[A] += IF A < C THEN k[B, C] ELSE 0",
                 "m[A] += k[B, C] * {C <> A}"):
        assert errors("ON +R(A, B) DO { " + stmt + " }") == [], stmt


def test_check_error_lists_every_problem_with_positions():
    text = DECLS + "ON +R(A, B) DO {\n  m[A] += k[B, C];\n  n[A, D] += 1 }"
    with pytest.raises(CheckError) as info:
        check_program(parse_program(text))
    err = info.value
    assert len(err.errors) == 2
    assert err.errors[0][1].line == 8 and err.errors[1][1].line == 9
    assert "at line 8, col 3" in str(err) and "at line 9, col 3" in str(err)


def test_a_passed_program_is_not_checked_again_and_a_failing_one_always_is(monkeypatch):
    """A program that passed is remembered by identity while it lives (a runtime per restore, move and segment
    skips the check); one that failed fails again, and an equal program built anew is checked."""
    import gc

    from boreas.m3 import check as checking

    walks = []
    real = checking.check_errors
    monkeypatch.setattr(checking, "check_errors", lambda p: walks.append(None) or real(p))
    good = parse_program(DECLS + "ON +R(A, B) DO { m[A] += k[B, C] * {C <> A} }")
    assert check_program(good) is good and check_program(good) is good
    assert len(walks) == 1
    bad = parse_program(DECLS + "ON +R(A, B) DO { m[A] += m[A] }")
    for _ in range(2):
        with pytest.raises(CheckError, match="reads the map it updates"):
            check_program(bad)
    assert len(walks) == 3
    again = parse_program(DECLS + "ON +R(A, B) DO { m[A] += k[B, C] * {C <> A} }")
    assert check_program(again) is again and len(walks) == 4
    remembered = len(checking._PASSED)
    del good, again
    gc.collect()
    assert len(checking._PASSED) == remembered - 2  # (an entry leaves with its program)


@pytest.mark.parametrize(
    "body, fragment",
    [
        ("DECLARE VIEW v[a := A](x := TOTAL(B : n[A, B] WHERE 0 < m[B]));", None),
        ("DECLARE VIEW v[a := A](x := TOTAL(A : n[A, B]));", "TOTAL sums over (A): each once, none a key variable"),
        ("DECLARE VIEW v[a := A](x := TOTAL(B : n[A, B] WHERE 0 < k[B, C]));",
         "a TOTAL's condition reads k at (B, C), not at distinct variables among (A, B)"),
        ("DECLARE VIEW v[a := A](x := TOTAL(B : n[A, B] WHERE C < 1));", "variable C of a TOTAL's condition is not in scope"),
        ("DECLARE VIEW v[a := A](x := TOTAL(B : n[A, B] WHERE 0 < m[B] TRACK k[B, C]));",
         "TOTAL tracks k at (B, C): it must be read at the view's key variables"),
        ("DECLARE VIEW v[a := A](x := TOTAL(B : n[A, B] WHERE 0 < TOTAL(C : k[B, C] WHERE A < C)));", None),
        ("DECLARE VIEW v[a := A](x := COUNT(B : n[A, B] WHERE m[B] <= 0 TRACK n[A, B]));", None),
        ("DECLARE VIEW v[a := A](x := MAX(B : n[A, B] WHERE C < 1));", "variable C of a TOTAL's condition is not in scope"),
        ("DECLARE VIEW v[a := A](x := COUNT(B : n[A, B] WHERE 0 < m[B] TRACK k[B, C]));",
         "COUNT tracks k at (B, C): it must be read at the view's key variables"),
    ],
)
def test_total_views_are_checked(body, fragment):
    """TOTAL (nested subqueries): the summed variables are not row variables, the condition reads variables in
    scope (a range TOTAL inside adds its own), a tracking map is read at the row's variables."""
    found = errors(body)
    if fragment is None:
        assert found == []
    else:
        assert any(fragment in e for e in found), found
