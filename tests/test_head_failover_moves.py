"""A move in flight when the leading Head dies is finished by the next leader, with the box's state.

The nodes move a box themselves and then report it to the Head (paper 3.1.2); the report waits in the
node's queue (``node/head_reports.py``) until a leader takes it.  Here the leader never sees the report:
it is stopped before ``boreas move`` starts and killed with kill -9 once the target node holds the box, so
the move reaches the catalog only through the next leader.  docs/architecture.md, "Leadership and
fencing" (the state table's row for a node's move not yet committed).
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys

import pytest
from boreas.client.publisher import Publisher
from boreas.client.subscriber import Subscriber
from support.cluster import TOKEN, catalog_at, get_json, wait_until
from support.streams import collect
from test_head_failover_ha import heads  # noqa: F401  (the fixture: several Heads on one zk:// catalog)
from test_moves import AGGREGATE, without_moves

pytestmark = [pytest.mark.zookeeper, pytest.mark.slow]

ROWS = [(float(n % 13), n) for n in range(6_000)]


def deploy(cluster) -> tuple[str, list[str]]:
    """Two Heads, two nodes; ``banded`` and the aggregate ``sums`` on the first node."""
    cluster.start_heads()
    leader = cluster.leader()
    nodes = [cluster.start_node(), cluster.start_node()]
    app = cluster.write("agg.xml", AGGREGATE)
    dep = cluster.write("agg_dep.xml", f"""<deploy> <publish stream="Packet" node="{nodes[0]}"/>
  <node endpoint="{nodes[0]}" query="banded sums"/> <node endpoint="{nodes[1]}" query=""/> </deploy>""")
    cluster.submit(app, dep, "--timeout", "60")
    return leader, nodes


def move_while_the_leader_dies(cluster, leader: str, follower: str, source: str, target: str
                               ) -> tuple[subprocess.CompletedProcess, str]:
    """Stop the leader, start ``boreas move sums TARGET`` given both Heads, kill -9 the leader once the
    target runs the box; the command's outcome, and where the catalog put the box at the kill."""
    leading = cluster.procs[f"head-{leader.rsplit(':', 1)[1]}"]
    leading.send_signal(signal.SIGSTOP)  # from here on it commits nothing: it is as good as dead
    heads = f"{follower.split('://')[1]},{leader.split('://')[1]}"  # the follower answers the command's reads
    command = subprocess.Popen([sys.executable, "-m", "boreas.cli.main", "move", "sums", target,
                                "--head", heads, "--timeout", "60"], env=cluster.env, cwd=cluster.workdir,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: "sums" in get_json(f"http://{target}/status")["boxes"], timeout=30,
                   what="the target node to take the box", interval=0.01)
        at_kill = catalog_at(f"{follower}/catalog").boxes["sums"].node
        cluster.kill(leader)
        out, err = command.communicate(timeout=120)
    finally:
        if command.poll() is None:
            command.kill()
            command.wait()
    return subprocess.CompletedProcess(command.args, command.returncode, out, err), at_kill


async def test_a_move_in_flight_when_the_leader_dies_is_finished_by_the_next_leader(heads):  # noqa: F811
    cluster = heads(2)
    leader, (source, target) = await asyncio.to_thread(deploy, cluster)
    follower = next(url for url in cluster.urls if url != leader)
    expected = without_moves(ROWS)

    async with Subscriber(cluster.head, "Sums", TOKEN) as subscriber:
        reading = asyncio.create_task(collect(subscriber, len(expected), timeout=120))
        async with Publisher(cluster.head, "Packet", TOKEN, batch_size=20) as publisher:
            async def publish() -> None:  # rows keep flowing before, during and after the move
                for start in range(0, len(ROWS), 50):
                    await publisher.send(ROWS[start:start + 50])
                    await asyncio.sleep(0.04)

            publishing = asyncio.create_task(publish())
            await asyncio.sleep(1.0)  # the aggregate has state (open windows) when it moves
            moved, at_kill = await asyncio.to_thread(move_while_the_leader_dies, cluster, leader, follower,
                                                     source, target)
            await publishing
        got = await reading

    assert at_kill == source  # the old leader never committed the move: only the next one could
    assert moved.returncode == 0, (moved.stdout, moved.stderr)
    assert f"moved box sums from {source} to {target}" in moved.stdout
    assert cluster.leader() == follower
    assert catalog_at(f"{follower}/catalog").boxes["sums"].node == target
    assert "sums" in get_json(f"http://{target}/status")["boxes"]
    assert "sums" not in get_json(f"http://{source}/status")["boxes"]
    assert got == expected  # its windows moved with it: no row lost or counted twice
