"""A partitioned ``m3`` box and stand-in members for the partitioned query tests.

The box ``v`` (two views over one stream), its rows, the layouts it is read
under, and stand-in members: real :class:`M3Operator` instances given the
``layout`` and ``member`` a partitioned part has and only the entries their
segments own.  ``test_partitioned_query.py`` (the member's API, the client's
pure parts) and ``test_partitioned_query_client.py`` (the client against
members on loopback ports) both build on them.
"""

from __future__ import annotations

import json
from dataclasses import replace

from aiohttp.test_utils import make_mocked_request
from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.validate import stream_schemas
from boreas.m3.boxtype import box_types
from boreas.m3.cumulus import Layout, Segment, even_layout, home_slot, slot
from boreas.node.cumulus.api import SegmentsApi
from boreas.node.operators import build_operator
from boreas.node.query import QueryApi

BOX = "v"  # its home slot (1718) is member 2's under the layouts below: home is not simply member 0
APP = f"""<borealis>
  <input stream="R" schema="RT"/>
  <output stream="G" schema="GT"/>
  <output stream="S" schema="ST"/>
  <schema name="RT"><field name="a" type="int"/><field name="b" type="int"/></schema>
  <schema name="GT"><field name="a" type="int"/><field name="total" type="long"/><field name="n" type="long"/></schema>
  <schema name="ST"><field name="s" type="long"/></schema>
  <box name="{BOX}" type="m3"><in stream="R"/><out stream="G"/><out stream="S"/>
    <parameter name="sql" value="CREATE STREAM R(a INT, b INT);&#10;SELECT a, SUM(b) AS total, COUNT(*) AS n FROM R GROUP BY a;&#10;SELECT COUNT(*) AS s FROM R"/>
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
        op.segment_entries = segment_counter(op)
        ops.append(op)
    return ops


def segment_counter(op):
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


async def call(api: QueryApi, path: str) -> tuple[int, dict]:
    route, _, _ = path.partition("?")
    request = make_mocked_request("GET", path, match_info={"box": BOX})
    handler = (SegmentsApi(api.dataflow, api.endpoint).handle_segments if route.startswith("/segments/") else
               api.handle_maps if route.endswith("/maps") else api.handle)
    response = await handler(request)
    return response.status, json.loads(response.body)
