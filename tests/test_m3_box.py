"""The ``m3`` box: validation, the operator (state, deletes), the query API and CLI, moves, Spark.

The cluster tests run the TPC-H Q3 example (examples/xml/tpch_q3.xml) on real
Head and node processes and compare every answer with DuckDB over the same
rows.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import random
import re

import duckdb
import msgspec
import pytest
from boreas.catalog import Catalog, read_document, read_file
from boreas.catalog import plan_submission as catalog_plan_submission
from boreas.catalog.validate import stream_schemas as catalog_stream_schemas
from boreas.m3.boxtype import box_types

BOX_TYPES = box_types()  # the registry the Head and the nodes pass: Borealis's types and m3


def plan_submission(catalog, documents):
    return catalog_plan_submission(catalog, documents, BOX_TYPES)


def stream_schemas(catalog):
    return catalog_stream_schemas(catalog, BOX_TYPES)
from boreas.cli.optimize import move_box
from boreas.client.publisher import Publisher
from boreas.client.query import QueryClient, QueryFailed
from boreas.client.subscriber import Subscriber
from boreas.node.operators import OperatorError, build_operator
from boreas.node.operators.m3box import date_of, micros_of
from support.cluster import EXAMPLES, TOKEN, get_json, http
from support.native import skip_without_native

APP = EXAMPLES / "tpch_q3.xml"
SEGMENTS = ["BUILDING", "AUTOMOBILE", "MACHINERY"]
DAY0 = dt.date(1995, 2, 1)
Q3 = """SELECT l_orderkey, o_orderdate, o_shippriority, SUM(l_extendedprice * (1 - l_discount)) AS revenue
FROM customer, orders, lineitem
WHERE c_mktsegment = 'BUILDING' AND c_custkey = o_custkey AND l_orderkey = o_orderkey
  AND o_orderdate < DATE '1995-03-15' AND l_shipdate > DATE '1995-03-15'
