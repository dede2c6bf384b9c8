"""A box partitioned over three real durable node processes, as the partitioned cluster tests run it.

The scenario they share (docs/cumulus.md §3.13-3.14): a Head and three
durable nodes running one box in 6 segments by ``auction``; three
producers, one per member, publishing in lockstep (no producer runs the
stream's watermark delay ahead of another, so none of their rows is late);
a segment moved to the third member while they publish, and the second
member's node killed with SIGKILL and restarted from its log; a subscriber
of the box's out stream (``boreas subscribe``, to the stream's end) whose
file the test compares with the answer from all of the rows.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import zlib
from pathlib import Path

from boreas.client.optimizer import Optimizer
from boreas.client.publisher import Publisher

from .cluster import TOKEN, wait_until


def producers_for_each_member(n: int) -> list[str]:
    """Producer ids that the publisher's pick sends to members 0, 1, ..., n-1."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < n:
        found.setdefault(zlib.crc32(f"bids-{i}".encode()) % n, f"bids-{i}")
        i += 1
    return [found[m] for m in range(n)]


async def start_partitioned(cluster_factory, tmp_path: Path, app: str, box: str, shared: bool = False, **head):
    """A Head (``head``: the cluster factory's options) and three durable nodes (data under ``tmp_path``;
    ``shared``: a directory another node may adopt) running ``app``'s box ``box`` partitioned in 6 segments by
    auction, every node in sync: the cluster, the nodes' endpoints and their data directories."""
    cluster = cluster_factory(**head)
    await asyncio.to_thread(cluster.start_head)
    dirs = [tmp_path / f"member{m}" for m in range(3)]
    nodes = await asyncio.to_thread(cluster.start_nodes, data_dirs=dirs, **({"shared": True} if shared else {}))
    members = "".join(f'<node endpoint="{n}"/>' for n in nodes)
    deploy = f'<deploy><partition box="{box}" segments="6" key="auction" epoch-ms="100">{members}</partition></deploy>'
    cluster.submit(cluster.write("app.xml", app), cluster.write("deploy.xml", deploy))
    await asyncio.to_thread(cluster.wait_in_sync, *nodes)
    return cluster, nodes, dirs


async def subscribe(cluster, stream: str) -> tuple[Path, subprocess.Popen]:
    """``boreas subscribe STREAM`` (to its end: no --count) writing JSON lines, once the Head lists it: the file
    and the process (the caller waits for or kills it)."""
    out = cluster.workdir / f"{stream.lower()}.jsonl"
    sub = subprocess.Popen([sys.executable, "-m", "boreas.cli.main", "subscribe", stream, "--output", str(out)],
                           env=cluster.env, stderr=subprocess.PIPE, text=True)
    await asyncio.to_thread(wait_until, lambda: any(
        s.stream == stream for s in cluster.head_catalog().subscriptions.values()), what="the subscription")
    return out, sub


class Lockstep:
    """One publisher per producer of ``data`` (producer -> its rows) on stream ``stream``, sending a batch each
    in turn, so no producer runs ahead of another."""

    def __init__(self, cluster, stream: str, data: dict[str, list], batch: int):
        self.data, self.batch = data, batch
        self.publishers = [Publisher(cluster.head, stream, TOKEN, producer=p, batch_size=batch) for p in data]

    async def start(self) -> None:
        for publisher in self.publishers:
            await publisher.start()

    async def publish(self, part: slice) -> None:
        for start in range(part.start, part.stop, self.batch):
            for publisher, rows in zip(self.publishers, self.data.values()):
                await publisher.send(rows[start:min(start + self.batch, part.stop)])
            for publisher in self.publishers:
                await publisher.flush()

    async def close(self, final: bool = True) -> None:
        for publisher in self.publishers:
            await publisher.close(final=final)


async def move_and_kill(cluster, nodes: list[str], dirs: list[Path], segment: str, lockstep: Lockstep,
                        cuts: tuple[int, int, int]) -> None:
    """Publish rows ``[0, a)``; move ``segment`` (say ``"w/0"``) to the third node while publishing ``[a, b)``;
    kill the second node with SIGKILL and restart it from its log; publish ``[b, c)``."""
    a, b, c = cuts
    await lockstep.publish(slice(0, a))
    async with Optimizer(cluster.head, TOKEN) as optimizer:
        moving = asyncio.create_task(optimizer.move(segment, nodes[2]))
        try:
            await lockstep.publish(slice(a, b))
        except BaseException:
            moving.cancel()  # (not left running past the test)
            raise
        moved = (await moving).relayout
    assert moved["changed"] and moved["moves"][0][0] == 0
    await asyncio.to_thread(cluster.stop, nodes[1], True)  # kill -9: recovered from its log
    await asyncio.to_thread(cluster.start_node, nodes[1], True, dirs[1])
    await lockstep.publish(slice(b, c))
