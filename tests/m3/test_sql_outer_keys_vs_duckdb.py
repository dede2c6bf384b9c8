"""A padded column as a key of an outer join agrees with DuckDB under NULL-heavy random inserts and deletes
(issue 33 item 3, docs/m3.md "Outer joins": a padded key is a constant key of its part, :mod:`.outerkeys`).

``SELECT s.c, COUNT(*) FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY s.c``: the rows of ``r`` without a match
are the group ``s.c = NULL``, read as None (its indicator an internal key), apart from the group ``0``.  LEFT,
RIGHT and FULL; a padded key beside a preserved key; over columns that are not nullable and nullable ones; a
view of rows; MIN/MAX and HAVING beside padded keys (a padded key read in HAVING, NULL in the group NULL); padded
STRING and DATE keys, their constant the type's zero, with '' and 1970-01-01 among the values.  Each
shape runs on both backends; after every batch the maps equal their definitions, deleting every row empties
every map, and each output row is DuckDB's, NULLs as None (:mod:`null_harness`).
"""

from __future__ import annotations

import datetime

import pytest
from boreas.m3 import compile_sql
from boreas.m3.errors import CompileError
from hypothesis import strategies as st
from m3_harness import new_runtime, shape_params
from null_harness import check_rows_against_duckdb, null_heavy

PLAIN = """
CREATE STREAM R(a INT, e INT);
CREATE STREAM S(e INT, f INT);
"""

NULLABLE = """
CREATE STREAM R(a INT, b INT NULL, c FLOAT NULL);
CREATE STREAM S(b INT NULL, d INT);
"""

TEXT = """
CREATE STREAM R(a INT, e INT);
CREATE STREAM U(e INT, name STRING, d DATE, n STRING NULL);
"""


def zeros_too(column, t):
    """:func:`null_heavy`, with the zeros a padded STRING or DATE key's constant is ('' and 1970-01-01) among
    the values, so the group NULL must stay apart from a real '' (its indicator key)."""
    if t == "STRING":
        s = st.sampled_from(["", "A", "B"])
        return st.one_of(st.none(), s) if column == "n" else s
    if t == "DATE":
        return st.sampled_from([datetime.date(1970, 1, 1), datetime.date(1995, 3, 15)])
    return null_heavy(column, t)


TEXT_SHAPES: dict[str, str] = {  # a padded STRING or DATE key: its type's zero the constant of its part
    "left_padded_string_key": TEXT + """SELECT u.name, COUNT(*) AS n, SUM(r.a) AS t FROM R r
        LEFT JOIN U u ON r.e = u.e GROUP BY u.name""",
    "full_padded_date_and_string_keys": TEXT + """SELECT r.a, u.d, u.name, COUNT(*) AS c FROM R r
        FULL JOIN U u ON r.e = u.e GROUP BY r.a, u.d, u.name""",
    "right_padded_nullable_string_rows": TEXT + "SELECT u.n, r.a FROM U u RIGHT JOIN R r ON r.e = u.e "
                                                "WHERE u.n IS NULL OR r.a > 0",
    "left_padded_string_key_with_extremes": TEXT + """SELECT u.n, MAX(u.e) AS m, COUNT(*) AS c FROM R r
        LEFT JOIN U u ON r.e = u.e GROUP BY u.n""",
}

