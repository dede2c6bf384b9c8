"""The XSD schemas accept real Borealis XML and report violations usefully."""

from __future__ import annotations

from pathlib import Path

import lxml.etree
import pytest
import xmlschema

from boreas.catalog import ValidationFailed, read_document
from boreas.schemas import LANGUAGES, XsdProblem, schema_for, xsd_errors

DATA = Path(__file__).parent / "data" / "borealis"
SHARED = Path(__file__).parents[1].parent / "shared" / "borealis"


def parse(data: str | bytes):
    if isinstance(data, str):
        data = data.encode()
    parser = lxml.etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
    return lxml.etree.fromstring(data, parser)


def borealis_files() -> list[Path]:
    files = sorted(DATA.glob("*.xml"))
    if SHARED.is_dir():
        files += sorted(SHARED.glob("*.xml"))
    return files


@pytest.mark.parametrize("path", borealis_files(), ids=lambda p: f"{'shared' if p.parent == SHARED else 'data'}/{p.name}")
def test_real_borealis_files_validate(path: Path):
    root = parse(path.read_bytes())
    assert root.tag in LANGUAGES
    assert xsd_errors(root) == []
    assert schema_for(LANGUAGES[root.tag]).is_valid(root)


def test_real_files_exist():
    assert len(list(DATA.glob("*.xml"))) >= 10


# ---------------------------------------------------------------- the paper

FIGURE_1 = """<?xml version="1.0"?>
<!DOCTYPE borealis SYSTEM
    "http://www.cs.brown.edu/research/borealis/borealis.dtd" >

<borealis>
  <input  stream="Packet"    schema="PacketTuple"  />
  <output stream="Aggregate" schema="AggregateTuple" />

  <schema name="PacketTuple">
    <field name="time"      type="int" />
    <field name="protocol"  type="string" size="4" />
  </schema>

  <schema name="AggregateTuple">
    <field name="interval"  type="int" />
    <field name="count"     type="int" />
  </schema>

  <box name="mybox" type="aggregate" >
    <in  stream="Packet" />
    <out stream="Aggregate" />

    <parameter name="aggregate-function.0" value="count()" />
    <parameter name="window-size-by"      value="VALUES" />
    <parameter name="window-size"        value="1" />
    <parameter name="advance"            value="1" />
    <parameter name="order-by"           value="FIELD" />
    <parameter name="order-on-field"     value="time" />
  </box>
</borealis>
"""

FIGURE_2 = """<?xml version="1.0"?>
<!DOCTYPE borealis SYSTEM
    "http://www.cs.brown.edu/research/borealis/borealis.dtd" >

<deploy>
  <publish    stream="Packet"    endpoint="localhost:15000" />
  <subscribe  stream="Aggregate"  endpoint="localhost:25000" />

  <node    endpoint="localhost:15000"    query="mybox" />
</deploy>
"""


@pytest.mark.parametrize("doc", [FIGURE_1, FIGURE_2], ids=["figure1", "figure2"])
def test_paper_figures_validate(doc: str):
    assert xsd_errors(parse(doc)) == []


def test_doctype_does_not_matter():
    # Figure 2's DOCTYPE names <borealis> but the root is <deploy>: irrelevant.
    without = FIGURE_2.replace(
        '<!DOCTYPE borealis SYSTEM\n    "http://www.cs.brown.edu/research/borealis/borealis.dtd" >', ""
    )
    assert "DOCTYPE" not in without
    assert xsd_errors(parse(without)) == xsd_errors(parse(FIGURE_2)) == []


# Every element and attribute application XML allows, at least once.
EVERYTHING = """<borealis update_queue="1" queue_type="3" key="time">
  <type name="pair" array="int(2)" size="8"/>
  <schema name="S"><field name="time" type="long"/><field name="s" type="string" size="4"/></schema>
  <schema name="Control"/>
  <input stream="A" schema="S" node=":15000"/>
  <output stream="B" schema="S" node=":15000"/>
  <query name="q" update_queue="0" queue_type="2" key="time">
    <schema name="T"><field name="b" type="byte"/></schema>
    <type name="t2" array="short(1...4)"/>
    <input stream="C" schema="T"/>
    <box name="b" type="filter" node=":15000" update_queue="1" queue_type="1" key="time">
      <in stream="A" connection_point_view="v" update_queue="1" queue_type="0" key="time"/>
      <in stream="C"/>
      <out stream="B"/>
      <access table="tab"/>
      <parameter name="expression.0" value="true"/>
    </box>
    <table name="tab" schema="S" stream="A" node=":15000"><key field="time"/><key field="s"/><index/></table>
    <connection_point_view name="v2" stream="C"><size value="10"/></connection_point_view>
    <output stream="B"/>
  </query>
  <connection_point_view name="v" stream="A">
    <size value="10"/><order field="time"/><parameter name="p" value="1"/>
  </connection_point_view>
  <modify table="tab"><parameter name="p" value="2"/></modify>
  <delete query="q" box="b"/>
  <delete/>
</borealis>
"""


