"""An m3 box's SQL as a reader writes it (issue 31, item 7): the parameter's text, or a file beside the XML.

* ``<parameter name="sql"><![CDATA[ ... ]]></parameter>`` reads as the same box
  as the attribute-escaped form, line breaks kept; a parameter with both or
  neither is refused naming its line and element.
* ``<parameter name="sql-file" value="views/q.sql"/>`` is inlined where the XML
  file is read (``boreas validate``, ``read_file``, ``head_api.read_documents``
  that ``boreas submit`` uses); a missing file is an error naming the XML
  file, line and element; the Head refuses a ``sql-file`` it is sent, having
  read no file (an in-process Head and node).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from boreas.catalog import Catalog, read_document, read_file
from boreas.catalog import plan_submission as catalog_plan_submission
from boreas.catalog.diagnostics import ValidationFailed
from boreas.cli.main import main as boreas
from boreas.client.head_api import read_documents, submit_documents, wait_submission
from boreas.m3.boxtype import box_types
from boreas.wire.client import PeerClient, PeerRefused

from support.cluster import TOKEN
from support.inprocess import in_process

SQL = """CREATE STREAM sales(region INT, amount DOUBLE);
-- a comment: only harmless when the line breaks are kept
SELECT region, SUM(amount) AS total
FROM sales
WHERE amount < 1000 AND amount >= 0
GROUP BY region"""

ESCAPED = SQL.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\n", "&#10;")


def application(parameter: str) -> str:
    return f"""<?xml version="1.0"?>
<!DOCTYPE borealis SYSTEM "borealis.dtd">
<!-- a comment before the root, and a blank line -->

<borealis>
  <input stream="Sales" schema="Sale"/> <output stream="Totals" schema="Total"/>
  <schema name="Sale"><field name="region" type="int"/><field name="amount" type="double"/></schema>
  <schema name="Total"><field name="region" type="int"/><field name="total" type="double"/></schema>
  <box name="totals" type="m3">
    <in stream="Sales"/> <out stream="Totals"/>
    {parameter}
  </box>
</borealis>
"""


def deployment(node: str = "localhost:15000") -> str:
    return f'<deploy><publish stream="Sales"/><node endpoint="{node}" query="totals"/></deploy>'


def box_of(doc) -> object:
    return next(d for d in doc.declarations if getattr(d, "name", None) == "totals")


def plan(*docs):
    return catalog_plan_submission(Catalog(), list(docs), box_types())


def test_the_sql_as_element_text_is_the_same_box_as_the_escaped_attribute():
    as_text = read_document(application(f'<parameter name="sql"><![CDATA[\n{SQL}\n    ]]></parameter>'), "t.xml")
    as_attribute = read_document(application(f'<parameter name="sql" value="{ESCAPED}"/>'), "a.xml")
    assert box_of(as_text).param("sql") == SQL == box_of(as_attribute).param("sql")
    for app in (as_text, as_attribute):  # the -- comment ends at its line: the query compiles
        result = plan(app, read_document(deployment(), "d.xml"))
        assert result.ok, result.problems


def test_text_without_cdata_is_read_too():
    text = SQL.replace("&", "&amp;").replace("<", "&lt;")
    doc = read_document(application(f'<parameter name="sql">{text}</parameter>'), "t.xml")
    assert box_of(doc).param("sql") == SQL


@pytest.mark.parametrize("parameter, reason", [
    (f'<parameter name="sql" value="SELECT 1">{ESCAPED}</parameter>', 'has both value= and text'),
    ('<parameter name="sql"/>', 'has no value: give value= or the value as the element'),
    ('<parameter name="sql">  </parameter>', 'has no value'),
])
def test_a_parameter_needs_exactly_one_of_value_and_text(parameter, reason):
    with pytest.raises(ValidationFailed) as failed:
        read_document(application(parameter), "app.xml")
    (problem,) = failed.value.diagnostics
    assert (problem.file, problem.line, problem.path) == ("app.xml", 11, "/borealis/box/parameter")
    assert reason in problem.reason


def write_application(folder: Path, parameter: str) -> Path:
    path = folder / "app.xml"
    path.write_text(application(parameter))
    (folder / "deploy.xml").write_text(deployment())
    return path


def test_sql_file_is_inlined_relative_to_the_xml_file(tmp_path, capsys):
    (tmp_path / "views").mkdir()
    (tmp_path / "views" / "totals.sql").write_text(SQL)
    app = write_application(tmp_path, '<parameter name="sql-file" value="views/totals.sql"/>')
    assert box_of(read_file(app)).param("sql") == SQL
    assert boreas(["validate", str(app), str(tmp_path / "deploy.xml")]) == 0
    assert "valid" in capsys.readouterr().out
    (name, data), _ = read_documents([app, tmp_path / "deploy.xml"])
    assert name == str(app) and b"sql-file" not in data
    assert box_of(read_document(data, name)).param("sql") == SQL


def test_inlining_keeps_every_line_where_it_was(tmp_path):
    (tmp_path / "totals.sql").write_text(SQL)
    app = write_application(tmp_path, '<parameter name="sql-file" value="totals.sql"/>')
    app.write_text(app.read_text().replace('<out stream="Totals"/>', '<out stream="Totals"/> <bogus/>'))
    with pytest.raises(ValidationFailed) as failed:
        read_file(app)
    assert [(p.file, p.line) for p in failed.value.diagnostics] == [(str(app), 10)]


@pytest.mark.parametrize("name, reason", [
    ("missing.sql", "cannot read {folder}/missing.sql: No such file or directory"),
    ("/etc/passwd.sql", "is an absolute path; give it relative to the XML file's directory"),
    ("totals.txt", "is not a .sql file"),
])
def test_a_sql_file_that_cannot_be_inlined_names_the_xml_file_line_and_element(tmp_path, capsys, name, reason):
    (tmp_path / "totals.txt").write_text(SQL)
    app = write_application(tmp_path, f'<parameter name="sql-file" value="{name}"/>')
    expected = f"{app}:11: /borealis/box/parameter: sql-file {name!r}: {reason.format(folder=tmp_path)}"
    with pytest.raises(ValidationFailed) as failed:
        read_documents([app])
    assert [str(p) for p in failed.value.diagnostics] == [expected]
    assert boreas(["validate", str(app)]) == 2
    assert expected in capsys.readouterr().err


def test_the_head_reads_no_sql_file_it_is_sent(tmp_path):
    (tmp_path / "totals.sql").write_text(SQL)
    app = write_application(tmp_path, '<parameter name="sql-file" value="totals.sql"/>')

    async def scenario() -> None:
        async with in_process(nodes=1) as cluster:
            deploy = deployment(cluster.nodes[0].endpoint).encode()
            async with PeerClient(TOKEN) as peers:
                with pytest.raises(PeerRefused) as refused:  # the raw file: the Head does not open totals.sql
                    await submit_documents(peers, cluster.url, [("app.xml", app.read_bytes()),
                                                                ("deploy.xml", deploy)])
                (problem,) = refused.value.payload["diagnostics"]
                assert (problem["file"], problem["line"]) == ("app.xml", 11)
                assert 'names a file, which only the client reads' in problem["reason"]
                (_, inlined), = read_documents([app])  # as boreas submit sends it
                status = await submit_documents(peers, cluster.url, [("app.xml", inlined), ("deploy.xml", deploy)])
                status = await wait_submission(peers, cluster.url, status, 20)
                assert status["state"] == "deployed", status

    asyncio.run(scenario())
