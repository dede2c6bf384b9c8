"""Reading a partitioned ``m3`` box through :class:`QueryClient` (issue 13 stage 1, docs/cumulus.md §2.7, §5).

* :class:`QueryClient` asks the one owner of a bound partition key, the home
  member for a home map, every member otherwise; merges their parts into
  what one node holding everything answers; follows a relayout the members
  learnt before the Head, and a member that moved.
* ``boreas segments BOX`` prints one line per segment and a total.
* Real ``PartOperator`` members (``node/cumulus/part.py``) answer the same.

Everything runs in process: each member (``support/partitioned_box.py``) is
served by the real query API on a loopback port; a stand-in Head answers
``GET /boxes``.  What a single member answers is ``test_partitioned_query.py``.
"""

from __future__ import annotations

import collections
import importlib
import json

import pytest
from aiohttp import web
from boreas.cli.main import main
from boreas.client.query import QueryClient, QueryFailed
from boreas.m3.cumulus import slot
from boreas.node.cumulus.api import SegmentsApi
from boreas.node.query import QueryApi
from support.query_servers import head_answer, servers, start_members  # noqa: F401 (servers: fixture)
from support.partitioned_box import (
    BOX,
    MAPS,
    ROWS,
    Dataflow,
    build,
    call,
    layout_v1,
    relayout,
    whole,
)

client_query = importlib.import_module("boreas.client.query")  # boreas.client.query is also a function


@pytest.fixture(scope="module")
def full():
    return whole()


# -- the client against members on loopback ports ------------------------------------------


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
        assert home.value == len(ROWS) and home.members == (2,)
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
    from boreas.catalog.partition_model import Partition, SegmentPlacement
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
        assert (await client.query(BOX, "S")).value == len(ROWS)
        for agg in ("sum", "min", "max"):
            assert (await client.query(BOX, "Q1_total", agg=agg)).value == \
                (await _one_node(full, "Q1_total", agg, ())).value
        one = await client.query(BOX, "G", [7])
        assert one.members == (layout.owner("Q1_total", (7,)),) and one.as_dict() == full.runtime.view("Q1", 7)
        _, answers = await client.segments(BOX)
    counted = {int(s): maps for a in answers for s, maps in a["segments"].items()}
    assert sorted(counted) == [0, 1, 2, 3, 4, 5]
    assert sum(maps.get("Q1_total", 0) for maps in counted.values()) == full.runtime.store.size("Q1_total")
