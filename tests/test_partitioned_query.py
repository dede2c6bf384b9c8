"""Reading a partitioned ``m3`` box (issue 13 stage 1, docs/cumulus.md §2.7, §5).

* A member answers from its own segments, pre-aggregated, with ``layout``,
  ``member`` and ``segments``; a part that found nothing is null; a read
  under another layout version is refused (409) with the member's layout;
  ``GET /segments/{box}`` counts its entries per segment.
* :class:`QueryClient` asks the one owner of a bound partition key, the home
  member for a home map, every member otherwise; merges their parts into
  what one node holding everything answers; follows a relayout the members
  learnt before the Head, and a member that moved.
* ``boreas segments BOX`` prints one line per segment and a total.

Everything runs in process: each member is a real :class:`M3Operator` given
the ``layout`` and ``member`` a partitioned part has and only the entries
its segments own (the stand-in for ``node/cumulus/part.py``), served by the
real query API on a loopback port; a stand-in Head answers ``GET /boxes``.
"""

from __future__ import annotations

import asyncio
import collections
import doctest
import importlib
import json
import threading
from dataclasses import replace

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.validate import stream_schemas
from boreas.cli.main import main
from boreas.client.query import QueryClient, QueryFailed, members_to_ask, merge
from boreas.m3.boxtype import box_types
from boreas.m3.cumulus import Layout, Segment, even_layout, home_slot, slot
from boreas.node.operators import build_operator
from boreas.node.cumulus.api import SegmentsApi
from boreas.node.query import QueryApi

client_query = importlib.import_module("boreas.client.query")  # boreas.client.query is also a function
client_partitioned = importlib.import_module("boreas.client.partitioned")  # its pure parts and their doctests
BOX = "v"  # its home slot (1718) is member 2's under the layouts below: home is not simply member 0
APP = f"""<borealis>
  <input stream="R" schema="RT"/>
  <output stream="G" schema="GT"/>
  <output stream="S" schema="ST"/>
  <schema name="RT"><field name="a" type="int"/><field name="b" type="int"/></schema>
  <schema name="GT"><field name="a" type="int"/><field name="total" type="long"/><field name="n" type="long"/></schema>
  <schema name="ST"><field name="s" type="long"/></schema>
  <box name="{BOX}" type="m3"><in stream="R"/><out stream="G"/><out stream="S"/>
    <parameter name="sql" value="CREATE STREAM R(a INT, b INT);&#10;SELECT a, SUM(b) AS total, COUNT(*) AS n FROM R GROUP BY a;&#10;SELECT SUM(b) AS s FROM R"/>
  </box>
</borealis>"""
MAPS = [("Q1_total", 0), ("Q1_n", 0), ("Q2_s", None)]
ROWS = [(a % 40, (a * 7) % 23 - 11) for a in range(400)]  # 40 keys; b in -11..11 (some sums negative, none 0)


def build():
    registry = box_types()
    plan = plan_submission(Catalog(), [read_document(APP, "v.xml")], registry)
    assert plan.ok, plan.problems
    schemas = stream_schemas(plan.catalog, registry)
    box = plan.catalog.boxes[BOX]
    return build_operator(box, [schemas[p.stream] for p in box.inputs], [schemas[s] for s in box.outputs])


def layout_v1(endpoints) -> Layout:
    return even_layout(BOX, list(endpoints), 6, maps=MAPS)


def relayout(layout: Layout) -> Layout:
    """Version + 1 with segment 0 moved from member 0 to member 1."""
    segments = [Segment(s.id, s.lo, s.hi, 1 if s.id == 0 else s.member) for s in layout.segments]
    return replace(layout, segments=tuple(segments), version=layout.version + 1)


def whole():
    """One operator holding everything: what every merged answer must equal."""
    op = build()
    op.process(0, ROWS, 0.0)
    return op


def parts(layout: Layout, full) -> list:
    """One stand-in partitioned operator per member: ``layout``, ``member``, only its entries."""
    ops = []
    for member in range(len(layout.members)):
        op = build()
        op.layout, op.member = layout, member
        for name in full.runtime.store.data:
            for key, value in full.runtime.store.items(name):
                if layout.owner(name, key) == member:
                    op.runtime.store.set(name, key, value)
        op.segment_entries = _counter(op)
        ops.append(op)
    return ops


