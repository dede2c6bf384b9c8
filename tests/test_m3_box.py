"""The ``m3`` box fed by hand: validation, the operator (state, deletes, backends), Spark, views computed when read.

The operator runs the TPC-H Q3 example (examples/xml/tpch_q3.xml, rows and
DuckDB's answer from tests/support/m3_q3.py) in this process and every view
is compared with DuckDB over the same rows; the same example on real Head
and node processes (query API and CLI, moves) is in test_m3_box_cluster.py.
"""

from __future__ import annotations

import logging

import msgspec
import pytest
from boreas.catalog import Catalog, read_document, read_file
from boreas.catalog import plan_submission as catalog_plan_submission
from boreas.catalog.validate import stream_schemas as catalog_stream_schemas
from boreas.m3.boxtype import box_types
from boreas.node.operators import OperatorError, build_operator
from boreas.node.operators.m3box import date_of
from support.cluster import EXAMPLES
from support.m3_q3 import APP, duckdb_q3, q3_app, q3_rows, wire
from support.changelog import follow as follow_changes
from support.native import skip_without_native

BOX_TYPES = box_types()  # the registry the Head and the nodes pass: Borealis's types and m3


def plan_submission(catalog, documents):
    return catalog_plan_submission(catalog, documents, BOX_TYPES)


def stream_schemas(catalog):
    return catalog_stream_schemas(catalog, BOX_TYPES)


# -- validation (unit) ---------------------------------------------------------------


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


def feed(op, data: dict[str, list[tuple]], batch: int = 50, sign: int | None = None,
         view: dict[tuple, float] | None = None) -> dict[tuple, float]:
    """Send every relation's rows in batches; the view (``view`` as the box emitted it so far) followed through
    the emitted changelog."""
    view = {} if view is None else view
    for port, name in enumerate(("customer", "orders", "lineitem")):
        rows = wire(data[name])
        if sign is not None:
            rows = [(sign, *row) for row in rows]
        for i in range(0, len(rows), batch):
            for out, changed in op.process(port, rows[i:i + batch], 0.0):
                assert out == 0
                follow_changes(view, changed, q3_key, 3)
    return view


def q3_key(key: tuple) -> tuple:
    return (key[0], date_of(key[1]), key[2])


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
    feed(whole, rest, view=feed(whole, first))
    moved = make()
    view = feed(moved, first)
    saved = msgspec.msgpack.decode(msgspec.msgpack.encode(moved.state()))
    again = make()
    again.restore(saved)
    assert again.runtime.version == moved.runtime.version
    assert feed(again, rest, view=view) == pytest.approx(duckdb_q3(data))  # retracting what the moved box emitted
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
    view = feed(native, first)
    assert view == pytest.approx(feed(python, first))
    monkeypatch.setenv("BOREAS_CC", "/nonexistent/cc")  # the node it moves to has no compiler
    with caplog.at_level(logging.WARNING, logger="boreas.node.operators.m3box"):
        there = q3_operator(q3_app())()
    assert there.backend == "python" and "no C compiler" in there.backend_reason
    assert any("runs the Python backend" in r.getMessage() for r in caplog.records)
    there.restore(msgspec.msgpack.decode(msgspec.msgpack.encode(native.state())))
    assert feed(there, rest, view=view) == pytest.approx(duckdb_q3(data))  # the Python backend's -old: the memo
    assert there.runtime.view("Q1") == pytest.approx(duckdb_q3(data))
    with pytest.raises(OperatorError, match="no C compiler"):
        q3_operator(q3_app(backend="native"))()
    with pytest.raises(OperatorError, match="must be one of auto, native, python"):
        q3_operator(q3_app(backend="turbo"))()


def test_a_sign_field_makes_rows_deletes():
    data = q3_rows(3)
    op = q3_operator(q3_app(sign=True))()
    view = feed(op, data, sign=1)
    assert view == pytest.approx(duckdb_q3(data))
    gone = {name: rows[::3] for name, rows in data.items()}
    feed(op, gone, sign=-1, view=view)  # the changes of the deletes: rows that changed or left the view
    left = {name: [r for i, r in enumerate(rows) if i % 3] for name, rows in data.items()}
    assert op.runtime.view("Q1") == pytest.approx(duckdb_q3(left)) == view  # the box said so, row by row
    before = op.runtime.version
    assert op.process(2, [(0, *wire([data["lineitem"][1]])[0])], 0.0) == [] and op.ignored == 1
    assert op.runtime.version == before
    feed(op, gone, sign=1, view=view)
    assert op.runtime.view("Q1") == pytest.approx(duckdb_q3(data)) == view


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
        return duckdb_q3(data, Q3_HAVING)

    def follow(data, sign, view):
        """Feed the rows with a sign and apply the emitted changelog (-old/+new) to ``view``."""
        for port, name in enumerate(("customer", "orders", "lineitem")):
            rows = [(sign, *row) for row in wire(data[name])]
            for i in range(0, len(rows), 50):
                for _, changed in op.process(port, rows[i:i + 50], 0.0):
                    follow_changes(view, changed, q3_key, 3)
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
