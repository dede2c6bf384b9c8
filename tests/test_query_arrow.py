"""QueryClient.arrow and .batches (client/query_arrow.py): a read as a pyarrow Table of the view's schema, keys
then values, typed by the node's view column types; the same rows as QueryClient.query's."""

from __future__ import annotations

import importlib

import pyarrow as pa
import pytest
from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.validate import stream_schemas
from boreas.client import query_arrow
from boreas.client.query import QueryClient
from boreas.m3.boxtype import box_types
from boreas.node.operators import build_operator
from support.partitioned_box import BOX, layout_v1, whole
from support.query_servers import head_answer, servers, start_members  # noqa: F401 (servers: fixture)

client_query = importlib.import_module("boreas.client.query")  # boreas.client.query is also a function


@pytest.fixture(scope="module")
def full():
    return whole()


def _rows_of(table) -> list[tuple]:
    """A result table's rows as QueryResult.rows holds them: (key tuple, value or value tuple)."""
    keys = len(table.schema) - (2 if "n" in table.schema.names else 1)
    rows = [tuple(r.values()) for r in table.to_pylist()]
    return [(r[:keys], r[keys:] if len(r) - keys > 1 else r[keys]) for r in rows]


@pytest.mark.parametrize("partitioned", [True, False])
async def test_arrow_and_batches_give_the_rows_read_as_a_table_keys_then_values(servers, full, partitioned):
    """QueryClient.arrow: the read as a pyarrow Table of the view's schema; .batches: its record batches."""
    if partitioned:
        head = servers.head([head_answer(start_members(servers, layout_v1, full))])
    else:
        head = servers.head([{"box": BOX, "type": "m3", "node": servers.member(full), "version": 3}])
    async with QueryClient(head, moved_wait=2) as client:
        view = await client.arrow(BOX)  # the default: view Q1 on out stream G, of every member
        assert view.schema.names == ["a", "total", "n"]
        assert [str(f.type) for f in view.schema] == ["int64", "int64", "int64"]
        assert sorted(_rows_of(view)) == sorted((await client.query(BOX)).rows)
        assert len(view) == 40
        batches = [b async for b in client.batches(BOX, "G")]
        assert pa.Table.from_batches(batches).equals(view)
        one, rows = await client.arrow(BOX, "Q1_total", [7]), await client.query(BOX, "Q1_total", [7])
        assert one.schema.names == [rows.keys[0][0], "Q1_total"] and _rows_of(one) == rows.rows  # (the map's key: A)
        total = await client.arrow(BOX, "Q1_total", agg="sum")
        assert total.column(0).to_pylist() == [None]  # the pattern's wildcard, as the rows give it
        assert total.column("Q1_total").to_pylist() == [full.runtime.read_sum("Q1_total")]
        empty = await client.arrow(BOX, "Q1_total", [1000])
        assert (empty.num_rows, empty.schema.names[1:]) == (0, ["Q1_total"])
        assert [b async for b in client.batches(BOX, "Q1_total", [1000])] == []


EXTREMES = f"""<borealis>
  <input stream="R" schema="RT"/>
  <output stream="G" schema="GT"/>
  <schema name="RT"><field name="a" type="int"/><field name="f" type="double"/><field name="s" type="string" size="8"/></schema>
  <schema name="GT"><field name="a" type="int"/><field name="mf" type="double"/><field name="ms" type="string" size="8"/></schema>
  <box name="{BOX}" type="m3"><in stream="R"/><out stream="G"/>
    <parameter name="sql" value="CREATE STREAM R(a INT, f FLOAT, s STRING);&#10;SELECT a, MAX(f) AS mf, MIN(s) AS ms FROM R GROUP BY a"/>
  </box>
</borealis>"""


async def test_arrow_types_a_min_or_max_of_floats_and_strings_as_the_view_not_as_its_count_map(servers):
    """MAX(f) of a FLOAT is float64 and MIN(s) of a STRING string, though their maps V_v are INT counts keyed
    by (group, value): the node reports each view column's M3 type (GET /query/{box}/maps, ``types``)."""
    registry = box_types()
    plan = plan_submission(Catalog(), [read_document(EXTREMES, "w.xml")], registry)
    assert plan.ok, plan.problems
    schemas = stream_schemas(plan.catalog, registry)
    box = plan.catalog.boxes[BOX]
    op = build_operator(box, [schemas[p.stream] for p in box.inputs], [schemas[s] for s in box.outputs])
    op.process(0, [(1, 1.5, "x"), (1, 2.75, "b"), (2, -0.5, "q")], 0.0)
    head = servers.head([{"box": BOX, "type": "m3", "node": servers.member(op), "version": 3}])
    async with QueryClient(head, moved_wait=2) as client:
        rows = await client.query(BOX, "Q1")
        assert sorted(rows.rows) == [((1,), (2.75, "b")), ((2,), (-0.5, "q"))]
        table = await client.arrow(BOX, "Q1")
        assert [str(f.type) for f in table.schema] == ["int64", "double", "string"]
        assert sorted(_rows_of_extremes(table)) == sorted(rows.rows)
        assert (await client.maps(BOX))["views"]["Q1"]["types"] == ["FLOAT", "STRING"]


def _rows_of_extremes(table: pa.Table) -> list:
    return [((r["a"],), (r["mf"], r["ms"])) for r in table.to_pylist()]


def test_without_the_nodes_types_a_min_or_max_column_is_typed_by_its_values_not_its_count_map():
    """An older node's maps answer has no ``types``: map V_v's type is used only where it is keyed as the view."""
    described = {"views": {"Q1": {"keys": [["a", "INT"]], "values": ["mf", "n"]}},
                 "maps": {"Q1_mf": {"keys": [["A", "INT"], ["F", "FLOAT"]], "value": "INT"},
                          "Q1_n": {"keys": [["A", "INT"]], "value": "INT"}}}
    result = client_query.QueryResult("w", "n:1", "Q1", 1, "slice", (("a", "INT"),), [((1,), (2.75, 3))])
    table = query_arrow.result_table(result, described)
    assert [str(f.type) for f in table.schema] == ["int64", "double", "int64"]
    assert table.column("mf").to_pylist() == [2.75]