GROUP BY l_orderkey, o_orderdate, o_shippriority"""


# -- data ---------------------------------------------------------------------------


def q3_rows(seed: int, customers: int = 40, orders: int = 200, items: int = 900) -> dict[str, list[tuple]]:
    """Customer, order and lineitem rows (dates as ``datetime.date``; prices multiples of 0.25: exact sums)."""
    rnd = random.Random(seed)
    day = lambda: DAY0 + dt.timedelta(days=rnd.randrange(90))
    return {
        "customer": [(c, rnd.choice(SEGMENTS)) for c in range(customers)],
        "orders": [(o, rnd.randrange(customers), day(), rnd.randrange(3)) for o in range(orders)],
        "lineitem": [(rnd.randrange(orders), rnd.randrange(4, 400) * 0.25, rnd.choice((0.0, 0.25, 0.5)), day())
                     for _ in range(items)],
    }


def wire(rows: list[tuple]) -> list[tuple]:
    """Rows as the streams carry them: dates as timestamps."""
    return [tuple(micros_of(v) if isinstance(v, dt.date) else v for v in row) for row in rows]


def duckdb_q3(data: dict[str, list[tuple]]) -> dict[tuple, float]:
    con = duckdb.connect()
    con.execute("CREATE TABLE customer(c_custkey INT, c_mktsegment VARCHAR)")
    con.execute("CREATE TABLE orders(o_orderkey INT, o_custkey INT, o_orderdate DATE, o_shippriority INT)")
    con.execute("CREATE TABLE lineitem(l_orderkey INT, l_extendedprice DOUBLE, l_discount DOUBLE, l_shipdate DATE)")
    for name, rows in data.items():
        if rows:
            con.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    return {(k, d, p): v for k, d, p, v in con.execute(Q3).fetchall()}


# -- validation (unit) ---------------------------------------------------------------


def q3_app(sql: str | None = None, orders_date: str = "timestamp", sign: bool = False,
           backend: str | None = None) -> str:
    """The example application, with its SQL, the orders date type, a sign field or the M3 backend changed."""
    text = APP.read_text()
    if sql is not None:
        text = re.sub(r'name="sql" value="[^"]*"', f'name="sql" value="{sql}"', text)
    text = text.replace('<field name="o_orderdate"    type="timestamp" />',
                        f'<field name="o_orderdate"    type="{orders_date}" />')
    if sign:
        for schema in ("CustomerTuple", "OrdersTuple", "LineitemTuple"):
            text = text.replace(f'<schema name="{schema}">',
                                f'<schema name="{schema}">\n    <field name="sign" type="int" />')
        text = text.replace('<out stream="Revenue" />',
                            '<out stream="Revenue" />\n    <parameter name="sign-field" value="sign" />')
    if backend is not None:
        text = text.replace('<out stream="Revenue" />',
                            f'<out stream="Revenue" />\n    <parameter name="backend" value="{backend}" />')
    return text


def plan_q3(app_text: str):
    return plan_submission(Catalog(), [read_document(app_text, "q3.xml")])


def test_the_example_validates_and_its_out_schema_is_inferred():
    plan = plan_submission(Catalog(), [read_file(APP), read_file(EXAMPLES / "tpch_q3_deploy.xml")])
    assert plan.ok, plan.problems
    revenue = stream_schemas(plan.catalog)["Revenue"]
    assert [(f.name, f.type.value) for f in revenue.fields] == [
        ("l_orderkey", "int"), ("o_orderdate", "timestamp"), ("o_shippriority", "int"), ("revenue", "double")]


def test_bad_sql_is_reported_with_its_position():
    bad = "CREATE STREAM customer(c_custkey INT, c_mktsegment VARCHAR(10));&#10;SELECT c_custkey, MEDIAN(c_custkey) FROM customer GROUP BY c_custkey"
    plan = plan_q3(q3_app(sql=bad))
    assert not plan.ok
    reason = plan.problems[0].reason
    assert "m3 box 'q3': parameter 'sql': unsupported aggregate MEDIAN" in reason
    assert "(at line 2, col 19)" in reason


def test_an_in_stream_that_does_not_match_its_relation_is_refused():
    plan = plan_q3(q3_app(orders_date="int"))
    assert not plan.ok
    reason = plan.problems[0].reason
    assert "in port 1 (stream 'Orders') feeds relation orders(" in reason
    assert "field 'o_orderdate' is int, column o_orderdate DATE needs timestamp" in reason


def test_ports_must_match_the_relations_and_views():
    text = q3_app().replace('<in  stream="Lineitem" />', "")
    reason = plan_q3(text).problems[0].reason
    assert "has 2 in streams but its program declares 3 relations (customer, orders, lineitem)" in reason
    both = q3_app().replace('<parameter name="sql"', '<parameter name="m3" value="x"/><parameter name="sql"')
    assert "exactly one of the parameters 'sql' and 'm3'" in plan_q3(both).problems[0].reason


# -- the operator (unit) -------------------------------------------------------------


def q3_operator(app_text: str):
    plan = plan_q3(app_text)
    assert plan.ok, plan.problems
    schemas = stream_schemas(plan.catalog)
    box = plan.catalog.boxes["q3"]
    return lambda: build_operator(box, [schemas[p.stream] for p in box.inputs], [schemas[s] for s in box.outputs])


def feed(op, data: dict[str, list[tuple]], batch: int = 50, sign: int | None = None) -> dict[tuple, float]:
    """Send every relation's rows in batches; the view as followed through the emitted changes."""
    view: dict[tuple, float] = {}
    for port, name in enumerate(("customer", "orders", "lineitem")):
        rows = wire(data[name])
        if sign is not None:
            rows = [(sign, *row) for row in rows]
        for i in range(0, len(rows), batch):
            for out, changed in op.process(port, rows[i:i + batch], 0.0):
                assert out == 0
                for *key, value in changed:
                    key = (key[0], date_of(key[1]), key[2])
                    view.pop(key, None) if value == 0 else view.__setitem__(key, value)
    return view


