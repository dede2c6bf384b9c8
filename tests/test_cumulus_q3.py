"""Cumulus with real processes: TPC-H Q3 partitioned over three nodes, members pushing entries to each other.

Q3's ``+orders`` trigger reads ``m2[custkey]``, kept on the owner of the
customer, while it writes at the order key: members run versions in one
order and push entries to each other (docs/cumulus.md §3.5).  Six publishers
(two per stream, so every member coordinates some batches) stream customers,
orders and lineitems with deletes; after quiescence the merged view equals
DuckDB.  The ``faults`` variant runs durable members and kills one with
SIGKILL several times mid-stream: it restarts from its snapshot and log, the
box stalls meanwhile, and the result is still exact.
"""

from __future__ import annotations

import asyncio
import random
import zlib

import pytest
from boreas.client.publisher import Publisher
from boreas.client.query import QueryClient
from support.cluster import TOKEN, get_json
from support.m3_q3 import duckdb_q3, q3_app, q3_rows, wire

STREAMS = (("Customer", "customer"), ("Orders", "orders"), ("Lineitem", "lineitem"))


def deploy(nodes: list[str], segments: int = 8, replicate: str = "") -> str:
    """Box q3 partitioned over ``nodes`` (``replicate``: maps every member holds whole, docs/cumulus.md §3.11)."""
    members = "".join(f'<node endpoint="{n}"/>' for n in nodes)
    publish = "".join(f'<publish stream="{s}"/>' for s, _ in STREAMS)
    also = f' replicate="{replicate}"' if replicate else ""
    return f'<deploy>{publish}<partition box="q3" segments="{segments}"{also}>{members}</partition></deploy>'


def producers(stream: str, n: int) -> list[str]:
    """Two producer ids for ``stream`` that publishers send to different members."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < min(2, n):
        name = f"q3-{stream}-{i}"
        found.setdefault(zlib.crc32(name.encode()) % n, name)
        i += 1
    return list(found.values())


def with_deletes(data: dict[str, list[tuple]], seed: str) -> tuple[dict[str, list[tuple]], dict[str, list[tuple]]]:
    """Per relation, the signed rows to publish (some lineitems and orders deleted later), and what remains."""
    rng = random.Random(seed)
    signed, remaining = {}, {}
    for name, rows in data.items():
        out = [(1, *r) for r in rows]  # the sign field comes first (q3_app's schemas)
        gone = rng.sample(rows, len(rows) // 5) if name != "customer" else []
        out += [(-1, *r) for r in gone]
        signed[name] = out
        left = list(rows)
        for r in gone:
            left.remove(r)
        remaining[name] = left
    return signed, remaining


async def publish_all(head: str, nodes: list[str], signed: dict[str, list[tuple]], between=None) -> None:
    """Every stream through two publishers each (each producer's rows in order), chunk by chunk."""
    pubs = []
    for stream, name in STREAMS:
        names = producers(stream, len(nodes))
        rows = wire(signed[name])
        for k, producer in enumerate(names):
            pubs.append((Publisher(head, stream, TOKEN, producer=producer, batch_size=40), rows[k::len(names)]))
    for publisher, _ in pubs:
        await publisher.start()
    chunk = 0
    while any(rows for _, rows in pubs):
        for i, (publisher, rows) in enumerate(pubs):
            if rows:
                await publisher.send(rows[:60])
                pubs[i] = (publisher, rows[60:])
        chunk += 1
        if between is not None:
            await between(chunk)
        await asyncio.sleep(0.01)
    for publisher, _ in pubs:
        await publisher.close()


def insert_then_delete(data: dict[str, list[tuple]]) -> dict[str, list[tuple]]:
    """Signed rows ordered so each delete comes after its insert in the same producer's share."""
    out = {}
    for name, rows in data.items():
        inserts = [r for r in rows if r[0] == 1]
        deletes = [r for r in rows if r[0] == -1]
        out[name] = inserts + deletes
    return out


async def view_equals(head: str, expected: dict, timeout: float = 90.0) -> None:
    async with QueryClient(head, TOKEN) as client:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            got = (await client.query("q3")).as_dict()
            if got == pytest.approx(expected):
                return
            assert asyncio.get_running_loop().time() < deadline, (len(got), len(expected))
            await asyncio.sleep(0.3)


def submit(cluster, nodes: list[str]) -> None:
    cluster.submit(cluster.write("q3.xml", q3_app(sign=True)), cluster.write("deploy.xml", deploy(nodes)))
    cluster.wait_in_sync(*nodes)


@pytest.mark.slow
async def test_q3_partitioned_over_three_nodes_equals_duckdb(cluster_factory):
    cluster = cluster_factory()
    await asyncio.to_thread(cluster.start_head)
    nodes = await asyncio.to_thread(cluster.start_nodes, 3)
    await asyncio.to_thread(submit, cluster, nodes)
    data = q3_rows(5, customers=60, orders=400, items=2500)
    signed, remaining = with_deletes(data, "q3-partitioned")
    # a delete may reach its member before its insert (another producer): M3's maps are sums, so the
    # final view does not depend on the order
    await publish_all(cluster.head, nodes, insert_then_delete(signed))
    await view_equals(cluster.head, duckdb_q3(remaining))
    for node in nodes:  # every member holds part of the maps
        counted = get_json(f"http://{node}/segments/q3")
        assert sum(n for per_map in counted["segments"].values() for n in per_map.values()) > 0


@pytest.mark.slow
@pytest.mark.faults
async def test_a_member_killed_mid_stream_restarts_and_q3_stays_exact(cluster_factory):
    cluster = cluster_factory(snapshot_interval=1.0)
    await asyncio.to_thread(cluster.start_head)
    dirs = [cluster.workdir / f"member{i}" for i in range(3)]
    nodes = await asyncio.to_thread(cluster.start_nodes, data_dirs=dirs)
    await asyncio.to_thread(submit, cluster, nodes)
    data = q3_rows(8, customers=50, orders=300, items=1800)
    signed, remaining = with_deletes(data, "q3-kill")
    kills = {4, 11, 19}

    async def maybe_kill(chunk: int) -> None:
        if chunk in kills:
            victim = chunk % 3
            await asyncio.to_thread(cluster.stop, nodes[victim], True)
            await asyncio.to_thread(cluster.start_node, nodes[victim], True, dirs[victim])

    await publish_all(cluster.head, nodes, insert_then_delete(signed), between=maybe_kill)
    await view_equals(cluster.head, duckdb_q3(remaining), timeout=120)
