"""MIN and MAX of a STRING expression (Nexmark q16's ``max(DATE_FORMAT(dateTime, 'HH:mm'))``), against DuckDB.

The runtime keeps a multiplicity map keyed by the value (docs/m3.md, "MIN
and MAX of strings"), so a deleted maximum gives way to the next one; an
``m3`` box emits such a column as a STRING field.  Random inserts and
deletes of rows, in batches, on both M3 backends: after each batch the view
is DuckDB's over the rows present, and the box's changelog (-old/+new)
followed row by row is that view too.
"""

from __future__ import annotations

import functools
from collections import Counter

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.validate import stream_schemas
from boreas.m3 import Runtime
from boreas.m3.boxtype import box_types
from boreas.m3.compiler.pipeline import compile_sql
from boreas.node.operators import build_operator
from support.changelog import follow
from support.step_batches import batches

STREAM = "CREATE STREAM R(k INT, s VARCHAR, t DOUBLE);\n"
QUERY = ("SELECT k, MAX(s) AS hi, MIN(LOWER(s)) AS lo, MAX(DATE_FORMAT(t, 'HH:mm')) AS hm, COUNT(*) AS n "
         "FROM R GROUP BY k")
DUCK = QUERY.replace("DATE_FORMAT(t, 'HH:mm')", "strftime(epoch_ms(CAST(t AS BIGINT)), '%H:%M')")
WORDS = ("apple", "Apple", "b", "", "zeta", "Zeta", "é", "a b")


@functools.cache
def compiled():
    return compile_sql(STREAM + QUERY)


def duck(rows: Counter) -> dict:
    con = duckdb.connect()
    con.execute("CREATE TABLE R(k INT, s VARCHAR, t DOUBLE)")
    present = list(rows.elements())
    if present:
        con.executemany("INSERT INTO R VALUES (?, ?, ?)", present)
    return {(r[0],): tuple(r[1:]) for r in con.execute(DUCK).fetchall()}


row = st.tuples(st.integers(0, 2), st.sampled_from(WORDS), st.integers(0, 47).map(lambda h: h * 1_800_000.0))
step = st.one_of(st.tuples(st.just(1), row), st.tuples(st.just(-1), st.integers(0, 50)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step, max_size=30), cuts=st.lists(st.booleans(), min_size=30, max_size=30),
       backend=st.sampled_from(["python", "native"]))
def test_string_min_max_follow_inserts_and_deletes_as_duckdb(steps, cuts, backend):
    if backend == "native":
        from support.native import skip_without_native
        skip_without_native()
    rt = Runtime(compiled(), backend=backend)
    present: Counter = Counter()
    for batch in batches(steps, cuts):
        rt.apply_batch([("R", sign, r) for sign, r in batch])
        for sign, r in batch:
            present[r] += sign
        assert dict(rt.view("Q1")) == duck(present)


APP = """<borealis><input stream="R" schema="RT"/>
<schema name="RT"><field name="sign" type="int"/><field name="k" type="int"/><field name="s" type="string" size="20"/>
<field name="t" type="double"/></schema>
<box name="b" type="m3"><in stream="R"/><out stream="Out"/><parameter name="sign-field" value="sign"/>
<parameter name="backend" value="{backend}"/><parameter name="sql"><![CDATA[{sql}]]></parameter></box></borealis>"""


@pytest.mark.parametrize("backend", ["python", "native"])
def test_a_box_emits_string_maxima_as_a_string_field_through_deletes(backend):
    if backend == "native":
        from support.native import skip_without_native
        skip_without_native()
    made = plan_submission(Catalog(), [read_document(APP.format(backend=backend, sql=STREAM + QUERY), "s.xml")],
                           box_types())
    assert made.ok, made.problems
    schemas = stream_schemas(made.catalog, box_types())
    assert [(f.name, f.type.value) for f in schemas["Out"].fields] == [
        ("k", "int"), ("hi", "string"), ("lo", "string"), ("hm", "string"), ("n", "long")]
    box = made.catalog.boxes["b"]
    op = build_operator(box, [schemas["R"]], [schemas["Out"]])
    rows = [(1, "Bb", 0.0), (1, "aZ", 5 * 3_600_000.0 + 60_000), (2, "x", 0.0), (1, "zz", 0.0)]
    present, view = Counter(), {}
    for batch in ([(1, r) for r in rows], [(-1, rows[1]), (-1, rows[2])], [(-1, rows[3])]):
        for _, out in op.process(0, [(sign, *r) for sign, r in batch], 0.0):
            follow(view, out, lambda k: k, 1)
        for sign, r in batch:
            present[r] += sign
        assert view == duck(present)
    assert view == {(1,): ("Bb", "bb", "00:00", 1)}  # the maxima gave way as their rows left
