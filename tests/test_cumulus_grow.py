"""A partition grown onto a new node while publishers stream, with real processes (docs/cumulus.md §6.4).

A box partitioned over two node processes gets a third: the deployment is
submitted again with the new ``<node>`` appended, which the Head commits as
*joining* (``boreas catalog show`` says so) and the running members follow in
place; ``boreas rebalance`` then moves segments onto it, and the new member
takes part from the first epoch of that change.  Meanwhile publishers keep
streaming to the first two members (the ones publishers pick from).
Afterwards the view equals DuckDB, every stable read taken during the run
equals DuckDB over the input prefixes it names, the new node holds entries,
and the Head's catalog and every member's agree on the layout, with no node
joining any more.  The last test shrinks the partition back: the grown
node's segments move away and ``boreas retire`` takes it out, while
publishers stream; the view stays exact and the node no longer runs the box.
"""

from __future__ import annotations

import asyncio

import pytest
from boreas.client.optimizer import Optimizer
from boreas.client.query import QueryClient
from support.cluster import TOKEN, get_json
from support.m3_q3 import duckdb_q3, q3_app, q3_rows
from test_cumulus_groupby import (
    APP,
    PrefixViews,
    deployment,
    expected_view,
    producers_for_each_member,
    streaming,
    view_becomes,
    workload,
)
from test_cumulus_q3 import deploy, insert_then_delete, publish_all, view_equals, with_deletes
from test_cumulus_relayout import catalogs_agree

pytestmark = pytest.mark.slow


async def grow(cluster, nodes: list[str], document: str, box: str) -> dict:
    """Submit ``document`` (the partition over every node in ``nodes``), then rebalance onto the new one."""
    await asyncio.to_thread(cluster.submit, cluster.write("grow.xml", document))
    await asyncio.to_thread(cluster.wait_in_sync, *nodes)
    shown = await asyncio.to_thread(cluster.boreas, "catalog", "show", "--head", cluster.head)
    assert f"joining {nodes[-1]}" in shown.stdout, shown.stdout + shown.stderr
    async with Optimizer(cluster.head, TOKEN) as optimizer:
        return await optimizer.rebalance(box)


def holds_entries(node: str, box: str) -> int:
    counted = get_json(f"http://{node}/segments/{box}")
    return sum(n for per_map in counted["segments"].values() for n in per_map.values())


async def test_a_group_by_grows_onto_a_third_node_while_publishers_stream(cluster_factory):
    cluster = cluster_factory()
    await asyncio.to_thread(cluster.start_head)
    nodes = await asyncio.to_thread(cluster.start_nodes, 3)
    cluster.submit(cluster.write("app.xml", APP), cluster.write("deploy.xml", deployment(nodes[:2])))
    await asyncio.to_thread(cluster.wait_in_sync, *nodes[:2])
    data = {p: workload(p, 2500) for p in producers_for_each_member(2)}
    stable_reads: list = []

    async with streaming(cluster.head, data, stable_reads):
        done = await grow(cluster, nodes, deployment(nodes), "v")
    assert done["changed"] and any(to == 2 for _, _, to in done["moves"]), done
    expected = expected_view([r for rows in data.values() for r in rows])
    await view_becomes(cluster.head, "v", expected)
    prefixes = PrefixViews(data)
    assert stable_reads
    for result in stable_reads:
        assert result.as_dict() == prefixes.at(result.positions), f"stable epoch {result.epoch}"
    version = await asyncio.to_thread(catalogs_agree, cluster, nodes, "v")
    part = cluster.head_catalog().partitions["v"]
    assert version == done["layout"]["layout"] and part.layout_nodes == tuple(nodes) and not part.joining
    assert holds_entries(nodes[2], "v") > 0
    shown = await asyncio.to_thread(cluster.boreas, "segments", "v", "--head", cluster.head)
    assert shown.returncode == 0 and nodes[2] in shown.stdout, shown.stderr


