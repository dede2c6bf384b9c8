"""The resync rule (docs/architecture.md, head/service.py ``HeadService.heartbeat``).

When a node's heartbeat makes it alive again, the Head reads the node's local
catalog again only if the node restarted (another incarnation), was failed
over, its last push failed, or the Head holds nothing of it.  A late
heartbeat of the *same* process whose pushes succeeded is not read again:
what it acknowledged is what it holds.  Reading every late node again kept a
Head busy with a large commit busy for good (every node looked restarted).

What a user sees of a read: the node's ``catalog_reads`` counter in the
Head's ``GET /nodes`` (``boreas_head_node_catalog_reads_total`` in
``/metrics``) and the Head's log line.
"""

from __future__ import annotations

import asyncio
import logging
import signal

import pytest
from support.cluster import TOKEN, free_port, wait_until

from boreas.head.service import HeadService
from boreas.node.service import NodeService

RESYNCED = "synchronising its local catalog"
NOT_RESYNCED = "nothing to read again"


async def _until(predicate, what: str, timeout: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def test_a_late_heartbeat_of_the_same_node_is_not_read_again_a_new_incarnation_is(caplog):
    """The Head, and a real node in this process that sends no heartbeats of its own: the test sends them,
    so the node is late exactly when the test says (the Head's heartbeat timeout is 0.3 s here)."""
    caplog.set_level(logging.INFO, logger="boreas.head.service")
    endpoint = f"localhost:{free_port()}"
    node = NodeService(endpoint, None, TOKEN)
    head = HeadService("memory://", TOKEN, snapshot_interval=0, heartbeat_timeout=0.3, failover_after=0)
    await node.start()
    await head.start("localhost", 0)
    try:
        head.heartbeat(endpoint, "first", 0)  # registers: the Head holds nothing of it, so it reads it
        sync = head.sync_for(endpoint)
        await _until(lambda: sync.in_sync and sync.held is not None, "the node to be read and in sync")
        assert sync.counters["catalog_reads"] == 1

        # Silent past the timeout, then the same incarnation again: down, then up, and not read again.
        await _until(lambda: not head.membership.alive(endpoint), "the node to be down at the Head")
        caplog.clear()
        head.heartbeat(endpoint, "first", 0)
        assert head.membership.alive(endpoint)
        assert sync.held is not None and sync.in_sync  # nothing forgotten, nothing to read
        assert NOT_RESYNCED in caplog.text and RESYNCED not in caplog.text
        await asyncio.sleep(0.3)  # give the sync loop the chance to read it, were it told to
        assert sync.counters["catalog_reads"] == 1

        # A late heartbeat whose last push failed is read again: the Head is unsure what the node applied.
        await _until(lambda: not head.membership.alive(endpoint), "the node to be down at the Head")
        sync.failure = "push timed out"  # what NodeSync.run records when a push is lost
        caplog.clear()
        head.heartbeat(endpoint, "first", 0)
        assert sync.held is None and not sync.in_sync
        assert RESYNCED in caplog.text and NOT_RESYNCED not in caplog.text
        await _until(lambda: sync.counters["catalog_reads"] == 2 and sync.in_sync, "the node to be read again")

        # Another incarnation (the node restarted) is read again even while its heartbeats were on time.
        caplog.clear()
        head.heartbeat(endpoint, "second", 0)
        assert sync.held is None and not sync.in_sync
        assert RESYNCED in caplog.text and NOT_RESYNCED not in caplog.text
        await _until(lambda: sync.counters["catalog_reads"] == 3 and sync.in_sync, "the restarted node to be read")

        # A heartbeat of a node that is alive changes nothing (not a return at all).
        caplog.clear()
        head.heartbeat(endpoint, "second", 0)
        assert sync.held is not None and RESYNCED not in caplog.text and NOT_RESYNCED not in caplog.text
    finally:
        await head.close()
        await node.close()


def _reads(cluster, endpoint: str) -> int:
    return cluster.nodes()[endpoint]["counters"].get("catalog_reads", 0)


@pytest.mark.slow
def test_a_paused_node_is_not_read_again_a_restarted_one_is(cluster_factory):
    """Real processes: a node stopped (SIGSTOP) until the Head marks it down, then resumed (SIGCONT) is the
    same incarnation and is not read again; the same node killed and restarted on its endpoint is."""
    cluster = cluster_factory()
    nodes, _ports = cluster.sensor_chain()
    paused = nodes[1]
    cluster.wait_in_sync(*nodes)
    expected = cluster.node_catalog(paused)
    assert expected.boxes  # it holds a slice, so a read would be real work
    reads = _reads(cluster, paused)
    assert reads >= 1

    resynced, answered = _logged(cluster, paused, RESYNCED), _logged(cluster, paused, NOT_RESYNCED)
    proc = cluster.procs[paused]
    proc.send_signal(signal.SIGSTOP)
    try:
        cluster.wait_alive(paused, alive=False)
    finally:
        proc.send_signal(signal.SIGCONT)
    cluster.wait_alive(paused)
    wait_until(lambda: (_logged(cluster, paused, NOT_RESYNCED) > answered
                        or _logged(cluster, paused, RESYNCED) > resynced), what="the Head to log the node's return")
    cluster.wait_in_sync(*nodes)
    assert _logged(cluster, paused, RESYNCED) == resynced, "the same process was read again"
    assert _reads(cluster, paused) == reads
    assert cluster.node_catalog(paused) == expected

    cluster.stop(paused, kill=True)
    cluster.wait_alive(paused, alive=False)
    cluster.start_node(paused)
    wait_until(lambda: _reads(cluster, paused) > reads, what="the restarted node to be read again")
    assert _logged(cluster, paused, RESYNCED) > resynced
    wait_until(lambda: cluster.node_catalog(paused) == expected, what="the slice to be re-sent")
    cluster.wait_in_sync(*nodes)


def _logged(cluster, endpoint: str, what: str) -> int:
    """Lines of the Head's log about ``endpoint`` that say ``what``."""
    return sum(f"node {endpoint} " in line and what in line for line in cluster.log("head").splitlines())
