"""Partitioned views of every join shape with real processes: each map equals the single-node runtime.

For TPC-H Q5 (24 maps, reads pushed between members), a self-join and a
three-way join, an application is built from the shape's SQL (one input
stream per relation, a sign field for deletes), the box is partitioned over
three node processes with 8 segments, and random inserts and deletes are
published by two publishers per relation (so every member coordinates),
a batch of 10 rows every 50 ms.  After quiescence every map, read merged
from the members, equals the map of one in-process runtime fed the same
events, and every view equals DuckDB (through the runtime, which tests/m3
checks against DuckDB and the maps' definitions); every READ_STABLE taken
meanwhile equals the view over exactly the input prefixes its positions name.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import html
import math
import random
import sys
import zlib
from pathlib import Path

import pytest
from boreas.client.publisher import Publisher
from boreas.client.query import QueryClient
from boreas.m3 import Runtime, compile_sql
from boreas.node.operators.m3box import micros_of
from support.cluster import TOKEN

sys.path.insert(0, str(Path(__file__).parent / "m3"))
from m3_harness import Harness  # noqa: E402
from test_views_vs_duckdb import SHAPES  # noqa: E402

pytestmark = pytest.mark.slow

FIELD = {"INT": 'type="int"', "FLOAT": 'type="double"', "STRING": 'type="string" size="16"', "DATE": 'type="timestamp"'}
VALUES = {"INT": lambda r: r.randrange(-3, 5), "FLOAT": lambda r: r.randrange(-8, 9) / 4,
          "STRING": lambda r: r.choice(["A", "B", "R", "ASIA", "BUILDING"]),
          "DATE": lambda r: r.choice([dt.date(1994, 6, 1), dt.date(1995, 3, 1), dt.date(1995, 3, 16)])}


def application(sql: str) -> tuple[str, list, list[str]]:
    """Borealis XML with one input stream per relation (sign field last) and the m3 box ``v``."""
    program = compile_sql(sql)
    relations = list(program.relations)
    views = [v.name for v in program.views]
    parts = ["<borealis>"]
    for r in relations:
        fields = "".join(f'<field name="{c.name}" {FIELD[c.type]}/>' for c in r.columns)
        parts.append(f'<input stream="{r.name}" schema="{r.name}_t"/>'
                     f'<schema name="{r.name}_t">{fields}<field name="sign" type="int"/></schema>')
    ins = "".join(f'<in stream="{r.name}"/>' for r in relations)
    outs = "".join(f'<out stream="out_{v}"/>' for v in views)
    parts.append(f'<box name="v" type="m3">{ins}{outs}<parameter name="sql" value="{html.escape(sql, quote=True)}"/>'
                 '<parameter name="sign-field" value="sign"/></box>')
    parts += [f'<output stream="out_{v}"/>' for v in views]
    parts.append("</borealis>")
    return "".join(parts), relations, views


def events(relations, seed: str, count: int) -> dict[str, list[tuple[int, tuple]]]:
    """Per relation, signed rows in order: inserts, and deletes of rows inserted before."""
    rng = random.Random(seed)
    out: dict[str, list] = {r.name: [] for r in relations}
    live: dict[str, list] = {r.name: [] for r in relations}
    for _ in range(count):
        r = rng.choice(relations)
        if live[r.name] and rng.random() < 0.25:
            out[r.name].append((-1, live[r.name].pop(rng.randrange(len(live[r.name])))))
        else:
            row = tuple(VALUES[c.type](rng) for c in r.columns)
            live[r.name].append(row)
            out[r.name].append((1, row))
    return out


def producers(relation: str, n: int) -> list[str]:
    found: dict[int, str] = {}
    i = 0
    while len(found) < min(2, n):
        found.setdefault(zlib.crc32(f"{relation}-{i}".encode()) % n, f"{relation}-{i}")
        i += 1
    return list(found.values())


BATCH = 10  # rows per publisher batch: a producer's batch seq k holds its rows [10k, 10k + 10)


def shares(relation: str, signed: list, n: int) -> dict[str, list[tuple[int, tuple]]]:
    """Each row's insert and its delete go through the same producer (rows split by value), in order."""
    names = producers(relation, n)
    out: dict[str, list] = {p: [] for p in names}
    for sign, row in signed:
        out[names[zlib.crc32(repr(row).encode()) % len(names)]].append((sign, row))
    return out


async def publish(head: str, relation: str, share: dict[str, list]) -> None:
    """The producers' rows, a batch at a time and slowly enough for stable epochs to end mid-stream."""
    async def one(producer: str, signed: list) -> None:
        rows = [(*(micros_of(v) if isinstance(v, dt.date) else v for v in row), sign) for sign, row in signed]
        async with Publisher(head, relation, TOKEN, producer=producer, batch_size=BATCH) as publisher:
            for start in range(0, len(rows), BATCH):
                await publisher.send(rows[start:start + BATCH])
                await asyncio.sleep(0.05)
    await asyncio.gather(*(one(p, signed) for p, signed in share.items()))


