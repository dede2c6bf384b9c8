"""The Borealis DTD, the real move example and the checks tests/test_borealis_forms.py and
tests/test_borealis_arrays.py share: a document planned on an empty catalog, and a catalog carried
through store elements, export and update XML unchanged.
"""

from __future__ import annotations

from pathlib import Path

from lxml import etree

from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.elements import catalog_from_elements, to_elements
from boreas.catalog.export import export_application
from boreas.catalog.replicate import apply_update, update_items
from boreas.catalog.updates import update_document

SHARED = Path(__file__).parents[2].parent / "shared" / "borealis"
DATA = Path(__file__).parents[1] / "data" / "borealis"
BOREALIS = SHARED if (SHARED / "move_Move.xml").is_file() else DATA
PARSER = etree.XMLParser(load_dtd=False, no_network=True, resolve_entities=False)


def dtd() -> etree.DTD:
    """The Borealis DTD (our own file, read from disk: a test fixture, never a document's DOCTYPE)."""
    return etree.DTD(str(BOREALIS / "borealis.dtd"))


def example() -> etree._Element:
    """The real move example's application: Packet -> filter box1 -> Result."""
    return etree.parse(str(BOREALIS / "move_Move.xml"), PARSER).getroot()


def text(root: etree._Element) -> str:
    return etree.tostring(root, encoding="unicode")


def dtd_content_errors(root: etree._Element) -> list[str]:
    """What the DTD says about element order and unknown elements (its ID/IDREF noise left out:
    the DTD marks schema names and stream references as IDs, which real files never satisfy)."""
    d = dtd()
    d.validate(root)
    return [e.message for e in d.error_log
            if "does not follow the DTD" in e.message or "No declaration for element" in e.message
            or "not among the enumerated set" in e.message]


def plan(*texts: str, base: Catalog | None = None, registry=None):
    return plan_submission(base or Catalog(), [read_document(t, f"app{i}.xml") for i, t in enumerate(texts)],
                           registry)


def accepted(doc: str) -> Catalog:
    result = plan(doc)
    assert result.ok, result.problems
    return result.catalog


def carried_unchanged(catalog: Catalog) -> None:
    """Store elements, export + re-read, update XML: each gives back an equal catalog."""
    assert catalog_from_elements(to_elements(catalog)) == catalog
    exported = plan(export_application(catalog))
    assert exported.ok, exported.problems
    assert exported.catalog.schemas == catalog.schemas and exported.catalog.types == catalog.types
    assert exported.catalog.boxes == catalog.boxes
    assert exported.catalog.tables == catalog.tables and exported.catalog.views == catalog.views
    update = read_document(update_document(update_items(Catalog(), catalog), version=1), "u.xml")
    assert apply_update(Catalog(), update.items) == catalog


def line_of(doc: str, needle: str) -> int:
    """The line on which ``needle`` first appears in ``doc``."""
    return doc[: doc.index(needle)].count("\n") + 1


def add(parent: etree._Element, xml: str, index: int | None = None) -> etree._Element:
    el = etree.fromstring(xml)
    if index is None:
        parent.append(el)
    else:
        parent.insert(index, el)
    return el