SHAPES: dict[str, str] = {
    "left_grouped_by_padded": PLAIN + "SELECT s.f, COUNT(*) AS n FROM R r LEFT JOIN S s ON r.e = s.e GROUP BY s.f",
    "right_grouped_by_padded": PLAIN + """SELECT r.a, COUNT(*) AS n, SUM(s.f) AS t
        FROM R r RIGHT JOIN S s ON r.e = s.e GROUP BY r.a""",
    "full_two_padded_keys": PLAIN + """SELECT r.a, s.f, COUNT(*) AS n, COUNT(r.e) AS k FROM R r FULL JOIN S s
        ON r.e = s.e GROUP BY r.a, s.f""",  # each anti part: a padded key beside a preserved one
    "left_rows_with_padded_column": PLAIN + "SELECT * FROM R LEFT JOIN S USING (e)",  # r.a, e, s.f
    "left_padded_nullable_key": NULLABLE + """SELECT s.b, SUM(s.d) AS t, COUNT(*) AS n FROM R r
        LEFT JOIN S s ON r.a = s.d GROUP BY s.b""",
    "left_padded_float_key": NULLABLE + """SELECT r.c, COUNT(*) AS n, SUM(s.d) AS t FROM S s
        LEFT JOIN R r ON s.d = r.a GROUP BY r.c""",
    "padded_keys_with_extremes_and_having": NULLABLE + """SELECT r.a, s.b, MIN(s.d) AS m, COUNT(*) AS n
        FROM R r LEFT JOIN S s ON r.a = s.d GROUP BY r.a, s.b HAVING MIN(s.d) IS NULL OR COUNT(*) > 1;
        SELECT s.b, MAX(s.d) AS m, COUNT(*) AS n FROM R r FULL JOIN S s ON r.a = s.d GROUP BY s.b
        HAVING NOT (MAX(s.d) < 2)""",  # MIN/MAX and HAVING (branch sqlJ) over constant keys (sqlK)
    "padded_and_nullable_keys_in_having": PLAIN + """SELECT s.f, COUNT(*) AS n FROM R r LEFT JOIN S s
        ON r.e = s.e GROUP BY s.f HAVING s.f > 1 OR s.f IS NULL AND n > 1;
        SELECT r.a, s.f AS g, COUNT(*) AS n FROM R r FULL JOIN S s ON r.e = s.e GROUP BY r.a, s.f
        HAVING NOT (g < 2) OR r.a IS NULL;""" + NULLABLE.replace("R(", "R2(").replace("S(", "S2(") + """
        SELECT r.b AS k, COUNT(*) AS n, SUM(s.d) AS t FROM R2 r LEFT JOIN S2 s ON r.a = s.d GROUP BY r.b
        HAVING k > 0 OR k IS NULL AND n > 1""",  # a key NULL where its indicator key is 1 (sqlL d)
    "expression_keys_over_padded_columns": PLAIN + """SELECT s.f % 2 AS k, COUNT(*) AS n FROM R r
        LEFT JOIN S s ON r.e = s.e GROUP BY s.f % 2;
        SELECT COALESCE(s.f, 0) AS k, r.a + 1 AS j, COUNT(*) AS n FROM R r LEFT JOIN S s ON r.e = s.e
        GROUP BY COALESCE(s.f, 0), r.a + 1;
        SELECT COALESCE(s.f, r.a) * 2 AS k, s.f - r.a AS d, COUNT(*) AS n FROM R r FULL JOIN S s ON r.e = s.e
        GROUP BY 1, 2""",  # folded per part: NULL (a padded key), a constant, or a key of the part (sqlL e)
    "expression_keys_folding_to_constant_arithmetic": PLAIN + """SELECT COALESCE(s.f, -1) AS k, COUNT(*) AS n
        FROM R r LEFT JOIN S s ON r.e = s.e GROUP BY 1;
        SELECT COALESCE(s.f, 0) + 1 AS k, COUNT(*) AS n FROM R r LEFT JOIN S s ON r.e = s.e GROUP BY 1;
        SELECT COALESCE(s.f, -5) % 2 AS k, -COALESCE(s.f, 1) AS m, COUNT(*) AS n FROM R r
        LEFT JOIN S s ON r.e = s.e GROUP BY 1, 2""",  # -1, 0 + 1, -5 % 2 in the padded part: constants (review)
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_rows_against_duckdb(SHAPES[shape], examples=5)  # small domains: 5 streams of batches cross 0


@pytest.mark.parametrize("shape", shape_params(TEXT_SHAPES))
def test_padded_string_and_date_keys_match_duckdb(shape):
    check_rows_against_duckdb(TEXT_SHAPES[shape], examples=5, value=zeros_too)


def test_a_padded_string_key_is_apart_from_the_empty_string_on_both_backends():
    """A row of R without a match is the group NULL, its constant '' with indicator 1; a real '' of U is the
    group '' (indicator 0); a delete moving a row between them is seen; deleting every row empties every map."""
    program = compile_sql(TEXT + "SELECT u.name, COUNT(*) AS n FROM R r LEFT JOIN U u ON r.e = u.e GROUP BY u.name")
    assert program.view("Q1").keys == ("name", "name__null")
    day = datetime.date(1995, 3, 15)
    for backend in ("python", "native"):
        rt = new_runtime(program, backend)
        rt.apply_batch([("R", 1, (1, 1)), ("R", 1, (2, 2)), ("U", 1, (1, "", day, None))])
        assert rt.view("Q1") == {("", 0): 1, (None, 1): 1}
        rt.apply_batch([("U", -1, (1, "", day, None))])
        assert rt.view("Q1") == {(None, 1): 2}
        rt.apply_batch([("R", -1, (1, 1)), ("R", -1, (2, 2))])
        assert rt.view("Q1") == {} and rt.entries() == 0


def test_the_null_group_is_apart_from_zero_and_empties_on_both_backends():
    """R's row without a match is the group NULL (None), apart from the group 0 of a matched row; a delete
    moving a row between them is seen; deleting every row empties every map."""
    program = compile_sql(PLAIN + "SELECT s.f, COUNT(*) AS n FROM R r LEFT JOIN S s ON r.e = s.e GROUP BY s.f")
    view = program.view("Q1")
    assert view.keys == ("f", "f__null") and view.internal == ("f__null",)
    for backend in ("python", "native"):
        rt = new_runtime(program, backend)
        rt.apply_batch([("R", 1, (1, 1)), ("R", 1, (2, 2)), ("S", 1, (1, 0))])
        assert rt.view("Q1") == {(0, 0): 1, (None, 1): 1}
        rt.apply_batch([("S", -1, (1, 0))])
        assert rt.view("Q1") == {(None, 1): 2}
        rt.apply_batch([("R", -1, (1, 1)), ("R", -1, (2, 2))])
        assert rt.view("Q1") == {} and rt.entries() == 0


def test_an_expression_key_over_a_padded_column_on_both_backends():
    """``s.f % 2`` is NULL for a row of R without a match (the group NULL, apart from 0), ``COALESCE(s.f, 0)``
    is 0 there (the group 0, with the matched rows whose f is even): each part folds the key with its padded
    columns NULL; deleting every row empties every map."""
    for key, want in (("s.f % 2", {(0, 0): 1, (None, 1): 1}), ("COALESCE(s.f, 0)", {(0, 0): 1, (2, 0): 1})):
        program = compile_sql(PLAIN + f"SELECT {key} AS k, COUNT(*) AS n FROM R r LEFT JOIN S s ON r.e = s.e "
                                      f"GROUP BY {key}")
        for backend in ("python", "native"):
            rt = new_runtime(program, backend)
            rt.apply_batch([("R", 1, (1, 1)), ("R", 1, (2, 2)), ("S", 1, (1, 2))])
            assert rt.view("Q1") == want, key
            rt.apply_batch([("R", -1, (1, 1)), ("R", -1, (2, 2)), ("S", -1, (1, 2))])
            assert rt.view("Q1") == {} and rt.entries() == 0


@pytest.mark.parametrize("sql, says", [
    (PLAIN + "SELECT s.f / 2 AS k, COUNT(*) FROM R r LEFT JOIN S s ON r.e = s.e GROUP BY s.f / 2",
     r"unsupported GROUP BY s.f / 2 over an outer join \(columns, and \+ - \* % and COALESCE"),
    (PLAIN + "SELECT ABS(s.f) AS k, COUNT(*) FROM R r LEFT JOIN S s ON r.e = s.e GROUP BY ABS(s.f)",
     r"unsupported GROUP BY ABS\(s.f\) over an outer join"),
    (NULLABLE + "SELECT r.c + 1 AS k, COUNT(*) FROM S s LEFT JOIN R r ON s.d = r.a GROUP BY r.c + 1",
     r"expression key over a padded column is built for \+ - \* % and COALESCE over INT columns only"),
    (NULLABLE + "SELECT s.b + 1 AS k, COUNT(*) FROM R r LEFT JOIN S s ON r.a = s.d GROUP BY s.b + 1",
     r"reading s.b \+ 1 as a key: an expression key over a nullable column"),
])
def test_other_expression_keys_over_an_outer_join_are_refused_by_name(sql, says):
    """``/`` (a DOUBLE), functions, FLOAT columns and nullable columns under an expression key: refused."""
    with pytest.raises(CompileError, match=says):
        compile_sql(sql)


@pytest.mark.parametrize("keys", ["COALESCE(s.f, 0) AS k, s.f AS g", "COALESCE(s.f, r.a) AS k, r.a AS g"])
def test_two_keys_one_part_reads_as_one_are_refused_by_name(keys):
    """``COALESCE(s.f, 0)`` is ``s.f`` where rows match, ``COALESCE(s.f, r.a)`` is ``r.a`` where they do not: two
    keys of the view one key of that part; refused naming both (it named a derived table before)."""
    with pytest.raises(CompileError, match=r"are the same key .* in one of its parts; group by one of them"):
        compile_sql(PLAIN + f"SELECT {keys}, COUNT(*) AS n FROM R r LEFT JOIN S s ON r.e = s.e GROUP BY 1, 2")


def test_a_padded_key_joined_with_another_key_is_refused_by_name():
    """Where rows match, ``r.e = s.e`` makes the two keys one variable of the inner part; where they do not,
    ``s.e`` is NULL: the view's keys cannot be one in some parts only, so the query is refused, naming both."""
    with pytest.raises(CompileError, match=r"reading s.e and r.e as keys: the ON condition makes them one key"):
        compile_sql(PLAIN + "SELECT r.e, s.e AS se, COUNT(*) FROM R r LEFT JOIN S s ON r.e = s.e GROUP BY r.e, s.e")


def test_a_padded_key_read_outside_an_aggregate_is_refused_by_name():
    """``s.f + COUNT(*)`` is NULL in the group NULL; the part would read its constant 0: refused, naming it."""
    with pytest.raises(CompileError, match=r"reading the padded key s.f outside an aggregate"):
        compile_sql(PLAIN + "SELECT s.f, s.f + COUNT(*) AS x FROM R r LEFT JOIN S s ON r.e = s.e GROUP BY s.f")


def test_a_padded_key_in_having_is_null_in_the_group_null_on_both_backends():
    """``HAVING s.f < 1`` is NULL (not TRUE) in the group NULL, whose key is the part's constant 0: the view
    reads the key with its indicator (NULL where it is 1), so only the matched group 0 is kept; ``IS NULL``
    keeps the group NULL alone."""
    for having, want in (("s.f < 1", {(0, 0): 1}), ("s.f IS NULL", {(None, 1): 1})):
        program = compile_sql(PLAIN + "SELECT s.f, COUNT(*) AS n FROM R r LEFT JOIN S s ON r.e = s.e GROUP BY s.f "
                                      f"HAVING {having}")
        for backend in ("python", "native"):
            rt = new_runtime(program, backend)
            rt.apply_batch([("R", 1, (1, 1)), ("R", 1, (2, 2)), ("S", 1, (1, 0))])
            assert rt.view("Q1") == want
            rt.apply_batch([("R", -1, (1, 1)), ("R", -1, (2, 2)), ("S", -1, (1, 0))])
            assert rt.view("Q1") == {} and rt.entries() == 0
