"""Two spellings DuckDB reads and the compiler now does too, checked against DuckDB after every batch.

* ``c IS [NOT] NULL`` of a column declared without ``NULL``: such a column never holds NULL, so the condition is
  FALSE (TRUE), in WHERE, under NOT, in OR and in a CASE (``m3/compiler/resolve.py``); a nullable column's reads
  its indicator (tests/m3/test_sql_nulls_vs_duckdb.py).
* ``SUBSTRING(s, 0, n)``: SQL's positions start at 1, so it is the first ``n - 1`` characters, as DuckDB reads it
  (``m3/compiler/sugar.py``).

Random workloads over small domains (``m3_harness``), both backends.
"""

from __future__ import annotations

import pytest
from m3_harness import check_against_duckdb, shape_params

GENERIC = """
CREATE STREAM R(a INT, b INT, c DOUBLE);
CREATE STREAM T(k INT, s STRING);
"""

SHAPES: dict[str, str] = {
    "is_null_empties_a_rows_view": GENERIC + "SELECT R.a, R.b FROM R WHERE R.c IS NULL",
    "is_not_null_keeps_every_row": GENERIC + "SELECT R.a, COUNT(*) AS n FROM R WHERE R.b IS NOT NULL GROUP BY R.a",
    "is_null_in_or_and_under_not": GENERIC + """SELECT R.a, SUM(R.c) AS s FROM R
        WHERE (R.b IS NULL OR R.b > 1) AND NOT (R.a IS NULL) GROUP BY R.a""",
    "is_null_in_a_case": GENERIC + """SELECT R.a, SUM(CASE WHEN R.c IS NULL THEN 10 ELSE R.b END) AS s FROM R
        GROUP BY R.a""",
    "substring_from_zero_as_key": GENERIC + """SELECT SUBSTRING(T.s, 0, 2) AS p, COUNT(*) AS n FROM T
        GROUP BY SUBSTRING(T.s, 0, 2)""",
    "substring_from_zero_in_where": GENERIC + """SELECT T.k, COUNT(*) AS n FROM T
        WHERE SUBSTRING(T.s, 0, 3) = SUBSTRING(T.s, 1, 2) AND SUBSTRING(T.s, 0) <> 'x' GROUP BY T.k""",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES, fast=1))  # one quick shape: the fast tier is at its limit
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])
