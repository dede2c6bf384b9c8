"""Reading a partitioned ``m3`` box, member side (issue 13 stage 1, docs/cumulus.md §2.7, §5).

* A member answers from its own segments, pre-aggregated, with ``layout``,
  ``member`` and ``segments``; a part that found nothing is null; a read
  under another layout version is refused (409) with the member's layout;
  ``GET /segments/{box}`` counts its entries per segment.
* The client's pure parts: which members to ask, and merging their answers.

Everything runs in process against the stand-in members of
``support/partitioned_box.py``.  :class:`QueryClient` against members served on
loopback ports, ``boreas segments`` and real ``PartOperator`` members are
``test_partitioned_query_client.py``.
"""

from __future__ import annotations

import doctest
import importlib

import pytest
from boreas.client.query import QueryFailed, members_to_ask, merge
from boreas.m3.cumulus import Layout, Segment, home_slot, slot
from boreas.node.query import QueryApi
from support.partitioned_box import BOX, MAPS, ROWS, Dataflow, call, layout_v1, parts, whole

client_partitioned = importlib.import_module("boreas.client.partitioned")  # its pure parts and their doctests
client_partitioned_merge = importlib.import_module("boreas.client.partitioned_merge")  # merging the answers


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
    assert body["rows"] == [{"key": [], "value": len(ROWS)}]


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
    results = [doctest.testmod(m, optionflags=doctest.ELLIPSIS) for m in (client_partitioned, client_partitioned_merge)]
    assert all(r.failed == 0 for r in results) and sum(r.attempted for r in results) >= 20


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
