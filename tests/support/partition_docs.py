"""The application and deployment documents the partition catalog tests submit, and how they submit them.

Shared by :mod:`test_partition_catalog` (XSD, codec, validation, planning)
and :mod:`test_partition_updates` (update XML, the Head, every store).
"""

from __future__ import annotations

from boreas.catalog import Catalog, apply_submission, open_store, plan_submission, read_document
from boreas.m3.boxtype import box_types

NODES = ("localhost:15001", "localhost:15002", "localhost:15003")
GROUP_BY = "SELECT a, SUM(b) AS total, COUNT(*) AS n FROM R GROUP BY a"
JOIN = "SELECT R.a, SUM(S.c) FROM R, S WHERE R.b = S.b GROUP BY R.a"


def app(sql: str = GROUP_BY, extra: str = "") -> str:
    return f"""<?xml version="1.0"?>
<borealis>
  <schema name="RS"><field name="a" type="int"/><field name="b" type="int"/></schema>
  <schema name="SS"><field name="b" type="int"/><field name="c" type="int"/></schema>
  <input stream="R" schema="RS"/>
  <input stream="S" schema="SS"/>
  <box name="v" type="m3"><in stream="R"/>{'<in stream="S"/>' if "S." in sql else ""}<out stream="V"/>
    <parameter name="sql" value="{sql}"/></box>
  <box name="f" type="filter"><in stream="R"/><out stream="F"/><parameter name="expression.0" value="a &gt; 1"/></box>
{extra}</borealis>
"""


def deploy(partition: str, extra: str = '<node endpoint="localhost:15001" query="f"/>') -> str:
    """Line 3 holds the <partition> element."""
    return f'<?xml version="1.0"?>\n<deploy>\n{partition}\n{extra}\n</deploy>\n'


MEMBERS = "".join(f'<node endpoint="{n}"/>' for n in NODES)
PARTITION = f'<partition box="v" segments="8" key="a">{MEMBERS}<map name="Q1_total" key="A"/></partition>'


def plan(*texts: str, base: Catalog | None = None):
    docs = [read_document(t, name) for t, name in zip(texts, ("app.xml", "dep.xml", "more.xml"))]
    return plan_submission(base or Catalog(), docs, box_types())


def committed(*texts: str):
    store = open_store("memory://")
    docs = [read_document(t, name) for t, name in zip(texts, ("app.xml", "dep.xml"))]
    return store, apply_submission(store, docs, registry=box_types()).after


def refused(*texts: str, base: Catalog | None = None, file: str = "dep.xml", line: int | None = 3,
            element: str = "partition") -> list[str]:
    """The reasons, each checked to name the file, line and element it is about."""
    result = plan(*texts, base=base)
    assert not result.ok, "expected the submission to be refused"
    for p in result.problems:
        assert p.file == file and (line is None or p.line == line) and p.path.split("/")[-1].startswith(element), p
    return [p.reason for p in result.problems]
