"""The libxml2 fast path and xmlschema must judge every document alike.

``xsd_errors`` trusts libxml2's verdict for valid documents and asks
xmlschema only to explain invalid ones; if the two engines disagreed, a
document could slip through.  Check them against each other on real,
example and deliberately broken documents.
"""

from pathlib import Path

import pytest
from lxml import etree

from boreas.schemas import LANGUAGES, fast_schema, schema_for

ROOT = Path(__file__).parents[1]
FILES = sorted((ROOT / "tests" / "data" / "borealis").glob("*.xml")) + sorted((ROOT / "examples" / "xml").glob("*.xml"))

BROKEN = [
    '<borealis><input stream="A"/></borealis>',
    '<borealis><box name="b" type="filter"><out stream="B"/></box></borealis>',
    '<borealis><schema name="T"><field name="x" type="bool"/></schema></borealis>',
    '<borealis><bogus/></borealis>',
    '<borealis queue_type="9"/>',
    '<deploy><node query="x"/></deploy>',
    '<deploy><client endpoint=":1"/></deploy>',
    '<update version="-1"/>',
    '<update><connect box="b"/></update>',
    '<update><connect box="b" upstream="2"><box name="f" type="filter"><in stream="A"/><out stream="B"/></box></connect></update>',
    '<update><global/></update>',
    '<borealis><connection_point_view name="v" stream="s"><order field="x"/><size value="1"/></connection_point_view></borealis>',
]


def _parse(data: bytes) -> etree._ElementTree:
    return etree.ElementTree(etree.fromstring(data, etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)))


@pytest.mark.parametrize("data", [f.read_bytes() for f in FILES] + [b.encode() for b in BROKEN],
                         ids=[f.name for f in FILES] + [f"broken{i}" for i in range(len(BROKEN))])
def test_engines_agree(data):
    tree = _parse(data)
    root = tree.getroot()
    fast = fast_schema(LANGUAGES[root.tag]).validate(tree)
    slow = not list(schema_for(root.tag).iter_errors(root))
    assert fast == slow