def test_every_application_feature_validates():
    assert xsd_errors(parse(EVERYTHING)) == []


# ---------------------------------------------------------------- update XML

UPDATE = """<?xml version="1.0"?>
<update version="7" origin="head" id="sub-42">
  <schema name="PacketTuple">
    <field name="value" type="double"/>
    <field name="time"  type="timestamp"/>
  </schema>
  <input  stream="Packet" schema="PacketTuple" node=":15000"/>
  <output stream="Result" schema="PacketTuple" node=":15100"/>
  <box name="box1" type="filter" node=":15000" update_queue="1" queue_type="8" key="time">
    <in stream="Packet" connection_point_view="cpv" update_queue="0" queue_type="0" key="time"/>
    <out stream="Result"/>
    <parameter name="expression.0" value="1=1"/>
    <access table="t"/>
  </box>
  <table name="t" schema="PacketTuple" node=":15000">
    <key field="time"/>
    <index field="value"/>
    <parameter name="truncate" value="1"/>
  </table>
  <connection_point_view name="cpv" stream="Packet">
    <range start="3" end="10"/>
    <order field="time"/>
  </connection_point_view>
  <query name="q">
    <box name="box2" type="filter"><in stream="Result"/><out stream="Add"/></box>
    <output stream="Add"/>
  </query>
  <move box="box1" node=":15100"/>
  <move table="t" node=":15100"/>
  <connect box="box1" port="0" upstream="1">
    <box name="drop" type="random_drop">
      <in stream="Packet"/>
      <out stream="Dropped"/>
      <parameter name="drop_rate" value="0.5"/>
    </box>
  </connect>
  <connect node=":15100">
    <box name="drop" type="random_drop"><in stream="Packet"/><out stream="Dropped"/></box>
  </connect>
  <disconnect stream="Dropped"/>
  <disconnect box="box1"/>
  <global endpoint="localhost:40000"/>
  <delete global="localhost:40000"/>
  <delete query="q" box="box2" table="t" stream="Add" node=":15100" view="cpv"/>
  <modify box="box1"><parameter name="expression.0" value="value &gt; 0"/></modify>
  <node endpoint=":15200" query=""/>
  <region node=":15000" endpoint=":30000" name="east"/>
  <publish stream="Packet" node=":15000"/>
  <subscribe stream="Result" endpoint=":25000" gap="10"/>
  <unsubscribe stream="Result" endpoint=":25000"/>
  <client prefix="Add" endpoint=":25100"><subscribe stream="Add"/></client>
  <replica_set name="rs" query="q"><node endpoint=":15300"/></replica_set>
</update>
"""


def test_sample_update_validates():
    assert xsd_errors(parse(UPDATE)) == []


def test_empty_update_validates():
    assert xsd_errors(parse("<update/>")) == []


def test_update_only_delete_attributes_rejected_in_application_xml():
    [problem] = xsd_errors(parse('<borealis>\n<delete table="t"/>\n</borealis>'))
    assert problem.line == 2
    assert "'table'" in problem.reason and "<delete>" in problem.reason


@pytest.mark.parametrize("element", ["<connect/>", "<global/>", "<disconnect/>"])
def test_update_only_elements_rejected_in_deploy(element: str):
    [problem] = xsd_errors(parse(f"<deploy>{element}</deploy>"))
    assert element.strip("</>") in problem.reason


# ---------------------------------------------------------------- problems

BAD = """<?xml version="1.0"?>
<!DOCTYPE borealis SYSTEM "borealis.dtd">
<borealis>
  <!-- a comment must not shift positions -->
  <input stream="Packet" schema="PacketTuple" foo="1"/>
  <output schema="PacketTuple"/>
  <schema name="PacketTuple">
    <field name="flag" type="bool(2)"/>
  </schema>
  <bogus/>
  <box name="b" type="filter">
    <out stream="Result"/>
  </box>
</borealis>
"""


