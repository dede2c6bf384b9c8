"""A general view's changelog from the values before the batch that ``changes()`` tells (branch nx17).

An ``m3`` box emits ``-old/+new`` for every changed row.  For a general view (folds, ``COUNT DISTINCT``,
``HAVING``) without NULLs or an ``ALWAYS`` row, the runtime tells each changed row's value before the batch
(``Changes.before``, from its own row memo or the maps before the batch), so the box keeps no second memo of
the view's rows.  What a subscriber sees must not change: the changelog, followed row by row (each ``-1``
names the row there), equals DuckDB's answer after every batch of inserts and deletes, including batches that
delete every row, across a snapshot restored into a new box, on both backends; and the box reads no view whole
to make it (the second memo was filled by reading each view whole).
"""

from __future__ import annotations

import random
from collections import Counter

import duckdb
import pytest
from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.validate import stream_schemas
from boreas.m3.boxtype import box_types
from boreas.node.operators import build_operator
from support.changelog import changes, follow

QUERIES = [
    "SELECT g, COUNT(DISTINCT b) AS d, MIN(b) AS lo, MAX(b) AS hi, COUNT(*) AS c, SUM(b) AS s FROM R GROUP BY g",
    "SELECT g, COUNT(DISTINCT b) AS d, MAX(b) AS hi FROM R WHERE b > 0 GROUP BY g HAVING COUNT(*) > 1",
    "SELECT g, b, COUNT(*) AS c FROM R GROUP BY g, b HAVING SUM(b) > 2",
]


def operator(backend: str, query: str):
    sql = query.replace("<", "&lt;").replace(">", "&gt;")
    xml = f"""<borealis>
      <schema name="RT"><field name="g" type="int"/><field name="b" type="int"/><field name="sign" type="int"/></schema>
      <input stream="R" schema="RT"/>
      <box name="q" type="m3"><in stream="R"/><out stream="V"/>
        <parameter name="sql" value="{sql}"/><parameter name="backend" value="{backend}"/>
        <parameter name="sign-field" value="sign"/></box>
    </borealis>"""
    types = box_types()
    made = plan_submission(Catalog(), [read_document(xml, "app.xml")], types)
    assert made.ok, made.problems
    schemas = stream_schemas(made.catalog, types)
    box = made.catalog.boxes["q"]
    return build_operator(box, [schemas[p.stream] for p in box.inputs], [schemas[s] for s in box.outputs])


def duck(rows: list[tuple], query: str) -> Counter:
    con = duckdb.connect()
    con.execute("CREATE TABLE R(g BIGINT, b BIGINT)")
    if rows:
        con.executemany("INSERT INTO R VALUES (?, ?)", rows)
    return Counter(con.execute(query).fetchall())


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("backend", ["python", "native"])
def test_a_general_views_changelog_follows_duckdb_without_a_second_memo(backend, query):
    if backend == "native":
        from support.native import skip_without_native

        skip_without_native()
    op = operator(backend, query)
    assert op.backend == backend
    width = 2 if "g, b," in query else 1
    reads = Counter()

    def counted(box):
        view = box.runtime.view

        def read(name):
            reads[name] += 1
            return view(name)
        box.runtime.view = read
        return box

    op = counted(op)
    rnd = random.Random(11)
    live: list[tuple] = []
    held: dict = {}
    for i in range(14):
        if i in (4, 9, 13):  # every live row deleted
            batch, sign, live = live, -1, []
        elif i % 3 == 2 and live:
            batch = [live.pop(rnd.randrange(len(live))) for _ in range(min(len(live), rnd.randint(1, 5)))]
            sign = -1
        else:
            batch, sign = [(rnd.randint(0, 3), rnd.randint(-2, 4)) for _ in range(rnd.randint(1, 9))], 1
            live += batch
        if i == 7:  # a snapshot restored into a new box: it emits on from the state it was given
            state = op.state()
            op = counted(operator(backend, query))
            op.restore(state)
        for _, sent in op.process(0, [row + (sign,) for row in batch], 0.0):
            follow(held, sent, tuple, width)
        got = Counter(k + (v if isinstance(v, tuple) else (v,)) for k, v in held.items())
        assert got == duck(live, query), (i, batch, sign)
    assert not reads, "the box read a view whole to emit its changes"

