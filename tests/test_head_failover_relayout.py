"""A Cumulus relayout whose commit the leading Head never makes is committed by the next leader.

A partitioned box's leader node changes the layout itself (docs/cumulus.md §6), its members switch, and it
then reports the new layout to the Head, which commits it so that every catalog agrees; the report waits in
the node's queue (``node/head_reports.py``) until a leader takes it.  Here the leading Head is stopped before
the relayout is asked and killed with kill -9 once the members switched: only the next leader can commit the
layout, after it brought every node to the catalog it read (which still holds the old layout).  Nothing is
undone meanwhile: a member running a layout follows a catalog that holds an older one of the same partition
(``node/cumulus/part.py`` ``follows``: the catalog learns a relayout after the members made it), and the node
re-sends its report until a leader takes it.  docs/architecture.md, "Leadership and fencing".
"""

from __future__ import annotations

import asyncio
import contextlib
import signal

import pytest
from boreas.client.optimizer import Optimizer
from boreas.client.publisher import Publisher
from boreas.m3.cumulus import Layout
from support.cluster import TOKEN, catalog_at, get_json, wait_until
from test_cumulus_groupby import BATCH, APP, deployment, expected_view, producers_for_each_member, view_becomes, workload
from test_head_failover_ha import heads  # noqa: F401  (the fixture: several Heads on one zk:// catalog)

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]


def layouts(cluster, head: str, nodes: list[str]) -> set[int]:
    """The layout versions of ``v`` that the Head at ``head`` and every member's local catalog hold."""
    held = {catalog_at(f"{head}/catalog").partitions["v"].layout}
    return held | {cluster.node_catalog(n).partitions["v"].layout for n in nodes}


async def test_a_relayout_while_the_leader_dies_is_committed_by_the_next_leader(heads):  # noqa: F811
    cluster = heads(2)
    await asyncio.to_thread(cluster.start_heads)
    leader = await asyncio.to_thread(cluster.leader)
    follower = next(url for url in cluster.urls if url != leader)
    nodes = await asyncio.to_thread(cluster.start_nodes, 3)
    cluster.submit(cluster.write("app.xml", APP), cluster.write("deploy.xml", deployment(nodes)), "--timeout", "60")
    await asyncio.to_thread(cluster.wait_in_sync, *nodes)
    before = Layout.from_dict(get_json(f"{follower}/boxes/v")["partition"])
    segment = next(s for s in before.segments if s.member != 0)  # moved onto the leader node

    data = {p: workload(p, 1500) for p in producers_for_each_member(3)}
    async with contextlib.AsyncExitStack() as stack:  # one publisher per producer, before and after the kill
        publishers = {p: await stack.enter_async_context(Publisher(cluster.head, "R", TOKEN, producer=p,
                                                                   batch_size=BATCH)) for p in data}

        async def send(part: slice) -> None:
            for p, rows in data.items():
                await publishers[p].send(rows[part])

        await send(slice(0, 750))
        stopped = cluster.procs[f"head-{leader.rsplit(':', 1)[1]}"]
        stopped.send_signal(signal.SIGSTOP)  # from here on it commits nothing: it is as good as dead
        both = f"http://{follower.split('://')[1]},{leader.split('://')[1]}"  # the follower answers the reads
        async with Optimizer(both, TOKEN, timeout=60) as optimizer:
            moving = asyncio.create_task(optimizer.move(segment.name("v"), nodes[0]))
            await send(slice(750, 1100))  # rows flow while the segment moves
            await asyncio.to_thread(wait_until, lambda: get_json(f"http://{nodes[0]}/segments/v")["layout"]["layout"]
                                    > before.version, timeout=60, what="the members to switch layouts")
            assert catalog_at(f"{follower}/catalog").partitions["v"].layout == before.version
            await asyncio.to_thread(cluster.kill, leader)
            moved = await moving
        await send(slice(1100, None))

    assert await asyncio.to_thread(cluster.leader) == follower
    after = moved.relayout["layout"]
    assert moved.relayout["changed"] and after["layout"] > before.version
    await asyncio.to_thread(wait_until, lambda: layouts(cluster, follower, nodes) == {after["layout"]},
                            timeout=60, what="the next leader's catalog and every member's to hold the new layout")
    assert Layout.from_dict(get_json(f"{follower}/boxes/v")["partition"]).segments == Layout.from_dict(after).segments
    await view_becomes(cluster.head, "v", expected_view([r for rows in data.values() for r in rows]))
