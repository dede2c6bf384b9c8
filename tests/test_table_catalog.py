"""Table boxes in the catalog (issue 35 item 3): what validation accepts, what it refuses, at which file and line.

A table box names its ``<table>`` with ``<access>`` and says what it does
in ``sql`` (catalog/table_params.py); its out schemas follow from the
table's schema and its ``pass-*`` parameters.  Everything wrong is refused
at the box, with the reason.
"""

from __future__ import annotations

import pytest
from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.model import Node
from boreas.catalog.validate import stream_schemas
from boreas.m3.boxtype import box_types

HEAD = """<borealis>
<schema name="Row"><field name="k" type="int"/><field name="v" type="int"/><field name="s" type="string" size="4"/></schema>
<schema name="Ask"><field name="k" type="int"/><field name="s" type="string" size="4"/></schema>
<input stream="Put" schema="Row"/><input stream="Read" schema="Ask"/>
<table name="T" schema="Row"><key field="k"/></table>
"""
PUT = """<box name="put" type="insert"><in stream="Put"/><access table="T"/>
  <parameter name="sql" value="insert into T values (k, v, s)"/></box>
"""


def plan(body: str):
    catalog = Catalog()
    catalog.nodes.update({name: Node(name) for name in ("n:1", "n:2")})
    return plan_submission(catalog, [read_document(HEAD + body + "</borealis>", "app.xml")], box_types())


def line_of(body: str, box: str) -> int:
    text = HEAD + body
    return text[:text.index(f'<box name="{box}"')].count("\n") + 1


def test_the_four_table_boxes_are_accepted_and_their_out_schemas_follow_the_table():
    body = PUT + """<box name="read" type="select"><in stream="Read"/><access table="T"/>
      <out stream="Found"/><out stream="Missed"/>
      <parameter name="sql" value="select s, T.k from T where T.k == input.k"/>
      <parameter name="pass-on-no-results" value="1"/></box>
    <box name="all" type="select"><in stream="Read"/><access table="T"/><out stream="All"/>
      <parameter name="sql" value="select * from T"/></box>
    <box name="bump" type="update"><in stream="Read"/><access table="T"/><out stream="Bumped"/>
      <parameter name="sql" value="update T set T.v = T.v + 1, s = input.s where T.k = input.k"/>
      <parameter name="pass-input" value="1"/></box>
    <box name="drop" type="delete"><in stream="Read"/><access table="T"/><out stream="Gone"/>
      <parameter name="sql" value="delete from T where T.s = input.s"/>
      <parameter name="pass-deletions" value="1"/></box>"""
    planned = plan(body)
    assert planned.problems == []
    schemas = stream_schemas(planned.catalog, box_types())
    shapes = {s: [(f.name, f.type.value) for f in schemas[s].fields] for s in ("Found", "Missed", "All", "Gone",
                                                                               "Bumped")}
    assert shapes["Found"] == [("s", "string"), ("k", "int")]
    assert shapes["Missed"] == shapes["Bumped"] == [("k", "int"), ("s", "string")]  # the input, passed on
    assert shapes["All"] == shapes["Gone"] == [("k", "int"), ("v", "int"), ("s", "string")]  # the table's rows


REFUSED = [
    ('<box name="b" type="select"><in stream="Read"/><access table="T"/><out stream="O"/></box>',
     "select box 'b' needs parameter 'sql'"),
    ('<box name="b" type="select"><in stream="Read"/><access table="T"/><out stream="O"/>'
     '<parameter name="sql" value="select from T"/></box>', "is not select *|FIELD, ... from TABLE"),
    ('<box name="b" type="select"><in stream="Read"/><access table="T"/><out stream="O"/>'
     '<parameter name="sql" value="select * from T where T.x = input.k"/></box>', "unknown field 'T.x'"),
    ('<box name="b" type="select"><in stream="Read"/><access table="T"/><out stream="O"/>'
     '<parameter name="sql" value="select * from U"/></box>',
     "parameter 'sql' names table 'U', but the box accesses table 'T'"),
    ('<box name="b" type="select"><in stream="Read"/><access table="T"/><out stream="O"/>'
     '<parameter name="sql" value="select w from T"/></box>', "selects 'w', which is not a field of table 'T'"),
    ('<box name="b" type="select"><in stream="Read"/><access table="T"/><out stream="O"/><out stream="P"/>'
     '<parameter name="sql" value="select * from T"/><parameter name="pass-result-sizes" value="1"/></box>',
     "parameter 'pass-result-sizes' is not supported yet"),
    ('<box name="b" type="insert"><in stream="Put"/><access table="T"/>'
     '<parameter name="sql" value="insert into T values (k, v)"/></box>', "gives 2 values, table 'T' has 3 fields"),
    ('<box name="b" type="insert"><in stream="Put"/><access table="T"/>'
     '<parameter name="sql" value="insert into T values (k, s, s)"/></box>',
     "'s' is string, table field 'v' is int"),
    ('<box name="b" type="insert"><in stream="Put"/><access table="T"/><out stream="O"/>'
     '<parameter name="sql" value="insert into T values (k, v, s)"/></box>',
     "insert box 'b' has 1 out streams, its parameters give 0"),
    ('<box name="b" type="update"><in stream="Read"/><access table="T"/>'
     '<parameter name="sql" value="update T set T.w = 1"/></box>', "sets 'w', which is not a field of table 'T'"),
    ('<box name="b" type="update"><in stream="Read"/><access table="T"/><out stream="O"/>'
     '<parameter name="sql" value="update T set T.v = 1"/><parameter name="output-expression.0" value="new.v"/>'
     '</box>', "parameter 'output-expression.0' is not supported: Borealis's UpdateQBox marks"),
    ('<box name="b" type="delete"><in stream="Read"/><access table="T"/>'
     '<parameter name="sql" value="delete from T"/><parameter name="pass-input" value="maybe"/></box>',
     "parameter 'pass-input'='maybe' must be 0 or 1"),
    ('<box name="b" type="delete"><in stream="Read"/><access table="T"/><access table="T"/>'
     '<parameter name="sql" value="delete from T"/></box>', "accesses 2 tables"),
    ('<box name="b" type="filter"><in stream="Read"/><parameter name="expression.0" value="k = 1"/></box>',
     "filter box 'b' has 0 out streams, its parameters give 1"),
]


