"""A nullable stream field through an ``m3`` box to a subscriber (issue 33 item 2, docs/m3.md "NULLs").

The box reads the in stream by name, so its relation takes the field's
nullability (the column and its indicator); rows carrying None, as rows and
as Arrow batches (whose nulls send the batch the row way), on both backends,
reach a subscriber as the view's changelog, followed as a bag and compared
with DuckDB's answer over the live rows.  A nullable field the query groups by
is a key that reaches the subscriber as None, and a SUM over only NULLs is None
(the out stream's fields say nullable); an expression of one as a key is
refused by name, not read as 0.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import random
from collections import Counter

import duckdb
import pytest
from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.model import Subscription
from boreas.catalog.validate import stream_schemas
from boreas.m3.boxtype import box_types
from boreas.node.dataflow import Dataflow
from boreas.node.operators.m3box import date_of, micros_of
from boreas.node.query import read, resolve
from boreas.wire.columns import Columns, from_rows
from support.changelog import changes
from support.duck import answer

BOX_TYPES = box_types()
QUERY = ("SELECT g, COUNT(b) AS nb, COUNT(*) AS n, SUM(b) AS sb, SUM(COALESCE(y, 0.5)) AS sy FROM R "
         "WHERE b IS NULL OR b > 0 GROUP BY g")


def app(backend: str, query: str = QUERY) -> str:
    sql = query.replace("<", "&lt;").replace(">", "&gt;")
    return f"""<borealis>
      <schema name="RT"><field name="g" type="int"/><field name="b" type="int" nullable="true"/>
        <field name="y" type="double" nullable="true"/></schema>
      <input stream="R" schema="RT"/>
      <box name="q" type="m3"><in stream="R"/><out stream="V"/>
        <parameter name="sql" value="{sql}"/><parameter name="backend" value="{backend}"/></box>
      <output stream="V"/>
    </borealis>"""


#: A nullable field as the view's key: its NULL group reaches the subscriber with None (and the out stream's
#: field is nullable), apart from the group of 0.
KEYED = "SELECT b, COUNT(*) AS n, SUM(g) AS s, COUNT(y) AS ny FROM R WHERE g > 0 OR y IS NULL GROUP BY b"


def duck(rows: list[tuple], query: str = QUERY) -> Counter:
    return answer(rows, query, "g BIGINT, b BIGINT, y DOUBLE")


#: An arithmetic key over a nullable field (branch sqlI): every row whose b is NULL in one group, shown None.
EXPR_KEY = "SELECT b + g AS k, COUNT(*) AS n FROM R GROUP BY b + g"
#: Counts only (issue 33): a group of only NULLs is a row of COUNT 0 (its hidden COUNT(*) keeps it), for the
#: subscriber and the query API alike.
COUNTS = "SELECT g, COUNT(b) AS nb, COUNT(y) FILTER (WHERE b > 0) AS ny FROM R GROUP BY g"
NULLABLE_OUT = {QUERY: [False, False, False, True, False], KEYED: [True, False, False, False], EXPR_KEY: [True, False],
                COUNTS: [False, False, False]}


@pytest.mark.parametrize("query", [QUERY, KEYED, EXPR_KEY, COUNTS])
@pytest.mark.parametrize("backend", ["python", "native"])
def test_null_heavy_rows_reach_a_subscriber_as_sql_says(backend, query):
    if backend == "native":
        from support.native import skip_without_native

        skip_without_native()
    plan = plan_submission(Catalog(), [read_document(app(backend, query), "app.xml")], BOX_TYPES)
    assert plan.ok, plan.problems
    cat = plan.catalog
    nullable = [f.nullable for f in stream_schemas(cat, BOX_TYPES)["V"].fields]  # NULL keys, SUMs of only NULLs
    assert nullable == NULLABLE_OUT[query]
    cat.subscriptions["V|c:9"] = Subscription("V", "c:9")
    dataflow = Dataflow("n:1", None, "n:1#a", box_types=BOX_TYPES)
    dataflow.reconfigure(cat)
    schema = cat.schemas["RT"]
    rnd = random.Random(5)
    live: list[tuple] = []
    bag: Counter = Counter()
    for i in range(10):
        new = [(rnd.randint(0, 2), rnd.choice([None, None, 0, 1, 2]), rnd.choice([None, 1.5, -0.25]))
               for _ in range(rnd.randint(1, 6))]
        live += new
        batch = from_rows(new, schema) if i % 2 else new  # Arrow with nulls, or rows
        asyncio.run(dataflow.router.enter("R", batch, "pub-R", i, ""))
        for _, sent, _, _ in dataflow.out.withdraw("c:9", {"V"}):
            for row, weight in changes(sent if isinstance(sent, Columns) else sent):
                bag[tuple(row)] += weight
        bag = Counter({r: k for r, k in bag.items() if k})
        assert bag == duck(live, query)
    op = dataflow.operators["q"]  # the query API (boreas query) reads the view as the subscriber got it
    _, rows = read(op, resolve(op, None), "slice", (), False)
    assert Counter(tuple(k[i] for i in op.plan.views[0].output_keys) + (v if isinstance(v, tuple) else (v,))
                   for k, v in rows) == duck(live, query)


def test_a_division_of_a_nullable_field_as_a_key_is_refused_by_name():
    """``+ - *`` over a nullable field are keys (above); a division is not (its NULL and its DOUBLE)."""
    plan = plan_submission(Catalog(), [read_document(app("python", "SELECT b / 2 AS k, COUNT(*) AS n FROM R "
                                                                   "GROUP BY b / 2"), "app.xml")], BOX_TYPES)
    assert not plan.ok
    assert "read outside an aggregate" in " ".join(p.reason for p in plan.problems)


#: Nullable VARCHAR and DATE fields, published as Arrow batches with and without NULLs (issue 34 (a)): a batch
#: without one goes as columns (STRING ids, day numbers), which must keep their encoding past the indicators.
STRINGS = ("SELECT g, s, COUNT(*) AS n, COUNT(s) AS ns, COUNT(d) AS nd FROM R "
           "WHERE d IS NULL OR d >= DATE '1995-01-02' GROUP BY g, s")
STRING_FIELDS = ('<field name="g" type="int"/><field name="s" type="string" size="8" nullable="true"/>'
                 '<field name="d" type="timestamp" nullable="true"/>')


@pytest.mark.parametrize("backend", ["python", "native"])
def test_nullable_string_and_date_columns_without_a_null_are_applied(backend):
    if backend == "native":
        from support.native import skip_without_native

        skip_without_native()
    xml = app(backend, STRINGS).replace(
        '<field name="g" type="int"/><field name="b" type="int" nullable="true"/>\n'
        '        <field name="y" type="double" nullable="true"/>', STRING_FIELDS)
    plan = plan_submission(Catalog(), [read_document(xml, "app.xml")], BOX_TYPES)
    assert plan.ok, plan.problems
    cat = plan.catalog
    cat.subscriptions["V|c:9"] = Subscription("V", "c:9")
    dataflow = Dataflow("n:1", None, "n:1#a", box_types=BOX_TYPES)
    dataflow.reconfigure(cat)
    schema = cat.schemas["RT"]
    rnd = random.Random(7)
    days = [micros_of(dt.date(1995, 1, 1) + dt.timedelta(days=k)) for k in range(3)]  # (a timestamp: micros)
    con = duckdb.connect()
    con.execute("CREATE TABLE R(g BIGINT, s VARCHAR, d DATE)")
    bag: Counter = Counter()
    for i in range(8):
        nulls = [None] if i % 2 else []  # every other batch has no NULL at all: the columns path
        new = [(rnd.randint(0, 2), rnd.choice(["a", "bb", ""] + nulls), rnd.choice(days + nulls))
               for _ in range(rnd.randint(1, 6))]
        con.executemany("INSERT INTO R VALUES (?, ?, ?)", [(g, s, None if d is None else date_of(d)) for g, s, d in new])
        batch = from_rows(new, schema)
        assert isinstance(batch, Columns)
        asyncio.run(dataflow.router.enter("R", batch, "pub-R", i, ""))
        for _, sent, _, _ in dataflow.out.withdraw("c:9", {"V"}):
            for row, weight in changes(sent):
                bag[tuple(row)] += weight
        bag = Counter({r: k for r, k in bag.items() if k})
        assert bag == Counter(con.execute(STRINGS).fetchall())
    assert dataflow.operators["q"].failed_batches == 0


#: MIN/MAX of a nullable VARCHAR (issue 33): a group of only NULLs is NULL, not '' (the out fields nullable).
STRING_EXTREMES = "SELECT g, MIN(s) AS lo, MAX(s) AS hi, COUNT(*) AS n FROM R GROUP BY g"
STRING_ONLY = ('<field name="g" type="int"/><field name="s" type="string" size="8" nullable="true"/>'
               '<field name="d" type="timestamp"/>')


def string_app(backend: str, declared: str = "") -> str:
    """:func:`app` over (g, s nullable VARCHAR, d); ``declared``: the out stream's ``<schema>`` fields, if any."""
    xml = app(backend, STRING_EXTREMES).replace(
        '<field name="g" type="int"/><field name="b" type="int" nullable="true"/>\n'
        '        <field name="y" type="double" nullable="true"/>', STRING_ONLY)
    if declared:
        xml = xml.replace('<output stream="V"/>', f'<schema name="VO">{declared}</schema><output stream="V" '
                                                  'schema="VO"/>')
    return xml


