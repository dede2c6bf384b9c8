"""Property tests: every view agrees with DuckDB after every batch of random inserts and deletes.

Each query shape is compiled once; hypothesis draws workloads (batches of
inserts and deletes of rows over small domains, so joins hit).  After every
batch the harness compares each view with DuckDB running the same SELECT over
the live rows, checks every map against its defining query and every index
against its map; at the end it deletes every live row and requires every map
to be empty.
"""

from __future__ import annotations

import pytest
from m3_harness import check_against_duckdb, shape_params

GENERIC = """
CREATE STREAM R(a INT, b INT, c DOUBLE);
CREATE STREAM S(b INT, d INT, e DOUBLE);
CREATE TABLE T(d INT, f INT, g VARCHAR);
"""

TPCH = """
CREATE STREAM region(r_regionkey INT, r_name VARCHAR);
CREATE STREAM nation(n_nationkey INT, n_name VARCHAR, n_regionkey INT);
CREATE STREAM supplier(s_suppkey INT, s_nationkey INT);
CREATE STREAM customer(c_custkey INT, c_name VARCHAR, c_acctbal DOUBLE, c_nationkey INT, c_mktsegment VARCHAR);
CREATE STREAM orders(o_orderkey INT, o_custkey INT, o_orderdate DATE, o_shippriority INT);
CREATE STREAM lineitem(l_orderkey INT, l_suppkey INT, l_extendedprice DECIMAL(15,2), l_discount DECIMAL(15,2),
                       l_shipdate DATE, l_returnflag VARCHAR);
"""

SEED = """
CREATE STREAM CUSTOMERS(CID INT, NATION INT);
CREATE STREAM ORDERS(CID INT, OID INT, DISCOUNT DOUBLE);
CREATE STREAM LINEITEMS(OID INT, PRICE DOUBLE, PART INT);
"""

SHAPES = {
    "single_no_group": GENERIC + "SELECT SUM(c) AS s FROM R",
    "single_group": GENERIC + "SELECT a, SUM(c) AS s FROM R GROUP BY a",
    "count": GENERIC + "SELECT a, COUNT(*) AS n FROM R GROUP BY a",
    "avg": GENERIC + "SELECT a, AVG(c) AS av FROM R GROUP BY a",
    "several_aggregates": GENERIC + "SELECT a, SUM(c) AS s, COUNT(*) AS n, AVG(b) AS av FROM R GROUP BY a",
    "two_way": GENERIC + "SELECT r.a, SUM(r.c * s.e) AS s FROM R r, S s WHERE r.b = s.b GROUP BY r.a",
    "two_way_join_on": GENERIC + "SELECT s.d, SUM(r.c) AS s FROM R r JOIN S s ON r.b = s.b GROUP BY s.d",
    "three_way": GENERIC + """SELECT t.g, SUM(r.c * s.e) AS s FROM R r, S s, T t
                              WHERE r.b = s.b AND s.d = t.d GROUP BY t.g""",
    "three_way_count_no_group": GENERIC + "SELECT COUNT(*) AS n FROM R r, S s, T t WHERE r.b = s.b AND s.d = t.d",
    "self_join": GENERIC + "SELECT r1.a, SUM(r2.c) AS s FROM R r1, R r2 WHERE r1.b = r2.a GROUP BY r1.a",
    "self_join_same_column": GENERIC + "SELECT COUNT(*) AS n FROM R r1, R r2 WHERE r1.b = r2.b",
    "group_by_join_key": GENERIC + "SELECT r.b, SUM(s.e) AS s FROM R r, S s WHERE r.b = s.b GROUP BY r.b",
    "arithmetic": GENERIC + "SELECT a, SUM(2 * c + 1) AS x, SUM((c - 1) * (b + 2)) AS y, SUM(-c / 4) AS z FROM R GROUP BY a",
    "arithmetic_across_join": GENERIC + "SELECT r.a, SUM(r.c + s.e * 3) AS x FROM R r, S s WHERE r.b = s.b GROUP BY r.a",
    "selection": GENERIC + "SELECT a, SUM(c) AS s FROM R WHERE b < 2 AND c >= 0 GROUP BY a",
    "selection_or": GENERIC + "SELECT a, COUNT(*) AS n FROM R WHERE b <> 1 OR c <= 0.5 GROUP BY a",
    "selection_or_across_join": GENERIC + """SELECT r.a, SUM(s.e) AS s FROM R r, S s
                                            WHERE r.b = s.b AND (r.a > 1 OR s.d <= 2) GROUP BY r.a""",
    "between_in": GENERIC + "SELECT a, COUNT(*) AS n FROM R WHERE b BETWEEN 1 AND 2 AND a IN (0, 3) GROUP BY a",
    "string_selection": GENERIC + "SELECT d, COUNT(*) AS n, SUM(f) AS s FROM T WHERE g = 'A' GROUP BY d",
    "two_queries": GENERIC + """SELECT r.a, SUM(s.e) AS s FROM R r, S s WHERE r.b = s.b GROUP BY r.a;
                                SELECT s.b, COUNT(*) AS n FROM S s GROUP BY s.b""",
    "tpch_q3": TPCH + """SELECT l.l_orderkey, o.o_orderdate, o.o_shippriority,
                                SUM(l.l_extendedprice * (1 - l.l_discount)) AS revenue
                         FROM customer c, orders o, lineitem l
                         WHERE c.c_mktsegment = 'BUILDING' AND c.c_custkey = o.o_custkey AND l.l_orderkey = o.o_orderkey
                           AND o.o_orderdate < DATE '1995-03-15' AND l.l_shipdate > DATE '1995-03-15'
                         GROUP BY l.l_orderkey, o.o_orderdate, o.o_shippriority""",
    "tpch_q5": TPCH + """SELECT n.n_name, SUM(l.l_extendedprice * (1 - l.l_discount)) AS revenue
                         FROM customer c, orders o, lineitem l, supplier s, nation n, region r
                         WHERE c.c_custkey = o.o_custkey AND l.l_orderkey = o.o_orderkey AND l.l_suppkey = s.s_suppkey
                           AND c.c_nationkey = s.s_nationkey AND s.s_nationkey = n.n_nationkey
                           AND n.n_regionkey = r.r_regionkey AND r.r_name = 'ASIA'
                           AND o.o_orderdate >= DATE '1994-01-01' AND o.o_orderdate < DATE '1995-01-01'
                         GROUP BY n.n_name""",
    "tpch_q10": TPCH + """SELECT c.c_custkey, c.c_name, c.c_acctbal, n.n_name,
                                 SUM(l.l_extendedprice * (1 - l.l_discount)) AS revenue
                          FROM customer c, orders o, lineitem l, nation n
                          WHERE c.c_custkey = o.o_custkey AND l.l_orderkey = o.o_orderkey
                            AND o.o_orderdate >= DATE '1993-10-01' AND o.o_orderdate < DATE '1994-01-01'
                            AND l.l_returnflag = 'R' AND c.c_nationkey = n.n_nationkey
                          GROUP BY c.c_custkey, c.c_name, c.c_acctbal, n.n_name""",
    "seed_example_2_1": SEED + """SELECT c.nation, l.part, SUM(o.discount * l.price) AS total
                                  FROM CUSTOMERS c, ORDERS o, LINEITEMS l
                                  WHERE c.cid = o.cid AND o.oid = l.oid GROUP BY c.nation, l.part""",
}

# make test-fast: a spread of 4, each on one backend (conftest.py)
@pytest.mark.parametrize("shape", shape_params(SHAPES, fast=4))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape], max_batches=4)

