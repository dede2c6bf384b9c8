"""Durability and recovery with real processes: ``kill -9`` a node, restart it, lose nothing.

A three-node chain (a filter where Packet enters, a map in the middle, a
per-band windowed count and sum on the node that feeds the subscriber) runs
on durable nodes (``--data-dir``) while a publisher keeps sending numbered
tuples.  One node is killed with SIGKILL at random moments and restarted
with the same data directory, again and again; snapshots are taken every
second meanwhile, so recoveries restore from snapshots and replay the log
after them.  The subscriber must receive exactly what a run with no failure
produces: nothing lost, nothing twice, in order.
"""

from __future__ import annotations

import asyncio
import random
import signal

import pytest
from boreas.client.publisher import Publisher
from boreas.client.subscriber import Subscriber
from support.cluster import EXAMPLES, TOKEN, free_port, get_json, http, take_snapshot, wait_until
from support.streams import collect

pytestmark = pytest.mark.faults

CHAIN = (EXAMPLES / "band_chain.xml").read_text()

BOXES = ("keep", "banded", "sums")
ROLES = {"entry": 0, "middle": 1, "feeding-subscribers": 2}


def without_failures(rows: list[tuple], batch: int) -> list[tuple]:
    """What the chain emits with nothing killed: its operators run in this process."""
    from boreas.catalog import plan_submission, read_document
    from boreas.catalog.model import Catalog
    from boreas.catalog.validate import stream_schemas
    from boreas.node.operators import build_operator

    catalog = plan_submission(Catalog(), [read_document(CHAIN.encode(), "app")]).catalog
    schemas = stream_schemas(catalog)
    ops = [build_operator(catalog.boxes[b], [schemas[p.stream] for p in catalog.boxes[b].inputs],
                          [schemas[s] for s in catalog.boxes[b].outputs]) for b in BOXES]
    out: list[tuple] = []
    for start in range(0, len(rows), batch):
        batches = [rows[start:start + batch]]
        for op in ops:
            batches = [produced for rows_in in batches for _, produced in op.process(0, rows_in, 0.0)]
        for produced in batches:
            out += produced
    return out


def deploy_chain(cluster, count: int = 3, shared: bool = False,
                 first: int | None = None) -> tuple[list[str], dict[int, object]]:
    """The chain, one box per node, on ``count`` durable nodes (``shared``: their data dirs count as
    shared storage); node ``first`` gets the lowest name (the Head's tie-break for failover)."""
    cluster.start_head()
    dirs = {n: cluster.workdir / f"node{n}-data" for n in range(count)}
    names = sorted(f"localhost:{free_port()}" for _ in range(count))
    if first is not None:
        names.insert(first, names.pop(0))
    nodes = cluster.start_nodes(endpoints=names, data_dirs=[dirs[n] for n in range(count)], shared=shared)
    app = cluster.write("chain.xml", CHAIN)
    dep = cluster.write("chain_dep.xml", f"""<deploy> <publish stream="Packet" node="{nodes[0]}"/>
  <node endpoint="{nodes[0]}" query="keep"/> <node endpoint="{nodes[1]}" query="banded"/>
  <node endpoint="{nodes[2]}" query="sums"/> </deploy>""")
    cluster.submit(app, dep)
    return nodes, dirs


def kill_and_restart(cluster, node: str, data_dir) -> None:
    cluster.stop(node, kill=True)
    cluster.start_node(node, data_dir=data_dir)


@pytest.mark.parametrize("role", sorted(ROLES))
async def test_a_node_killed_at_ten_random_points_loses_and_repeats_nothing(cluster_factory, role):
    cluster = cluster_factory(snapshot_interval=1.0)
    nodes, dirs = await asyncio.to_thread(deploy_chain, cluster)
    victim = ROLES[role]
    rng = random.Random(f"recovery-{role}")
    rows = [(float(n % 13), n) for n in range(20_000)]
    expected = without_failures(rows, 50)
    chunks = [rows[start:start + 200] for start in range(0, len(rows), 200)]
    kill_at = set(rng.sample(range(5, len(chunks) - 5), 10))  # kill points spread over the stream
    async with Subscriber(cluster.head, "Sums", TOKEN) as subscriber:
        reading = asyncio.create_task(collect(subscriber, len(expected), timeout=240))
        async with Publisher(cluster.head, "Packet", TOKEN, producer="recovery-test", batch_size=50) as publisher:
            restarting: asyncio.Task | None = None
            for number, chunk in enumerate(chunks):
                if number in kill_at:
                    if restarting is not None:
                        await restarting
                    restarting = asyncio.create_task(
                        asyncio.to_thread(kill_and_restart, cluster, nodes[victim], dirs[victim]))
                await publisher.send(chunk)
                await asyncio.sleep(0.02)
            assert restarting is not None
            await restarting
        got = await reading
        await asyncio.sleep(1.0)  # nothing more may come: no duplicates after the last expected row
        extra = []
        while not subscriber._rows.empty():
            extra += subscriber._rows.get_nowait()
    assert len(got) == len(expected)
    assert got == expected
    assert extra == []
    status = get_json(f"http://{nodes[victim]}/status")["recovery"]
    assert status["state"] == "ready"
    assert status["restored_from"] is not None or status["replayed_batches"] > 0


