"""``REGEXP_EXTRACT(...) IS [NOT] NULL`` as Flink means it (NULL: no match), against DuckDB (Nexmark q21's WHERE).

Boreas's ``REGEXP_EXTRACT`` value reads Flink's NULL as ``''``, but its
NULL test is exact: it reads ``REGEXP_FOUND`` (m3/functions.py), so a match
of an empty group (``channel_id=`` with nothing after it) is not NULL while
no match is.  The oracle is DuckDB's ``regexp_matches`` (RE2: the same
matches as Python's ``re`` for this pattern).  Random strings made of the
URL's pieces are inserted and deleted in batches on both M3 backends; after
each batch the views are DuckDB's over the rows present.
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

PATTERN = "(&|^)channel_id=([^&]*)"
EXTRACT = f"REGEXP_EXTRACT(s, '{PATTERN}', 2)"
VIEWS = {  # Boreas's SQL, DuckDB's (no match is NULL in Flink: DuckDB's regexp_matches says which)
    "missing": (f"SELECT s, COUNT(*) AS n FROM R WHERE {EXTRACT} IS NULL GROUP BY s",
                f"SELECT s, COUNT(*) FROM R WHERE NOT regexp_matches(s, '{PATTERN}') GROUP BY s"),
    "found": (f"SELECT {EXTRACT} AS id, COUNT(*) AS n FROM R WHERE k > 0 AND {EXTRACT} IS NOT NULL GROUP BY {EXTRACT}",
              f"SELECT regexp_extract(s, '{PATTERN}', 2), COUNT(*) FROM R WHERE k > 0 AND regexp_matches(s, "
              f"'{PATTERN}') GROUP BY 1"),
}
PIECES = ("&", "channel_id=", "x", "7", "?a=1", "channel", "=")


@functools.cache
def compiled(view: str):
    return compile_sql("CREATE STREAM R(k INT, s VARCHAR);\n" + VIEWS[view][0])


def duck(view: str, rows: Counter) -> dict:
    con = duckdb.connect()
    con.execute("CREATE TABLE R(k INT, s VARCHAR)")
    present = list(rows.elements())
    if present:
        con.executemany("INSERT INTO R VALUES (?, ?)", present)
    return {(r[0],): r[1] for r in con.execute(VIEWS[view][1]).fetchall()}


row = st.tuples(st.integers(0, 2), st.lists(st.sampled_from(PIECES), max_size=4).map("".join))
step = st.one_of(st.tuples(st.just(1), row), st.tuples(st.just(-1), st.integers(0, 50)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step, max_size=30), cuts=st.lists(st.booleans(), min_size=30, max_size=30),
       backend=st.sampled_from(["python", "native"]), view=st.sampled_from(sorted(VIEWS)))
def test_regexp_extract_is_null_is_flinks_no_match(steps, cuts, backend, view):
    if backend == "native":
        from support.native import skip_without_native
        skip_without_native()
    replay(Runtime(compiled(view), backend=backend), steps, cuts, functools.partial(duck, view))


def test_an_empty_group_is_found_and_no_match_is_null():
    rt = Runtime(compiled("missing"), backend="python")
    rt.apply_batch([("R", 1, (1, "?a=1&channel_id=")), ("R", 1, (1, "?a=1")), ("R", 1, (1, "channel_id=7"))])
    assert dict(rt.view("Q1")) == {("?a=1",): 1}
