"""Failover with real processes: a node that stays down has its boxes adopted by a live node.

The chain of ``test_recovery`` (filter on the entry node, map in the middle,
windowed sums on the node feeding the subscriber) runs on durable nodes whose
data directories count as shared storage (``--shared-dir``; here, one host's
disk).  The middle node is killed with SIGKILL mid-stream and not restarted:
after ``--failover-after`` the Head has a live node adopt its boxes from its
directory (last snapshot, then its log), re-points the upstream node, and the
subscriber still receives exactly the output of a run with no failure.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from boreas.client.publisher import Publisher
from boreas.client.subscriber import Subscriber
from support.cluster import TOKEN, get_json, http, wait_until
from support.streams import collect
from test_recovery import deploy_chain, with_outputs_waiting_at_a_snapshot, without_failures

pytestmark = pytest.mark.faults


async def run_with_kill(cluster, nodes, rows, kill_chunk: int, expected: list, victim: int = 1,
                        producer: str = "failover-test") -> tuple[list, list, Publisher, list[str]]:
    """Publish ``rows`` in chunks, SIGKILL node ``victim`` (not restarted) at chunk ``kill_chunk``;
    what the subscriber got, anything after it, the publisher, and where its links ended up."""
    chunks = [rows[start:start + 200] for start in range(0, len(rows), 200)]
    async with Subscriber(cluster.head, "Sums", TOKEN) as subscriber:
        reading = asyncio.create_task(collect(subscriber, len(expected), timeout=120))
        async with Publisher(cluster.head, "Packet", TOKEN, producer=producer, batch_size=50) as publisher:
            for number, chunk in enumerate(chunks):
                if number == kill_chunk:
                    await asyncio.to_thread(cluster.stop, nodes[victim], True)
                await publisher.send(chunk)
                await asyncio.sleep(0.02)
        routed = [link.endpoint for link in publisher.links]  # after close: every batch acknowledged
        got = await reading
        await asyncio.sleep(1.0)  # nothing more may come
        extra = []
        while not subscriber._rows.empty():
            extra += subscriber._rows.get_nowait() or []
    return got, extra, publisher, routed


ADOPTERS = {"spare node": 3, "upstream neighbour": 0, "downstream neighbour": 2}


@pytest.mark.parametrize("adopter", sorted(ADOPTERS))
async def test_a_middle_node_that_stays_down_fails_over_and_nothing_is_lost(cluster_factory, adopter):
    """Adopted by an idle node, by the node feeding it (which takes back what it had sent), or by
    the node it fed (which takes the replayed outputs as if they came over the network)."""
    cluster = cluster_factory(snapshot_interval=1.0, failover_after=2.0)
    count = 4 if adopter == "spare node" else 3
    nodes, dirs = await asyncio.to_thread(deploy_chain, cluster, count, True, ADOPTERS[adopter])
    rows = [(float(n % 13), n) for n in range(12_000)]
    expected = without_failures(rows, 50)
    got, extra, _, _ = await run_with_kill(cluster, nodes, rows, kill_chunk=25, expected=expected)
    assert len(got) == len(expected)
    assert got == expected
    assert extra == []

    failover = get_json(f"{cluster.head}/status")["failover"]["nodes"][nodes[1]]
    assert failover["state"] == "failed over"
    assert failover["boxes"] == ["banded"]
    target = failover["to"]
    assert target == nodes[ADOPTERS[adopter]]
    assert cluster.head_catalog().boxes["banded"].node == target
    assert "banded" in get_json(f"http://{target}/status")["boxes"]
    listing = await asyncio.to_thread(cluster.boreas, "nodes")
    assert f"failed over to {target} (banded)" in listing.stdout

    # The failed node comes back: its boxes run elsewhere, so it starts empty and stays so.
    await asyncio.to_thread(cluster.start_node, nodes[1], data_dir=dirs[1], shared=True)
    wait_until(lambda: get_json(f"{cluster.head}/nodes")["nodes"] and cluster.nodes()[nodes[1]]["in_sync"],
               timeout=20, what="the returning node in sync")
    assert get_json(f"http://{nodes[1]}/status")["boxes"] == []
    assert list(dirs[1].glob("adopted-*")), "its old state is set aside, not deleted"


async def test_a_node_whose_state_is_not_shared_stays_put_and_the_head_says_why(cluster_factory):
    cluster = cluster_factory(snapshot_interval=1.0, failover_after=1.0)
    nodes, dirs = await asyncio.to_thread(deploy_chain, cluster, 3, False)
    rows = [(float(n % 13), n) for n in range(6_000)]
    expected = without_failures(rows, 50)
    chunks = [rows[start:start + 200] for start in range(0, len(rows), 200)]
    async with Subscriber(cluster.head, "Sums", TOKEN) as subscriber:
        reading = asyncio.create_task(collect(subscriber, len(expected), timeout=120))
        async with Publisher(cluster.head, "Packet", TOKEN, producer="stay-test", batch_size=50) as publisher:
            for number, chunk in enumerate(chunks):
                if number == 10:
                    await asyncio.to_thread(cluster.stop, nodes[1], True)
                await publisher.send(chunk)
            wait_until(lambda: (get_json(f"{cluster.head}/status")["failover"]["nodes"].get(nodes[1]) or {})
                       .get("state") == "not failed over", timeout=20, what="the Head to give up on failover")
            state = get_json(f"{cluster.head}/status")["failover"]["nodes"][nodes[1]]
            assert "shared storage" in state["reason"]
            listing = await asyncio.to_thread(cluster.boreas, "nodes")
            assert "not failed over: its state is unreachable" in listing.stdout
            assert cluster.head_catalog().boxes["banded"].node == nodes[1]  # left where it is
            await asyncio.to_thread(cluster.start_node, nodes[1], data_dir=dirs[1])
        got = await reading
    assert got == expected


async def test_an_entry_node_that_stays_down_fails_over_and_the_publisher_follows(cluster_factory):
    """The node where Packet enters dies: a spare adopts it (its log holds what it acknowledged),
    the Head places the stream's entry there, and the publisher re-routes what was not acknowledged."""
    cluster = cluster_factory(snapshot_interval=1.0, failover_after=2.0)
    nodes, dirs = await asyncio.to_thread(deploy_chain, cluster, 4, True, 3)
    rows = [(float(n % 13), n) for n in range(12_000)]
    expected = without_failures(rows, 50)
    got, extra, publisher, routed = await run_with_kill(cluster, nodes, rows, kill_chunk=25, expected=expected,
                                                        victim=0, producer="entry-failover")
    assert routed == [nodes[3]]
    assert got == expected and extra == []
    assert publisher.accepted == len(rows)
    failover = get_json(f"{cluster.head}/status")["failover"]["nodes"][nodes[0]]
    assert (failover["state"], failover["to"], failover["boxes"]) == ("failed over", nodes[3], ["keep"])


