"""A correlated SUM subquery multiplied into the one outer SUM (issue 33) agrees with DuckDB after every batch of inserts and deletes, on both backends.

``SELECT SUM(x * (SELECT SUM(e) FROM S s WHERE c)) FROM R r WHERE w`` is
compiled as the sum over the join, ``SUM(x * e) FROM R r, S s WHERE w AND
c`` (:mod:`boreas.m3.compiler.sumjoin`: a sum of sums with no group variable
between them is one sum over the product), so any correlation (equalities,
comparisons, several columns) is a join condition.  Shapes: a self-join count
per key (DBToaster's shape), a range correlation, an outer factor and
filter, an inner join of two relations, an outer JOIN ... ON, a negated
factor.  Every view equals DuckDB's (NULL where no outer row has inner rows,
as SQL), every map its definition, and deleting every row empties every map.
"""

from __future__ import annotations

import re

import pytest
from boreas.m3 import CompileError, compile_to_text
from m3_harness import check_against_duckdb, shape_params

SCHEMA = """
CREATE STREAM R(a INT, b INT);
CREATE STREAM S(a INT, c INT);
"""

SHAPES: dict[str, str] = {
    "self_join_count_per_key": SCHEMA + "SELECT SUM((SELECT SUM(1) FROM R r2 WHERE r1.a = r2.a)) AS s FROM R r1",
    "range_correlated": SCHEMA + "SELECT SUM((SELECT SUM(S.c) FROM S WHERE S.a < r.a)) AS s FROM R r",
    "outer_factor_and_filter": SCHEMA + """SELECT SUM(r.b * (SELECT SUM(S.c - 1) FROM S WHERE S.a = r.a AND S.c <> r.b))
        AS s FROM R r WHERE r.b > 0""",
    "inner_join_of_two": SCHEMA + """SELECT SUM(-(SELECT SUM(r2.b * s.c) FROM R r2, S s WHERE r2.a = s.a
        AND s.c = r1.b)) AS s FROM R r1""",
    "outer_join_on": SCHEMA + """SELECT SUM(S.c * (SELECT SUM(r2.b) FROM R r2 WHERE r2.a = r1.b)) AS s
        FROM R r1 JOIN S ON r1.a = S.a""",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


def test_the_sum_over_the_join_is_first_order():
    text = compile_to_text(SHAPES["self_join_count_per_key"])
    assert text.splitlines()[0].startswith("-- view Q1: first-order"), text.splitlines()[0]


@pytest.mark.parametrize("sql", [
    # grouped: a group whose rows have no inner rows is a row with NULL in SQL, no row of the join
    SCHEMA + "SELECT r1.b, SUM((SELECT SUM(1) FROM R r2 WHERE r1.a = r2.a)) AS s FROM R r1 GROUP BY r1.b",
    # COUNT: over no outer rows SQL's SUM is NULL, the join's COUNT 0
    SCHEMA + "SELECT SUM((SELECT COUNT(*) FROM R r2 WHERE r1.a = r2.a)) AS s FROM R r1",
    # the subquery beside another aggregate: the join would count the outer rows anew
    SCHEMA + "SELECT SUM((SELECT SUM(1) FROM R r2 WHERE r1.a = r2.a)) AS s, COUNT(*) AS n FROM R r1",
    # an unqualified inner column could bind differently in the joined FROM
    SCHEMA + "SELECT SUM((SELECT SUM(c) FROM S WHERE S.a = r.a)) AS s FROM R r",
])
def test_other_shapes_stay_refused(sql):
    """Not rewritten (:func:`boreas.m3.compiler.sumjoin.joined` is None): the subquery in the SELECT list is refused
    where it stands, by the general rule."""
    with pytest.raises(CompileError, match=re.escape("unsupported subquery (nested SELECT) here: a subquery may "
                                                     "stand in WHERE only as a conjunct")):
        compile_to_text(sql)
