"""An ``m3`` box whose view groups by columns it does not select (issue 33 item 5), fed by hand.

Its out stream carries the selected columns only: the schema the catalog
infers, and every changelog row the box emits, on both backends (the native
one emits its changes as Arrow columns read from the C journals, the Python
one as rows), with the emitted rows followed as a bag and compared with
DuckDB's answer.  The internal key stays readable by name through the query
API, and an output whose declared schema still holds the column, or a
replaced application whose query stops selecting it under a reader, is told
why.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.validate import stream_schemas
from boreas.m3.boxtype import box_types
from boreas.node.operators import build_operator
from boreas.node.query import parse_keys, read, resolve
from support.duck import answer

BOX_TYPES = box_types()
SQL = "SELECT SUM(c) AS s, COUNT(*) AS n FROM R WHERE a &lt; 3 GROUP BY b"
QUERY = "SELECT SUM(c) AS s, COUNT(*) AS n FROM R WHERE a < 3 GROUP BY b"


def app(backend: str, out_schema: str = "") -> str:
    output = f'<output stream="V" schema="{out_schema}"/>' if out_schema else ""
    return f"""<borealis>
      <input stream="R" schema="RT"/>{output}
      <schema name="RT"><field name="a" type="int"/><field name="b" type="int"/><field name="c" type="double"/></schema>
      <schema name="WithB"><field name="b" type="int"/><field name="s" type="double"/><field name="n" type="long"/></schema>
      <box name="q" type="m3"><in stream="R"/><out stream="V"/>
        <parameter name="sql" value="{SQL}"/><parameter name="backend" value="{backend}"/></box>
    </borealis>"""


def operator(backend: str):
    plan = plan_submission(Catalog(), [read_document(app(backend), "app.xml")], BOX_TYPES)
    assert plan.ok, plan.problems
    schemas = stream_schemas(plan.catalog, BOX_TYPES)
    box = plan.catalog.boxes["q"]
    return build_operator(box, [schemas["R"]], [schemas["V"]]), schemas["V"]


def duck(rows: list[tuple]) -> Counter:
    return answer(rows, QUERY, "a BIGINT, b BIGINT, c DOUBLE")


@pytest.mark.parametrize("backend", ["python", "native"])
def test_the_out_stream_carries_the_selected_columns_only(backend):
    if backend == "native":
        from support.native import skip_without_native

        skip_without_native()
    op, schema = operator(backend)
    assert op.backend == backend
    assert [(f.name, f.type.value) for f in schema.fields] == [("s", "double"), ("n", "long")]
    rnd = random.Random(7)
    live: list[tuple] = []
    bag: Counter = Counter()
    for _ in range(12):  # batches of inserts, then of deletes of live rows
        if live and rnd.random() < 0.4:
            gone = [live.pop(rnd.randrange(len(live))) for _ in range(min(len(live), rnd.randint(1, 4)))]
            batch = [(-1, *r) for r in gone]
        else:
            new = [(rnd.randint(0, 4), rnd.randint(0, 2), rnd.randint(-4, 4) / 4) for _ in range(rnd.randint(1, 8))]
            live += new
            batch = [(1, *r) for r in new]
        op_rows = [r[1:] for r in batch if r[0] == 1]
        dead = [r[1:] for r in batch if r[0] == -1]
        emitted = op.process(0, op_rows, 0.0) if op_rows else []
        if dead:  # deletes as a changelog batch of -1 rows
            from boreas.wire.columns import weighted

            emitted += op.process(0, weighted(dead, [-1] * len(dead), op.inputs[0]), 0.0)
        from support.changelog import changes

        for port, changed in emitted:
            assert port == 0
            for row, weight in changes(changed):
                assert len(row) == 2  # (s, n): no b
                bag[tuple(row)] += weight
        bag = Counter({r: k for r, k in bag.items() if k})
        assert bag == duck(live)
    # the internal key b is the view's key for the query API: read the group b = 1 by name
    target = resolve(op, None)
    assert [name for name, _ in target.keys] == ["b"]
    _, rows = read(op, target, "slice", parse_keys(["1"], target.keys, "V"), False)
    want = [r for r in live if r[0] < 3 and r[1] == 1]
    if want:
        assert [(k, tuple(v) if isinstance(v, tuple) else v) for k, v in rows] == [
            ((1,), (pytest.approx(sum(r[2] for r in want)), len(want)))]


def test_an_output_declaring_the_unselected_column_is_told_why():
    """A resubmitted application whose output schema still holds a GROUP BY column the SELECT does not name."""
    plan = plan_submission(Catalog(), [read_document(app("python", out_schema="WithB"), "app.xml")], BOX_TYPES)
    assert not plan.ok
    reason = " ".join(p.reason for p in plan.problems)
    assert "output stream 'V' declares schema 'WithB' (b int, s double, n long), but its producer yields " \
           "(s double, n long)" in reason
    assert "GROUP BY columns the SELECT does not name (b)" in reason


def test_a_replaced_query_that_stops_selecting_a_group_column_is_told_why():
    """``boreas submit --replace`` of an application whose m3 box no longer selects ``b`` while a box that stays
    reads the out stream: the refusal says the column became an internal key."""
    def document(select: str) -> str:
        return f"""<borealis>
          <input stream="R" schema="RT"/>
          <schema name="RT"><field name="a" type="int"/><field name="b" type="int"/><field name="c" type="double"/></schema>
          <box name="q" type="m3"><in stream="R"/><out stream="V"/>
            <parameter name="sql" value="SELECT {select} FROM R GROUP BY b"/></box>
          <box name="f" type="filter"><in stream="V"/><out stream="F"/><parameter name="expression.0" value="s &gt; 0"/>
          </box>
        </borealis>"""

    before = plan_submission(Catalog(), [read_document(document("b, SUM(c) AS s"), "app.xml")], BOX_TYPES)
    assert before.ok, before.problems
    after = plan_submission(before.catalog, [read_document(document("SUM(c) AS s"), "app.xml")], BOX_TYPES,
                            replacing=True)
    reasons = [p.reason for p in after.problems]
    assert any("stream 'V' would change its schema from (b int, s double) to (s double) (an m3 view outputs the "
               "columns its SELECT names: GROUP BY columns the SELECT does not name (b) are the view's internal "
               "keys" in r and "while box f still reads it" in r for r in reasons), reasons
