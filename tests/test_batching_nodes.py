"""Adaptive batching with real node processes: a box's output batches held open (``--batch-rows``,
``--batch-ms``) across a ``kill -9`` and a move lose and repeat nothing, and at a low rate rows still reach
subscribers (the batch's deadline fires on its own)."""

from __future__ import annotations

import asyncio

import pytest
from boreas.client.optimizer import Optimizer
from boreas.client.publisher import Publisher
from boreas.client.subscriber import Subscriber
from support.cluster import EXAMPLES, TOKEN
from support.streams import collect

BOREALIS = EXAMPLES.parents[1] / "tests" / "data" / "borealis"
HOLD = ("--batch-rows", "1000000", "--batch-ms", "60000")  # nothing closes by rows or time: only a move does


def filter_on(cluster, nodes: list[str], at: int) -> None:
    """move_Move.xml: box1 filters Packet into Result (every row passes); Packet enters at nodes[0]."""
    app = cluster.write("app.xml", (BOREALIS / "move_Move.xml").read_text())
    others = "".join(f'<node endpoint="{n}" query=""/>' for n in nodes if n != nodes[at])
    dep = cluster.write("dep.xml", f"""<deploy> <publish stream="Packet" node="{nodes[0]}"/>
  <node endpoint="{nodes[at]}" query="box1"/> {others} </deploy>""")
    cluster.submit(app, dep)


@pytest.mark.slow
async def test_a_move_while_the_box_holds_an_open_batch_loses_and_repeats_nothing(cluster_factory):
    cluster = cluster_factory()

    def start() -> list[str]:
        cluster.start_head()
        nodes = [cluster.start_node(extra=HOLD), cluster.start_node()]
        filter_on(cluster, nodes, 0)
        return nodes

    nodes = await asyncio.to_thread(start)
    rows = [(float(n), n) for n in range(3000)]
    async with Subscriber(cluster.head, "Result", TOKEN) as subscriber:
        async with Publisher(cluster.head, "Packet", TOKEN, batch_size=50) as publisher:
            await publisher.send(rows[:1000])
            await publisher.flush()  # taken by the box on nodes[0], which holds its output
            async with Optimizer(cluster.head, TOKEN) as optimizer:
                assert (await optimizer.move("box1", nodes[1])).source == nodes[0]
            await publisher.send(rows[1000:])
        got = await collect(subscriber, len(rows))
    assert got == rows


@pytest.mark.slow
async def test_a_node_killed_with_open_batches_comes_back_and_sends_each_row_once(cluster_factory):
    cluster = cluster_factory()
    data_dir = cluster.workdir / "node-data"
    hold = ("--batch-rows", "400", "--batch-ms", "200")

    def start() -> list[str]:
        cluster.start_head()
        nodes = [cluster.start_node(data_dir=data_dir, extra=hold)]
        filter_on(cluster, nodes, 0)
        return nodes

    nodes = await asyncio.to_thread(start)
    rows = [(float(n), n) for n in range(2000)]
    async with Subscriber(cluster.head, "Result", TOKEN) as subscriber:
        async with Publisher(cluster.head, "Packet", TOKEN, producer="batching-kill", batch_size=30) as publisher:
            await publisher.send(rows[:1000])
            await publisher.flush()  # acknowledged: in the log; part of it in a batch still open
            await asyncio.to_thread(cluster.stop, nodes[0], True)
            await asyncio.to_thread(cluster.start_node, nodes[0], True, data_dir, False, hold)
            await publisher.send(rows[1000:])
        got = await collect(subscriber, len(rows))
    assert got == rows


async def test_rows_sent_one_at_a_time_reach_the_subscriber_without_more_coming(cluster_factory):
    cluster = cluster_factory()

    def start() -> list[str]:
        cluster.start_head()
        nodes = [cluster.start_node()]  # the default limits: far more rows than sent here
        filter_on(cluster, nodes, 0)
        return nodes

    await asyncio.to_thread(start)
    async with Subscriber(cluster.head, "Result", TOKEN) as subscriber:
        async with Publisher(cluster.head, "Packet", TOKEN, batch_size=1) as publisher:
            for n in range(3):
                await publisher.send([(float(n), n)])
                await publisher.flush()
                assert await collect(subscriber, 1, timeout=30.0) == [(float(n), n)]  # nothing else pushed it