def _counter(op):
    def segment_entries() -> dict[int, dict[str, int]]:
        layout = op.layout
        out = {s.id: {m: 0 for m, _ in layout.maps} for s in layout.segments_of(op.member)}
        for name, column in layout.maps:
            for key, _ in op.runtime.store.items(name):
                s = home_slot(layout.box) if column is None else slot(key[column])
                out[layout.segment_of_slot(s).id][name] += 1
        return out
    return segment_entries


class Dataflow:
    def __init__(self, op):
        self.operators = {BOX: op}


# -- the member: GET /query/{box}, GET /segments/{box} ---------------------------------------


async def call(api: QueryApi, path: str) -> tuple[int, dict]:
    route, _, _ = path.partition("?")
    request = make_mocked_request("GET", path, match_info={"box": BOX})
    handler = (SegmentsApi(api.dataflow, api.endpoint).handle_segments if route.startswith("/segments/") else
               api.handle_maps if route.endswith("/maps") else api.handle)
    response = await handler(request)
    return response.status, json.loads(response.body)


@pytest.fixture(scope="module")
def full():
    return whole()


@pytest.fixture(scope="module")
def members(full):
    layout = layout_v1(["m0:1", "m1:1", "m2:1"])
    return layout, parts(layout, full)


async def test_a_member_answers_from_its_segments_with_layout_member_and_segments(full, members):
    layout, ops = members
    assert layout.home == 2
    total = 0
    for member, op in enumerate(ops):
        api = QueryApi(Dataflow(op), f"m{member}:1")
        status, body = await call(api, f"/query/{BOX}?map=Q1_total&layout=1")
        assert status == 200, body
        assert (body["layout"], body["member"]) == (1, member)
        assert body["segments"] == [s.id for s in layout.segments_of(member)] and len(body["segments"]) == 2
        keys = [row["key"][0] for row in body["rows"]]
        assert keys and all(layout.owner("Q1_total", (k,)) == member for k in keys)
        status, body = await call(api, f"/query/{BOX}?map=Q1_total&agg=sum")  # no layout=: answered as is
        assert status == 200 and body["rows"][0]["value"] == sum(v for _, v in op.runtime.read_slice("Q1_total"))
        total += body["rows"][0]["value"]
    assert total == full.runtime.read_sum("Q1_total")
    status, body = await call(QueryApi(Dataflow(ops[2]), "m2:1"), f"/query/{BOX}?map=S")  # the home view
    assert body["rows"] == [{"key": [], "value": sum(b for _, b in ROWS)}]


async def test_a_part_that_found_nothing_is_null_for_every_aggregate(members):
    layout, ops = members
    key = 7
    owner = layout.owner("Q1_total", (key,))
    other = QueryApi(Dataflow(ops[(owner + 1) % 3]), "x:1")
    for agg in ("sum", "min", "max"):
        status, body = await call(other, f"/query/{BOX}?map=Q1_total&key={key}&agg={agg}")
        assert status == 200 and body["rows"] == [{"key": [key], "value": None}], (agg, body)
        status, body = await call(other, f"/query/{BOX}?map=G&key={key}&agg={agg}")  # a view of two columns
        assert status == 200 and body["rows"] == [{"key": [key], "value": None}], (agg, body)
    status, body = await call(QueryApi(Dataflow(ops[owner]), "x:1"), f"/query/{BOX}?map=G&key={key}&agg=sum")
    assert body["rows"][0]["value"] == list(ops[owner].runtime.view("Q1", key)[(key,)])
    status, body = await call(other, f"/query/{BOX}?map=Q1_total&key={key}")
    assert status == 200 and body["rows"] == []


async def test_a_read_under_another_layout_is_refused_with_the_members_layout(members):
    layout, ops = members
    api = QueryApi(Dataflow(ops[0]), "m0:1")
    status, body = await call(api, f"/query/{BOX}?layout=4")
    assert status == 409 and body["error"] == "layout 1, asked for 4"
    assert Layout.from_dict(body["layout"]) == layout
    status, body = await call(api, f"/query/{BOX}?layout=soon")
    assert status == 422 and "layout='soon'" in body["error"]
    status, body = await call(api, f"/query/{BOX}?stable=1")
    assert status == 422 and "partitioned" in body["error"]