@pytest.mark.parametrize("body, why", REFUSED)
def test_a_wrong_table_box_is_refused_at_its_box_with_the_reason(body, why):
    problems = plan(PUT + body).problems
    assert problems, "refused"
    assert (problems[0].file, problems[0].line) == ("app.xml", line_of(PUT + body, "b"))
    assert why in problems[0].reason


def test_a_tables_key_must_be_one_of_its_fields():
    body = ('<table name="K" schema="Row"><key field="x"/></table>\n<box name="b" type="delete"><in stream="Read"/>'
            '<access table="K"/><parameter name="sql" value="delete from K"/></box>')
    [problem] = plan(body).problems
    assert problem.line == line_of(body, "b")
    assert "table 'K''s key 'x' is not one of its fields (k, v, s)" in problem.reason


def test_a_table_accessed_from_two_nodes_is_refused_naming_both():
    body = PUT.replace('type="insert"', 'type="insert" node="n:1"') + (
        '<box name="b" type="select" node="n:2"><in stream="Read"/><access table="T"/><out stream="O"/>'
        '<parameter name="sql" value="select * from T"/></box>')
    [problem] = plan(body).problems
    assert problem.line == line_of(body, "put")
    assert ("table 'T' is accessed from several nodes (select box 'b' on n:2; insert box 'put' on n:1): a table's "
            "rows live on one node") in problem.reason


def test_a_table_box_fed_a_changelog_is_refused():
    body = PUT + """<box name="v" type="m3"><in stream="Read"/><out stream="V"/>
      <parameter name="sql" value="SELECT k, s FROM Read"/></box>
    <box name="b" type="select"><in stream="V"/><access table="T"/><out stream="O"/>
      <parameter name="sql" value="select * from T where T.k = input.k"/></box>"""
    [problem] = plan(body).problems
    assert problem.line == line_of(body, "b")
    assert "a select box cannot apply weights" in problem.reason



def test_joinstatic_joins_its_stream_with_a_tables_rows():
    body = PUT + """<box name="j" type="joinstatic"><in stream="Read"/><access table="T"/><out stream="J"/>
      <parameter name="predicate" value="left.k = right.k"/></box>
    <box name="f" type="joinstatic"><in stream="Read"/><access table="T"/><out stream="F"/>
      <parameter name="predicate" value="left.s = right.s"/>
      <parameter name="out-field.0" value="right.v + 1"/><parameter name="out-field-name.0" value="n"/></box>"""
    planned = plan(body)
    assert planned.problems == []
    schemas = stream_schemas(planned.catalog, box_types())
    assert [f.name for f in schemas["J"].fields] == ["k", "s", "k", "v", "s"]  # the input's, then the row's
    assert [(f.name, f.type.value) for f in schemas["F"].fields] == [("n", "int")]


def test_joinstatic_with_two_in_streams_as_borealis_wrote_it_is_refused_with_the_reason():
    body = PUT + """<box name="b" type="joinstatic"><in stream="Read"/><in stream="Put"/><out stream="J"/>
      <parameter name="predicate" value="left.k = right.k"/></box>"""
    [problem] = plan(body).problems
    assert problem.line == line_of(body, "b")
    assert "joinstatic box 'b' has 2 in streams: Borealis's JoinStatic joined its first with rows its code reads " \
           "from a file it names" in problem.reason


def test_an_index_derived_after_a_move_says_what_the_whole_check_says_of_a_table_used_on_two_nodes():
    """Incremental validation skips the table-placement walk for a change that reaches no table box, table or
    partition (issue 37); a move of a table box, or of its table, is still refused as the whole check refuses it."""
    from dataclasses import replace
    from boreas.catalog.index import CatalogIndex
    from boreas.catalog.validate import check_topology

    body = PUT + """<box name="all" type="select"><in stream="Read"/><access table="T"/><out stream="All"/>
      <parameter name="sql" value="select * from T"/></box>
    <box name="f" type="filter"><in stream="All"/><out stream="F"/><parameter name="expression.0" value="k &gt; 1"/>
      </box>"""
    catalog = plan(body).catalog
    for name in ("put", "all", "f"):
        catalog.boxes[name] = replace(catalog.boxes[name], node="n:1")
    index = CatalogIndex.build(catalog, box_types())
    assert index.ok

    def moved(base: CatalogIndex, **changes) -> CatalogIndex:
        after = base.catalog.copy()
        for name, node in changes.items():
            kind = "tables" if name == "T" else "boxes"
            getattr(after, kind)[name] = replace(getattr(after, kind)[name], node=node)
        derived = base.derive(after)
        assert [str(p) for p in derived.problems] == [str(p) for p in check_topology(after, box_types()).problems]
        return derived

    assert moved(index, f="n:2").ok  # reaches no table box: nothing to say
    refused = moved(index, all="n:2")
    assert [p.reason for p in refused.problems] == [
        "table 'T' is accessed from several nodes (select box 'all' on n:2; insert box 'put' on n:1): a table's "
        "rows live on one node, so every box that accesses it runs there (docs/operators.md, \"Table boxes\")"]
    assert not moved(index, T="n:2").ok  # the table itself placed elsewhere
    assert moved(index, all="n:2", put="n:2").ok
