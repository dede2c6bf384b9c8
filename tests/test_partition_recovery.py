"""A member of a partitioned box restarted from a snapshot taken while another member was not reading.

The GROUP BY view of ``test_cumulus_groupby`` partitioned over three durable
nodes.  Member 2's node is stopped (SIGSTOP) while events flow, so what
members 0 and 1 send it (Work for its segments, Close, Advance) waits
unacknowledged on their links; member 1's node then takes a snapshot, and
both nodes are killed with SIGKILL and restarted.  A restart replays the log
only after the snapshot, so member 1's messages to member 2 from before it
would never be produced again, and member 2 would go on without them.  The snapshot
keeps them and the restarted node sends them first: after member 2 goes on
(SIGCONT) and the rest of the input is published, the merged view equals
DuckDB.
"""

from __future__ import annotations

import asyncio
import signal

import pytest
from boreas.client.publisher import Publisher
from boreas.client.query import QueryClient
from support.cluster import TOKEN, take_snapshot
from test_cumulus_groupby import APP, BATCH, deployment, expected_view, producers_for_each_member, workload

pytestmark = [pytest.mark.slow, pytest.mark.faults]


async def test_member_messages_not_acknowledged_at_a_snapshot_survive_a_kill(cluster_factory, tmp_path):
    cluster = cluster_factory()  # no scheduled snapshots: one is taken at the chosen moment
    await asyncio.to_thread(cluster.start_head)
    dirs = [tmp_path / f"member{m}" for m in range(3)]
    nodes = await asyncio.to_thread(cluster.start_nodes, data_dirs=dirs)
    cluster.submit(cluster.write("app.xml", APP), cluster.write("deploy.xml", deployment(nodes)))
    await asyncio.to_thread(cluster.wait_in_sync, *nodes)
    producers = producers_for_each_member(3)
    data = {p: workload(p, 1_200) for p in producers}

    async with Publisher(cluster.head, "R", TOKEN, producer=producers[0], batch_size=BATCH) as first, \
            Publisher(cluster.head, "R", TOKEN, producer=producers[1], batch_size=BATCH) as second:
        for publisher, producer in ((first, producers[0]), (second, producers[1])):
            await publisher.send(data[producer][:400])
            await publisher.flush()
        stopped = cluster.procs[nodes[2]]
        stopped.send_signal(signal.SIGSTOP)
        try:
            for publisher, producer in ((first, producers[0]), (second, producers[1])):
                await publisher.send(data[producer][400:440])  # one batch each: admitted, Work for member 2
            await asyncio.sleep(0.5)  # epochs end meanwhile: Advance and Close for member 2 wait too
            await asyncio.to_thread(take_snapshot, nodes[1], 1_000)
            # both killed (a rack's power, say): what member 2's kernel had buffered from member 1 is gone too
            await asyncio.to_thread(cluster.stop, nodes[1], True)
            await asyncio.to_thread(cluster.stop, nodes[2], True)
        finally:
            stopped.send_signal(signal.SIGCONT)
        for m in (1, 2):
            await asyncio.to_thread(cluster.start_node, nodes[m], True, dirs[m])
        for publisher, producer in ((first, producers[0]), (second, producers[1])):
            await publisher.send(data[producer][440:])
    async with Publisher(cluster.head, "R", TOKEN, producer=producers[2], batch_size=BATCH) as third:
        await third.send(data[producers[2]])

    expected = expected_view([r for rows in data.values() for r in rows])
    async with QueryClient(cluster.head, TOKEN) as client:
        deadline = asyncio.get_running_loop().time() + 90
        while (await client.query("v")).as_dict() != expected:
            assert asyncio.get_running_loop().time() < deadline, "the partitioned view never equalled DuckDB"
            await asyncio.sleep(0.3)
    restarted = cluster.node_status(nodes[1])["recovery"]
    assert restarted["state"] == "ready" and restarted["restored_from"] == 1_000