async def test_a_node_cut_off_but_alive_stops_when_its_boxes_are_adopted(cluster_factory):
    """Fencing: a claim on its data directory stops a node that was only taken for dead."""
    cluster = cluster_factory()
    nodes, dirs = await asyncio.to_thread(deploy_chain, cluster, 4, True, 3)
    async with Publisher(cluster.head, "Packet", TOKEN, producer="fence", batch_size=50) as publisher:
        await publisher.send([(1.0, n) for n in range(1_000)])
    reply = await asyncio.to_thread(
        http, "POST", f"http://{nodes[3]}/adopt",
        json.dumps({"node": nodes[1], "data_dir": str(dirs[1])}).encode(), content_type="application/json")
    assert reply[0] == 200, reply
    wait_until(lambda: get_json(f"http://{nodes[1]}/status")["recovery"]["fenced_by"] == nodes[3],
               timeout=10, what="the adopted node to stop")
    assert get_json(f"http://{nodes[1]}/status")["recovery"]["state"] == "adopted"
    assert "banded" in get_json(f"http://{nodes[3]}/status")["boxes"]
    # A second adopter is refused: the directory is claimed.
    refused = await asyncio.to_thread(
        http, "POST", f"http://{nodes[2]}/adopt",
        json.dumps({"node": nodes[1], "data_dir": str(dirs[1])}).encode(), content_type="application/json")
    assert refused[0] == 409 and "already adopted by" in refused[1].decode()


async def test_outputs_not_acknowledged_at_the_last_snapshot_reach_their_receiver_after_a_failover(cluster_factory):
    """The adopter sends what the failed node's snapshot lists as not acknowledged, before its replay's
    outputs: the middle node's outputs that the next node had not acknowledged when the snapshot was
    taken are produced by no replay (the replay starts after the snapshot)."""
    cluster = cluster_factory(failover_after=2.0)  # no scheduled snapshots: one is taken at the chosen moment
    nodes, dirs = await asyncio.to_thread(deploy_chain, cluster, 3, True)
    # the last node is stopped briefly (well under --failover-after); the middle one is killed for good
    got, expected = await with_outputs_waiting_at_a_snapshot(
        cluster, nodes, stopped=2, snapshotted=1, crash=lambda: cluster.stop(nodes[1], True),
        producer="unacked-failover")
    assert got == expected
    assert get_json(f"{cluster.head}/status")["failover"]["nodes"][nodes[1]]["state"] == "failed over"
