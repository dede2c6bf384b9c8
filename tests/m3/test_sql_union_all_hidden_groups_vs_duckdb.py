"""Set operations of grouped aggregated queries whose rows are values (issue 33, docs/m3.md, the row "a set
operation statement of aggregated queries"): DBToaster's ``simple/r_union`` shape (a key that is one column in
one branch and another in the other) under UNION and UNION ALL, UNION ALL of branches grouped by columns they do
not select (``SELECT SUM(b) FROM R GROUP BY a UNION ALL ...``: a row per group of each branch, the group columns
internal keys, a slot per branch, ``m3/compiler/setgroups.py``) and UNION of them (each value once: the values
lifted into keys, the lift bound per part, ``m3/compiler/setlifted.py``).  Against DuckDB under random
inserts and deletes with small domains, both backends (the harness's backend per shape, and both below);
deleting every row empties every map (``m3_harness``)."""

from __future__ import annotations

import pytest
from boreas.m3 import compile_sql
from m3_harness import check_against_duckdb, new_runtime, shape_params

GENERIC = """
CREATE STREAM R(a INT, b INT);
CREATE STREAM S(b INT, c INT);
CREATE STREAM T(n STRING, v INT);
"""
NULLABLE = """
CREATE STREAM R(a INT, b INT NULL);
CREATE STREAM S(b INT NULL, c INT);
"""

SHAPES: dict[str, str] = {
    # a key that is a in one branch and b in the other: equal (key, value) rows from both, one kept by UNION
    "swapped_keys_union": GENERIC + """SELECT a AS k, SUM(b) AS d FROM R GROUP BY a
        UNION SELECT b AS k, SUM(a) AS d FROM R GROUP BY b""",
    "swapped_keys_union_all": GENERIC + """SELECT a AS k, SUM(b) AS d FROM R GROUP BY a
        UNION ALL SELECT b AS k, SUM(a) AS d FROM R GROUP BY b""",
    "swapped_keys_three_branches": GENERIC + """SELECT a AS k, COUNT(*) AS d FROM R GROUP BY a
        UNION SELECT b, COUNT(*) FROM R GROUP BY b UNION SELECT c, COUNT(*) FROM S GROUP BY c""",
    "nullable_keys_union": NULLABLE + """SELECT b AS k, SUM(a) AS d FROM R GROUP BY b
        UNION SELECT b, COUNT(c) FROM S GROUP BY b""",
    "computed_keys_union": GENERIC + """SELECT a + b AS k, SUM(b) AS d FROM R GROUP BY a + b
        UNION SELECT b * 2, COUNT(*) FROM S GROUP BY b * 2""",
    # only values selected: a row per group of each branch, equal values two rows
    "values_only": GENERIC + """SELECT SUM(b) AS d FROM R GROUP BY a
        UNION ALL SELECT SUM(a) FROM R GROUP BY b""",
    "a_key_and_hidden_groups": GENERIC + """SELECT a AS k, SUM(b) AS d FROM R GROUP BY a, b
        UNION ALL SELECT c, COUNT(*) FROM S GROUP BY c""",
    "three_branches_string_join_extremes": GENERIC + """SELECT MAX(b) AS m, COUNT(*) AS n FROM R GROUP BY a
        UNION ALL SELECT MIN(v), SUM(v) FROM T GROUP BY n
        UNION ALL SELECT MAX(s.c), COUNT(*) FROM R r, S s WHERE r.b = s.b GROUP BY r.a, s.c""",
    "arithmetic_group_and_having": GENERIC + """SELECT COUNT(*) AS n FROM R GROUP BY a + b HAVING SUM(a) > 1
        UNION ALL SELECT SUM(c) FROM S GROUP BY b""",
    "nullable_hidden_groups": NULLABLE + """SELECT SUM(a) AS s, COUNT(b) AS n FROM R GROUP BY b
        UNION ALL SELECT SUM(b), COUNT(*) FROM S GROUP BY c""",
    # UNION of such branches: each value (with its keys) once, whichever group or branch gives it (lifted keys)
    "values_only_union": GENERIC + """SELECT SUM(b) AS d FROM R GROUP BY a
        UNION SELECT SUM(a) FROM R GROUP BY b""",
    "union_key_and_values_three_branches": GENERIC + """SELECT a AS k, SUM(b) AS d, COUNT(*) AS n FROM R
        GROUP BY a, b UNION SELECT c, MAX(b), COUNT(*) FROM S GROUP BY c
        UNION SELECT b, MIN(a), SUM(a) - 1 FROM R GROUP BY b HAVING COUNT(*) < 3""",
    "union_over_a_join_with_having": GENERIC + """SELECT COUNT(*) AS n FROM R r, S s WHERE r.b = s.b
        GROUP BY r.a, s.c HAVING SUM(s.c) > 1 UNION SELECT COUNT(*) FROM T GROUP BY n""",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape], examples=8)


