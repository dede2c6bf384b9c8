"""Failover of a partition member with real processes (docs/cumulus.md §6.3).

A GROUP BY view (and TPC-H Q3, whose members push entries to each other) partitioned over three durable nodes whose data directories
count as shared storage (``--shared-dir``).  Three publishers stream inserts
and deletes, one per member.  The node of member 2 is killed with SIGKILL
mid-stream and not restarted: after ``--failover-after`` the Head has
another member's node adopt it -- it replays the failed node's log and hosts
member 2 as a *guest* next to its own member -- and commits the
``<partition>`` naming that node for member 2, so every catalog agrees, the
other member sends member 2's messages there and the publisher of member
2's producer follows.  After quiescence the view (every member read, the
guest through ``/segments/v/members/2/query``) equals DuckDB, every stable
read taken before and after the failover equals DuckDB over the input
prefixes its positions name, ``boreas segments v`` names the adopter for
member 2's segments, and moving those segments to live members' own
operators (``boreas rebalance``, which empties the guest; ``boreas move`` in the Q3 test) leaves the view exact, read by ``QueryClient``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
import urllib.error

import pytest
from boreas.client.optimizer import Optimizer
from boreas.client.publisher import Publisher
from boreas.client.query import QueryClient
from boreas.m3.cumulus import Layout
from support.cluster import TOKEN, get_json, wait_until
from support.m3_q3 import duckdb_q3, q3_rows
from test_cumulus_groupby import (
    APP,
    BATCH,
    PrefixViews,
    deployment,
    expected_view,
    producers_for_each_member,
    workload,
)
from test_cumulus_q3 import (
    insert_then_delete,
    publish_all,
    submit,
    view_equals,
    with_deletes,
)

pytestmark = [pytest.mark.slow, pytest.mark.faults]


def read_members(layout: Layout, query: str) -> dict[tuple, tuple]:
    """The view read from every member with segments in ``layout``, each by its own route (a guest's too)."""
    view: dict[tuple, tuple] = {}
    for m in range(len(layout.members)):
        if layout.segments_of(m):
            answer = get_json(f"http://{layout.members[m]}/segments/v/members/{m}/query?{query}")
            assert answer["member"] == m
            view.update((tuple(row["key"]), tuple(row["value"])) for row in answer["rows"])
    return view


def stable_read(leader: str) -> tuple[int, list, dict[tuple, tuple]] | None:
    """A READ_STABLE across the members: (epoch, positions, view); None if there is none now."""
    try:
        info = get_json(f"http://{leader}/segments/v/stable")
        if info["epoch"] < 0:
            return None
        view = read_members(Layout.from_dict(info["layout_at"]), f"stable=1&epoch={info['epoch']}")
    except (urllib.error.URLError, OSError, json.JSONDecodeError):  # a member down (the box stalls) or 410
        return None
    return info["epoch"], info["positions"], view


async def publish(head: str, producer: str, rows: list[tuple]) -> list[str]:
    """Publish in chunks; the endpoints its links ended on."""
    async with Publisher(head, "R", TOKEN, producer=producer, batch_size=BATCH) as publisher:
        for start in range(0, len(rows), 200):
            await publisher.send(rows[start:start + 200])
            await asyncio.sleep(0.2)  # still publishing when the node fails, and after
    return [link.endpoint for link in publisher.links]


async def test_a_member_whose_node_stays_down_fails_over_as_a_guest_and_the_view_stays_exact(cluster_factory):
    cluster = cluster_factory(snapshot_interval=1.0, failover_after=2.0)
    await asyncio.to_thread(cluster.start_head)
    dirs = [cluster.workdir / f"member{i}" for i in range(3)]
    nodes = await asyncio.to_thread(cluster.start_nodes, data_dirs=dirs, shared=True)
    cluster.submit(cluster.write("app.xml", APP), cluster.write("deploy.xml", deployment(nodes)))
    await asyncio.to_thread(cluster.wait_in_sync, *nodes)
    producers = producers_for_each_member(3)
    data = {p: workload(p, 3000) for p in producers}
    victim = nodes[2]
    stable_reads: list = []
    failed_over_at: list[float] = []

    async def sample() -> None:
        while True:
            found = await asyncio.to_thread(stable_read, nodes[0])
            if found is not None:
                stable_reads.append((time.monotonic(), *found))
            await asyncio.sleep(0.1)

    sampling = asyncio.create_task(sample())
    publishing = asyncio.gather(*(publish(cluster.head, p, rows) for p, rows in data.items()))
    await asyncio.sleep(1.5)
    await asyncio.to_thread(cluster.stop, victim, True)  # SIGKILL, not restarted

    def failed_over() -> bool:
        state = get_json(f"{cluster.head}/status")["failover"]["nodes"].get(victim) or {}
        return state.get("state") == "failed over"

    await asyncio.to_thread(wait_until, failed_over, 60, "the Head to fail member 2 over")
    failed_over_at.append(time.monotonic())
    routes = await publishing
    state = get_json(f"{cluster.head}/status")["failover"]["nodes"][victim]
    target = state["to"]
    assert target in nodes[:2] and state["boxes"] == ["v"]
    assert routes[2] == [target]  # member 2's publisher follows it to the adopter

    expected = expected_view([r for rows in data.values() for r in rows])
    partition = cluster.head_catalog().partitions["v"]
    assert partition.nodes == (nodes[0], nodes[1], target)
    layout = Layout.from_dict(get_json(f"{cluster.head}/boxes/v")["partition"])
    deadline = time.monotonic() + 90
    while (got := await asyncio.to_thread(read_members, layout, "")) != expected:
        wrong = {k: (got.get(k), v) for k, v in expected.items() if got.get(k) != v}
        assert time.monotonic() < deadline, (f"the view never equalled DuckDB ({len(wrong)} of {len(expected)} "
                                             f"groups wrong, e.g. {sorted(wrong.items())[:5]})")
        await asyncio.sleep(0.3)
    # stable reads resume once the guest has caught up: wait (bounded) for one that covers every event, rather
    # than a fixed pause, which a loaded machine can outlast before the first stable epoch after the failover
    deadline = time.monotonic() + 60
    while not ((after := [r for r in stable_reads if r[0] > failed_over_at[0]]) and after[-1][3] == expected):
        assert time.monotonic() < deadline, (f"no stable read after the failover covered every event "
                                             f"({len(after)} taken after it)")
        await asyncio.sleep(0.3)
    sampling.cancel()
    for node in nodes[:2]:  # every live catalog names the adopter for member 2
        assert cluster.node_catalog(node).partitions["v"].nodes == partition.nodes
    hosted = get_json(f"http://{target}/segments/v")
    assert hosted["members"] == sorted([nodes.index(target), 2])

    assert len(stable_reads) > 10, len(stable_reads)
    prefixes = PrefixViews(data)
    for _, epoch, positions, view in stable_reads:
        assert view == prefixes.at(positions), f"stable epoch {epoch}"
    assert after[-1][3] == expected  # the last stable read covers everything

    shown = await asyncio.to_thread(cluster.boreas, "segments", "v", "--head", cluster.head)
    assert shown.returncode == 0, shown.stderr
    guest_segments = [s.id for s in layout.segments_of(2)]
    for line in shown.stdout.splitlines():
        if any(line.startswith(f"v/{sid} ") for sid in guest_segments):
            assert target in line and victim not in line, line

    # QueryClient reads the guest through its own route on the adopter (the adopter's /query is its own member's).
    async with QueryClient(cluster.head, TOKEN) as client:
        assert (await client.query("v")).as_dict() == expected
        assert (await client.query("v", stable=True)).as_dict() == expected

    # `boreas rebalance` balances the two live nodes and empties the guest (its segments go to the live
    # members' own operators): then QueryClient reads as usual.
    balanced = await asyncio.to_thread(cluster.boreas, "rebalance", "v", "--head", cluster.head)
    assert balanced.returncode == 0 and balanced.stdout.startswith("box v: layout "), balanced.stderr
    after_layout = Layout.from_dict(get_json(f"{cluster.head}/boxes/v")["partition"])
    assert not after_layout.segments_of(2), "the guest still holds segments after a rebalance"
    assert after_layout.segments_of(0) and after_layout.segments_of(1)
    async with QueryClient(cluster.head, TOKEN) as client:
        deadline = time.monotonic() + 60
        while (await client.query("v")).as_dict() != expected:
            assert time.monotonic() < deadline, "the view never equalled DuckDB after the guest's segments moved"
            await asyncio.sleep(0.3)


def read_q3(layout: Layout) -> dict[tuple, float]:
    """Q3's view from every member with segments, each by its own route (dates back to ``datetime.date``)."""
    view: dict[tuple, float] = {}
    for m in range(len(layout.members)):
        if layout.segments_of(m):
            answer = get_json(f"http://{layout.members[m]}/segments/q3/members/{m}/query")
            for row in answer["rows"]:
                key = tuple(dt.date.fromisoformat(v) if isinstance(v, str) else v for v in row["key"])
                view[key] = row["value"]
    return view


async def test_q3_with_a_member_failed_over_equals_duckdb(cluster_factory):
    """TPC-H Q3 (members push entries to each other, versions in one order): the failed member's node is
    adopted by another member's while publishers of every stream write to all three."""
    cluster = cluster_factory(snapshot_interval=1.0, failover_after=2.0)
    await asyncio.to_thread(cluster.start_head)
    dirs = [cluster.workdir / f"member{i}" for i in range(3)]
    nodes = await asyncio.to_thread(cluster.start_nodes, data_dirs=dirs, shared=True)
    await asyncio.to_thread(submit, cluster, nodes)
    data = q3_rows(8, customers=50, orders=300, items=1800)
    signed, remaining = with_deletes(data, "q3-failover")
    victim = nodes[1]

    async def kill(chunk: int) -> None:
        if chunk == 5:
            await asyncio.to_thread(cluster.stop, victim, True)  # SIGKILL, not restarted

    await publish_all(cluster.head, nodes, insert_then_delete(signed), between=kill)
    state = get_json(f"{cluster.head}/status")["failover"]["nodes"][victim]
    assert state["state"] == "failed over" and state["boxes"] == ["q3"]
    target = state["to"]
    partition = cluster.head_catalog().partitions["q3"]
    assert partition.nodes == tuple(target if n == victim else n for n in nodes)
    expected = duckdb_q3(remaining)
    layout = Layout.from_dict(get_json(f"{cluster.head}/boxes/q3")["partition"])
    deadline = time.monotonic() + 90
    while (got := await asyncio.to_thread(read_q3, layout)) != pytest.approx(expected):
        assert time.monotonic() < deadline, f"Q3 never equalled DuckDB ({len(got)} of {len(expected)} rows)"
        await asyncio.sleep(0.3)
    own = nodes.index(target)  # (the endpoint now names two members: the member's number says which)
    async with Optimizer(cluster.head, TOKEN) as optimizer:
        for sid in [s.id for s in layout.segments_of(1)]:  # the guest's segments to its host's own member
            await optimizer.move(f"q3/{sid}", str(own))
    await view_equals(cluster.head, expected)
