"""A partitioned top-N view over three real node processes whose out stream ends after its last row
(docs/cumulus.md §3.13, "The end of input"; node/cumulus/end_marks.py).  Three producers, one per member;
the first ends (``final``) while the others still stream bids that change its node's member, a segment moves
meanwhile and a node is killed with SIGKILL and restarted from its log; then the others end.  The subscriber
exits at the stream's end (every node's final mark, ``boreas subscribe`` without ``--count``), and what it wrote,
summed by ``_weight``, is the one-node result: no node ended its out stream before the last row its members
emitted (before the fix, a node ended it when its own producers ended, and the rows after were lost to the
subscriber).  The second test makes certain what made the first flaky (1 run in 3-9 at load 10-12): the killed
node was the move's source, and replaying its whole log under the catalog's later layout re-sent other changelog
batches under the numbers it had used (docs/cumulus.md §6.3, "Restart").  The third: a node that no producer
publishes to ends its out stream too; the fourth: the second's divergence in a failover's adopter, which replays
the failed node's whole log.  The in-process tests: test_cumulus_ends.py, test_stream_ends.py."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from boreas.client.optimizer import Optimizer
from boreas.client.publisher import Publisher
from support.cluster import TOKEN, get_json, wait_until
from support.partitioned import Lockstep, producers_for_each_member, start_partitioned, subscribe
from test_cumulus_topn_cluster import APP, bids, ranked, summed

pytestmark = [pytest.mark.slow, pytest.mark.faults]

BATCH = 40
ALONE = [(2, 900, 7), (7, 900, 7)]  # auctions of segment t/1 only (slots 683-1365 of 6 segments): new leaders
ALONE_0 = [(5, 900, 7), (13, 900, 7)]  # ... of segment t/0 only (slots 0-682)


async def test_a_partitioned_top_n_stream_ends_after_every_row_through_a_move_and_a_kill(cluster_factory, tmp_path):
    cluster, nodes, dirs = await start_partitioned(cluster_factory, tmp_path, APP, "t")
    producers = producers_for_each_member(3)
    data = {p: bids(p, 600) for p in producers}
    data[producers[0]] = data[producers[0]][:200]  # member 0's producer ends first
    want = ranked(*data.values())
    out, sub = await subscribe(cluster, "Top")
    try:
        publishers = dict(zip(producers, [Publisher(cluster.head, "Bid", TOKEN, producer=p, batch_size=BATCH)
                                          for p in producers]))
        for publisher in publishers.values():
            await publisher.start()

        async def publish(part: slice, among: list[str]) -> None:
            for start in range(part.start, part.stop, BATCH):
                for p in among:
                    await publishers[p].send(data[p][start:min(start + BATCH, part.stop)])
                for p in among:
                    await publishers[p].flush()

        await publish(slice(0, 200), producers)
        await publishers[producers[0]].close(final=True)  # node 0's input ends; the others still change its member
        rest = producers[1:]
        async with Optimizer(cluster.head, TOKEN) as optimizer:
            moving = asyncio.create_task(optimizer.move("t/1", nodes[0]))
            try:
                await publish(slice(200, 350), rest)
            except BaseException:
                moving.cancel()  # (the move's request is not left running past the test)
                raise
            moved = (await moving).relayout
        assert moved["changed"]
        await asyncio.to_thread(cluster.stop, nodes[1], True)  # kill -9: recovered from its log
        await asyncio.to_thread(cluster.start_node, nodes[1], True, dirs[1])
        await publish(slice(350, 600), rest)
        for p in rest:
            await publishers[p].close(final=True)
        assert await asyncio.to_thread(sub.wait, 120) == 0, sub.stderr.read()
    finally:
        if sub.poll() is None:
            sub.kill()
    assert summed(out) == want


async def test_a_move_source_killed_with_no_snapshot_replays_its_log_under_the_layout_it_began_with(
        cluster_factory, tmp_path):
    """The flake of the test above, made certain: member 1 applies rows of its segment t/1 first (its share of
    them reached the subscriber), then t/1 moves away and member 1's node is killed with SIGKILL and restarted
    (no snapshot: it replays its whole log).  Its log began under layout 1 (t/1 its own); the catalog it
    restarts with says layout 2.  The one-node result after every producer ended is what must come out."""
    cluster, nodes, dirs = await start_partitioned(cluster_factory, tmp_path, APP, "t")
    producers = producers_for_each_member(3)
    data = {p: bids(p, 400) for p in producers}

    def one_node(upto: int, *more: list) -> Counter:
        return ranked(*(rows[:upto] for rows in data.values()), *more)

    out, sub = await subscribe(cluster, "Top")
    try:
        lockstep = Lockstep(cluster, "Bid", data, BATCH)
        await lockstep.start()
        publishers, publish = lockstep.publishers, lockstep.publish

        await publish(slice(0, 200))
        await asyncio.to_thread(wait_until, lambda: summed(out) == one_node(200), 60, "the first rows ranked")
        # a version that changes t/1 alone, stamped by member 1's own coordinator: under layout 1 member 1
        # ranks it and its out stream numbers a batch for it (under layout 2 it would go to member 0)
        await publishers[1].send(ALONE)
        await publishers[1].flush()
        await asyncio.to_thread(wait_until, lambda: summed(out) == one_node(200, ALONE), 60, "t/1's own change")
        async with Optimizer(cluster.head, TOKEN) as optimizer:
            moved = (await optimizer.move("t/1", nodes[0])).relayout
        assert moved["changed"]
        await asyncio.to_thread(cluster.stop, nodes[1], True)  # kill -9: no snapshot, its whole log replays
        await asyncio.to_thread(cluster.start_node, nodes[1], True, dirs[1])
        await publish(slice(200, 400))
        await lockstep.close(final=True)
        assert await asyncio.to_thread(sub.wait, 120) == 0, sub.stderr.read()
    finally:
        if sub.poll() is None:
            sub.kill()
    assert summed(out) == one_node(400, ALONE)


async def test_a_node_that_no_producer_publishes_to_ends_its_out_stream(cluster_factory, tmp_path):
    """Producers publish to members 0 and 1 only; member 2's node takes no producer's rows, but ranks the groups
    of its segments (the coordinators send it Work).  The subscriber exits at the stream's end, which needs node
    2's final mark too: it comes once the end of the input settled there (before the fix, node 2's input never
    ended, so its out stream never did, and the subscriber waited on)."""
    cluster, _, _ = await start_partitioned(cluster_factory, tmp_path, APP, "t")
    producers = producers_for_each_member(3)[:2]
    data = {p: bids(p, 300) for p in producers}
    out, sub = await subscribe(cluster, "Top")
    try:
        for p, rows in data.items():
            publisher = Publisher(cluster.head, "Bid", TOKEN, producer=p, batch_size=BATCH)
            await publisher.start()
            await publisher.send(rows)
            await publisher.close(final=True)
        assert await asyncio.to_thread(sub.wait, 120) == 0, sub.stderr.read()
    finally:
        if sub.poll() is None:
            sub.kill()
    assert summed(out) == ranked(*data.values())


async def test_a_move_source_failed_over_with_no_snapshot_is_replayed_under_the_layout_it_began_with(
        cluster_factory, tmp_path):
    """As the test above, with a failover instead of a restart: member 0's segment t/0 moves to member 1 after
    member 0 ranked its rows (one version of member 1's producer with t/0's rows alone), then member 1's node
    (no snapshot) is killed and stays down, and another node adopts it, replaying its whole log (node/adopt.py).
    That log began under layout 1; its catalog.xml says layout 2: the adopter replays under the layout
    layouts.json noted, as a restart does (before the fix, under the catalog's: member 1 ranked that version
    itself, its replayed out stream was not what it had sent under the same numbers, and the changelog the
    subscriber summed never became the one-node result)."""
    cluster, nodes, _ = await start_partitioned(cluster_factory, tmp_path, APP, "t", shared=True, failover_after=2.0)
    producers = producers_for_each_member(3)
    data = {p: bids(p, 400) for p in producers}

    def one_node(upto: int, *more: list) -> Counter:
        return ranked(*(rows[:upto] for rows in data.values()), *more)

    out, sub = await subscribe(cluster, "Top")
    try:
        lockstep = Lockstep(cluster, "Bid", data, BATCH)
        await lockstep.start()
        publishers, publish = lockstep.publishers, lockstep.publish

        await publish(slice(0, 200))
        await asyncio.to_thread(wait_until, lambda: summed(out) == one_node(200), 60, "the first rows ranked")
        # a version that changes t/0 alone, stamped by member 1's coordinator: under layout 1 member 0 ranks it
        # (under layout 2 member 1 would, and its out stream would number one more batch)
        await publishers[1].send(ALONE_0)
        await publishers[1].flush()
        await asyncio.to_thread(wait_until, lambda: summed(out) == one_node(200, ALONE_0), 60, "t/0's change")
        async with Optimizer(cluster.head, TOKEN) as optimizer:  # member 0's t/0 to member 1: layout 2
            moved = (await optimizer.move("t/0", nodes[1])).relayout
        assert moved["changed"]
        await asyncio.to_thread(cluster.stop, nodes[1], True)  # kill -9, not restarted: adopted

        def failed_over() -> bool:
            state = get_json(f"{cluster.head}/status")["failover"]["nodes"].get(nodes[1]) or {}
            return state.get("state") == "failed over"

        await asyncio.to_thread(wait_until, failed_over, 60, "the Head to fail member 1 over")
        await publish(slice(200, 400))
        want = one_node(400, ALONE_0)
        await asyncio.to_thread(wait_until, lambda: summed(out) == want, 90, "the one-node result")
    finally:
        sub.kill()
    assert summed(out) == want
