"""Shapes DBToaster's query suite writes (issue 33) agree with DuckDB after every batch of inserts and deletes.

Block comments before a statement, or standing alone between statements, are no statement
(``m3/compiler/positions.py``).  A constant selected in a view without aggregates is a value column of
the view, the same in every row (``m3/compiler/outputs.py``), and so is arithmetic over columns whose terms
cancel (``a * 0``: ``m3/compiler/arithkey.py``).  A WHERE in a query without FROM is a condition
on its one row (``m3/compiler/fromless.py``).  A derived table's GROUP BY may name a selected column
unqualified, qualified or by its alias (``m3/compiler/groupnames.py``); an alias that is also an input
column groups by the column, as SQL does, and stays refused where that column is not selected.  ``*`` over a
grouped derived table is its named columns (``m3/compiler/stars.py``).  An uncorrelated scalar subquery in the
SELECT list, inside SUM/AVG or beside aggregates, is a part of its own (``m3/compiler/selectsub.py``; one correlated
with group columns only is one value per group: that part grouped by them), and so is
a scalar subquery over relations in a query over a grouped derived table, grouped by the columns it is
correlated on (TPC-H Q11's shapes, ``m3/compiler/liftscope.py``).  A WHERE that never holds makes a view
that is always empty, not a refusal (``m3/compiler/normalize.py``).  Random workloads over small domains (``m3_harness``), both backends:
every view equals DuckDB's after every batch, every map its definition, deleting every row empties every map.
"""

from __future__ import annotations

import pytest
from boreas.m3 import compile_sql
from m3_harness import check_against_duckdb, shape_params

GENERIC = """
CREATE STREAM R(a INT, b INT, c DOUBLE);
CREATE STREAM S(b INT, d INT, e DOUBLE);
"""