@pytest.fixture(scope="module")
def bad_problems() -> list[XsdProblem]:
    return xsd_errors(parse(BAD))


def only(problems: list[XsdProblem], line: int) -> XsdProblem:
    found = [p for p in problems if p.line == line]
    assert len(found) == 1, problems
    reason = found[0].reason
    assert "\n" not in reason and len(reason) < 200, reason
    return found[0]


def test_unknown_attribute(bad_problems):
    p = only(bad_problems, 5)
    assert "unknown attribute 'foo'" in p.reason and "<input>" in p.reason
    assert p.path == "/borealis/input"


def test_missing_required_attribute(bad_problems):
    p = only(bad_problems, 6)
    assert "missing required attribute 'stream'" in p.reason and "<output>" in p.reason


def test_bad_array_element_type_is_left_to_the_reader_which_names_it():
    # The XSD checks only an array type's shape, element(...): the reader says precisely what is
    # wrong with it (an unknown element type here; a sparse dimension or a <schema> element
    # elsewhere: tests/test_borealis_arrays.py), at the same file, line and element.
    doc = BAD.replace(' foo="1"', "").replace('<output schema="PacketTuple"/>', "")
    doc = doc.replace("  <bogus/>\n", "").replace('<out stream="Result"/>', '<in stream="Packet"/><out stream="Result"/>')
    with pytest.raises(ValidationFailed) as failed:
        read_document(doc, "bad.xml")
    [problem] = failed.value.diagnostics
    assert (problem.file, problem.line, problem.path) == ("bad.xml", 8, "/borealis/schema/field")
    assert "array type 'bool(2)': element type 'bool' is not one of" in problem.reason


def test_unknown_element(bad_problems):
    p = only(bad_problems, 10)
    assert "unexpected child element <bogus>" in p.reason
    assert p.path == "/borealis/bogus"


def test_box_without_in(bad_problems):
    p = only(bad_problems, 12)  # the <out> that came where <in> was due
    assert "<out>" in p.reason and "<box>" in p.reason and "<in>" in p.reason


def test_no_other_problems(bad_problems):
    assert sorted(p.line for p in bad_problems) == [5, 6, 10, 12]


def test_incomplete_box_reports_missing_child():
    doc = '<borealis>\n  <box name="b" type="t">\n    <parameter name="p" value="1"/>\n  </box>\n</borealis>'
    [p] = xsd_errors(parse(doc))
    assert p.line == 3 and "<parameter>" in p.reason and "<in>" in p.reason


def test_a_box_without_out_is_left_to_validation():
    """Borealis's insert and update boxes have none; how many a box needs is its type's business."""
    assert xsd_errors(parse('<borealis>\n  <box name="b" type="t">\n    <in stream="x"/>\n  </box>\n</borealis>')) == []


def test_unknown_root():
    [p] = xsd_errors(parse("<?xml version='1.0'?>\n<foo/>"))
    assert p.line == 2
    assert "<foo>" in p.reason
    assert all(f"<{root}>" in p.reason for root in LANGUAGES)


def test_shared_element_is_not_a_root():
    # <box> is declared globally in common.xsd, but is not a document root.
    [p] = xsd_errors(parse('<box name="b" type="t"><in stream="x"/><out stream="y"/></box>'))
    assert "unknown root element <box>" in p.reason


def test_accepts_element_tree():
    assert xsd_errors(parse(FIGURE_1).getroottree()) == []


def test_bad_update_attributes():
    doc = '<update version="x">\n<connect port="-1" upstream="2"/>\n</update>'
    problems = xsd_errors(parse(doc))
    reasons = " | ".join(p.reason for p in problems)
    assert [p.line for p in problems] == [1, 2, 2, 2]
    assert "version='x'" in reasons and "port='-1'" in reasons and "upstream='2'" in reasons
    assert "int()" not in reasons


# ---------------------------------------------------------------- schema_for


def test_schema_for_accepts_language_or_root_and_caches():
    assert schema_for("borealis") is schema_for("application")
    assert schema_for("deploy") is schema_for("deployment")
    assert schema_for("update") is schema_for("update")
    assert isinstance(schema_for("update"), xmlschema.XMLSchema)


def test_schema_for_unknown():
    with pytest.raises(ValueError, match="known"):
        schema_for("nope")