async def test_snapshots_complete_are_recorded_and_truncate_the_log(cluster_factory):
    """``boreas snapshot`` takes one on every durable node; the Head records it; logs are cut."""
    cluster = cluster_factory()
    nodes, dirs = await asyncio.to_thread(deploy_chain, cluster)
    async with Publisher(cluster.head, "Packet", TOKEN, producer="snap", batch_size=100) as publisher:
        await publisher.send([(1.0, n) for n in range(5_000)])
    done = await asyncio.to_thread(cluster.boreas, "snapshot")
    assert done.returncode == 0, done.stderr
    assert "complete on 3 nodes" in done.stdout
    first = get_json(f"{cluster.head}/status")["snapshots"]["last_complete"]["id"]
    # (another producer: under "snap" again these other rows were dropped as its batches 0-29, now refused)
    async with Publisher(cluster.head, "Packet", TOKEN, producer="snap-2", batch_size=100) as publisher:
        await publisher.send([(1.0, n) for n in range(5_000, 8_000)])
    status, body = await asyncio.to_thread(http, "POST", f"{cluster.head}/snapshots")
    assert status == 200
    wait_until(lambda: get_json(f"http://{nodes[0]}/status")["recovery"]["completed_snapshot"] == first + 1,
               what="the node to hear the snapshot is complete")
    log_status = get_json(f"http://{nodes[0]}/status")["recovery"]["log"]
    assert log_status["first"] > 0, "the log before the complete snapshot was truncated"
    listing = await asyncio.to_thread(cluster.boreas, "nodes")
    assert f"last complete snapshot: {first + 1}" in listing.stdout
    assert f"snapshot {first + 1}" in listing.stdout
    # The record survives a Head restart.
    await asyncio.to_thread(cluster.stop, "head")
    await asyncio.to_thread(cluster.start_head)
    assert get_json(f"{cluster.head}/status")["snapshots"]["last_complete"]["id"] == first + 1


def q3_durable(cluster) -> tuple[list[str], object]:
    """TPC-H Q3 as an m3 box on a durable node; its inputs enter at another (durable) node."""
    from support.m3_q3 import APP

    cluster.start_head()
    dirs = [cluster.workdir / f"m3node{n}" for n in range(2)]
    nodes = cluster.start_nodes(data_dirs=dirs)
    publish = "".join(f'<publish stream="{s}" node="{nodes[0]}"/>' for s in ("Customer", "Orders", "Lineitem"))
    dep = cluster.write("dep.xml", f'<deploy>{publish}<node endpoint="{nodes[1]}" query="q3"/>'
                                   f'<node endpoint="{nodes[0]}" query=""/></deploy>')
    cluster.submit(APP, dep)
    return nodes, dirs[1]


async def test_a_node_holding_an_m3_box_killed_at_ten_points_keeps_its_view_equal_to_duckdb(cluster_factory):
    from boreas.client.query import QueryClient
    from support.m3_q3 import STREAMS, duckdb_q3, q3_rows, view_becomes, wire

    cluster = cluster_factory(snapshot_interval=1.0)
    nodes, data_dir = await asyncio.to_thread(q3_durable, cluster)
    data = q3_rows(11, customers=60, orders=300, items=3000)
    expected = duckdb_q3(data)
    rng = random.Random("recovery-m3")
    chunks = [(stream, wire(data[name])[i:i + 60]) for stream, name in STREAMS
              for i in range(0, len(data[name]), 60)]
    kill_at = set(rng.sample(range(3, len(chunks) - 3), 10))
    publishers = {stream: Publisher(cluster.head, stream, TOKEN, producer=f"q3-{stream}", batch_size=30)
                  for stream, _ in STREAMS}
    for publisher in publishers.values():
        await publisher.start()
    restarting: asyncio.Task | None = None
    for number, (stream, rows) in enumerate(chunks):
        if number in kill_at:
            if restarting is not None:
                await restarting
            restarting = asyncio.create_task(asyncio.to_thread(kill_and_restart, cluster, nodes[1], data_dir))
        await publishers[stream].send(rows)
        await asyncio.sleep(0.01)
    assert restarting is not None
    await restarting
    for publisher in publishers.values():
        await publisher.close()
    async with QueryClient(cluster.head, TOKEN) as client:
        await view_becomes(client, expected, timeout=60)
    status = get_json(f"http://{nodes[1]}/status")["recovery"]
    assert status["state"] == "ready"


