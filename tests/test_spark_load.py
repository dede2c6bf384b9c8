"""boreas.spark.load_view with real processes: a partitioned TPC-H Q3 box bulk-loaded by Spark, then streamed.

A Head and three nodes run the Q3 example partitioned over them
(``<partition box="q3" segments="8">``).  Spark (``local[2,4]``) computes
every map of the box from DataFrames of customers, orders and lineitems and
sends each entry to its owner; then publishers stream more rows, among them
deletes of loaded rows, through the box's triggers.  The merged view (a
stable read, every member at one epoch) must equal DuckDB over everything,
as if every row had been streamed.  A box that already holds data refuses a
load with the member's message, before Spark sends anything.

A load cut into many parts by many tasks delivers every entry of every map
exactly once, to its owner (real members, and fake members that count what
they get), and a re-run of the same job adds nothing.  The load moves Arrow
(one ``mapInArrow`` per map, Arrow IPC parts): it leaves every map's
entries on the same members as streaming the same rows, an Arrow part that
does not fit is refused with the reason, and members killed after a load
replay its parts from their logs.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import random
import threading
from decimal import Decimal
from pathlib import Path

import msgspec
import pyarrow as pa
import pytest
from aiohttp import web
from boreas.client.publisher import Publisher
from boreas.client.query import QueryClient
from boreas.node.cumulus.loading import ARROW
from boreas.spark.load_arrow import encode
from boreas.spark.load_tasks import post_part
from boreas.wire.client import PeerClient
from boreas.m3 import compile_sql
from boreas.m3.cumulus import plan_partition
from boreas.m3.cumulus.definitions import definition_sql
from boreas.m3.runtime.initial import evaluate_definition
from boreas.spark import (
    LoadError,
    LoadPlan,
    LoadRefused,
    load_view,
    plan_load,
    verify_view,
)
from support.cluster import TOKEN, free_port, get_json
from support.m3_q3 import Q3, duckdb_q3, q3_app, q3_rows, wire
from test_cumulus_q3 import deploy

pytestmark = pytest.mark.slow

SCHEMAS = {
    "customer": "c_custkey INT, c_mktsegment STRING",
    "orders": "o_orderkey INT, o_custkey INT, o_orderdate DATE, o_shippriority INT",
    "lineitem": "l_orderkey INT, l_extendedprice DECIMAL(15,2), l_discount DECIMAL(15,2), l_shipdate DATE",
}
STREAMS = {"customer": "Customer", "orders": "Orders", "lineitem": "Lineitem"}


def frames(spark, data: dict[str, list[tuple]], partitions: int = 3) -> dict:
    """The relations as DataFrames (prices as DECIMAL, as TPC-H's files have them), spread over partitions."""
    out = {}
    for name, rows in data.items():
        if name == "lineitem":
            rows = [(k, Decimal(str(p)), Decimal(str(d)), day) for k, p, d, day in rows]
        out[name] = spark.createDataFrame(rows, SCHEMAS[name]).repartition(partitions)
    return out


def split(data: dict[str, list[tuple]], seed: str):
    """(loaded, streamed signed rows, everything that remains): some rows loaded, the rest streamed,
    and a fifth of the loaded orders and lineitems deleted by the stream."""
    rng = random.Random(seed)
    loaded, streamed, remaining = {}, {}, {}
    for name, rows in data.items():
        cut = len(rows) * 2 // 3
        loaded[name], later = rows[:cut], rows[cut:]
        gone = rng.sample(loaded[name], len(loaded[name]) // 5) if name != "customer" else []
        streamed[name] = [(1, *r) for r in later] + [(-1, *r) for r in gone]
        left = list(rows)
        for r in gone:
            left.remove(r)
        remaining[name] = left
    return loaded, streamed, remaining


async def publish(head: str, streamed: dict[str, list[tuple]]) -> None:
    for name, rows in streamed.items():
        async with Publisher(head, STREAMS[name], TOKEN, batch_size=50) as publisher:
            await publisher.send(wire(rows))


def start(cluster_factory, members: int = 3) -> tuple:
    cluster = cluster_factory()
    cluster.start_head()
    nodes = cluster.start_nodes(members)
    cluster.submit(cluster.write("q3.xml", q3_app(sign=True)), cluster.write("deploy.xml", deploy(nodes)))
    cluster.wait_in_sync(*nodes)
    return cluster, nodes


def test_a_bulk_load_then_streaming_equals_streaming_everything(cluster_factory, spark):
    cluster, nodes = start(cluster_factory)
    data = q3_rows(11, customers=60, orders=500, items=3000)
    loaded, streamed, remaining = split(data, "spark-load")
    plan = plan_load("q3", cluster.head, TOKEN)
    assert plan.relations == ["customer", "orders", "lineitem"]
    assert set(plan.sql) == {m.name for m in plan.program.maps}

    # one task: one part per member (a member takes no second part yet, see the test below)
    counts = load_view("q3", frames(spark, loaded), head=cluster.head, token=TOKEN, spark=spark, job="q3-initial",
                       partitions=1)
    expected_loaded = duckdb_q3(loaded)
    assert counts["Q1_revenue"] == len(expected_loaded) > 0
    held = [get_json(f"http://{n}/segments/q3") for n in nodes]
    per_member = [sum(n for m in h["segments"].values() for n in m.values()) for h in held]
    assert sum(per_member) == sum(counts.values()) and all(per_member), per_member
    check = verify_view("q3", expected_loaded, head=cluster.head, token=TOKEN, stable=False, wait=10)
    assert check.ok, check

    # the same job again (a re-run after a failure): every part is known, nothing is added
    assert load_view("q3", frames(spark, loaded), head=cluster.head, token=TOKEN, spark=spark, job="q3-initial",
                     partitions=1) == counts
    assert verify_view("q3", expected_loaded, head=cluster.head, token=TOKEN, stable=False, wait=10).ok

    asyncio.run(publish(cluster.head, streamed))
    expected = duckdb_q3(remaining)
    check = verify_view("q3", expected, head=cluster.head, token=TOKEN, wait=30)
    assert check.ok, check
    assert check.epoch is not None  # a stable read: every member at one epoch
    # and Spark SQL over the same rows agrees (the box's SQL, run by Spark: the cross-check users run)
    by_sql = verify_view("q3", Q3, frames(spark, remaining, partitions=2), head=cluster.head, token=TOKEN,
                         spark=spark)
    assert by_sql.ok and by_sql.rows == len(expected), by_sql


def test_a_load_in_many_parts_from_many_tasks(cluster_factory, spark):
    cluster, _ = start(cluster_factory, members=2)
    data = q3_rows(5, customers=30, orders=150, items=600)
    counts = load_view("q3", frames(spark, data), head=cluster.head, token=TOKEN, spark=spark, chunk=20)
    assert counts["Q1_revenue"] == len(duckdb_q3(data))
    assert verify_view("q3", Q3, frames(spark, data), head=cluster.head, token=TOKEN, spark=spark,
                       stable=False).ok


def test_a_box_that_holds_data_refuses_a_load_with_the_members_message(cluster_factory, spark):
    cluster, nodes = start(cluster_factory, members=2)
    data = q3_rows(3, customers=10, orders=40, items=100)
    with pytest.raises(LoadError, match=r"relation\(s\) lineitem but no table"):
        load_view("q3", {k: v for k, v in frames(spark, data, 1).items() if k != "lineitem"}, head=cluster.head,
                  token=TOKEN, spark=spark)
    with pytest.raises(LoadError, match="no box 'nope'"):
        load_view("nope", {}, head=cluster.head, token=TOKEN, spark=spark)

    asyncio.run(publish(cluster.head, {name: [(1, *r) for r in rows] for name, rows in data.items()}))
    expected = duckdb_q3(data)
    assert verify_view("q3", expected, head=cluster.head, token=TOKEN, stable=False, wait=30).ok
    with pytest.raises(LoadRefused, match="already holds data; a bulk load starts an empty partitioned box") as caught:
        load_view("q3", frames(spark, data), head=cluster.head, token=TOKEN, spark=spark)
    assert caught.value.status == 409 and caught.value.endpoint in nodes
    assert "refused part 0" in str(caught.value)

    async def view() -> dict:
        async with QueryClient(cluster.head, TOKEN) as client:
            return (await client.query("q3")).as_dict()

    async def post_wrong_parts() -> list[LoadRefused]:
        async with QueryClient(cluster.head, TOKEN) as client:
            layout = await client.layout_of("q3", fresh=True)
        theirs = next(k for k in range(10_000) if layout.owner("m3", (k,)) == 1)  # m3: keyed by order key
        refused = []
        async with PeerClient(TOKEN) as peers:
            for entries in ([["m3", [theirs], 1.0]], [["nope", [1], 1.0]], [["m3", [1, 2], 1.0]]):
                with pytest.raises(LoadRefused) as caught:
                    await post_part(peers, "q3", 0, layout.members[0], "wrong", 0, msgspec.msgpack.encode(entries), 5.0)
                refused.append(caught.value)
            for batch in (pa.record_batch({"k0": pa.array([theirs], pa.int64()), "value": [1.0]}),
                          pa.record_batch({"k0": [str(theirs)], "value": [1.0]})):  # Arrow parts, as load_view's
                with pytest.raises(LoadRefused) as caught:
                    await post_part(peers, "q3", 0, layout.members[0], "wrong", 0, encode("m3", batch), 5.0, ARROW)
                refused.append(caught.value)
        return refused

    foreign, unknown, wide, arrow_foreign, arrow_string = asyncio.run(post_wrong_parts())  # before any state
    assert arrow_foreign.status == 422 and "belongs to another member of box 'q3' than 0" in str(arrow_foreign)
    assert arrow_string.status == 422 and "map 'm3' key column 0 is INT (int64); the part's k0 is string" in str(
        arrow_string)
    assert foreign.status == 422 and "belongs to another member of box 'q3' than 0" in str(foreign)
    assert "send it to its owner" in str(foreign)
    assert unknown.status == 422 and "box 'q3' has no map 'nope'" in str(unknown)
    assert wide.status == 422 and "map 'm3' has 1 key columns; an entry has 2" in str(wide)
    assert asyncio.run(view()) == pytest.approx(expected)  # nothing was loaded


def every_map(head: str, program) -> dict[str, dict]:
    """Every map of box q3, merged over its members."""

    async def read() -> dict[str, dict]:
        async with QueryClient(head, TOKEN) as client:
            return {m.name: (await client.query("q3", m.name)).as_dict() for m in program.maps}

    return asyncio.run(read())


def test_an_arrow_load_gives_every_member_the_maps_streaming_the_same_rows_gives(cluster_factory, spark):
    """The columnar load against the row path it replaces: the same rows streamed into one partitioned q3 and
    loaded by Spark into another leave the same entries in every map (not only the view), on the same members."""
    data = q3_rows(17, customers=40, orders=300, items=1500)
    program, held = None, {}
    for how in ("stream", "load"):
        cluster, nodes = start(cluster_factory, members=2)
        program = plan_load("q3", cluster.head, TOKEN).program
        if how == "stream":
            asyncio.run(publish(cluster.head, {name: [(1, *r) for r in rows] for name, rows in data.items()}))
        else:
            counts = load_view("q3", frames(spark, data), head=cluster.head, token=TOKEN, spark=spark, chunk=100)
            assert counts["Q1_revenue"] == len(duckdb_q3(data))
        assert verify_view("q3", duckdb_q3(data), head=cluster.head, token=TOKEN, stable=False, wait=30).ok
        segments = [get_json(f"http://{n}/segments/q3")["segments"] for n in nodes]
        held[how] = (every_map(cluster.head, program), segments)
        cluster.close()
    (streamed, stream_segments), (loaded, load_segments) = held["stream"], held["load"]
    assert any(len(entries) > 100 for entries in loaded.values())
    for m in program.maps:
        assert loaded[m.name] == pytest.approx(streamed[m.name]), m.name
    assert load_segments == stream_segments  # each entry on the member that streaming put it on


def test_a_loaded_member_killed_replays_the_arrow_parts_from_its_log(cluster_factory, spark, tmp_path):
    """The Load messages are logged as the Arrow parts came: members killed with SIGKILL after a load (no
    snapshot taken) replay them on restart, and the view is the loaded one, then takes the stream on top."""
    cluster = cluster_factory()
    cluster.start_head()
    dirs = [tmp_path / f"member{m}" for m in range(2)]
    nodes = cluster.start_nodes(data_dirs=dirs)
    cluster.submit(cluster.write("q3.xml", q3_app(sign=True)), cluster.write("deploy.xml", deploy(nodes)))
    cluster.wait_in_sync(*nodes)
    data = q3_rows(23, customers=30, orders=200, items=900)
    loaded, streamed, remaining = split(data, "spark-replay")
    load_view("q3", frames(spark, loaded), head=cluster.head, token=TOKEN, spark=spark, chunk=50)
    expected_loaded = duckdb_q3(loaded)
    assert verify_view("q3", expected_loaded, head=cluster.head, token=TOKEN, stable=False, wait=30).ok
    for node in nodes:
        cluster.stop(node, kill=True)
    for node, data_dir in zip(nodes, dirs):
        cluster.start_node(node, True, data_dir)
    check = verify_view("q3", expected_loaded, head=cluster.head, token=TOKEN, stable=False, wait=60)
    assert check.ok, check
    asyncio.run(publish(cluster.head, streamed))
    check = verify_view("q3", duckdb_q3(remaining), head=cluster.head, token=TOKEN, wait=60)
    assert check.ok, check


# -- against fake members: many tasks, many parts --------------------------------------------


class FakeMembers:
    """Members that take every part once (``(job, part)`` dedup), refuse foreign entries, and add up values."""

    def __init__(self, program, count: int):
        self.program = program
        self.ports = [free_port() for _ in range(count)]
        self.endpoints = [f"localhost:{p}" for p in self.ports]
        self.layout = plan_partition(program, "q3", self.endpoints, segments=8).layout
        self.dates = {m.name: [k.type == "DATE" for k in m.keys] for m in program.maps}
        self.maps: dict[str, dict[tuple, float]] = {m.name: {} for m in program.maps}
        self.parts: dict[tuple[int, str, int], int] = {}  # (member, job, part) -> entries
        self.duplicates = 0
        self.arrow_parts = 0
        self.foreign = 0
        self._loop = asyncio.new_event_loop()
        self._runners: list[web.AppRunner] = []

    def key(self, name: str, key: list) -> tuple:
        epoch = dt.date(1970, 1, 1).toordinal()
        return tuple(dt.date.fromordinal(v + epoch) if d else v for v, d in zip(key, self.dates[name]))

    def app(self, member: int) -> web.Application:
        async def maps(request):
            return web.json_response({"maps": {m.name: {"keys": [[k.name, k.type] for k in m.keys]}
                                               for m in self.program.maps}})

        async def load(request):
            job, part = request.query["job"], int(request.query["part"])
            body = await request.read()
            if request.content_type == ARROW:  # the Arrow part load_view sends: columns k0, ..., value
                table = pa.ipc.open_stream(body).read_all()
                name = table.schema.metadata[b"map"].decode()
                self.arrow_parts += 1
                entries = [[name, list(row[:-1]), row[-1]] for row in zip(*(c.to_pylist() for c in table.columns))]
            else:  # msgpack (each member's empty first part): DATE keys as day numbers
                entries = [[name, self.key(name, key), value] for name, key, value in msgspec.msgpack.decode(body)]
            for name, key, _ in entries:
                if self.layout.owner(name, tuple(key)) != member:
                    self.foreign += 1
                    return web.json_response({"error": f"entry {name}{key} is not member {member}'s"}, status=422)
            if (member, job, part) in self.parts:
                self.duplicates += 1
            else:
                self.parts[(member, job, part)] = len(entries)
                for name, key, value in entries:
                    k = tuple(key)
                    self.maps[name][k] = self.maps[name].get(k, 0) + value
            return web.json_response({"entries": len(entries)})

        async def box(request):  # member 0 plays a Head that knows box "plain", on one node
            return web.json_response({"box": "plain", "type": "m3", "node": "n1:15001", "partition": None})

        app = web.Application()
        app.router.add_get("/boxes/plain", box)
        app.router.add_get("/query/q3/maps", maps)
        app.router.add_post("/segments/q3/load", load)
        return app

    def __enter__(self):
        threading.Thread(target=self._loop.run_forever, daemon=True).start()

        async def serve():
            for member, port in enumerate(self.ports):
                runner = web.AppRunner(self.app(member))
                await runner.setup()
                await web.TCPSite(runner, "localhost", port).start()
                self._runners.append(runner)

        asyncio.run_coroutine_threadsafe(serve(), self._loop).result(10)
        return self

    def __exit__(self, *exc):
        async def stop():
            for runner in self._runners:
                await runner.cleanup()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)


def test_many_tasks_send_every_entry_once_to_its_owner_in_parts(spark, monkeypatch):
    program = compile_sql((Path(__file__).parents[1] / "examples" / "tpch_q3.sql").read_text())
    data = q3_rows(7, customers=40, orders=300, items=1500)
    with FakeMembers(program, 3) as members:
        with pytest.raises(LoadError, match=r"box 'plain' is not partitioned \(it runs on node n1:15001\)"):
            load_view("plain", {}, head=f"http://{members.endpoints[0]}", spark=spark)
        plan = LoadPlan("q3", program, members.layout,
                        {m.name: definition_sql(program, m, dialect="spark") for m in program.maps})
        monkeypatch.setattr("boreas.spark.load.plan_load", lambda box, head, token=None: plan)
        counts = load_view("q3", frames(spark, data, partitions=4), head="http://head.invalid", spark=spark,
                           job="many", chunk=25)
        parts = dict(members.parts)
        again = load_view("q3", frames(spark, data, partitions=4), head="http://head.invalid", spark=spark,
                          job="many", chunk=25)
    assert again == counts and members.parts == parts and members.duplicates == len(parts)  # a re-run adds nothing
    assert members.foreign == 0 and members.arrow_parts == 2 * (len(parts) - 3)  # all but the empty first parts, twice
    assert max(parts.values()) <= 25 and len(parts) > 3 * len(program.maps)
    for member in range(3):
        assert (member, "many", 0) in parts  # the empty first part
    for m in program.maps:
        want = evaluate_definition(program, m, data)
        got = members.maps[m.name]
        assert counts[m.name] == len(got) == len(want), m.name
        assert got == pytest.approx(want), m.name


def test_doctests():
    import doctest

    import boreas.spark.view_check

    assert doctest.testmod(boreas.spark.view_check).failed == 0
