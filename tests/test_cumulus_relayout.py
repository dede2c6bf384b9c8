"""Cumulus layout changes with real processes, while publishers stream (issue 13 item 5).

A GROUP BY view (members apply work as it arrives) and TPC-H Q3 (members
run versions in order and push entries to each other), each partitioned over
three node processes: while publishers stream, segments are moved, split,
rebalanced, and the whole box is moved onto one member and spread out again.
Afterwards the view equals DuckDB, every stable read taken meanwhile equals
DuckDB over the input prefixes it names, and the Head's catalog and every
member's local catalog hold the layout the members run.

Segments are pre-copied before they move (docs/cumulus.md §6.2): the last
test makes the nodes copy ten keys per step, so a move takes seconds while
publishers write every key of the moving segment, kills the source in the
middle of its copy (it restarts from its snapshot and log, replay re-sending
the same chunks), and asks for a second change meanwhile, which the API
decides from the move's layout and the leader queues after it (queued
changes are also simulated in ``test_cumulus_precopy.py``).  A move can be
cancelled while its segment copies (in process and through the API).
"""

from __future__ import annotations

import asyncio
import datetime
import random
import zlib

import pytest
from boreas.client.optimizer import Optimizer, OptimizerFailed
from boreas.client.query import QueryClient
from boreas.m3.cumulus import Layout
from support.cluster import TOKEN, get_json
from support.m3_q3 import duckdb_q3, q3_rows
from test_cumulus_groupby import (
    APP,
    PrefixViews,
    expected_view,
    producers_for_each_member,
    publish,
    streaming,
    view_becomes,
    workload,
)
from test_cumulus_q3 import (
    insert_then_delete,
    publish_all,
    submit,
    view_equals,
    with_deletes,
)

pytestmark = pytest.mark.slow


def catalogs_agree(cluster, nodes: list[str], box: str) -> int:
    """The layout version the Head's catalog and every member's local catalog hold (they must be equal)."""
    versions = {cluster.head_catalog().partitions[box].layout}
    versions |= {cluster.node_catalog(n).partitions[box].layout for n in nodes}
    assert len(versions) == 1, versions
    return versions.pop()


async def changes(cluster, nodes: list[str], box: str) -> list[dict]:
    """Move, split, rebalance, move the whole box to one node and spread it again; the leader's answers."""
    async with Optimizer(cluster.head, TOKEN) as optimizer:
        done = [(await optimizer.move(f"{box}/1", nodes[0])).relayout]
        done.append(await optimizer.split(box, 0))
        done.append((await optimizer.move(f"{box}/0", nodes[2])).relayout)
        done.append((await optimizer.move(box, nodes[1])).relayout)  # every segment onto one member
        done.append(await optimizer.rebalance(box))  # and spread out again
    return done


async def test_a_group_by_keeps_exact_while_its_segments_move_split_and_rebalance(cluster_factory):
    cluster = cluster_factory()
    await asyncio.to_thread(cluster.start_head)
    nodes = await asyncio.to_thread(cluster.start_nodes, 3)
    cluster.submit(cluster.write("app.xml", APP), cluster.write(
        "deploy.xml", '<deploy><partition box="v" segments="6">'
                      + "".join(f'<node endpoint="{n}"/>' for n in nodes) + "</partition></deploy>"))
    await asyncio.to_thread(cluster.wait_in_sync, *nodes)
    data = {p: workload(p, 2500) for p in producers_for_each_member(3)}
    stable_reads: list = []

    async with streaming(cluster.head, data, stable_reads, lead=0.3):
        done = await changes(cluster, nodes, "v")
    everything = [r for rows in data.values() for r in rows]
    expected = expected_view(everything)
    await view_becomes(cluster.head, "v", expected)
    assert [d["changed"] for d in done] == [True] * 4 + [done[-1]["changed"]]
    assert all(d["moves"] for d in done[2:4]) and not done[1]["moves"]  # a split moves no data
    prefixes = PrefixViews(data)
    for result in stable_reads:
        assert result.as_dict() == prefixes.at(result.positions), f"stable epoch {result.epoch}"
    version = await asyncio.to_thread(catalogs_agree, cluster, nodes, "v")
    assert version == done[-1]["layout"]["layout"]
    counted = [get_json(f"http://{n}/segments/v") for n in nodes]
    assert sum(sum(m.values()) for c in counted for m in c["segments"].values()) == 2 * len(expected)
    assert {c["layout"]["layout"] for c in counted} == {version}