@pytest.mark.parametrize("backend", ["python", "native"])
def test_string_extremes_of_only_nulls_reach_a_subscriber_as_null(backend):
    if backend == "native":
        from support.native import skip_without_native

        skip_without_native()
    plan = plan_submission(Catalog(), [read_document(string_app(backend), "app.xml")], BOX_TYPES)
    assert plan.ok, plan.problems
    cat = plan.catalog
    assert [f.nullable for f in stream_schemas(cat, BOX_TYPES)["V"].fields] == [False, True, True, False]
    cat.subscriptions["V|c:9"] = Subscription("V", "c:9")
    dataflow = Dataflow("n:1", None, "n:1#a", box_types=BOX_TYPES)
    dataflow.reconfigure(cat)
    schema = cat.schemas["RT"]
    rnd = random.Random(11)
    con = duckdb.connect()
    con.execute("CREATE TABLE R(g BIGINT, s VARCHAR, d TIMESTAMP)")
    bag: Counter = Counter()
    for i in range(10):  # group 3 only ever NULL; the others mostly
        new = [(g, None if g == 3 else rnd.choice([None, None, None, "a", "bb", ""]), 0)
               for g in (rnd.randint(0, 3) for _ in range(rnd.randint(1, 6)))]
        con.executemany("INSERT INTO R VALUES (?, ?, NULL)", [(g, s) for g, s, _ in new])
        asyncio.run(dataflow.router.enter("R", from_rows(new, schema) if i % 2 else new, "pub-R", i, ""))
        for _, sent, _, _ in dataflow.out.withdraw("c:9", {"V"}):
            for row, weight in changes(sent):
                bag[tuple(row)] += weight
        bag = Counter({r: k for r, k in bag.items() if k})
        assert bag == Counter(con.execute(STRING_EXTREMES).fetchall())
    assert any(row[1] is None and row[2] is None for row in bag)


