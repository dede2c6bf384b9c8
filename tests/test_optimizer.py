"""The Python API for optimizers, ``boreas.client.optimizer`` (issue 36; docs/client.md "Optimizers").

In process: the checks every caller shares refuse the same changes for the same reasons, against a catalog
built by hand.  With real processes: a program moves a box and inserts and removes a filter through the
Head, and a regional component does the same through its own catalog; each change shows in the Head's
catalog as a user reading it would see it.  (Moves, connects and relayouts while tuples flow are
test_moves.py, test_connect.py and test_cumulus_relayout.py, through the same API.)
"""

from __future__ import annotations

import asyncio

import pytest
from boreas.catalog.model import Box, Catalog, InPort
from boreas.client.optimizer import Optimizer, OptimizerFailed
from boreas.client.optimizer_updates import (
    check_insertion,
    connect_added,
    connect_document,
    filter_box,
    in_stream,
    inserted_box,
    node_of,
)
from support.cluster import TOKEN, wait_until
from test_connect import connect_topology


def chain() -> Catalog:
    """Packet -> box0 -> Source -> box1 -> Result, box0 on a:1 and box1 on b:2."""
    box0 = Box("box0", "filter", (InPort("Packet"),), ("Source",), (("expression.0", "true"),), node="a:1")
    box1 = Box("box1", "filter", (InPort("Source"),), ("Result",), (("expression.0", "true"),), node="b:2")
    return Catalog(version=7, boxes={"box0": box0, "box1": box1})


def refused(call, status: int, why: str) -> None:
    with pytest.raises(OptimizerFailed, match=why) as failed:
        call()
    assert failed.value.status == status


def test_the_checks_every_caller_shares():
    catalog = chain()
    assert node_of(catalog, "box1") == "b:2" and in_stream(catalog, "box1", 0) == "Source"
    refused(lambda: node_of(catalog, "nosuch"), 404, "no box 'nosuch' in the catalog \\(version 7\\)")
    refused(lambda: in_stream(catalog, "box1", 1), 422, "in ports 0-0, not 1")
    sink, producer = connect_added(catalog, "Source")
    assert (sink.name, producer.name) == ("box1", "box0")
    refused(lambda: connect_added(catalog, "Packet"), 409, "not a stream a connect added")  # no box writes it
    for taken in ("box0", "Result"):
        box = inserted_box(connect_document("box1", 0, filter_box(taken, "Source", "true")))
        refused(lambda: check_insertion(catalog, "box1", 0, box), 409, f"'{taken}' is taken")
    check_insertion(catalog, "box1", 0, inserted_box(connect_document("box1", 0, filter_box("f", "Source", "true"))))


def test_a_connect_document_takes_exactly_one_box():
    refused(lambda: connect_document("box1", 0, "<borealis><box name='a'/><box name='b'/></borealis>"), 422,
            "expected one <box> to insert, found 2")
    refused(lambda: connect_document("box1", 0, "<box"), 422, "box XML")


async def test_a_program_moves_a_box_and_inserts_and_removes_a_filter_through_the_head(cluster_factory):
    cluster = cluster_factory()
    nodes = await asyncio.to_thread(connect_topology, cluster, 2)
    async with Optimizer(cluster.head, TOKEN) as optimizer:
        moved = await optimizer.move("box1", nodes[0])
        assert moved.source == nodes[1] and moved.relayout is None
        assert (await asyncio.to_thread(cluster.head_catalog)).boxes["box1"].node == nodes[0]

        inserted = await optimizer.insert_filter("box1", "time % 2 = 0", name="even")
        assert (inserted["inserted"], inserted["node"], inserted["stream"]) == ("even", nodes[0], "even")
        catalog = await asyncio.to_thread(cluster.head_catalog)
        assert catalog.boxes["even"].node == nodes[0] and catalog.boxes["even"].inputs[0].stream == "Source"
        assert catalog.boxes["box1"].inputs[0].stream == "even"

        for call, status, why in [(lambda: optimizer.move("box1", nodes[0]), 409, "already on"),
                                  (lambda: optimizer.move("nosuch", nodes[0]), 404, "no box 'nosuch'"),
                                  (lambda: optimizer.move("box1/0", nodes[1]), 422, "not partitioned"),
                                  (lambda: optimizer.split("box1", 0), 409, "not partitioned"),
                                  (lambda: optimizer.disconnect("Packet"), 409, "not a stream a connect added"),
                                  (lambda: optimizer.insert_filter("box1", "true", name="box0"), 409, "is taken"),
                                  (lambda: optimizer.insert_filter("box1", "nosuch > 1", name="bad"), 502, "bad")]:
            with pytest.raises(OptimizerFailed, match=why) as failed:
                await call()
            assert failed.value.status == status, (why, failed.value)
        assert "bad" not in (await asyncio.to_thread(cluster.head_catalog)).boxes  # nothing half-applied

        removed = await optimizer.disconnect("even")
        assert removed["removed"] == "even"
    catalog = await asyncio.to_thread(cluster.head_catalog)
    assert "even" not in catalog.boxes and catalog.boxes["box1"].inputs[0].stream == "Source"


@pytest.mark.slow
async def test_a_regional_component_inserts_and_removes_a_filter_through_its_own_catalog(cluster_factory):
    from boreas.regional.component import RegionalComponent

    cluster = cluster_factory()
    nodes = await asyncio.to_thread(connect_topology, cluster, 2)
    region = RegionalComponent(cluster.head, TOKEN, name="default")  # takes over the default region
    await region.start()
    try:
        await region.wait_until(lambda: region.catalog.location("box1") == nodes[1], 10, "box1 in the region")
        optimizer = region.optimizer(10)
        inserted = await optimizer.insert_filter("box1", "time % 2 = 0", name="even", upstream=True)
        assert inserted["node"] == nodes[0] and region.catalog.location("even") == nodes[0]  # shown when it returns
        await asyncio.to_thread(wait_until, lambda: "even" in cluster.head_catalog().boxes, 10,
                                "the Head to learn of the filter")
        await optimizer.disconnect("even")
        assert region.catalog.location("even") is None
        await asyncio.to_thread(wait_until, lambda: cluster.head_catalog().boxes["box1"].inputs[0].stream == "Source",
                                10, "the Head to learn the filter is gone")
    finally:
        await region.close()
