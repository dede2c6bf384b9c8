"""A CASE whose WHEN arms read one column and whose ELSE another, in a view of rows (Nexmark q21), against DuckDB.

The front end compiles it as the UNION ALL of two views (m3/compiler/casesplit.py).  Random inserts and
deletes in batches, on both M3 backends; after each batch the view (each row with its multiplicity) is
DuckDB's over the rows present.
"""

from __future__ import annotations

import functools
from collections import Counter

import duckdb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boreas.m3 import Runtime
from boreas.m3.compiler.pipeline import compile_sql
from support.step_batches import replay

STREAM = "CREATE STREAM R(k INT, s VARCHAR, t VARCHAR);\n"
EXTRACT = "REGEXP_EXTRACT(t, '(&|^)id=([^&]*)', 2)"
VIEWS = {  # Boreas's SQL, DuckDB's
    "q21": (f"SELECT k, s, CASE WHEN LOWER(s) = 'apple' THEN '0' WHEN LOWER(s) = 'baidu' THEN '3' ELSE {EXTRACT} "
            f"END AS id FROM R WHERE {EXTRACT} IS NOT NULL OR LOWER(s) IN ('apple', 'baidu')",
            "SELECT k, s, CASE WHEN LOWER(s) = 'apple' THEN '0' WHEN LOWER(s) = 'baidu' THEN '3' ELSE "
            "regexp_extract(t, '(&|^)id=([^&]*)', 2) END AS id FROM R WHERE regexp_matches(t, '(&|^)id=([^&]*)') "
            "OR LOWER(s) IN ('apple', 'baidu')"),
    "split": ("SELECT k, CASE WHEN s LIKE 'b%' THEN UPPER(s) ELSE SPLIT_INDEX(t, '&', 1) END AS c FROM R WHERE k > 0",
              "SELECT k, CASE WHEN s LIKE 'b%' THEN UPPER(s) ELSE split_part(t, '&', 2) END AS c FROM R WHERE k > 0"),
    "ints": ("SELECT s, CASE WHEN k = 1 THEN 10 WHEN k >= 2 THEN 20 ELSE CHAR_LENGTH(t) END AS n FROM R",
             "SELECT s, CASE WHEN k = 1 THEN 10 WHEN k >= 2 THEN 20 ELSE length(t) END AS n FROM R"),
}


@functools.cache
def compiled(view: str):
    return compile_sql(STREAM + VIEWS[view][0])


def duck(view: str, rows: Counter) -> dict:
    con = duckdb.connect()
    con.execute("CREATE TABLE R(k INT, s VARCHAR, t VARCHAR)")
    present = list(rows.elements())
    if present:
        con.executemany("INSERT INTO R VALUES (?, ?, ?)", present)
    return {tuple(r[:-1]): r[-1] for r in con.execute(f"SELECT *, count(*) FROM ({VIEWS[view][1]}) GROUP BY ALL").fetchall()}


row = st.tuples(st.integers(0, 3), st.sampled_from(("Apple", "apple", "Baidu", "bing", "x", "")),
                st.lists(st.sampled_from(("&", "id=", "7", "a=1", "id")), max_size=4).map("".join))
step = st.one_of(st.tuples(st.just(1), row), st.tuples(st.just(-1), st.integers(0, 50)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step, max_size=30), cuts=st.lists(st.booleans(), min_size=30, max_size=30),
       backend=st.sampled_from(["python", "native"]), view=st.sampled_from(sorted(VIEWS)))
def test_a_case_of_two_columns_is_duckdbs_through_inserts_and_deletes(steps, cuts, backend, view):
    if backend == "native":
        from support.native import skip_without_native
        skip_without_native()
    replay(Runtime(compiled(view), backend=backend), steps, cuts, functools.partial(duck, view))

