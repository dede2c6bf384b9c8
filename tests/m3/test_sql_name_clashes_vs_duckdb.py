"""FROM items named alike up to case answer as in DuckDB: a read one item answers is that item's, one both could
answer is refused naming the clash; names alike across scopes (a CTE hiding a stream, a subquery's ``FROM T``
hiding an outer ``t``) answer as DuckDB does.

Names of relations, aliases and CTEs are case-insensitive (quoted or not, as in DuckDB).  ``FROM (SELECT ...) t, T``
names two items ``t``: DuckDB reads ``t.k`` from the one that has a column ``k`` and refuses ``t.g`` when both have
one ("ambiguous reference to table").  Boreas refused both with an unrelated error (``unknown column T.g``, "joined
with relations on some of its group columns") or, for a derived table of rows, compiled a view joining the derived
table with itself; now it names the items apart first (:mod:`boreas.m3.compiler.clashes`).  The accepted shapes run random insert/delete batches on both backends
(``m3_harness``): every view equals DuckDB's after every batch.
"""

from __future__ import annotations

import re

import duckdb
import pytest
from boreas.m3 import CompileError, compile_sql
from m3_harness import check_against_duckdb

DDL = "CREATE STREAM T(g INT, v INT); CREATE STREAM U(g INT, w INT);\n"
GROUPED = "(SELECT g, SUM(w) AS sw FROM U GROUP BY g)"
ROWS = "(SELECT g, w FROM U)"

CLASH = ("the alias t of a derived table and the stream T name the same relation in FROM and both have a column g: "
         "names are case-insensitive (quoted or not), so ")
CTE_CLASH = "the CTE t and T (the CTE t, which hides the stream T) name the same relation in FROM and both have a column g"

REFUSED = [
    # the reported shape: a grouped derived table t joined with the stream T
    (f"SELECT t.g, SUM(T.v) AS s FROM {GROUPED} t, T WHERE t.g = T.g GROUP BY t.g", CLASH),
    (f"SELECT t.g, SUM(T.v) AS s FROM T, {GROUPED} t WHERE t.g = T.g GROUP BY t.g",
     "the stream T and the alias t of a derived table name the same relation in FROM and both have a column g"),
    (f"SELECT t.g, SUM(T.v) AS s FROM {GROUPED} t JOIN T ON t.g = T.g GROUP BY t.g", CLASH),
    # a derived table of rows: was compiled, t.g = T.g read as U.g = U.g
    (f"SELECT t.g, COUNT(*) AS n FROM {ROWS} t, T WHERE t.g = T.g GROUP BY t.g", CLASH),
    (f'SELECT "t".g, COUNT(*) AS n FROM {ROWS} "t", "T" WHERE "t".g = "T".g GROUP BY "t".g', CLASH),
    (f"SELECT T.g, COUNT(*) AS n FROM {ROWS} T, T WHERE T.g = T.g GROUP BY T.g",
     "the alias T of a derived table and the stream T name the same relation in FROM and both have a column g: "
     "T.g could read either"),
    (f"SELECT t.*, T.v FROM {ROWS} t, T", "so t.* could read either"),
    (f"SELECT * FROM {ROWS} t, T", "so * could read either"),
    # a CTE t hides the stream T: FROM t, T reads the CTE twice under one name
    (f"WITH t AS {GROUPED} SELECT t.g, SUM(T.v) AS s FROM t, T WHERE t.g = T.g GROUP BY t.g", CTE_CLASH),
    (f"WITH t AS {ROWS} SELECT t.g, COUNT(*) AS n FROM t, T WHERE t.g = T.g GROUP BY t.g", CTE_CLASH),
    # relations and aliases alike, and a clash inside a subquery
    ("SELECT t.g, COUNT(*) AS n FROM U t, T WHERE t.g = T.g GROUP BY t.g",
     "the alias t of stream U and the stream T name the same relation in FROM"),
    ("SELECT COUNT(*) AS n FROM U WHERE EXISTS (SELECT t.g FROM (SELECT g FROM U) t, T WHERE t.g = T.g)", CLASH),
    (f"SELECT T.w, COUNT(*) AS n FROM {ROWS} t, T WHERE EXISTS (SELECT * FROM U x WHERE x.g = T.g) GROUP BY T.w",
     "so T.g could read either"),
]


