"""Replicated maps with real processes (docs/cumulus.md §3.11): Q3 with its customer map on every member.

TPC-H Q3 partitioned over three node processes with ``replicate="m2"``
(customers per key, which every order reads): every statement is LOCAL, so
an order is applied by the owner of its order key alone.  Two publishers
per relation stream inserts and deletes while segments are moved, split,
moved all onto one member and rebalanced again.  Afterwards every map read
merged (``m2`` read at one member) equals one in-process runtime fed the
same events, the view equals DuckDB through that runtime, every READ_STABLE
taken meanwhile equals the view over the input prefixes it names, every
member holds the whole of ``m2``, and ``boreas segments`` and ``boreas
catalog show`` say it is replicated.  (Growing onto a new node with ``m2`` replicated:
``test_cumulus_grow.py``; a Spark bulk load's parts: ``test_cumulus_replicated_sim.py``.)
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from boreas.client.query import QueryClient
from boreas.m3 import Runtime, compile_sql
from support.cluster import TOKEN, get_json
from test_cumulus_relayout import catalogs_agree, changes
from test_cumulus_shapes import (
    application,
    events,
    maps_become_the_single_runtimes,
    publish,
    same,
    shares,
    stable_reads_are_prefixes,
)

sys.path.insert(0, str(Path(__file__).parent / "m3"))
from test_views_vs_duckdb import SHAPES  # noqa: E402

pytestmark = pytest.mark.slow


async def test_q3_with_a_replicated_map_stays_exact_while_its_segments_move(cluster_factory):
    sql = SHAPES["tpch_q3"]
    program = compile_sql(sql)
    app, relations, views = application(sql)
    cluster = cluster_factory()
    await asyncio.to_thread(cluster.start_head)
    nodes = await asyncio.to_thread(cluster.start_nodes, 3)
    members = "".join(f'<node endpoint="{n}"/>' for n in nodes)
    cluster.submit(cluster.write("app.xml", app), cluster.write(
        "deploy.xml", f'<deploy><partition box="v" segments="8" replicate="m2">{members}</partition></deploy>'))
    await asyncio.to_thread(cluster.wait_in_sync, *nodes)

    used = [r for r in relations if any(t.relation == r.name for t in program.triggers)]
    signed = events(used, "replicated-q3", 700)
    share = {rel: shares(rel, rows, len(nodes)) for rel, rows in signed.items() if rows}
    stable_reads: list = []
    done: list = []

    async def read_stable(client: QueryClient) -> None:
        while True:
            stable_reads.append(await client.query("v", f"out_{views[0]}", stable=True))
            await asyncio.sleep(0.03)

    async def relayouts() -> None:
        await asyncio.sleep(1.0)
        done.extend(await changes(cluster, nodes, "v"))

    async with QueryClient(cluster.head, TOKEN) as reader:
        sampling = asyncio.create_task(read_stable(reader))
        await asyncio.gather(relayouts(), *(publish(cluster.head, rel, by) for rel, by in share.items()))
        await asyncio.sleep(1.0)
        sampling.cancel()
    assert len(done) == 5 and all(d["changed"] for d in done[:4]), done

    single = Runtime(program)
    for rel, rows in signed.items():
        for sign, row in rows:
            single.apply_grouped([(rel, sign, [row])])
    assert dict(single.store.items("m2")), "the workload has customers in segment BUILDING"

    await maps_become_the_single_runtimes(cluster.head, "v", single)
    async with QueryClient(cluster.head, TOKEN) as client:
        assert same((await client.query("v", f"out_{views[0]}")).as_dict(), single.view(views[0]))
        # m2 is read at one member: each entry once, and its sum is the single runtime's
        m2 = dict(single.store.items("m2"))
        sliced = await client.query("v", "m2")
        assert len(sliced.rows) == len(m2) and len(sliced.members) == 1, sliced
        assert (await client.query("v", "m2", agg="sum")).value == pytest.approx(sum(m2.values()))

    # every member holds the whole replicated map, and says so
    held = [get_json(f"http://{n}/segments/v") for n in nodes]
    assert [h["segments"]["-1"]["m2"] for h in held] == [len(dict(single.store.items("m2")))] * 3
    shown = await asyncio.to_thread(cluster.boreas, "segments", "v", "--head", cluster.head)
    assert shown.returncode == 0, shown.stderr
    assert f"replicated on each of the 3 members: m2 {len(dict(single.store.items('m2')))}" in shown.stdout
    version = await asyncio.to_thread(catalogs_agree, cluster, nodes, "v")
    catalog = await asyncio.to_thread(cluster.boreas, "catalog", "show", "--head", cluster.head)
    segments = len((await asyncio.to_thread(cluster.head_catalog)).partitions["v"].segments)
    assert f"partition v: 3 members, {segments} segments, layout {version}, replicated m2" in catalog.stdout

    stable_reads_are_prefixes(stable_reads, share, sql, views[0], "q3 with m2 replicated")

