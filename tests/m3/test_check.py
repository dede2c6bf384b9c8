"""The checker: event vs loop variables, and the restricted-M3 rules of seed 001 section 2.1."""

from __future__ import annotations

import pytest
from boreas.m3 import CheckError, check_errors, check_program, classify, parse_program

DECLS = """
CREATE STREAM R(A INT, B INT);
CREATE STREAM S(B INT, C INT);
DECLARE MAP m[A: INT] : INT;
DECLARE MAP n[A: INT, B: INT] : INT;
DECLARE MAP k[B: INT, C: INT] : INT;
"""


def errors(body: str) -> list[str]:
    return [msg for msg, _ in check_errors(parse_program(DECLS + body))]


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
        ("ON +R(A, B) DO { m[C] += IF C < 3 THEN k[B, C] ELSE 0 }", "condition compares loop variable C"),
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
    ],
)
def test_rule_violations_are_reported(body, fragment):
    found = errors(body)
    assert any(fragment in m for m in found), found


def test_check_error_lists_every_problem_with_positions():
    text = DECLS + "ON +R(A, B) DO {\n  m[A] += k[B, C];\n  n[A, D] += 1 }"
    with pytest.raises(CheckError) as info:
        check_program(parse_program(text))
    err = info.value
    assert len(err.errors) == 2
    assert err.errors[0][1].line == 8 and err.errors[1][1].line == 9
    assert "at line 8, col 3" in str(err) and "at line 9, col 3" in str(err)
