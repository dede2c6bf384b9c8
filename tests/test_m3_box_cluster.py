"""The ``m3`` box on real Head and node processes: subscribe, the query API and CLI, moves while rows flow.

The TPC-H Q3 example (examples/xml/tpch_q3.xml) on a Head and two nodes;
every answer is compared with DuckDB over the same rows (tests/support/m3_q3.py).
The operator fed by hand is in test_m3_box.py.
"""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from boreas.client.optimizer import Optimizer
from boreas.client.query import QueryClient, QueryFailed
from boreas.client.subscriber import Subscriber
from boreas.node.operators.m3box import date_of
from support.cluster import TOKEN, get_json, http
from support.m3_q3 import APP, duckdb_q3, publish_all, q3_rows, view_becomes
from support.native import skip_without_native


# -- a real cluster ---------------------------------------------------------------------


def q3_cluster(cluster, pin_inputs: bool = False) -> list[str]:
    """A Head and two nodes; q3 on the first.  ``pin_inputs``: the streams enter at the first node."""
    cluster.start_head()
    nodes = cluster.start_nodes(2)
    at = f' node="{nodes[0]}"' if pin_inputs else ""
    publish = "".join(f'<publish stream="{s}"{at}/>' for s in ("Customer", "Orders", "Lineitem"))
    dep = cluster.write("dep.xml", f'<deploy>{publish}<node endpoint="{nodes[0]}" query="q3"/>'
                                   f'<node endpoint="{nodes[1]}" query=""/></deploy>')
    cluster.submit(APP, dep)
    return nodes


async def follow(subscriber: Subscriber, expected: dict, timeout: float = 30.0) -> dict:
    """Apply the view's changelog the subscriber receives (-old/+new) until it adds up to ``expected``."""
    view: dict[tuple, float] = {}

    async def read() -> None:
        async for (key_order, day, priority, revenue), weight in subscriber.changes():
            key = (key_order, date_of(day), priority)
            if weight < 0:
                assert view.pop(key) == revenue  # a retraction names the row it retracts
            else:
                view[key] = revenue
            if view == pytest.approx(expected):
                return

    await asyncio.wait_for(read(), timeout)
    return view


@pytest.mark.slow
async def test_q3_on_a_cluster_subscribe_and_query_over_http_and_the_cli(cluster_factory):
    cluster = cluster_factory()
    nodes = await asyncio.to_thread(q3_cluster, cluster)
    data = q3_rows(5)
    expected = duckdb_q3(data)
    async with Subscriber(cluster.head, "Revenue", TOKEN) as subscriber:
        await publish_all(cluster.head, data)
        assert await follow(subscriber, expected) == pytest.approx(expected)
    async with QueryClient(cluster.head, TOKEN) as client:
        await view_becomes(client, expected)
        values = list(expected.values())
        assert (await client.query("q3", agg="sum")).value == pytest.approx(sum(values))
        assert (await client.query("q3", "Revenue", agg="min", stable=True)).value == pytest.approx(min(values))
        assert (await client.query("q3", "Q1", agg="max")).value == pytest.approx(max(values))
        order, day, priority = next(iter(expected))
        one = await client.query("q3", keys=[order], stable=True)
        assert one.node == nodes[0] and one.version > 0
        assert one.as_dict() == pytest.approx({(order, day, priority): expected[(order, day, priority)]})
        on_day = (await client.query("q3", keys=[None, day])).as_dict()
        assert on_day == pytest.approx({k: v for k, v in expected.items() if k[1] == day})
        m3 = (await client.query("q3", "m3", keys=[order])).rows  # an inner map: lineitems' revenue per order
        assert m3 and m3[0][0] == (order,)
        for bad, status, words in [({"map": "nosuch"}, 404, "has no map, view or out stream 'nosuch'"),
                                   ({"keys": [1, 2, 3, 4]}, 422, "has 3 key columns"),
                                   ({"keys": [None, "soon"]}, 422, "is not a date"),
                                   ({"keys": ["one"]}, 422, "'one' is not an INT")]:
            with pytest.raises(QueryFailed, match=re.escape(words)) as failed:
                await client.query("q3", **bad)
            assert failed.value.status == status
    status, body = await asyncio.to_thread(http, "GET", f"http://{nodes[1]}/query/q3", None, None)
    assert status == 404 and b"no box 'q3' on node" in body
    status, body = await asyncio.to_thread(http, "GET", f"http://{nodes[0]}/query/q3?agg=avg", None, None)
    assert status == 422 and b"agg='avg'" in body

    def cli(*words: str) -> list[dict]:
        result = cluster.boreas("query", "q3", *words, "--json")
        assert result.returncode == 0, result.stderr
        return [json.loads(line) for line in result.stdout.splitlines()]

    as_json = {(k[0], k[1].isoformat(), k[2]): v for k, v in expected.items()}
    rows = await asyncio.to_thread(cli)
    assert {tuple(r["key"]): r["value"] for r in rows} == pytest.approx(as_json)
    [total] = await asyncio.to_thread(cli, "--agg", "sum", "--stable")
    assert total == {"key": [None, None, None], "value": pytest.approx(sum(values))}
    [low] = await asyncio.to_thread(cli, "Revenue", "_", day.isoformat(), "--agg", "min")
    assert low["value"] == pytest.approx(min(v for k, v in expected.items() if k[1] == day))
    [mine] = await asyncio.to_thread(cli, str(order))
    assert mine["key"] == [order, day.isoformat(), priority]
    result = await asyncio.to_thread(cluster.boreas, "query", "nosuch")
    assert result.returncode == 1 and "nosuch" in result.stderr


