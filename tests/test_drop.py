"""Dropping and resubmitting an application (issue 31, item 5): ``<delete stream>`` in application XML, and
``boreas drop`` taking queries, boxes, streams or a whole application file out of the running catalog."""

from __future__ import annotations

import pytest
from boreas.catalog import Catalog, plan_submission, read_document
from boreas.m3.boxtype import box_types
from support.cluster import EXAMPLES

CHAIN = (EXAMPLES / "sensor_chain.xml").read_bytes()
TYPES = box_types()


def committed(*texts: bytes | str) -> Catalog:
    catalog = Catalog()
    for i, text in enumerate(texts):
        plan = plan_submission(catalog, [read_document(text, f"doc{i}.xml")], TYPES)
        assert plan.ok, plan.problems
        catalog = plan.catalog
    return catalog


def test_a_stream_still_read_is_refused_naming_its_readers_and_goes_after_them():
    catalog = committed(CHAIN)
    plan = plan_submission(catalog, [read_document('<borealis><delete stream="Reading"/></borealis>', "d.xml")],
                           TYPES)
    assert not plan.ok
    assert "cannot delete stream 'Reading': valid still uses it" in plan.problems[0].reason
    assert plan.problems[0].file == "d.xml" and plan.problems[0].line == 1
    text = ('<borealis><delete query="cleanup"/><delete query="convert"/><delete query="summarise"/>'
            '<delete stream="Reading"/><delete stream="Average"/></borealis>')
    plan = plan_submission(catalog, [read_document(text, "d.xml")], TYPES)
    assert plan.ok, plan.problems
    assert not plan.catalog.boxes and "Reading" not in plan.catalog.inputs and "Average" not in plan.catalog.outputs
    again = plan_submission(plan.catalog, [read_document(CHAIN, "chain.xml")], TYPES)  # the edit loop
    assert again.ok, again.problems


def test_a_stream_that_is_not_there_is_named():
    plan = plan_submission(committed(CHAIN), [read_document('<borealis><delete stream="Nope"/></borealis>',
                                                            "d.xml")], TYPES)
    assert "cannot delete stream 'Nope': no such stream" in plan.problems[0].reason


def test_what_drop_sends_for_a_file_and_for_names():
    from boreas.catalog.documents import Application
    from boreas.cli.common import BadInput
    from boreas.cli.drop import deletes_for_application, deletes_for_names

    catalog = committed(CHAIN)
    queries, boxes = set(catalog.queries), set(catalog.boxes)
    streams = {*catalog.inputs, *catalog.outputs}
    app = read_document(CHAIN, "chain.xml")
    assert isinstance(app, Application)
    sent = deletes_for_application(app, queries, boxes, streams)
    assert sent[-2:] == ['<delete stream="Reading"/>', '<delete stream="Average"/>']
    plan = plan_submission(catalog, [read_document("<borealis>" + "".join(sent) + "</borealis>", "drop.xml")], TYPES)
    assert plan.ok and not plan.catalog.boxes, plan.problems
    with pytest.raises(BadInput, match=r"no query, box or stream 'Readng' in the catalog \(did you mean 'Reading'"):
        deletes_for_names(["Readng"], queries, boxes, streams)


@pytest.mark.slow
def test_drop_then_submit_again_on_a_cluster(cluster_factory):
    cluster = cluster_factory()
    nodes, ports = cluster.sensor_chain()
    deploy = cluster.example("sensor_chain_deploy.xml", ports)
    refused = cluster.boreas("submit", str(EXAMPLES / "sensor_chain.xml"), str(deploy))
    assert refused.returncode == 2 and "duplicate input stream 'Reading'" in refused.stderr
    stream_only = cluster.boreas("drop", "Reading")
    assert stream_only.returncode == 2 and "valid still uses it" in stream_only.stderr
    dropped = cluster.boreas("drop", str(EXAMPLES / "sensor_chain.xml"))
    assert dropped.returncode == 0, dropped.stdout + dropped.stderr
    catalog = cluster.head_catalog()
    assert not catalog.boxes and "Reading" not in catalog.inputs
    for node in nodes:
        cluster.wait_in_sync(node)
        assert not cluster.node_catalog(node).boxes
    again = cluster.boreas("submit", str(EXAMPLES / "sensor_chain.xml"), str(deploy))
    assert again.returncode == 0, again.stderr
    assert set(cluster.head_catalog().boxes) == {"valid", "to_fahrenheit", "per_sensor"}