def same(got: dict, want: dict) -> bool:
    """View rows equal, floats within rounding (rows whose values are all zero are absent)."""
    def values(v):
        return v if isinstance(v, tuple) else (v,)
    want = {k: v for k, v in want.items() if any(values(v))}
    got = {k: v for k, v in got.items() if any(values(v))}
    return got.keys() == want.keys() and all(
        all(math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6) for a, b in zip(values(got[k]), values(v), strict=True))
        for k, v in want.items())


async def maps_become_the_single_runtimes(head: str, box: str, single: Runtime, timeout: float = 90) -> None:
    """Every map of ``box``, read merged as users read it, equals ``single``'s within ``timeout`` seconds."""
    async with QueryClient(head, TOKEN) as client:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            differ = []
            for m in single.program.maps:
                got = (await client.query(box, m.name)).as_dict()
                want = dict(single.store.items(m.name))
                if got.keys() != want.keys() or not all(math.isclose(got[k], v, abs_tol=1e-9) for k, v in want.items()):
                    differ.append(m.name)
            if not differ:
                return
            assert asyncio.get_running_loop().time() < deadline, f"maps {differ} never equalled the single runtime"
            await asyncio.sleep(0.3)


def stable_reads_are_prefixes(stable_reads: list, share: dict, sql: str, view: str, label: str) -> None:
    """Every READ_STABLE taken while the publishers ran equals ``view`` over the input prefixes it names (a
    runtime fed those events), in epoch order, and some saw only part of the input."""
    assert len(stable_reads) >= 3
    epochs = [r.epoch for r in stable_reads]
    assert epochs == sorted(epochs)
    covered = []
    for result in stable_reads:
        upto = {(stream, producer): seq for stream, producer, seq in result.positions}
        prefix = Runtime(compile_sql(sql))
        for rel, by in share.items():
            for producer, rows in by.items():
                for sign, row in rows[:BATCH * (upto.get((rel, producer), -1) + 1)]:
                    prefix.apply_grouped([(rel, sign, [row])])
        assert same(result.as_dict(), prefix.view(view)), f"stable epoch {result.epoch} of {label}"
        covered.append(sum(upto.values()))
    assert any(0 < n < max(covered) for n in covered), "some reads during the run saw part of the input"


@pytest.mark.parametrize("shape", ["tpch_q5", "self_join", "three_way"])
async def test_every_map_of_a_partitioned_shape_equals_the_single_runtime(cluster_factory, shape):
    sql = SHAPES[shape]
    app, relations, views = application(sql)
    cluster = cluster_factory()
    await asyncio.to_thread(cluster.start_head)
    nodes = await asyncio.to_thread(cluster.start_nodes, 3)
    members = "".join(f'<node endpoint="{n}"/>' for n in nodes)
    cluster.submit(cluster.write("app.xml", app),
                   cluster.write("deploy.xml", f'<deploy><partition box="v" segments="8">{members}</partition></deploy>'))
    await asyncio.to_thread(cluster.wait_in_sync, *nodes)

    signed = events(relations, shape, 600)
    share = {rel: shares(rel, rows, len(nodes)) for rel, rows in signed.items() if rows}
    stable_reads: list = []

    async def read_stable(client: QueryClient) -> None:
        while True:
            stable_reads.append(await client.query("v", f"out_{views[0]}", stable=True))
            await asyncio.sleep(0.03)

    async with QueryClient(cluster.head, TOKEN) as reader:
        sampling = asyncio.create_task(read_stable(reader))
        await asyncio.gather(*(publish(cluster.head, rel, by) for rel, by in share.items()))
        await asyncio.sleep(1.0)  # and a few epochs more, as the members catch up
        sampling.cancel()

    single = Runtime(compile_sql(sql))
    for rel, rows in signed.items():  # the maps are sums: the order of the events does not matter
        for sign, row in rows:
            single.apply_grouped([(rel, sign, [row])])
    live = {r.name: [] for r in relations}
    for rel, rows in signed.items():
        for sign, row in rows:
            if sign > 0:
                live[rel].append((len(live[rel]), row))
            else:
                live[rel].remove(next(x for x in live[rel] if x[1] == row))
    import duckdb

    harness = Harness(sql)
    con = duckdb.connect()
    for name, cols in single.relations.items():
        con.execute(f'CREATE TABLE "{name}" (_id BIGINT, ' + ", ".join(f'"{c}" VARCHAR' if t == "STRING" else
                    f'"{c}" {dict(INT="BIGINT", FLOAT="DOUBLE", DATE="DATE")[t]}' for c, t in cols) + ")")
        for rid, row in live[name]:
            con.execute(f'INSERT INTO "{name}" VALUES ({", ".join("?" * (len(row) + 1))})', [rid, *row])
    harness.compare(single, con, live, check_maps=True)  # the oracle: DuckDB and the maps' definitions

    await maps_become_the_single_runtimes(cluster.head, "v", single)
    async with QueryClient(cluster.head, TOKEN) as client:
        for view in views:  # and the views read merged, as users read them
            got = (await client.query("v", f"out_{view}")).as_dict()
            want = single.view(view)
            assert got.keys() == want.keys()

    # (a runtime fed the prefixes: DuckDB's, as the oracle above shows for the whole input)
    stable_reads_are_prefixes(stable_reads, share, sql, views[0], shape)