@pytest.mark.parametrize("replicate", ["", "m2"], ids=["partitioned", "m2-replicated"])
async def test_q3_grows_onto_a_third_node_while_publishers_stream(cluster_factory, replicate):
    """With ``m2`` replicated (docs/cumulus.md §3.11) the node joining also gets member 0's copy of it (a move of
    segment -1) and applies its writes from its first epoch: it ends holding what the others hold."""
    cluster = cluster_factory()
    await asyncio.to_thread(cluster.start_head)
    nodes = await asyncio.to_thread(cluster.start_nodes, 3)
    cluster.submit(cluster.write("q3.xml", q3_app(sign=True)),
                   cluster.write("deploy.xml", deploy(nodes[:2], replicate=replicate)))
    await asyncio.to_thread(cluster.wait_in_sync, *nodes[:2])
    data = q3_rows(11, customers=60, orders=400, items=2500)
    signed, remaining = with_deletes(data, "q3-grow")
    done: list = []

    async def grow_midway(chunk: int) -> None:
        if chunk == 3:
            done.append(await grow(cluster, nodes, deploy(nodes, replicate=replicate), "q3"))

    await publish_all(cluster.head, nodes[:2], insert_then_delete(signed), between=grow_midway)
    await view_equals(cluster.head, duckdb_q3(remaining))
    assert len(done) == 1 and done[0]["changed"], done
    await asyncio.to_thread(catalogs_agree, cluster, nodes, "q3")
    assert holds_entries(nodes[2], "q3") > 0
    if replicate:
        held = [get_json(f"http://{n}/segments/q3")["segments"]["-1"]["m2"] for n in nodes]
        assert held[0] > 0 and held == [held[0]] * 3, held
        assert [-1, 0, 2] in done[0]["moves"], done  # the copy to the joining member, as the reply names it


async def test_a_grown_node_is_emptied_and_retired_while_publishers_stream(cluster_factory):
    cluster = cluster_factory()
    await asyncio.to_thread(cluster.start_head)
    nodes = await asyncio.to_thread(cluster.start_nodes, 3)
    cluster.submit(cluster.write("app.xml", APP), cluster.write("deploy.xml", deployment(nodes[:2])))
    await asyncio.to_thread(cluster.wait_in_sync, *nodes[:2])
    await asyncio.to_thread(cluster.submit, cluster.write("grow.xml", deployment(nodes)))
    await asyncio.to_thread(cluster.wait_in_sync, *nodes)
    optimizer = Optimizer(cluster.head, TOKEN)
    for seg in (0, 3):  # an empty box: a move (not a rebalance, which has nothing to even out) makes it a member
        await optimizer.move(f"v/{seg}", nodes[2])
    data = {p: workload(p, 2500) for p in producers_for_each_member(2)}
    stable_reads: list = []
    async with streaming(cluster.head, data, stable_reads), optimizer:
        async with QueryClient(cluster.head, TOKEN) as client:
            layout = await client.layout_of("v", fresh=True)
        assert [s.id for s in layout.segments_of(2)] == [0, 3]
        for k, seg in enumerate(layout.segments_of(2)):
            await optimizer.move(f"v/{seg.id}", nodes[k % 2])
        retired = await asyncio.to_thread(cluster.boreas, "retire", "v", nodes[2], "--head", cluster.head)
        assert retired.returncode == 0 and f"{nodes[2]} retired" in retired.stdout, retired.stderr
    expected = expected_view([r for rows in data.values() for r in rows])
    await view_becomes(cluster.head, "v", expected)
    prefixes = PrefixViews(data)
    for result in stable_reads:
        assert result.as_dict() == prefixes.at(result.positions), f"stable epoch {result.epoch}"
    await asyncio.to_thread(catalogs_agree, cluster, nodes[:2], "v")
    assert cluster.head_catalog().partitions["v"].nodes == tuple(nodes[:2])
    assert "v" not in cluster.node_catalog(nodes[2]).partitions
    # a member that still holds segments does not retire, and says why (a coordinator would hand its producers
    # over: docs/cumulus.md §6.5)
    refused = await asyncio.to_thread(cluster.boreas, "retire", "v", nodes[1], "--head", cluster.head)
    assert refused.returncode != 0 and "still holds segment" in refused.stderr, refused.stderr