SHAPES: dict[str, str] = {
    "comment_before_declaration": """/* a note before the first statement */
        CREATE STREAM R(a INT, b INT, c DOUBLE);
        /* one between */ CREATE STREAM S(b INT, d INT, e DOUBLE);
        SELECT R.a, SUM(S.e) AS s FROM R, S WHERE R.b = S.b GROUP BY R.a;
        /* a query commented out, alone after the last statement: SELECT 1 */""",
    # constants selected in a view without aggregates: value columns, the same in every row (m3/compiler/outputs.py)
    "constants_in_rows": GENERIC + "SELECT 2.5 AS x, R.a, 3 * 2 AS y, 'k' AS z FROM R WHERE R.b < 2",
    "constant_arithmetic_in_rows": GENERIC + "SELECT R.a * 0 AS z, R.b, (R.b - R.b) * 2 + 1 AS w FROM R WHERE R.a > 0",
    "constants_in_rows_of_a_join": GENERIC + """SELECT 7 AS k, S.b, (R.a * (2 - 0.5)) AS z FROM R, S s2, S
        WHERE 3 > s2.b + s2.d AND R.b = S.d""",
    # a WHERE in a query without FROM: a condition on its one row (m3/compiler/fromless.py)
    "fromless_where_in": GENERIC + "SELECT 1 AS one WHERE 2 IN (SELECT R.a FROM R WHERE R.b > 0)",
    "fromless_where_exists_and_compare": GENERIC + """SELECT (SELECT SUM(c) FROM R) AS x WHERE NOT EXISTS
        (SELECT * FROM S WHERE S.d = 1) AND (SELECT COUNT(*) FROM S) >= (SELECT MAX(a) FROM R) AND 1 < 2""",
    "fromless_where_never_holds": GENERIC + "SELECT (SELECT COUNT(*) FROM R) AS n WHERE 2 > 3",
    # a derived table's GROUP BY naming a selected column another way (m3/compiler/groupnames.py)
    "derived_group_by_alias": GENERIC + """SELECT foo, n FROM (SELECT R.a AS foo, COUNT(*) AS n FROM R
        GROUP BY foo) q WHERE n > 1""",
    "derived_group_by_unqualified": GENERIC + """SELECT s.n FROM (SELECT R.b, SUM(R.c) AS n FROM R GROUP BY b) s
        WHERE s.b = 1""",
    "derived_group_by_qualified_joined": GENERIC + """SELECT S.d, r.n FROM (SELECT b, COUNT(*) AS n FROM R
        GROUP BY R.b) r, S WHERE S.b = r.b AND r.n > 1""",
    # * and alias.* over a grouped derived table: its named columns (m3/compiler/stars.py)
    "star_over_grouped_derived": GENERIC + """SELECT * FROM (SELECT R.a, COUNT(*) AS n FROM R GROUP BY R.a) s
        WHERE s.a = 1""",
    "alias_star_over_grouped_derived_joined": GENERIC + """SELECT t.*, S.d FROM S, (SELECT R.b AS k, SUM(R.c) AS n
        FROM R GROUP BY R.b) t WHERE S.b = t.k""",
    # uncorrelated scalar subqueries in the SELECT list, inside SUM/AVG or beside aggregates (m3/compiler/selectsub.py)
    "subquery_factor_in_sum": GENERIC + "SELECT a, SUM(b * (SELECT SUM(S.d) FROM S)) AS s FROM R GROUP BY a",
    "subquery_terms_in_sum_and_avg": GENERIC + """SELECT R.a, SUM(R.b * (SELECT COUNT(*) FROM S) - 2 * (SELECT
        MAX(S.d) FROM S WHERE S.e > 0) + 1) AS s, AVG(R.c + (SELECT SUM(S.b) FROM S)) AS m FROM R GROUP BY R.a""",
    "subquery_times_aggregate": GENERIC + """SELECT r1.b, (SELECT COUNT(*) FROM R r2) * SUM(r1.a) AS x,
        COUNT(*) AS n FROM R r1 WHERE r1.c < 1 GROUP BY r1.b""",
    # ... correlated with group columns only: one value per group, a part grouped by the correlation columns
    "correlated_subquery_factor_in_sum": GENERIC + """SELECT r1.a, r1.b, SUM(r1.c * (SELECT SUM(S.e) FROM S
        WHERE S.d = r1.b AND S.e > 0)) AS s, COUNT(*) AS n FROM R r1 GROUP BY r1.a, r1.b""",
    "correlated_subquery_beside_aggregate": GENERIC + """SELECT R.b, SUM(R.a) - (SELECT COUNT(*) FROM S
        WHERE R.b = S.b) AS x FROM R GROUP BY R.b""",
    "subquery_in_ungrouped_sum": GENERIC + "SELECT SUM((SELECT SUM(1) FROM S)) AS s FROM R",
    # a scalar subquery over relations in a query over a grouped derived table, uncorrelated or correlated with
    # its group columns (TPC-H Q11's shapes): a part grouped by the correlation columns (m3/compiler/liftscope.py)
    "grouped_derived_vs_uncorrelated_subquery": GENERIC + """SELECT p.a, SUM(p.v) AS q FROM (SELECT R.a, SUM(R.c)
        AS v FROM R GROUP BY R.a) p WHERE p.v > (SELECT SUM(S.e) * 0.5 FROM S) GROUP BY p.a""",
    "grouped_derived_vs_correlated_subquery": GENERIC + """SELECT p.a, p.b, SUM(p.v) AS q FROM (SELECT R.a, R.b,
        SUM(R.c) AS v FROM R GROUP BY R.a, R.b) p WHERE p.v > (SELECT SUM(S.e) FROM S WHERE S.b = p.b AND S.d > 0)
        GROUP BY p.a, p.b""",
    "grouped_derived_vs_correlated_count": GENERIC + """SELECT p.a, COUNT(*) AS k FROM (SELECT R.a, COUNT(*) AS n
        FROM R GROUP BY R.a) p WHERE NOT p.n < (SELECT COUNT(*) FROM S WHERE p.a = S.d) GROUP BY p.a""",
    # a WHERE or value that never holds: an always-empty (or always 0) view is still a view (m3/compiler/normalize.py)
    "where_never_holds": GENERIC + "SELECT a, b FROM R WHERE NOT EXISTS (SELECT 2)",
    "where_never_holds_grouped": GENERIC + "SELECT a, SUM(c) AS s FROM R WHERE FALSE OR 1 = 2 GROUP BY a",
    "case_never_holds": GENERIC + "SELECT a, SUM(CASE WHEN 1 = 2 THEN c ELSE 0 END) AS s FROM R GROUP BY a",
    "sum_of_zero": GENERIC + "SELECT SUM(0) AS s FROM R",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])