async def test_q3_keeps_exact_while_its_segments_move(cluster_factory):
    cluster = cluster_factory()
    await asyncio.to_thread(cluster.start_head)
    nodes = await asyncio.to_thread(cluster.start_nodes, 3)
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


def producers_named(prefix: str, n: int) -> list[str]:
    """Producer ids ``prefix-i`` that the publisher's pick sends to members 0, 1, ..., n-1."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < n:
        name = f"{prefix}-{i}"
        found.setdefault(zlib.crc32(name.encode()) % n, name)
        i += 1
    return [found[m] for m in range(n)]


def many_keys(seed: str, count: int, keys: int, deletes: float) -> list[tuple[int, int, int]]:
    """Rows over ``keys`` groups: inserts, and deletes of earlier inserts of the same producer."""
    rng = random.Random(seed)
    live: list[tuple[int, int]] = []
    rows = []
    for _ in range(count):
        if live and rng.random() < deletes:
            a, b = live.pop(rng.randrange(len(live)))
            rows.append((a, b, -1))
        else:
            a, b = rng.randrange(keys), rng.randrange(1, 1000)
            live.append((a, b))
            rows.append((a, b, 1))
    return rows


@pytest.mark.faults
async def test_a_move_survives_its_source_killed_mid_copy_while_the_segment_is_written(cluster_factory):
    cluster = cluster_factory(snapshot_interval=1.0)
    cluster.env["BOREAS_CUMULUS_COPY_STEP"] = "10"  # a segment of ~800 keys (1,600 entries) copies in seconds
    await asyncio.to_thread(cluster.start_head)
    dirs = [cluster.workdir / f"member{i}" for i in range(3)]
    nodes = await asyncio.to_thread(cluster.start_nodes, data_dirs=dirs)
    cluster.submit(cluster.write("app.xml", APP), cluster.write(
        "deploy.xml", '<deploy><partition box="v" segments="3">'
                      + "".join(f'<node endpoint="{n}"/>' for n in nodes) + "</partition></deploy>"))
    await asyncio.to_thread(cluster.wait_in_sync, *nodes)
    first = {p: many_keys(p, 1500, 3000, 0.0) for p in producers_named("fill", 3)}
    await asyncio.gather(*(publish(cluster.head, p, rows) for p, rows in first.items()))
    later = {p: many_keys(p, 1200, 3000, 0.3) for p in producers_named("during", 3)}
    data = {**first, **later}
    layout = Layout.from_dict(get_json(f"{cluster.head}/boxes/v")["partition"])
    seg = next(s for s in layout.segments if s.member == 1)  # from member 1 to member 2: neither leads
    stable_reads: list = []

    async def read_stable(client: QueryClient) -> None:
        while True:
            try:
                stable_reads.append(await client.query("v", stable=True))
            except Exception:  # the source is down for a while: its box stalls
                pass
            await asyncio.sleep(0.05)

    async with QueryClient(cluster.head, TOKEN) as reader, Optimizer(cluster.head, TOKEN) as optimizer:
        sampling = asyncio.create_task(read_stable(reader))  # (it tolerates the source being down)
        publishing = asyncio.gather(*(publish(cluster.head, p, rows) for p, rows in later.items()))
        await asyncio.sleep(0.3)
        moving = asyncio.create_task(optimizer.relayout("v", {"move": [seg.id, nodes[2]]}))
        await asyncio.sleep(0.6)
        # a second change asked meanwhile is decided from the move's layout and queues after it
        queued = asyncio.create_task(optimizer.split("v", seg.id))
        assert "copied" not in cluster.log(nodes[1]), "the copy was over before the source was killed"
        await asyncio.to_thread(cluster.stop, nodes[1], True)
        await asyncio.to_thread(cluster.start_node, nodes[1], True, dirs[1])
        done = await moving
        split = await queued
        await publishing
        back = (await optimizer.move(f"v/{seg.id}", nodes[1])).relayout  # the next change goes
        await asyncio.sleep(0.5)
        sampling.cancel()
    assert done["changed"] and done["moves"] == [[seg.id, 1, 2]] and back["moves"] == [[seg.id, 2, 1]]
    assert split["changed"] and split["moves"] == [] and split["layout"]["layout"] == done["layout"]["layout"] + 1
    assert "copied" in cluster.log(nodes[1])
    expected = expected_view([r for rows in data.values() for r in rows])
    await view_becomes(cluster.head, "v", expected)
    assert len(stable_reads) > 10
    prefixes = PrefixViews(data)
    for result in stable_reads:
        assert result.as_dict() == prefixes.at(result.positions), f"stable epoch {result.epoch}"
    version = await asyncio.to_thread(catalogs_agree, cluster, nodes, "v")
    assert version == back["layout"]["layout"]
    counted = [get_json(f"http://{n}/segments/v") for n in nodes]
    assert sum(sum(m.values()) for c in counted for m in c["segments"].values()) == 2 * len(expected)


@pytest.mark.parametrize("shape", ["tpch_q3", "group_by_join_key"])
def test_a_move_cancelled_before_its_first_epoch_leaves_the_layout_and_the_maps_exact(shape, monkeypatch):
    """In process (support.cumulus_sim): a move is announced and its source pre-copies two keys per step
    while batches flow; the leader is asked to cancel it before every source copied (its first epoch not
    fixed), and a later move completes.  The cancel comes at a random point of the message exchange: every
    member drops the change (a source its copy, a target its staging and late chunks), the layout stays,
    every map equals the single runtime's and every stable read its prefix."""
    import math
    import sys
    from pathlib import Path

    from boreas.m3 import compile_sql
    from boreas.m3.cumulus import even_layout, place
    from boreas.m3.cumulus import relayout as changes
    from boreas.node.cumulus import precopy
    from support.cumulus_sim import Sim

    sys.path.insert(0, str(Path(__file__).parent / "m3"))
    from test_cumulus_sim import check_stable
    from test_views_vs_duckdb import SHAPES

    monkeypatch.setattr(precopy, "COPY_STEP", 2)
    program = compile_sql(SHAPES[shape])
    maps = tuple((m.map, m.column) for m in place(program, box="v").maps)
    relations = sorted(r.name for r in program.relations if any(t.relation == r.name for t in program.triggers))
    types = {r.name: [c.type for c in r.columns] for r in program.relations}
    values = {"INT": lambda rng: rng.randrange(6), "FLOAT": lambda rng: rng.randrange(8) / 4,
              "STRING": lambda rng: rng.choice(["A", "BUILDING"]),
              "DATE": lambda rng: datetime.date(1995, 3, rng.choice([1, 16]))}
    for seed in range(8):
        rng = random.Random(seed)
        base = even_layout("v", ["n0:1", "n1:1", "n2:1"], 6)
        sim = Sim(SHAPES[shape], Layout(base.box, base.members, base.segments, maps), rng)

        def publish(count: int) -> None:
            for _ in range(count):
                rel = rng.choice(relations)
                sim.publish(rng.randrange(3), rel, [(1, tuple(values[t](rng) for t in types[rel]))
                                                    for _ in range(rng.randint(1, 4))])

        publish(30)
        sim.settle()
        leader = sim.members[0]
        before = leader.layout
        seg = next(s for s in before.segments if s.member == 1)
        sim.request("cancel-me", changes.move(before, seg.id, 2))
        change = leader.parts.changes.relayouts[-1].change
        for _ in range(rng.randrange(0, 6)):  # some chunks on their way, some copy steps done
            publish(1)
            sim.deliver_one()
        cancellable = leader.parts.changes.cancellable() == change
        sim.cancel(change)
        publish(10)
        sim.settle()
        final = leader.layout
        if cancellable:
            assert final.version == before.version and leader.parts.changes.requested is None, seed
        else:  # its first epoch was fixed already: the move completes
            assert final.version == before.version + 1, seed
        assert all(op.layout == final and not op.parts.changes.relayouts and not op.parts.changes.early for op in sim.members), seed
        later = changes.move(final, seg.id, 0)
        sim.request("later", later)
        publish(10)
        sim.settle()
        assert leader.layout.version == final.version + 1 and leader.layout.segments == later.segments, seed
        layout = leader.layout
        for mp in sim.program.maps:
            union = {}
            for m, op in enumerate(sim.members):
                for key, value in op.runtime.store.items(mp.name):
                    assert layout.owner(mp.name, key) == m, (seed, mp.name, key)
                    union[key] = value
            single = dict(sim.single.store.items(mp.name))
            assert union.keys() == single.keys(), (seed, mp.name)
            assert all(math.isclose(union[k], v, rel_tol=1e-9, abs_tol=1e-9) for k, v in single.items()), seed
        assert check_stable(sim)