async def test_segments_counts_a_members_entries_per_segment(full, members):
    layout, ops = members
    seen: dict[int, dict[str, int]] = {}
    for member, op in enumerate(ops):
        status, body = await call(QueryApi(Dataflow(op), f"m{member}:1"), f"/segments/{BOX}")
        assert status == 200, body
        assert (body["box"], body["member"], body["node"]) == (BOX, member, f"m{member}:1")
        assert Layout.from_dict(body["layout"]) == layout
        assert sorted(int(s) for s in body["segments"]) == [s.id for s in layout.segments_of(member)]
        seen.update({int(s): maps for s, maps in body["segments"].items()})
    for name in ("Q1_total", "Q1_n", "Q2_s"):
        assert sum(maps[name] for maps in seen.values()) == full.runtime.store.size(name)
    home = layout.segment_of_slot(home_slot(BOX)).id
    assert seen[home]["Q2_s"] == 1

    status, body = await call(QueryApi(Dataflow(whole()), "n:1"), f"/segments/{BOX}")  # not partitioned
    assert status == 404 and body["error"] == f"box {BOX!r} on node n:1 is not partitioned"
    status, body = await call(QueryApi(Dataflow(whole()), "n:1"), f"/query/{BOX}/maps")
    assert body["views"]["Q1"]["maps"] == ["Q1_total", "Q1_n"] and "layout" not in body
    api = QueryApi(type("Empty", (), {"operators": {}})(), "n:1")
    status, body = await call(api, f"/segments/{BOX}")
    assert status == 404 and body["error"] == f"no box {BOX!r} on node n:1"


# -- the pure parts of the client ------------------------------------------------------------