def test_a_comment_before_create_stream_declares_a_stream():
    program = compile_sql("/* streams; */ CREATE STREAM R(a INT); /* the view */ SELECT SUM(a) AS s FROM R; /* SELECT 1; */")
    assert [(r.name, r.kind) for r in program.relations] == [("R", "STREAM")]
    assert [v.name for v in program.views] == ["Q1"]


def test_a_group_alias_shadowed_by_a_column_groups_by_the_column():
    from boreas.m3 import CompileError
    with pytest.raises(CompileError, match="unsupported column R.b AS a of a grouped derived table"):
        compile_sql(GENERIC + "SELECT x FROM (SELECT R.b AS a, COUNT(*) AS x FROM R GROUP BY a) s")


@pytest.mark.parametrize("backend", ["python", "auto"])
@pytest.mark.parametrize("shape", ["subquery_factor_in_sum", "subquery_times_aggregate",
                                   "correlated_subquery_factor_in_sum", "grouped_derived_vs_correlated_subquery",
                                   "fromless_where_in"])
def test_changes_name_every_row_a_subquery_moves(shape, backend):
    """A batch that changes only a subquery's relation changes every row that reads its value: ``changes()``
    names each of them (the rows are re-read, ``boreas.m3.over.rereads``), with the view's new value."""
    import random

    from boreas.m3 import Runtime

    rt = Runtime(compile_sql(SHAPES[shape]), backend=backend)
    rng = random.Random(7)
    live: dict[str, list] = {"R": [], "S": []}
    for step in range(30):
        before = {name: dict(rt.view(name).items()) for name in (v.name for v in rt.program.views)}
        rel = "S" if step % 3 else "R"
        if live[rel] and rng.random() < 0.3:
            row = live[rel].pop(rng.randrange(len(live[rel])))
            rt.apply_batch([(rel, -1, row)])
        else:
            row = (rng.randrange(3), rng.randrange(3), rng.choice([0.0, 0.5, 1.0]))
            live[rel].append(row)
            rt.apply_batch([(rel, 1, row)])
        changes = rt.changes()
        for name, old in before.items():
            new = dict(rt.view(name).items())
            moved = {k for k in set(old) | set(new) if old.get(k) != new.get(k)}
            reported = dict(changes.get(name, []))
            assert moved <= set(reported), f"{name}: rows {sorted(moved - set(reported))} changed unreported"
            for k in moved:  # the new value, or 0 (all zeros) for a row that left the view
                value = reported[k]
                assert value == new[k] if k in new else not any(value if isinstance(value, tuple) else (value,))


def test_create_function_is_refused_naming_the_function_and_why():
    """An external function outside the built-in library (``cos`` is in it: tests/m3/test_sql_library_vs_duckdb.py)
    is refused naming it, saying why and what the library has."""
    from boreas.m3 import CompileError
    with pytest.raises(CompileError, match=r"unsupported CREATE FUNCTION blend AS EXTERNAL 'blend': Boreas calls "
                                           r"no external function; the built-in library has .*COS"):
        compile_sql(GENERIC + "CREATE FUNCTION blend(x double) RETURNS int AS EXTERNAL 'blend'; "
                    "SELECT SUM(a) AS s FROM R")