async def test_a_move_cancelled_through_the_api_while_its_segment_copies(cluster_factory):
    """``POST /segments/v/relayout {"cancel": true}`` while a move's source pre-copies (ten keys per step)
    and publishers write: the move's own request answers 409 (cancelled), the layout stays in every
    catalog and member, a second cancel finds nothing to cancel, a later move completes, and the view
    equals DuckDB."""
    cluster = cluster_factory()
    cluster.env["BOREAS_CUMULUS_COPY_STEP"] = "10"
    await asyncio.to_thread(cluster.start_head)
    nodes = await asyncio.to_thread(cluster.start_nodes, 3)
    cluster.submit(cluster.write("app.xml", APP), cluster.write(
        "deploy.xml", '<deploy><partition box="v" segments="3">'
                      + "".join(f'<node endpoint="{n}"/>' for n in nodes) + "</partition></deploy>"))
    await asyncio.to_thread(cluster.wait_in_sync, *nodes)
    first = {p: many_keys(p, 1500, 3000, 0.0) for p in producers_named("fill", 3)}
    await asyncio.gather(*(publish(cluster.head, p, rows) for p, rows in first.items()))
    later = {p: many_keys(p, 600, 3000, 0.3) for p in producers_named("during", 3)}
    layout = Layout.from_dict(get_json(f"{cluster.head}/boxes/v")["partition"])
    seg = next(s for s in layout.segments if s.member == 1)
    publishing = asyncio.gather(*(publish(cluster.head, p, rows) for p, rows in later.items()))
    optimizer = Optimizer(cluster.head, TOKEN)
    moving = asyncio.create_task(optimizer.move(f"v/{seg.id}", nodes[2]))
    await asyncio.sleep(0.5)
    cancelled = await optimizer.cancel("v")
    assert cancelled["layout"]["layout"] == layout.version and not cancelled["changed"]
    with pytest.raises(OptimizerFailed, match="was cancelled"):
        await moving
    again = await asyncio.to_thread(cluster.boreas, "cancel", "v", "--head", cluster.head)  # `boreas cancel`
    assert again.returncode == 1 and "no layout change to cancel" in again.stderr, (again.returncode, again.stderr)
    await publishing
    for n in nodes:
        assert get_json(f"http://{n}/segments/v")["layout"]["layout"] == layout.version
    done = (await optimizer.move(f"v/{seg.id}", nodes[2])).relayout  # the next change goes
    await optimizer.close()
    assert done["moves"] == [[seg.id, 1, 2]] and done["layout"]["layout"] == layout.version + 1
    expected = expected_view([r for rows in {**first, **later}.values() for r in rows])
    async with QueryClient(cluster.head, TOKEN) as client:
        deadline = asyncio.get_running_loop().time() + 60
        while (await client.query("v")).as_dict() != expected:
            assert asyncio.get_running_loop().time() < deadline, "the view never equalled the expected sums"
            await asyncio.sleep(0.2)
    assert await asyncio.to_thread(catalogs_agree, cluster, nodes, "v") == layout.version + 1