def test_the_operator_emits_the_views_changes_and_matches_duckdb():
    data = q3_rows(1)
    op = q3_operator(q3_app())()
    view = feed(op, data)
    expected = duckdb_q3(data)
    assert expected and view == pytest.approx(expected)
    assert op.runtime.view("Q1") == pytest.approx(expected)


def test_state_and_restore_continue_exactly_through_msgpack():
    data = q3_rows(2)
    first = {name: rows[: len(rows) // 2] for name, rows in data.items()}
    rest = {name: rows[len(rows) // 2:] for name, rows in data.items()}
    make = q3_operator(q3_app())
    whole = make()
    feed(whole, first), feed(whole, rest)
    moved = make()
    feed(moved, first)
    saved = msgspec.msgpack.decode(msgspec.msgpack.encode(moved.state()))
    again = make()
    again.restore(saved)
    assert again.runtime.version == moved.runtime.version
    feed(again, rest)
    assert again.runtime.view("Q1") == whole.runtime.view("Q1") == pytest.approx(duckdb_q3(data))
    with pytest.raises(OperatorError, match="cannot restore its maps"):
        q3_operator(q3_app(sql="CREATE STREAM customer(c_custkey INT, c_mktsegment VARCHAR(10));&#10;"
                              "CREATE STREAM orders(o_orderkey INT, o_custkey INT, o_orderdate DATE, o_shippriority INT);&#10;"
                              "CREATE STREAM lineitem(l_orderkey INT, l_extendedprice DECIMAL(15,2), l_discount DECIMAL(15,2), l_shipdate DATE);&#10;"
                              "SELECT l_orderkey, o_orderdate, o_shippriority, SUM(l_extendedprice) AS revenue "
                              "FROM customer, orders, lineitem WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey "
                              "GROUP BY l_orderkey, o_orderdate, o_shippriority"))().restore(saved)


def test_the_backend_parameter_picks_the_runtime_and_state_moves_between_backends(monkeypatch, caplog):
    skip_without_native()
    data = q3_rows(4)
    first = {name: rows[: len(rows) // 2] for name, rows in data.items()}
    rest = {name: rows[len(rows) // 2:] for name, rows in data.items()}
    native, python = q3_operator(q3_app(backend="native"))(), q3_operator(q3_app(backend="python"))()
    assert (native.backend, python.backend) == ("native", "python")
    assert feed(native, first) == pytest.approx(feed(python, first))
    monkeypatch.setenv("BOREAS_CC", "/nonexistent/cc")  # the node it moves to has no compiler
    with caplog.at_level(logging.WARNING, logger="boreas.node.operators.m3box"):
        there = q3_operator(q3_app())()
    assert there.backend == "python" and "no C compiler" in there.backend_reason
    assert any("runs the Python backend" in r.getMessage() for r in caplog.records)
    there.restore(msgspec.msgpack.decode(msgspec.msgpack.encode(native.state())))
    feed(there, rest)
    assert there.runtime.view("Q1") == pytest.approx(duckdb_q3(data))
    with pytest.raises(OperatorError, match="no C compiler"):
        q3_operator(q3_app(backend="native"))()
    with pytest.raises(OperatorError, match="must be one of auto, native, python"):
        q3_operator(q3_app(backend="turbo"))()


def test_a_sign_field_makes_rows_deletes():
    data = q3_rows(3)
    op = q3_operator(q3_app(sign=True))()
    assert feed(op, data, sign=1) == pytest.approx(duckdb_q3(data))
    gone = {name: rows[::3] for name, rows in data.items()}
    view = feed(op, gone, sign=-1)  # the changes of the deletes: rows that changed or left the view
    left = {name: [r for i, r in enumerate(rows) if i % 3] for name, rows in data.items()}
    assert op.runtime.view("Q1") == pytest.approx(duckdb_q3(left))
    assert view  # the deletes changed the view, and the box said so
    before = op.runtime.version
    assert op.process(2, [(0, *wire([data["lineitem"][1]])[0])], 0.0) == [] and op.ignored == 1
    assert op.runtime.version == before
    feed(op, gone, sign=1)
    assert op.runtime.view("Q1") == pytest.approx(duckdb_q3(data))


# -- Spark cross-check (unit, with the session's Spark) ---------------------------------


@pytest.mark.slow
def test_the_view_equals_spark_sql_over_the_same_rows(spark):
    from boreas.spark.verify import verify

    data = q3_rows(4)
    op = q3_operator(q3_app())()
    feed(op, data)
    columns = {"customer": "c_custkey INT, c_mktsegment STRING",
               "orders": "o_orderkey INT, o_custkey INT, o_orderdate DATE, o_shippriority INT",
               "lineitem": "l_orderkey INT, l_extendedprice DOUBLE, l_discount DOUBLE, l_shipdate DATE"}
    frames = {name: spark.createDataFrame(rows, columns[name]) for name, rows in data.items()}
    sql = read_file(APP).declarations[-1].param("sql")
    got = verify(sql, frames, spark)
    spark_view = {(r["l_orderkey"], r["o_orderdate"], r["o_shippriority"]): r["revenue"] for r in got}
    assert spark_view and op.runtime.view("Q1") == pytest.approx(spark_view)


# -- a real cluster ---------------------------------------------------------------------


def q3_cluster(cluster, pin_inputs: bool = False) -> list[str]:
    """A Head and two nodes; q3 on the first.  ``pin_inputs``: the streams enter at the first node."""
    cluster.start_head()
    nodes = [cluster.start_node() for _ in range(2)]
    at = f' node="{nodes[0]}"' if pin_inputs else ""
    publish = "".join(f'<publish stream="{s}"{at}/>' for s in ("Customer", "Orders", "Lineitem"))
    dep = cluster.write("dep.xml", f'<deploy>{publish}<node endpoint="{nodes[0]}" query="q3"/>'
                                   f'<node endpoint="{nodes[1]}" query=""/></deploy>')
    cluster.submit(APP, dep)
    return nodes


STREAMS = (("Customer", "customer"), ("Orders", "orders"), ("Lineitem", "lineitem"))


async def publish_all(head: str, data: dict[str, list[tuple]], batch_size: int = 40, pause: float = 0.0) -> None:
    """Customers, then orders, then lineitems (so lineitems keep joining while a move goes on)."""
    for stream, name in STREAMS:
        async with Publisher(head, stream, TOKEN, batch_size=batch_size) as publisher:
            rows = wire(data[name])
            for i in range(0, len(rows), batch_size):
                await publisher.send(rows[i:i + batch_size])
                if pause:
                    await asyncio.sleep(pause)
            await publisher.flush()
        assert publisher.accepted == len(rows) and not publisher.refused


async def view_becomes(client: QueryClient, expected: dict, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        got = (await client.query("q3")).as_dict()
        if got == pytest.approx(expected):
            return
        if asyncio.get_running_loop().time() > deadline:
            assert got == pytest.approx(expected)
        await asyncio.sleep(0.1)


async def follow(subscriber: Subscriber, expected: dict, timeout: float = 30.0) -> dict:
    """Apply the view changes the subscriber receives until they add up to ``expected``."""
    view: dict[tuple, float] = {}

    async def read() -> None:
        async for key_order, day, priority, revenue in subscriber:
            key = (key_order, date_of(day), priority)
            view.pop(key, None) if revenue == 0 else view.__setitem__(key, revenue)
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
        result = cluster.boreas("query", "q3", *words)
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
    for i in range(moves):  # while the lineitems flow (about two seconds of them)
        await asyncio.sleep(0.3)
        assert await move_box(cluster.head, TOKEN, "q3", nodes[(i + 1) % 2]) == nodes[i % 2]
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
    for i in range(moves):
        await asyncio.sleep(0.3)
        assert await move_box(cluster.head, TOKEN, "q3", nodes[(i + 1) % 2]) == nodes[i % 2]
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


# -- a view computed when read (issue 14): arithmetic over aggregates, HAVING, MIN/MAX ---------------

Q3_HAVING = """SELECT l_orderkey, o_orderdate, o_shippriority,
       SUM(l_extendedprice * (1 - l_discount)) / COUNT(*) - MIN(l_extendedprice) AS revenue
FROM customer, orders, lineitem
WHERE c_mktsegment = 'BUILDING' AND c_custkey = o_custkey AND l_orderkey = o_orderkey
  AND o_orderdate < DATE '1995-03-15' AND l_shipdate > DATE '1995-03-15'
GROUP BY l_orderkey, o_orderdate, o_shippriority
HAVING COUNT(*) > 1 AND MAX(l_discount) > 0"""


def test_a_box_emits_a_view_computed_when_read_through_inserts_and_deletes():
    """Rows enter and leave with their HAVING as rows are inserted and deleted; the emitted changes follow DuckDB."""
    declarations = ("CREATE STREAM customer(c_custkey INT, c_mktsegment VARCHAR(10));&#10;"
                    "CREATE STREAM orders(o_orderkey INT, o_custkey INT, o_orderdate DATE, o_shippriority INT);&#10;"
                    "CREATE STREAM lineitem(l_orderkey INT, l_extendedprice DECIMAL(15,2), "
                    "l_discount DECIMAL(15,2), l_shipdate DATE);&#10;")
    sql = declarations + Q3_HAVING.replace("\n", "&#10;").replace("<", "&lt;").replace(">", "&gt;")
    op = q3_operator(q3_app(sql=sql, sign=True))()

    def duck(data):
        con = duckdb.connect()
        con.execute("CREATE TABLE customer(c_custkey INT, c_mktsegment VARCHAR)")
        con.execute("CREATE TABLE orders(o_orderkey INT, o_custkey INT, o_orderdate DATE, o_shippriority INT)")
        con.execute("CREATE TABLE lineitem(l_orderkey INT, l_extendedprice DOUBLE, l_discount DOUBLE, l_shipdate DATE)")
        for name, rows in data.items():
            if rows:
                con.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * len(rows[0]))})", rows)
        return {(k, d, p): v for k, d, p, v in con.execute(Q3_HAVING).fetchall()}

    def follow(data, sign, view):
        """Feed the rows with a sign and apply the emitted changes to ``view`` (value 0: the row left)."""
        for port, name in enumerate(("customer", "orders", "lineitem")):
            rows = [(sign, *row) for row in wire(data[name])]
            for i in range(0, len(rows), 50):
                for _, changed in op.process(port, rows[i:i + 50], 0.0):
                    for *key, value in changed:
                        key = (key[0], date_of(key[1]), key[2])
                        view.pop(key, None) if value == 0 else view.__setitem__(key, value)
        return view

    data = q3_rows(4)
    view = follow(data, 1, {})
    assert duck(data) and view == pytest.approx(duck(data))
    gone = {"customer": [], "orders": [], "lineitem": data["lineitem"][::2]}
    left = dict(data, lineitem=[r for i, r in enumerate(data["lineitem"]) if i % 2])
    follow(gone, -1, view)
    assert duck(left) != duck(data)  # rows left the view, others changed
    assert view == pytest.approx(duck(left)) and op.runtime.view("Q1") == pytest.approx(duck(left))
    # the query API reads the one-column computed view as the view, not as a map
    from boreas.node.query import read, resolve

    target = resolve(op, None)
    assert target.view == "Q1" and target.map is None
    _, rows = read(op, target, "slice", (), False)
    assert dict(rows) == pytest.approx(duck(left))  # (keys with dates: a read answers them as dates)
    _, [(_, total)] = read(op, target, "sum", (), False)
    assert total == pytest.approx(sum(duck(left).values()))
