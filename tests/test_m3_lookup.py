"""Lookup joins (``JOIN t FOR SYSTEM_TIME AS OF s.col``): each stream row joins the table as it is on arrival.

The oracle is a row-at-a-time reference: a dict of the table's rows, and for
each stream row the rows it joins at that moment, never revised by a later
table insert or delete (which an ordinary ``m3`` join would fold in).  Table
inserts and deletes are interleaved with the stream at random, in batches of
random size, on both M3 backends.  A batch holds one relation's events (as an
``m3`` box's in port delivers them: the runtime applies a batch atomically,
relation by relation), so a batch ends where the relation changes.
"""

from __future__ import annotations

import functools
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boreas.m3 import Runtime
from boreas.m3.compiler.pipeline import compile_sql
from boreas.m3.errors import CompileError

DECLARE = "CREATE TABLE T(k INT, v INT); CREATE STREAM S(a INT, x INT, ts INT);\n"
ROWS = DECLARE + ("SELECT s.a, s.x, t.v FROM (SELECT *, PROCTIME() AS p FROM S) s "
                  "JOIN T FOR SYSTEM_TIME AS OF s.p AS t ON MOD(s.a, 3) = t.k")
SUMS = DECLARE + "SELECT t.v, SUM(S.x) AS total FROM S JOIN T FOR SYSTEM_TIME AS OF S.ts AS t ON S.a = t.k GROUP BY t.v"


@functools.cache
def compiled(sql: str):
    return compile_sql(sql)


def runtime(sql: str, backend: str) -> Runtime:
    if backend == "native":
        from support.native import skip_without_native
        skip_without_native()
    return Runtime(compiled(sql), backend=backend)


def nonzero(view: dict) -> dict:
    return {k: v for k, v in view.items() if v}


step = st.one_of(
    st.tuples(st.just("+T"), st.integers(0, 3), st.integers(1, 4)),
    st.tuples(st.just("-T"), st.integers(0, 20), st.just(0)),  # deletes the n-th present table row, if any
    st.tuples(st.just("+S"), st.integers(0, 6), st.integers(1, 9)),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step, max_size=30), cuts=st.lists(st.booleans(), min_size=30, max_size=30),
       backend=st.sampled_from(["python", "native"]))
def test_a_lookup_join_matches_a_row_at_a_time_reference(steps, cuts, backend):
    rows, sums = runtime(ROWS, backend), runtime(SUMS, backend)
    table: Counter = Counter()
    want_rows: Counter = Counter()
    want_sums: Counter = Counter()
    batch: list[tuple] = []

    def flush():
        rows.apply_batch(batch)
        sums.apply_batch(batch)
        batch.clear()

    for (what, a, b), cut in zip(steps, cuts):
        if batch and batch[-1][0] != what[1]:
            flush()
        if what == "+T":
            table[(a, b)] += 1
            batch.append(("T", 1, (a, b)))
        elif what == "-T":
            present = sorted(table.elements())
            if not present:
                continue
            row = present[a % len(present)]
            table[row] -= 1
            batch.append(("T", -1, row))
        else:
            for (k, v), n in table.items():
                if k == a % 3 and n:
                    want_rows[(a, b, v)] += n
                if k == a and n:
                    want_sums[v] += b * n
            batch.append(("S", 1, (a, b, 0)))
        if cut:
            flush()
    flush()
    assert nonzero(rows.view("Q1")) == {k: n for k, n in want_rows.items() if n}
    assert nonzero(sums.view("Q1")) == {(v,): t for v, t in want_sums.items() if t}


def test_a_later_table_insert_does_not_revise_rows_already_joined():
    """The difference from an ordinary join, where the same events give the late row too."""
    look = Runtime(compile_sql(ROWS), backend="python")
    plain = Runtime(compile_sql(ROWS.replace("FOR SYSTEM_TIME AS OF s.p", "")), backend="python")
    for r in (look, plain):
        r.apply_batch([("S", 1, (4, 7, 0)), ("T", 1, (1, 100))])
        r.apply_batch([("S", 1, (1, 8, 0))])
    assert nonzero(look.view("Q1")) == {(1, 8, 100): 1}
    assert nonzero(plain.view("Q1")) == {(1, 8, 100): 1, (4, 7, 100): 1}


@pytest.mark.parametrize("sql, says", [
    (DECLARE + "SELECT S.a FROM S FOR SYSTEM_TIME AS OF S.ts", "a lookup join is JOIN <table> FOR SYSTEM_TIME"),
    (DECLARE + "SELECT S.a FROM S JOIN T FOR SYSTEM_TIME AS OF 5 ON S.a = T.k", "time expression is not"),
    (DECLARE + "SELECT S.a FROM S JOIN U FOR SYSTEM_TIME AS OF S.ts ON S.a = U.k", "unknown relation U"),
    (DECLARE + "WITH U AS (SELECT * FROM T) SELECT S.a FROM S JOIN U FOR SYSTEM_TIME AS OF S.ts ON S.a = U.k",
     "reads U, which is not a declared"),
])
def test_other_shapes_are_refused_saying_why(sql, says):
    with pytest.raises(CompileError) as err:
        compile_sql(sql)
    assert says in str(err.value)
