"""``x BETWEEN low AND high`` with bounds read from another relation's columns (a range join, issue 33: an
employee's salary within a grade's bounds) agrees with DuckDB on both backends: in a view of rows, grouped, with
NOT, with arithmetic bounds, beside an equi-join, over FLOAT columns, grouped by a quotient key (``e.pay / 2``).

Small domains make rows fall on both bounds (BETWEEN includes them), and empty ranges (``lo > hi``) occur.
Deleting every row empties every map (the harness asserts it).
"""

from __future__ import annotations

import pytest
from hypothesis import strategies as st
from m3_harness import check_against_duckdb, shape_params

GENERIC = """
CREATE STREAM E(id INT, g INT, pay FLOAT);
CREATE STREAM G(g INT, lo FLOAT, hi FLOAT);
"""

SHAPES: dict[str, str] = {
    "rows_within_bounds": GENERIC + "SELECT e.id, s.g AS grade FROM E e, G s WHERE e.pay BETWEEN s.lo AND s.hi",
    "unqualified_bounds": GENERIC + "SELECT id, G.g AS grade FROM E, G WHERE pay BETWEEN lo AND hi",
    "grouped_by_grade": GENERIC + """SELECT s.g AS grade, SUM(e.pay) AS total, COUNT(*) AS n FROM E e, G s
        WHERE e.pay BETWEEN s.lo AND s.hi GROUP BY s.g""",
    "not_between": GENERIC + "SELECT e.id, COUNT(*) AS n FROM E e, G s WHERE e.pay NOT BETWEEN s.lo AND s.hi GROUP BY e.id",
    "arithmetic_bound": GENERIC + """SELECT e.id, s.g AS grade FROM E e, G s
        WHERE e.pay BETWEEN s.lo AND s.lo + 1""",
    "beside_an_equi_join": GENERIC + """SELECT e.id, SUM(s.hi) AS t FROM E e JOIN G s ON e.g = s.g
        WHERE e.pay BETWEEN s.lo AND s.hi GROUP BY e.id""",
    "grouped_by_a_quotient_key": GENERIC + """SELECT e.pay / 2 AS h, COUNT(*) AS n FROM E e, G s
        WHERE e.pay BETWEEN s.lo AND s.hi GROUP BY e.pay / 2""",
    "constant_between_columns": GENERIC + "SELECT s.g AS grade, COUNT(*) AS n FROM G s WHERE 2 BETWEEN s.lo AND s.hi GROUP BY s.g",
}


def _small(column: str, t: str):
    """A few values, so rows meet the bounds exactly and ranges are sometimes empty."""
    return st.integers(0, 3) if t != "FLOAT" else st.integers(0, 8).map(lambda x: x / 2)


@pytest.mark.parametrize("shape", shape_params(SHAPES, fast=1))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape], value=_small)


def test_compile_shows_the_cost_class():
    """``boreas compile`` names the range join domain-bound: each event loops over the other side's map."""
    from boreas.m3.compiler.pipeline import compile_to_text

    first = compile_to_text(SHAPES["rows_within_bounds"]).splitlines()[0]
    assert first.startswith("-- view Q1: domain-bound: a comparison between columns (LO <= PAY, PAY <= HI)")