ROWS = [("R", (1, 2)), ("R", (2, 1)), ("R", (2, 2)), ("S", (2, 3)), ("S", (1, 3))]


@pytest.mark.parametrize("backend", ["python", "native"])
@pytest.mark.parametrize("shape, want", [
    ("swapped_keys_union", [(1, 2), (2, 3)]),  # (1, 2) from both branches: once
    ("swapped_keys_union_all", [(1, 2), (1, 2), (2, 3), (2, 3)]),  # twice
    ("values_only", [2, 2, 3, 3]),
    ("a_key_and_hidden_groups", [(1, 2), (2, 1), (2, 2), (3, 2)]),  # key 2 with two values
    ("values_only_union", [(2, 1), (3, 1)]),  # 2 and 3 (keys; its count 1), each from two groups of each branch: once
])
def test_equal_rows_and_every_row_deleted(shape, want, backend):
    """Known rows on both backends: two branches' equal rows (one under UNION, two under UNION ALL), one key
    with two values; every row deleted, no row left."""
    program = compile_sql(SHAPES[shape])
    view = next(v for v in program.views if v.name == "Q1")
    rt = new_runtime(program, backend)
    rt.apply_batch([(r, 1, row) for r, row in ROWS])
    assert sorted(_out(view, k, v) for k, v in rt.view("Q1").items()) == sorted(want)
    rt.apply_batch([(r, -1, row) for r, row in ROWS])
    assert rt.view("Q1") == {}


def _out(view, key, value):
    """An output row: the view's output keys and its value (internal keys dropped)."""
    keys = tuple(key[i] for i, k in enumerate(view.keys) if k not in view.internal)
    return keys + (value,) if keys else value


@pytest.mark.parametrize("shape, cost", [("values_only", "first-order"),
                                         ("three_branches_string_join_extremes", "domain-bound"),
                                         ("values_only_union", "domain-bound")])
def test_compile_shows_the_cost_class_and_the_printed_program_reads_back(shape, cost):
    """``boreas compile`` names the view's cost class (a UNION of values reads every part's entries), and the
    printed program, its union of lifted maps included, reads back as the same program."""
    from boreas.m3.compiler.pipeline import compile_to_text
    from boreas.m3.printer import format_program
    from boreas.m3.syntax import parse_program

    assert compile_to_text(SHAPES[shape]).splitlines()[0].startswith(f"-- view Q1: {cost}")
    program = compile_sql(SHAPES[shape])
    assert parse_program(format_program(program)) == program


@pytest.mark.parametrize("query, says", [
    ("SELECT SUM(b) AS d FROM R GROUP BY a EXCEPT SELECT SUM(a) FROM R GROUP BY b",
     "unsupported EXCEPT of aggregated queries grouped by columns they do not select"),
    ("SELECT SUM(b) AS d FROM R GROUP BY a INTERSECT SELECT SUM(a) FROM R GROUP BY b",
     "unsupported INTERSECT of aggregated queries grouped by columns they do not select"),
    ("SELECT SUM(b) AS d FROM R GROUP BY a UNION ALL SELECT SUM(v) FROM T GROUP BY UPPER(n)",
     "grouped by UPPER"),
    ("SELECT SUM(b) AS d FROM R UNION ALL SELECT SUM(a) FROM R GROUP BY b", "mixing branches with and without"),
    ("SELECT a AS k, SUM(b) AS d FROM R GROUP BY k UNION ALL SELECT b, SUM(a) FROM R GROUP BY b",
     "grouped by exactly its selected columns"),
])
def test_what_is_not_built_is_refused_by_name(query, says):
    with pytest.raises(Exception, match=says):
        compile_sql(GENERIC + query)


def test_a_union_of_values_over_nullable_columns_is_refused_by_name():
    with pytest.raises(Exception, match="over nullable columns .* a NULL value is no lifted key"):
        compile_sql(NULLABLE + "SELECT SUM(b) AS d FROM R GROUP BY a UNION SELECT COUNT(*) FROM S GROUP BY c")