def test_a_declared_out_schema_not_nullable_where_a_string_extreme_may_be_null_is_refused():
    """The out stream's declared schema says ``lo``/``hi`` are never NULL: refused naming the fields, the box and
    why; declared nullable it is accepted.  The operator built with such a schema refuses it too."""
    fields = ('<field name="g" type="int"/><field name="lo" type="string" size="8"/>'
              '<field name="hi" type="string" size="8" nullable="true"/><field name="n" type="long"/>')
    plan = plan_submission(Catalog(), [read_document(string_app("python", fields), "app.xml")], BOX_TYPES)
    assert not plan.ok
    reason = " ".join(p.reason for p in plan.problems)
    assert "field 'lo' is NULL where m3 box 'q' writes NULL: " in reason and "MIN or MAX" in reason, reason
    assert "declare it nullable=\"true\"" in reason, reason
    fixed = fields.replace('name="lo" type="string" size="8"', 'name="lo" type="string" size="8" nullable="true"')
    plan = plan_submission(Catalog(), [read_document(string_app("python", fixed), "app.xml")], BOX_TYPES)
    assert plan.ok, plan.problems

    from boreas.catalog.model import Box, Field, InPort, Schema
    from boreas.m3.boxtype import infer_m3
    from boreas.node.operators.base import OperatorError
    from boreas.node.operators.registry import DEFAULT_REGISTRY

    schema = plan.catalog.schemas["RT"]
    box = Box("q", "m3", (InPort("R"),), ("V",), (("sql", STRING_EXTREMES), ("backend", "python")))
    inferred = infer_m3(box, [schema])[0]
    declared = Schema("VO", tuple(Field(f.name, f.type, f.size) for f in inferred.fields))  # none nullable
    with pytest.raises(OperatorError, match=r"m3 box 'q' out port 0: field 'lo' may be NULL .*MIN or MAX"):
        DEFAULT_REGISTRY.build(box, [schema], [declared])
    assert DEFAULT_REGISTRY.build(box, [schema], [inferred]) is not None


def test_string_extremes_of_a_column_not_nullable_stay_not_nullable():
    """Only what may be NULL is nullable: MIN/MAX of a VARCHAR not declared NULL is a plain string field."""
    from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
    from boreas.m3.boxtype import infer_m3

    schema = Schema("RT", (Field("g", FieldType.INT), Field("s", FieldType.STRING, 8),
                           Field("d", FieldType.TIMESTAMP)))
    box = Box("q", "m3", (InPort("R"),), ("V",), (("sql", STRING_EXTREMES),))
    assert [f.nullable for f in infer_m3(box, [schema])[0].fields] == [False, False, False, False]
