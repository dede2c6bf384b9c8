"""The Head's failover decisions, in process: when, to whom, and what it reports when it cannot."""

from __future__ import annotations

import asyncio

import pytest
from boreas.catalog.model import Box, Catalog, InPort, Node
from boreas.catalog.store import open_store
from boreas.head.failover import Failover
from boreas.head.membership import Membership
from boreas.wire.client import PeerUnreachable
from boreas.wire.supervisor import Supervisor


class Peers:
    """Records what the Head asks nodes; an adopter may be made unreachable."""

    def __init__(self, unreachable: set[str] = frozenset()):
        self.calls: list[tuple[str, dict]] = []
        self.unreachable = unreachable

    async def call(self, method, url, json_body=None, timeout=None):
        self.calls.append((url, json_body))
        if any(e in url for e in self.unreachable):
            raise PeerUnreachable(url, "cannot connect")
        return {"replayed_batches": 3, "snapshot": 7}


def cluster(*holders: str) -> Catalog:
    nodes = {e: Node(e) for e in ("a:1", "b:2", "c:3")}
    boxes = {f"x{i}": Box(f"x{i}", "filter", (InPort("S"),), (f"O{i}",), node=e) for i, e in enumerate(holders)}
    return Catalog(nodes=nodes, boxes=boxes)


@pytest.fixture
def store(tmp_path):
    s = open_store(f"sqlite:///{tmp_path}/catalog.db")
    yield s
    s.close()


def members(now: float, down: str, shared: bool) -> Membership:
    m = Membership(timeout=3.0)
    for e in ("a:1", "b:2", "c:3"):
        report = {"durable": True, "shared": shared, "data_dir": f"/shared/{e}", "snapshots": None}
        m.heartbeat(e, "i", now=now - (100 if e == down else 0), recovery=report)
    return m


async def test_a_node_down_past_the_limit_is_adopted_by_the_least_loaded_live_node(store):
    catalog = cluster("a:1", "b:2", "b:2", "c:3", "c:3")  # a:1 holds 1 box, c:3 holds 2
    learned = []

    async def learn(source, target):
        learned.append((source, target))
        return 9

    peers = Peers()
    failover = Failover(lambda: catalog, lambda: store, members(1000.0, "b:2", True), peers, learn, after=30.0,
                        tasks=Supervisor("head"))
    failover.started = 0.0
    failover.heard("b:2", {"durable": True, "shared": True, "data_dir": "/shared/b:2", "snapshots": None})
    await failover.check(now=1000.0)
    assert peers.calls == [("http://a:1/adopt", {"node": "b:2", "data_dir": "/shared/b:2", "snapshots": None})]
    assert learned == [("b:2", "a:1")]
    state = failover.status()["nodes"]["b:2"]
    assert (state["state"], state["to"], state["boxes"], state["version"]) == ("failed over", "a:1", ["x1", "x2"], 9)


async def test_not_yet_down_long_enough_nothing_happens(store):
    catalog = cluster("a:1", "b:2")
    peers = Peers()
    m = members(1000.0, "b:2", True)
    failover = Failover(lambda: catalog, lambda: store, m, peers, None, after=200.0, tasks=Supervisor("head"))
    failover.started = 0.0
    await failover.check(now=1000.0)
    assert peers.calls == [] and failover.status()["nodes"] == {}


async def test_state_not_on_shared_storage_is_reported_and_the_boxes_stay(store):
    catalog = cluster("a:1", "b:2")
    peers = Peers()
    failover = Failover(lambda: catalog, lambda: store, members(1000.0, "b:2", False), peers, None, after=30.0,
                        tasks=Supervisor("head"))
    failover.started = 0.0
    await failover.check(now=1000.0)
    state = failover.status()["nodes"]["b:2"]
    assert state["state"] == "not failed over"
    assert "shared storage" in state["reason"] and "--shared-dir" in state["reason"]
    assert peers.calls == []


async def test_an_adopter_that_cannot_be_reached_is_reported_and_retried_later(store):
    catalog = cluster("b:2", "c:3")
    peers = Peers(unreachable={"a:1"})
    failover = Failover(lambda: catalog, lambda: store, members(1000.0, "b:2", True), peers, None, after=30.0,
                        tasks=Supervisor("head"))
    failover.started = 0.0
    failover.heard("b:2", {"shared": True, "data_dir": "/shared/b:2"})
    await failover.check(now=1000.0)
    assert "could not adopt" in failover.status()["nodes"]["b:2"]["reason"]
    await failover.check(now=1001.0)  # within the retry pause: not asked again
    assert len(peers.calls) == 1


async def test_where_a_node_keeps_its_data_survives_a_head_restart(store):
    catalog = cluster("b:2")
    first = Failover(lambda: catalog, lambda: store, Membership(), Peers(), None, tasks=Supervisor("head"))
    first.heard("b:2", {"shared": True, "data_dir": "/shared/b:2", "snapshots": "file:///shared/snaps"})
    await asyncio.sleep(0.2)  # recorded off the event loop
    restarted = Failover(lambda: catalog, lambda: store, Membership(), Peers(), None, tasks=Supervisor("head"))
    assert restarted.place("b:2") == {"data_dir": "/shared/b:2", "snapshots": "file:///shared/snaps"}


def test_failover_after_zero_disables_it(store):
    catalog = cluster("b:2")
    peers = Peers()
    failover = Failover(lambda: catalog, lambda: store, members(1000.0, "b:2", True), peers, None, after=0,
                        tasks=Supervisor("head"))
    asyncio.run(failover.check(now=1000.0))
    assert peers.calls == [] and failover.status()["nodes"] == {}
