"""Cumulus layout changes with real processes, while publishers stream (issue 13 item 5).

A GROUP BY view (members apply work as it arrives) and TPC-H Q3 (members
run versions in order and push entries to each other), each partitioned over
three node processes: while publishers stream, segments are moved, split,
rebalanced, and the whole box is moved onto one member and spread out again.
Afterwards the view equals DuckDB, every stable read taken meanwhile equals
DuckDB over the input prefixes it names, and the Head's catalog and every
member's local catalog hold the layout the members run.
"""

from __future__ import annotations

import asyncio

import pytest
from boreas.cli.relayout import move_partitioned, rebalance_box, relayout_box
from boreas.client.query import QueryClient
from support.cluster import TOKEN, get_json
from test_cumulus_groupby import APP, BATCH, expected_view, producers_for_each_member, publish, workload
from test_cumulus_q3 import insert_then_delete, publish_all, submit, view_equals, with_deletes
from test_m3_box import duckdb_q3, q3_rows

pytestmark = pytest.mark.slow


def catalogs_agree(cluster, nodes: list[str], box: str) -> int:
    """The layout version the Head's catalog and every member's local catalog hold (they must be equal)."""
    versions = {cluster.head_catalog().partitions[box].layout}
    versions |= {cluster.node_catalog(n).partitions[box].layout for n in nodes}
    assert len(versions) == 1, versions
    return versions.pop()


async def changes(cluster, nodes: list[str], box: str) -> list[dict]:
    """Move, split, rebalance, move the whole box to one node and spread it again; the leader's answers."""
    head = cluster.head
    done = [await move_partitioned(head, TOKEN, f"{box}/1", nodes[0])]
    done.append(await relayout_box(head, TOKEN, box, {"split": 0}))
    done.append(await move_partitioned(head, TOKEN, f"{box}/0", nodes[2]))
    done.append(await move_partitioned(head, TOKEN, box, nodes[1]))  # every segment onto one member
    done.append(await rebalance_box(head, TOKEN, box))  # and spread out again
    return done


async def test_a_group_by_keeps_exact_while_its_segments_move_split_and_rebalance(cluster_factory):
    cluster = cluster_factory()
    await asyncio.to_thread(cluster.start_head)
    nodes = [await asyncio.to_thread(cluster.start_node) for _ in range(3)]
    cluster.submit(cluster.write("app.xml", APP), cluster.write(
        "deploy.xml", '<deploy><partition box="v" segments="6">'
                      + "".join(f'<node endpoint="{n}"/>' for n in nodes) + "</partition></deploy>"))
    await asyncio.to_thread(cluster.wait_in_sync, *nodes)
    data = {p: workload(p, 2500) for p in producers_for_each_member(3)}
    stable_reads: list = []

    async def read_stable(client: QueryClient) -> None:
        while True:
            stable_reads.append(await client.query("v", stable=True))
            await asyncio.sleep(0.05)

    async with QueryClient(cluster.head, TOKEN) as reader:
        sampling = asyncio.create_task(read_stable(reader))
        publishing = asyncio.gather(*(publish(cluster.head, p, rows) for p, rows in data.items()))
        await asyncio.sleep(0.3)
        done = await changes(cluster, nodes, "v")
        await publishing
        await asyncio.sleep(0.5)
        sampling.cancel()
    everything = [r for rows in data.values() for r in rows]
    expected = expected_view(everything)
    async with QueryClient(cluster.head, TOKEN) as client:
        deadline = asyncio.get_running_loop().time() + 60
        while (await client.query("v")).as_dict() != expected:
            assert asyncio.get_running_loop().time() < deadline, "the view never equalled DuckDB"
            await asyncio.sleep(0.2)
    assert [d["changed"] for d in done] == [True] * 4 + [done[-1]["changed"]]
    assert all(d["moves"] for d in done[2:4]) and not done[1]["moves"]  # a split moves no data
    for result in stable_reads:
        upto = {producer: seq for _, producer, seq in result.positions}
        prefix = [r for p, rows in data.items() for r in rows[:BATCH * (upto.get(p, -1) + 1)]]
        assert result.as_dict() == expected_view(prefix), f"stable epoch {result.epoch}"
    version = await asyncio.to_thread(catalogs_agree, cluster, nodes, "v")
    assert version == done[-1]["layout"]["layout"]
    counted = [get_json(f"http://{n}/segments/v") for n in nodes]
    assert sum(sum(m.values()) for c in counted for m in c["segments"].values()) == 2 * len(expected)
    assert {c["layout"]["layout"] for c in counted} == {version}


async def test_q3_keeps_exact_while_its_segments_move(cluster_factory):
    cluster = cluster_factory()
    await asyncio.to_thread(cluster.start_head)
    nodes = [await asyncio.to_thread(cluster.start_node) for _ in range(3)]
    await asyncio.to_thread(submit, cluster, nodes)
    data = q3_rows(9, customers=60, orders=400, items=2500)
    signed, remaining = with_deletes(data, "q3-relayout")
    done: list = []

    async def relayout_midway(chunk: int) -> None:
        if chunk == 3:
            done.extend(await changes(cluster, nodes, "q3"))

    await publish_all(cluster.head, nodes, insert_then_delete(signed), between=relayout_midway)
    await view_equals(cluster.head, duckdb_q3(remaining))
    assert len(done) == 5 and all(d["changed"] for d in done[:4])
    await asyncio.to_thread(catalogs_agree, cluster, nodes, "q3")
    shown = await asyncio.to_thread(cluster.boreas, "split", "q3/2", "--head", cluster.head)
    assert shown.returncode == 0 and "no data moved" in shown.stdout, shown.stderr
    await view_equals(cluster.head, duckdb_q3(remaining))