PUBLISH_SCRIPT = """
import asyncio, sys
from boreas.client.publisher import Publisher

async def main(head, token, first):
    async with Publisher(head, "Packet", token, producer="crashing-publisher", batch_size=50) as pub:
        for start in range(0, 20_000, 200):
            await pub.send([(float(n % 13), n) for n in range(start, start + 200)])
            if start >= first:
                print("sent", start, flush=True)
            await asyncio.sleep(0.01)

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


async def test_a_publisher_killed_and_run_again_delivers_every_tuple_once(cluster_factory):
    """A publisher with a stable producer id re-sends from the start; the entry node drops what it has."""
    import subprocess
    import sys

    cluster = cluster_factory()
    nodes, _ = await asyncio.to_thread(deploy_chain, cluster)
    rows = [(float(n % 13), n) for n in range(20_000)]
    expected = without_failures(rows, 50)
    argv = [sys.executable, "-c", PUBLISH_SCRIPT, cluster.head, TOKEN]
    async with Subscriber(cluster.head, "Sums", TOKEN) as subscriber:
        reading = asyncio.create_task(collect(subscriber, len(expected), timeout=120))
        first = await asyncio.create_subprocess_exec(*argv, "6000", stdout=subprocess.PIPE)
        assert first.stdout is not None
        await first.stdout.readline()  # it got past row 6,000
        first.kill()
        await first.wait()
        second = await asyncio.create_subprocess_exec(*argv, "0", stdout=subprocess.DEVNULL)
        assert await second.wait() == 0
        got = await reading
    assert got == expected
    counters = get_json(f"http://{nodes[0]}/status")["data"]["in"]
    assert counters["duplicate_batches"] > 0, "the second run re-sent what the first had delivered"


async def test_the_head_killed_in_the_middle_of_a_snapshot(cluster_factory):
    """The snapshot it was taking is not recorded; the next one completes; no tuple is lost or doubled."""
    cluster = cluster_factory()
    nodes, dirs = await asyncio.to_thread(deploy_chain, cluster)
    rows = [(float(n % 13), n) for n in range(10_000)]
    expected = without_failures(rows, 50)
    async with Subscriber(cluster.head, "Sums", TOKEN) as subscriber:
        reading = asyncio.create_task(collect(subscriber, len(expected), timeout=120))
        async with Publisher(cluster.head, "Packet", TOKEN, producer="head-kill", batch_size=50) as publisher:
            await publisher.send(rows[:5_000])
            done = await asyncio.to_thread(cluster.boreas, "snapshot")
            assert done.returncode == 0, done.stderr
            before = get_json(f"{cluster.head}/status")["snapshots"]["last_complete"]["id"]
            asking = asyncio.create_task(asyncio.to_thread(http, "POST", f"{cluster.head}/snapshots"))
            await asyncio.sleep(0.005)
            await asyncio.to_thread(cluster.stop, "head", True)
            await asyncio.gather(asking, return_exceptions=True)
            await publisher.send(rows[5_000:])
            await asyncio.to_thread(cluster.start_head)
            recorded = get_json(f"{cluster.head}/status")["snapshots"]["last_complete"]["id"]
            assert recorded in (before, before + 1)
            await asyncio.to_thread(cluster.wait_alive, *nodes)
            again = await asyncio.to_thread(cluster.boreas, "snapshot")
            assert again.returncode == 0, again.stdout + again.stderr
            assert get_json(f"{cluster.head}/status")["snapshots"]["last_complete"]["id"] > recorded
        got = await reading
    assert got == expected


async def test_a_corrupt_log_tail_and_a_half_written_snapshot_are_survived(cluster_factory):
    """Garbage after the last record is cut (never replayed as data); a temporary snapshot file is ignored."""
    cluster = cluster_factory()
    nodes, dirs = await asyncio.to_thread(deploy_chain, cluster)
    rows = [(float(n % 13), n) for n in range(6_000)]
    expected = without_failures(rows, 50)
    async with Subscriber(cluster.head, "Sums", TOKEN) as subscriber:
        reading = asyncio.create_task(collect(subscriber, len(expected), timeout=120))
        async with Publisher(cluster.head, "Packet", TOKEN, producer="corrupt", batch_size=50) as publisher:
            await publisher.send(rows[:3_000])
            await publisher.flush()
            done = await asyncio.to_thread(cluster.boreas, "snapshot")
            assert done.returncode == 0, done.stderr
            # records after the snapshot's marker: the node cuts its log before the marker once the snapshot
            # is complete, and starts the next segment with its next record
            await publisher.send(rows[3_000:3_100])
            await publisher.flush()
            segments = await asyncio.to_thread(wait_until, lambda: sorted((dirs[2] / "log").glob("*.log")),
                                               20.0, "a log segment after the snapshot")
            await asyncio.to_thread(cluster.stop, nodes[2], True)
            with open(segments[-1], "ab") as f:  # a torn record: a length, half a checksum
                f.write(b"\x00\x00\x10\x00\xde\xad")
            (dirs[2] / "snapshots" / ".snap-000000000099.tmp").write_bytes(b"BOREASS1\x00\x00")
            await asyncio.to_thread(cluster.start_node, nodes[2], True, dirs[2])
            await publisher.send(rows[3_100:])
        got = await reading
    assert got == expected
    assert "cut" in cluster.log(nodes[2]) or "torn" in cluster.log(nodes[2]).lower()
    assert get_json(f"http://{nodes[2]}/status")["recovery"]["state"] == "ready"


async def test_snapshots_taken_while_a_box_keeps_moving(cluster_factory):
    """Snapshots every 0.3 s while the map moves back and forth; then the node it ended on is killed."""
    from boreas.client.optimizer import Optimizer

    cluster = cluster_factory(snapshot_interval=0.3)
    nodes, dirs = await asyncio.to_thread(deploy_chain, cluster)
    rows = [(float(n % 13), n) for n in range(10_000)]
    expected = without_failures(rows, 50)
    async with Subscriber(cluster.head, "Sums", TOKEN) as subscriber:
        reading = asyncio.create_task(collect(subscriber, len(expected), timeout=180))
        async with Publisher(cluster.head, "Packet", TOKEN, producer="moving", batch_size=50) as publisher:
            async def publish() -> None:
                for start in range(0, len(rows), 200):
                    await publisher.send(rows[start:start + 200])
                    await asyncio.sleep(0.03)

            sending = asyncio.create_task(publish())
            where = 1
            async with Optimizer(cluster.head, TOKEN) as optimizer:
                for _ in range(4):
                    await asyncio.sleep(0.25)
                    target = 0 if where == 1 else 1
                    assert (await optimizer.move("banded", nodes[target])).source == nodes[where]
                    where = target
            await asyncio.to_thread(kill_and_restart, cluster, nodes[where], dirs[where])
            await sending
        got = await reading
    assert got == expected
    attempts = get_json(f"{cluster.head}/status")["snapshots"]
    assert attempts["last_complete"] is not None


async def with_outputs_waiting_at_a_snapshot(cluster, nodes: list[str], stopped: int, snapshotted: int, crash,
                                             producer: str) -> tuple[list[tuple], list[tuple]]:
    """Publish 3,000 rows through the chain; for the second thousand node ``stopped`` is stopped (SIGSTOP), so
    node ``snapshotted``'s outputs wait unacknowledged when it takes a snapshot; then ``crash()`` runs (in a
    thread) and node ``stopped`` goes on.  Returns what the subscriber got and what it should have got."""
    rows = [(float(n % 13), n) for n in range(3_000)]
    expected = without_failures(rows, 50)
    process = cluster.procs[nodes[stopped]]
    async with Subscriber(cluster.head, "Sums", TOKEN) as subscriber:
        reading = asyncio.create_task(collect(subscriber, len(expected), timeout=120))
        async with Publisher(cluster.head, "Packet", TOKEN, producer=producer, batch_size=50) as publisher:
            await publisher.send(rows[:1_000])
            await publisher.flush()
            await asyncio.sleep(0.5)  # through the chain
            process.send_signal(signal.SIGSTOP)
            try:
                await publisher.send(rows[1_000:2_000])
                await publisher.flush()  # acknowledged by the entry node: logged there
                await asyncio.sleep(0.2)  # on through the nodes before the stopped one
                await asyncio.to_thread(take_snapshot, nodes[snapshotted], 1_000)
                await asyncio.to_thread(crash)
            finally:
                process.send_signal(signal.SIGCONT)
            await publisher.send(rows[2_000:])
        return await reading, expected


async def test_outputs_not_acknowledged_when_a_snapshot_is_taken_survive_a_kill(cluster_factory):
    """A node's outputs that its downstream had not acknowledged when the node took a snapshot must not be
    lost when the node is killed after it: recovery restores the snapshot and replays only the log after it,
    so those outputs would otherwise never be produced again (the receiver would skip the gap)."""
    cluster = cluster_factory()  # no scheduled snapshots: the test takes one at the chosen moment
    nodes, dirs = await asyncio.to_thread(deploy_chain, cluster)
    got, expected = await with_outputs_waiting_at_a_snapshot(
        cluster, nodes, stopped=1, snapshotted=0, crash=lambda: kill_and_restart(cluster, nodes[0], dirs[0]),
        producer="unacked-test")
    assert got == expected
