"""The TPC-H Q3 example the ``m3`` box tests run: its rows, DuckDB's answer, and publishing them to a cluster.

examples/xml/tpch_q3.xml (``q3_app`` changes its SQL, date type, sign field or
backend), deterministic customer, order and lineitem rows, the view DuckDB
computes over them, and, on a real cluster, publishing the rows and waiting
for the merged view.  Shared by :mod:`test_m3_box` (the operator fed by hand),
:mod:`test_m3_box_cluster` (real processes) and the Cumulus, Spark and
recovery tests that check a Q3 view against DuckDB.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import random
import re

import duckdb
import pytest

from boreas.client.publisher import Publisher
from boreas.client.query import QueryClient
from boreas.node.operators.m3box import micros_of
from support.cluster import EXAMPLES, TOKEN

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


def duckdb_q3(data: dict[str, list[tuple]], query: str | None = None) -> dict[tuple, float]:
    """DuckDB's answer to Q3 (or ``query``, another select over the same tables) over ``data``."""
    con = duckdb.connect()
    con.execute("CREATE TABLE customer(c_custkey INT, c_mktsegment VARCHAR)")
    con.execute("CREATE TABLE orders(o_orderkey INT, o_custkey INT, o_orderdate DATE, o_shippriority INT)")
    con.execute("CREATE TABLE lineitem(l_orderkey INT, l_extendedprice DOUBLE, l_discount DOUBLE, l_shipdate DATE)")
    for name, rows in data.items():
        if rows:
            con.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    return {(k, d, p): v for k, d, p, v in con.execute(query or Q3).fetchall()}



def q3_app(sql: str | None = None, orders_date: str = "timestamp", sign: bool = False,
           backend: str | None = None) -> str:
    """The example application, with its SQL, the orders date type, a sign field or the M3 backend changed."""
    text = APP.read_text()
    if sql is not None:
        text = re.sub(r'<parameter name="sql">.*?</parameter>', f'<parameter name="sql" value="{sql}"/>', text,
                      flags=re.DOTALL)
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