@pytest.mark.parametrize("sql, message", REFUSED)
def test_a_clash_is_refused_naming_both_items(sql, message):
    with pytest.raises(CompileError, match=re.escape(message)) as e:
        compile_sql(DDL + sql)
    assert e.value.message.endswith("rename one in view Q1"), e.value.message


@pytest.mark.parametrize("sql", [sql for sql, _ in REFUSED])
def test_duckdb_refuses_the_clashes_too(sql):
    con = duckdb.connect()
    con.execute(DDL.replace("STREAM", "TABLE"))
    with pytest.raises(duckdb.BinderException, match="(?i)ambiguous|duplicate"):
        con.execute(sql)


SHAPES: dict[str, str] = {
    # t and T told apart by their columns, as DuckDB does (was: unknown column T.g)
    "clash_read_by_column": DDL + """SELECT t.k, SUM(T.v * t.sw) AS s
        FROM (SELECT g AS k, SUM(w) AS sw FROM U GROUP BY g) t, T WHERE t.k = T.g GROUP BY t.k""",
    "clash_rows_read_by_column": DDL + f"""SELECT T.w, COUNT(*) AS n FROM {ROWS} t, T
        WHERE t.w = T.v AND T.v < 3 GROUP BY T.w""",
    "clash_cte_count": DDL + f"WITH t AS {ROWS} SELECT COUNT(*) AS n FROM t, T",
    "clash_correlated_read": DDL + f"""SELECT T.w, COUNT(*) AS n FROM {ROWS} t, T
        WHERE EXISTS (SELECT * FROM U x WHERE x.w = T.v) GROUP BY T.w""",
    # the derived table or CTE named apart from the stream
    "grouped_derived_d": DDL + f"SELECT d.g, SUM(T.v) AS s FROM {GROUPED} d, T WHERE d.g = T.g GROUP BY d.g",
    "grouped_derived_value": DDL + f"""SELECT d.g, SUM(T.v * d.sw) AS s FROM {GROUPED} AS d, T
        WHERE d.g = T.g GROUP BY d.g""",
    "rows_derived_d": DDL + f"SELECT d.g, SUM(T.v) AS s FROM {ROWS} d, T WHERE d.g = T.g GROUP BY d.g",
    "stream_aliased_apart": DDL + f"SELECT t.g, COUNT(*) AS n FROM {ROWS} t, T x WHERE t.g = x.g GROUP BY t.g",
    "grouped_cte_d": DDL + f"WITH d AS {GROUPED} SELECT d.g, SUM(T.v) AS s FROM d, T WHERE d.g = T.g GROUP BY d.g",
    # a CTE hides the stream of its name (up to case); its body still reads the stream
    "cte_hides_stream": DDL + f"WITH t AS {ROWS} SELECT T.g, COUNT(*) AS n FROM T GROUP BY T.g",
    "cte_reads_the_stream_it_hides": DDL + "WITH t AS (SELECT g, v FROM T WHERE v > 0) "
                                           "SELECT g, SUM(v) AS s FROM T GROUP BY g",
    # a subquery's FROM T hides the outer derived table t: T.x and t.x in it are T's
    "exists_hides_derived": DDL + f"""SELECT t.g, COUNT(*) AS n FROM {ROWS} t
        WHERE EXISTS (SELECT * FROM T WHERE T.g = 1) GROUP BY t.g""",
    "exists_hides_derived_both": DDL + f"""SELECT t.g, COUNT(*) AS n FROM {ROWS} t
        WHERE EXISTS (SELECT * FROM T WHERE T.g = t.g) GROUP BY t.g""",
    "in_hides_derived": DDL + f"""SELECT t.g, COUNT(*) AS n FROM {ROWS} t
        WHERE t.w IN (SELECT T.v FROM T WHERE T.g = 2) GROUP BY t.g""",
    "exists_hides_grouped_derived": DDL + f"""SELECT SUM(sw) AS total FROM {GROUPED} t
        WHERE EXISTS (SELECT * FROM T WHERE T.g = 1)""",
}


#: The quick tier's shapes (make test-fast; conftest.py gives them one backend each): a read told apart by its
#: columns and a subquery's ``FROM T`` hiding the outer ``t``; make test runs every shape on both backends.
QUICK = ("clash_read_by_column", "exists_hides_derived_both")


@pytest.mark.parametrize("shape", [name if name in QUICK else pytest.param(name, marks=pytest.mark.slow)
                                   for name in sorted(SHAPES)])
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape])
