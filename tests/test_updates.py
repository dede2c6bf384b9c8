"""Update XML written by Boreas validates against its XSD and reads back to the same items."""

from pathlib import Path

from lxml import etree

from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.document_model import Connect, Delete, Disconnect, Modify, Move, NodeAssignment, Unsubscribe
from boreas.catalog.model import Box, GlobalComponent, InPort
from boreas.catalog.updates import update_document
from boreas.schemas import xsd_errors

EXAMPLES = Path(__file__).parents[1] / "examples" / "xml"


def test_every_catalog_element_and_operation_round_trips():
    docs = [read_document((EXAMPLES / f).read_bytes(), f)
            for f in ("sensor_chain.xml", "sensor_chain_deploy.xml", "sensor_chain_region_deploy.xml")]
    docs.append(read_document('<deploy><client endpoint=":25000"><subscribe stream="Average"/></client></deploy>'))
    catalog = plan_submission(Catalog(), docs).catalog
    declarations = [obj for name in ("schemas", "inputs", "outputs", "boxes", "queries", "nodes", "regions",
                                     "publications", "subscriptions", "clients")
                    for obj in getattr(catalog, name).values()]
    filter_box = Box("drop", "filter", (InPort("Valid"),), ("Valid2",), (("expression.0", "sensor > 3"),))
    operations = [
        Move("localhost:15100", box="valid"),
        Connect(filter_box, sink="to_fahrenheit", port=0, upstream=True, node="localhost:15100"),
        Disconnect(stream="Valid2"),
        Delete(box="valid"),
        Delete(global_="localhost:40000"),
        Modify((("expression.0", "celsius > 0.0"),), box="valid"),
        Unsubscribe("Average", "localhost:25000"),
        NodeAssignment("localhost:15200", ("summarise",)),
        GlobalComponent("localhost:40000"),
    ]
    text = update_document(declarations + operations, version=12, origin="head", id="sub-1")
    assert xsd_errors(etree.fromstring(text)) == []
    update = read_document(text, "u.xml")
    assert (update.version, update.origin, update.id) == (12, "head", "sub-1")
    assert update.items == declarations + operations