def test_the_clients_doctests():
    result = doctest.testmod(client_partitioned, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted >= 20


def test_members_to_ask_follow_the_partition_column():
    layout = layout_v1(["m0:1", "m1:1", "m2:1"])
    for key in range(40):
        assert members_to_ask(layout, 0, [key]) == (layout.owner("Q1_total", (key,)),)
    assert members_to_ask(layout, 0, [None]) == (0, 1, 2)
    assert members_to_ask(layout, None, []) == (2,)  # the home member
    two = Layout(BOX, ("m0:1", "m1:1", "m2:1"), (Segment(0, 0, 2048, 0), Segment(1, 2048, 4096, 2)), tuple(MAPS))
    assert members_to_ask(two, 0, []) == (0, 2)  # member 1 holds no segment
    assert members_to_ask(layout, 1, [3, 9]) == (layout.owner_of_slot(slot(9)),)


def test_merge_refuses_answers_that_do_not_cover_the_segments_once():
    layout = layout_v1(["m0:1", "m1:1", "m2:1"])

    def answer(member, segments, value):
        return {"box": BOX, "node": f"m{member}:1", "map": "Q1_total", "version": 1, "agg": "sum",
                "keys": [["a", "INT"]], "layout": 1, "member": member, "segments": segments,
                "rows": [{"key": [None], "value": value}]}

    good = [answer(0, [0, 3], 5), answer(1, [1, 4], None), answer(2, [2, 5], -2)]
    assert merge("sum", good, layout)["rows"][0]["value"] == 3
    assert merge("min", good, layout)["rows"][0]["value"] == -2
    with pytest.raises(QueryFailed, match="segment 5 missing; segment 4 answered by members 1 and 2") as failed:
        merge("sum", [answer(0, [0, 3], 5), answer(1, [1, 4], 1), answer(2, [2, 4], 1)], layout)
    assert failed.value.status == 409


# -- the client against members on loopback ports ------------------------------------------


class Servers:
    """aiohttp apps on loopback ports, served by an event loop of their own (the CLI runs asyncio.run)."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.runners: list[web.AppRunner] = []
        self.hits: dict[str, list[str]] = {}

    def serve(self, app: web.Application) -> str:
        async def start() -> str:
            runner = web.AppRunner(app)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            self.runners.append(runner)
            return f"127.0.0.1:{runner.addresses[0][1]}"
        return asyncio.run_coroutine_threadsafe(start(), self.loop).result(10)

    def member(self, op) -> str:
        """Serve ``op`` with the real query API; requests counted in ``hits[endpoint]``."""
        endpoint_box: dict[str, str] = {}

        @web.middleware
        async def count(request, handler):
            self.hits.setdefault(endpoint_box["endpoint"], []).append(request.path_qs)
            return await handler(request)

        app = web.Application(middlewares=[count])
        api = QueryApi(Dataflow(op), "")
        api.add_routes(app.router)
        segments = SegmentsApi(api.dataflow, "")
        segments.add_routes(app.router)
        endpoint = self.serve(app)
        endpoint_box["endpoint"] = api.endpoint = segments.endpoint = endpoint
        return endpoint

    def head(self, answers: list[dict]) -> str:
        """A Head answering ``GET /boxes/{name}`` with ``answers`` in turn (the last one from then on)."""
        calls = []

        async def box(request):
            if request.match_info["name"] != BOX:
                return web.json_response({"error": f"no box {request.match_info['name']!r} in the catalog "
                                                   "(version 3)"}, status=404)
            calls.append(1)
            return web.json_response(answers[min(len(calls), len(answers)) - 1])

        app = web.Application()
        app.router.add_get("/boxes/{name}", box)
        self.head_calls = calls
        return "http://" + self.serve(app)

    def close(self):
        async def stop():
            for runner in self.runners:
                await runner.cleanup()
        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def head_answer(layout: Layout) -> dict:
    """What the Head's ``GET /boxes/{name}`` answers for a partitioned box (extra keys included)."""
    return {"box": BOX, "type": "m3", "node": None, "version": 3,
            "partition": {**layout.to_dict(), "epoch_ms": 100, "id": 1, "key": "a"}}


def start_members(servers: Servers, layout_of, full) -> Layout:
    """Serve one stand-in member per endpoint; ``layout_of(endpoints)`` is the layout they hold."""
    ops = [build() for _ in range(3)]
    endpoints = [servers.member(op) for op in ops]
    layout = layout_of(endpoints)
    for op, filled in zip(ops, parts(layout, full)):
        op.runtime, op.layout, op.member, op.segment_entries = filled.runtime, layout, filled.member, _counter(op)
    return layout


@pytest.fixture
def servers():
    s = Servers()
    yield s
    s.close()


async def test_the_client_asks_the_owner_the_home_or_every_member_and_merges(servers, full):
    layout = start_members(servers, layout_v1, full)
    head = servers.head([head_answer(layout)])
    async with QueryClient(head, moved_wait=2) as client:
        everything = await client.query(BOX)
        assert everything.as_dict() == {k: v for k, v in full.runtime.view("Q1").items()}
        assert everything.members == (0, 1, 2) and everything.segments == (0, 1, 2, 3, 4, 5)
        assert everything.keys == (("a", "INT"),)
        for agg in ("sum", "min", "max"):
            for name in ("Q1_total", "G"):
                got = (await client.query(BOX, name, agg=agg)).value
                want = (await _one_node(full, name, agg, ())).value
                assert got == want, (name, agg)

        servers.hits.clear()
        one = await client.query(BOX, "Q1_total", [7])
        owner = layout.owner("Q1_total", (7,))
        assert one.rows == [((7,), full.runtime.read_slice("Q1_total", 7)[0][1])]
        assert one.members == (owner,) and one.node == layout.members[owner]
        assert set(servers.hits) == {layout.members[owner]}  # nobody else was asked (maps were learnt before)
        assert "layout=1" in servers.hits[layout.members[owner]][0]
        assert (await client.query(BOX, "G", ["7"], agg="max")).value == tuple(full.runtime.view("Q1", 7)[(7,)])

        servers.hits.clear()
        home = await client.query(BOX, "S")
        assert home.value == sum(b for _, b in ROWS) and home.members == (2,)
        assert set(servers.hits) == {layout.members[2]}

        nothing = await client.query(BOX, "Q1_total", [1000], agg="min")
        assert nothing.value is None and len(nothing.members) == 1
        assert (await client.query(BOX, "Q1_total", [1000], agg="sum")).value == 0

        with pytest.raises(QueryFailed, match="no map, view or out stream 'nope'") as failed:
            await client.query(BOX, "nope")
        assert failed.value.status == 404
        with pytest.raises(QueryFailed, match="keeps no stable epochs") as failed:  # stand-ins: no epochs
            await client.query(BOX, stable=True)
        assert failed.value.status == 404
    assert len(servers.head_calls) == 1  # the layout was cached


async def _one_node(full, name, agg, keys):
    """The answer of one node holding everything, through the same query API."""
    api = QueryApi(Dataflow(full), "n:1")
    params = "&".join([f"map={name}", f"agg={agg}", *(f"key={k}" for k in keys)])
    status, body = await call(api, f"/query/{BOX}?{params}")
    assert status == 200, body
    return client_query._result(body)


async def test_the_client_follows_a_relayout_the_members_learnt_before_the_head(servers, full):
    layout = start_members(servers, lambda e: relayout(layout_v1(e)), full)
    old = layout_v1(layout.members)
    head = servers.head([head_answer(old)])  # the Head is still at layout 1
    async with QueryClient(head, moved_wait=2) as client:
        result = await client.query(BOX, "Q1_total", agg="sum")
        assert result.value == full.runtime.read_sum("Q1_total")
        assert result.segments == (0, 1, 2, 3, 4, 5) and result.members == (0, 1, 2)
        assert await client.layout_of(BOX) == layout  # learnt from the members' 409
        moved = next(k for k in range(100) if old.owner("Q1_total", (k,)) == 0 and layout.owner("Q1_total", (k,)) == 1)
        one = await client.query(BOX, "Q1_total", [moved])
        assert one.members == (1,) and one.value == full.runtime.read_slice("Q1_total", moved)[0][1]


async def test_the_client_asks_the_head_again_when_a_member_is_gone(servers, full):
    layout = start_members(servers, layout_v1, full)
    dead = layout_v1(["127.0.0.1:1", *layout.members[1:]])  # member 0 answered nowhere
    head = servers.head([head_answer(dead), head_answer(layout)])
    async with QueryClient(head, moved_wait=5) as client:
        result = await client.query(BOX, agg="sum")
        assert result.value == (sum(b for _, b in ROWS), len(ROWS))
    assert len(servers.head_calls) == 2

    head = servers.head([head_answer(dead)])  # it never comes back: the error names the member
    async with QueryClient(head, moved_wait=0.3) as client:
        with pytest.raises(Exception, match=r"127\.0\.0\.1:1.* is unreachable"):
            await client.query(BOX, "Q1_total")


async def test_an_unpartitioned_box_is_read_as_before(servers, full):
    node = servers.member(full)
    head = servers.head([{"box": BOX, "type": "m3", "node": node, "version": 3}])
    async with QueryClient(head) as client:
        result = await client.query(BOX, "Q1_total", agg="sum")
        assert result.value == full.runtime.read_sum("Q1_total") and result.node == node
        assert (result.members, result.segments) == ((), ())
        assert await client.layout_of(BOX) is None
        with pytest.raises(QueryFailed, match="is not partitioned"):
            await client.segments(BOX)


# -- boreas segments BOX ---------------------------------------------------------------------


def test_boreas_segments_prints_a_line_per_segment_and_a_total(servers, full, capsys):
    layout = start_members(servers, layout_v1, full)
    head = servers.head([head_answer(layout)])
    assert main(["segments", BOX, "--head", head]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 7
    first = lines[0].split()
    assert first[:4] == ["v/0", "slots", "0-682", layout.members[0]]
    on_0 = sum(1 for key, _ in full.runtime.store.items("Q1_total") if slot(key[0]) < 683)
    assert first[4:] == ["Q1_total", f"{on_0:,}", "Q1_n", f"{on_0:,}", "Q2_s", "0"] and on_0 > 0
    assert lines[2].startswith("v/2  slots 1366-2048  ") and "Q2_s 1" in lines[2]
    assert [line.split()[0] for line in lines[:6]] == [f"v/{i}" for i in range(6)]
    assert len({line.index("127.0.0.1") for line in lines[:6]}) == 1  # columns line up
    entries = sum(full.runtime.store.size(m) for m, _ in MAPS)
    assert lines[6] == f"layout 1, 3 members, 6 segments, {entries:,} entries"

    assert main(["segments", BOX, "--head", head, "--json"]) == 0
    answers = json.loads(capsys.readouterr().out)
    assert [a["member"] for a in answers] == [0, 1, 2] and answers[0]["layout"] == layout.to_dict()


def test_boreas_segments_says_what_is_wrong_in_one_line(servers, full, capsys):
    node = servers.member(full)
    head = servers.head([{"box": BOX, "type": "m3", "node": node, "version": 3}])
    assert main(["segments", BOX, "--head", head]) == 1
    assert capsys.readouterr().err == f"error: box 'v' is not partitioned (it runs on node {node})\n"
    assert main(["segments", "nosuch", "--head", head]) == 1
    assert capsys.readouterr().err == "error: no box 'nosuch' in the catalog (version 3)\n"

    layout = start_members(servers, layout_v1, full)
    dead = layout_v1([*layout.members[:2], "127.0.0.1:1"])
    head = servers.head([head_answer(dead)])
    assert main(["segments", BOX, "--head", head]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: member 2 (127.0.0.1:1) of box 'v' is unreachable: ") and err.count("\n") == 1


# -- the real PartOperator (node/cumulus/part.py) behind the same API ---------------------


class _Members:
    """Real ``PartOperator``s, one per member, with their member-to-member messages carried in order and their
    timers (the leader's epoch) run on a clock of their own, as node processes would."""

    def __init__(self, ops: list, n_in: int, n_out: int):
        self.ops, self.n_in, self.n_out = ops, n_in, n_out
        self.now = 0.0
        self.queue: collections.deque = collections.deque()

    def _collect(self, src: int, emitted) -> None:
        for port, rows in emitted:
            if port >= self.n_out:
                stream, _ = self.ops[src].internal_streams().outputs[port - self.n_out]
                self.queue.append((int(stream.rsplit("@", 1)[1]), rows))

    def publish(self, member: int, rows: list) -> None:
        self._collect(member, self.ops[member].process(0, rows, self.now))

    def settle(self, limit: int = 100_000) -> None:
        for _ in range(limit):
            if self.queue:
                dst, rows = self.queue.popleft()
                self._collect(dst, self.ops[dst].process(self.n_in, rows, self.now))  # its own member's in port
                continue
            deadlines = [d for d in (op.next_deadline() for op in self.ops) if d is not None]
            if not deadlines:
                return
            self.now = max(self.now, min(deadlines))
            for i, op in enumerate(self.ops):
                deadline = op.next_deadline()
                if deadline is not None and deadline <= self.now:
                    self._collect(i, op.poll(self.now))
        raise AssertionError("the members did not settle")


async def test_real_members_fed_through_their_coordinators_answer_as_one_node(servers, full):
    from boreas.catalog.model import Partition, SegmentPlacement
    from boreas.node.cumulus.part import PartOperator

    flows = [Dataflow(None) for _ in range(3)]
    endpoints = []
    for flow in flows:
        app = web.Application()
        api = QueryApi(flow, "")
        api.add_routes(app.router)
        segments = SegmentsApi(flow, "")
        segments.add_routes(app.router)
        api.endpoint = segments.endpoint = servers.serve(app)
        endpoints.append(api.endpoint)
    layout = layout_v1(endpoints)
    partition = Partition(BOX, tuple(endpoints), tuple(SegmentPlacement(s.id, s.lo, s.hi, s.member)
                                                       for s in layout.segments),
                          maps=(("Q1_total", "a", 0), ("Q1_n", "a", 0), ("Q2_s", None, None)), layout=1, id="c0ffee")
    template = build()
    ops = [PartOperator(template.box, template.inputs, template.outputs, partition, e) for e in endpoints]
    for flow, op in zip(flows, ops):
        flow.operators[BOX] = op
    members = _Members(ops, len(template.box.inputs), len(template.box.outputs))
    for i in range(0, len(ROWS), 50):  # each batch enters a member by turns, which sends the others their share
        members.publish((i // 50) % 3, ROWS[i:i + 50])
    members.settle()  # coordinators hold Work until the epoch ends: the leader's timer ends it

    head = servers.head([head_answer(layout)])
    async with QueryClient(head, moved_wait=2) as client:
        assert (await client.query(BOX)).as_dict() == full.runtime.view("Q1")
        assert (await client.query(BOX, "S")).value == sum(b for _, b in ROWS)
        for agg in ("sum", "min", "max"):
            assert (await client.query(BOX, "Q1_total", agg=agg)).value == \
                (await _one_node(full, "Q1_total", agg, ())).value
        one = await client.query(BOX, "G", [7])
        assert one.members == (layout.owner("Q1_total", (7,)),) and one.as_dict() == full.runtime.view("Q1", 7)
        _, answers = await client.segments(BOX)
    counted = {int(s): maps for a in answers for s, maps in a["segments"].items()}
    assert sorted(counted) == [0, 1, 2, 3, 4, 5]
    assert sum(maps.get("Q1_total", 0) for maps in counted.values()) == full.runtime.store.size("Q1_total")