@pytest.mark.slow
async def test_an_m3_box_moves_between_nodes_while_rows_flow(cluster_factory):
    cluster = cluster_factory()
    nodes = await asyncio.to_thread(q3_cluster, cluster, True)
    data = q3_rows(6, customers=60, orders=300, items=1500)
    expected = duckdb_q3(data)
    publishing = asyncio.create_task(publish_all(cluster.head, data, batch_size=30, pause=0.03))
    moves = 4
    async with Optimizer(cluster.head, TOKEN) as optimizer:
        for i in range(moves):  # while the lineitems flow (about two seconds of them)
            await asyncio.sleep(0.3)
            assert (await optimizer.move("q3", nodes[(i + 1) % 2])).source == nodes[i % 2]
    await publishing
    async with QueryClient(cluster.head, TOKEN) as client:
        await view_becomes(client, expected)
        where = await client.query("q3", agg="sum", stable=True)
    assert where.node == nodes[moves % 2]
    assert where.value == pytest.approx(sum(expected.values()))
    assert "q3" in (await asyncio.to_thread(cluster.node_status, nodes[moves % 2]))["boxes"]


@pytest.mark.slow
async def test_a_box_moves_between_a_node_with_a_compiler_and_one_without(cluster_factory):
    """Issue 17: the native backend on one node, the Python fallback on the other; the view stays exact."""
    skip_without_native()
    cluster = cluster_factory()
    cluster.start_head()
    native_node = cluster.start_node()
    env = cluster.env
    cluster.env = {**env, "BOREAS_CC": "/nonexistent/cc"}  # the second node finds no C compiler
    try:
        python_node = cluster.start_node()
    finally:
        cluster.env = env
    nodes = [native_node, python_node]
    publish = "".join(f'<publish stream="{s}" node="{native_node}"/>' for s in ("Customer", "Orders", "Lineitem"))
    dep = cluster.write("dep.xml", f'<deploy>{publish}<node endpoint="{native_node}" query="q3"/>'
                                   f'<node endpoint="{python_node}" query=""/></deploy>')
    cluster.submit(APP, dep)
    data = q3_rows(7, customers=60, orders=300, items=1500)
    expected = duckdb_q3(data)
    publishing = asyncio.create_task(publish_all(cluster.head, data, batch_size=30, pause=0.03))
    moves = 3
    async with Optimizer(cluster.head, TOKEN) as optimizer:
        for i in range(moves):
            await asyncio.sleep(0.3)
            assert (await optimizer.move("q3", nodes[(i + 1) % 2])).source == nodes[i % 2]
    await publishing
    async with QueryClient(cluster.head, TOKEN) as client:
        await view_becomes(client, expected)
        where = await client.query("q3", agg="sum", stable=True)
    assert where.node == nodes[moves % 2] == python_node
    assert where.value == pytest.approx(sum(expected.values()))
    logs = {n: (cluster.workdir / f"{n.replace(':', '_')}.log").read_text() for n in nodes}
    assert "m3 box 'q3' runs the Python backend: no C compiler found" in logs[python_node]
    assert "runs the Python backend" not in logs[native_node]
    shown = get_json(f"http://{python_node}/status")["data"]["box_backends"]["q3"]  # /status says it too
    assert shown["backend"] == "python" and "no C compiler" in shown["reason"]
