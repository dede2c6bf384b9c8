"""TPC-H for the M3 tests: the schema, small value domains per column, and the 22 queries as streaming views.

The queries are TPC-H's (validation substitution parameters) in the
dialect the compiler reads: ``INTERVAL '90' DAY`` for ``interval '90' day
(3)``, and without ``LIMIT`` (a view holds every row; the compiler refuses
LIMIT).  Nothing else is rewritten: a query the compiler does not support
stays as TPC-H writes it, in :data:`QUERIES` too, and the test lists it with
the reason it is refused, so the remaining gap is explicit.

Value domains are small (keys 0-3) so joins and groups collide, and hold the
constants the queries compare with (``'BUILDING'``, ``'Brand#23'``, dates on
both sides of each bound), so every predicate is sometimes true and
sometimes false.  Quantities include values large enough for Q18's
``SUM(l_quantity) > 300``.
"""

from __future__ import annotations

import datetime

from hypothesis import strategies as st
from m3_harness import workloads

SCHEMA = """
CREATE TABLE part(p_partkey INT, p_name VARCHAR, p_mfgr VARCHAR, p_brand VARCHAR, p_type VARCHAR, p_size INT,
                  p_container VARCHAR, p_retailprice DOUBLE, p_comment VARCHAR);
CREATE TABLE supplier(s_suppkey INT, s_name VARCHAR, s_address VARCHAR, s_nationkey INT, s_phone VARCHAR,
                      s_acctbal DOUBLE, s_comment VARCHAR);
CREATE TABLE partsupp(ps_partkey INT, ps_suppkey INT, ps_availqty INT, ps_supplycost DOUBLE, ps_comment VARCHAR);
CREATE TABLE customer(c_custkey INT, c_name VARCHAR, c_address VARCHAR, c_nationkey INT, c_phone VARCHAR,
                      c_acctbal DOUBLE, c_mktsegment VARCHAR, c_comment VARCHAR);
CREATE STREAM orders(o_orderkey INT, o_custkey INT, o_orderstatus VARCHAR, o_totalprice DOUBLE, o_orderdate DATE,
                     o_orderpriority VARCHAR, o_clerk VARCHAR, o_shippriority INT, o_comment VARCHAR);
CREATE STREAM lineitem(l_orderkey INT, l_partkey INT, l_suppkey INT, l_linenumber INT, l_quantity DOUBLE,
                       l_extendedprice DOUBLE, l_discount DOUBLE, l_tax DOUBLE, l_returnflag VARCHAR,
                       l_linestatus VARCHAR, l_shipdate DATE, l_commitdate DATE, l_receiptdate DATE,
                       l_shipinstruct VARCHAR, l_shipmode VARCHAR, l_comment VARCHAR);
CREATE TABLE nation(n_nationkey INT, n_name VARCHAR, n_regionkey INT, n_comment VARCHAR);
CREATE TABLE region(r_regionkey INT, r_name VARCHAR, r_comment VARCHAR);
"""

_D = datetime.date
DATES = [_D(1993, 7, 1), _D(1993, 10, 1), _D(1994, 1, 1), _D(1994, 6, 1), _D(1995, 3, 15), _D(1995, 9, 1),
         _D(1996, 1, 1), _D(1997, 6, 1), _D(1998, 9, 1), _D(1998, 12, 1)]
_KEYS = st.integers(0, 3)
_MONEY = st.sampled_from([1.0, 2.5, 10.0, 100.0, 1000.0])

DOMAINS: dict[str, st.SearchStrategy] = {
    "p_name": st.sampled_from(["forest green", "red rose"]),
    "p_brand": st.sampled_from(["Brand#12", "Brand#23", "Brand#34", "Brand#45"]),
    "p_type": st.sampled_from(["PROMO BRUSHED TIN", "STANDARD POLISHED BRASS", "ECONOMY ANODIZED STEEL",
                               "MEDIUM POLISHED COPPER"]),
    "p_size": st.sampled_from([1, 5, 15, 49]),
    "p_container": st.sampled_from(["SM CASE", "MED BOX", "LG BOX", "SM PACK", "MED BAG"]),
    "n_name": st.sampled_from(["FRANCE", "GERMANY", "BRAZIL", "CANADA", "SAUDI ARABIA"]),
    "r_name": st.sampled_from(["EUROPE", "ASIA", "AMERICA"]),
    "c_mktsegment": st.sampled_from(["BUILDING", "AUTOMOBILE", "MACHINERY"]),
    "c_phone": st.sampled_from(["13-1", "31-2", "23-3", "11-4"]),  # Q22: country codes in and out of its list
    "o_orderstatus": st.sampled_from(["F", "O"]),
    "o_orderpriority": st.sampled_from(["1-URGENT", "2-HIGH", "3-MEDIUM"]),
    "l_quantity": st.sampled_from([1.0, 10.0, 24.0, 30.0, 150.0, 200.0]),
    "l_discount": st.sampled_from([0.0, 0.05, 0.06, 0.07, 0.1]),
    "l_tax": st.sampled_from([0.0, 0.02, 0.08]),
    "l_returnflag": st.sampled_from(["R", "A", "N"]),
    "l_linestatus": st.sampled_from(["O", "F"]),
    "l_shipinstruct": st.sampled_from(["DELIVER IN PERSON", "NONE"]),
    "l_shipmode": st.sampled_from(["MAIL", "SHIP", "AIR", "AIR REG", "TRUCK"]),
    "ps_availqty": st.sampled_from([1, 100, 5000]),
    "s_comment": st.sampled_from(["Customer Complaints", "x Customer y Complaints", "Complaints Customer", "x"]),
}


def domain(column: str, kind: str) -> st.SearchStrategy:
    """The values a column takes in the tests (see module doc)."""
    if column in DOMAINS:
        return DOMAINS[column]
    if kind == "DATE":
        return st.sampled_from(DATES)
    if kind == "INT":
        return _KEYS
    if kind == "FLOAT":
        return _MONEY
    return st.sampled_from(["x", "y"])


def tpch_workloads(relations: dict, max_batches: int = 4, max_ops: int = 16):
    """Batches of inserts and deletes (``m3_harness`` operations) over the given relations' columns."""
    return workloads(relations, max_batches, max_ops, value=domain, delete_one_in=5)


QUERIES: dict[int, str] = {
    1: """SELECT l_returnflag, l_linestatus, SUM(l_quantity) AS sum_qty, SUM(l_extendedprice) AS sum_base_price,
       SUM(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
       SUM(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge, AVG(l_quantity) AS avg_qty,
       AVG(l_extendedprice) AS avg_price, AVG(l_discount) AS avg_disc, COUNT(*) AS count_order
       FROM lineitem WHERE l_shipdate <= DATE '1998-12-01' - INTERVAL '90' DAY
       GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus""",
    2: """SELECT s_acctbal, s_name, n_name, p_partkey, p_mfgr, s_address, s_phone, s_comment
       FROM part, supplier, partsupp, nation, region
       WHERE p_partkey = ps_partkey AND s_suppkey = ps_suppkey AND p_size = 15 AND p_type LIKE '%BRASS'
         AND s_nationkey = n_nationkey AND n_regionkey = r_regionkey AND r_name = 'EUROPE'
         AND ps_supplycost = (SELECT MIN(ps_supplycost) FROM partsupp, supplier, nation, region
                              WHERE p_partkey = ps_partkey AND s_suppkey = ps_suppkey AND s_nationkey = n_nationkey
                                AND n_regionkey = r_regionkey AND r_name = 'EUROPE')
       ORDER BY s_acctbal DESC, n_name, s_name, p_partkey""",
    3: """SELECT l_orderkey, SUM(l_extendedprice * (1 - l_discount)) AS revenue, o_orderdate, o_shippriority
       FROM customer, orders, lineitem
       WHERE c_mktsegment = 'BUILDING' AND c_custkey = o_custkey AND l_orderkey = o_orderkey
         AND o_orderdate < DATE '1995-03-15' AND l_shipdate > DATE '1995-03-15'
       GROUP BY l_orderkey, o_orderdate, o_shippriority ORDER BY revenue DESC, o_orderdate""",
    4: """SELECT o_orderpriority, COUNT(*) AS order_count FROM orders
       WHERE o_orderdate >= DATE '1993-07-01' AND o_orderdate < DATE '1993-07-01' + INTERVAL '3' MONTH
         AND EXISTS (SELECT * FROM lineitem WHERE l_orderkey = o_orderkey AND l_commitdate < l_receiptdate)
       GROUP BY o_orderpriority ORDER BY o_orderpriority""",
    5: """SELECT n_name, SUM(l_extendedprice * (1 - l_discount)) AS revenue
       FROM customer, orders, lineitem, supplier, nation, region
       WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey AND l_suppkey = s_suppkey
         AND c_nationkey = s_nationkey AND s_nationkey = n_nationkey AND n_regionkey = r_regionkey
         AND r_name = 'ASIA' AND o_orderdate >= DATE '1994-01-01' AND o_orderdate < DATE '1994-01-01' + INTERVAL '1' YEAR
       GROUP BY n_name ORDER BY revenue DESC""",
    6: """SELECT SUM(l_extendedprice * l_discount) AS revenue FROM lineitem
       WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1994-01-01' + INTERVAL '1' YEAR
         AND l_discount BETWEEN 0.06 - 0.01 AND 0.06 + 0.01 AND l_quantity < 24""",
    7: """SELECT supp_nation, cust_nation, l_year, SUM(volume) AS revenue
       FROM (SELECT n1.n_name AS supp_nation, n2.n_name AS cust_nation, EXTRACT(year FROM l_shipdate) AS l_year,
                    l_extendedprice * (1 - l_discount) AS volume
             FROM supplier, lineitem, orders, customer, nation n1, nation n2
             WHERE s_suppkey = l_suppkey AND o_orderkey = l_orderkey AND c_custkey = o_custkey
               AND s_nationkey = n1.n_nationkey AND c_nationkey = n2.n_nationkey
               AND ((n1.n_name = 'FRANCE' AND n2.n_name = 'GERMANY') OR (n1.n_name = 'GERMANY' AND n2.n_name = 'FRANCE'))
               AND l_shipdate BETWEEN DATE '1995-01-01' AND DATE '1996-12-31') AS shipping
       GROUP BY supp_nation, cust_nation, l_year""",
    8: """SELECT o_year, SUM(CASE WHEN nation = 'BRAZIL' THEN volume ELSE 0 END) / SUM(volume) AS mkt_share
       FROM (SELECT EXTRACT(year FROM o_orderdate) AS o_year, l_extendedprice * (1 - l_discount) AS volume,
                    n2.n_name AS nation
             FROM part, supplier, lineitem, orders, customer, nation n1, nation n2, region
             WHERE p_partkey = l_partkey AND s_suppkey = l_suppkey AND l_orderkey = o_orderkey
               AND o_custkey = c_custkey AND c_nationkey = n1.n_nationkey AND n1.n_regionkey = r_regionkey
               AND r_name = 'AMERICA' AND s_nationkey = n2.n_nationkey
               AND o_orderdate BETWEEN DATE '1995-01-01' AND DATE '1996-12-31'
               AND p_type = 'ECONOMY ANODIZED STEEL') AS all_nations
       GROUP BY o_year""",
    9: """SELECT nation, o_year, SUM(amount) AS sum_profit
       FROM (SELECT n_name AS nation, EXTRACT(year FROM o_orderdate) AS o_year,
                    l_extendedprice * (1 - l_discount) - ps_supplycost * l_quantity AS amount
             FROM part, supplier, lineitem, partsupp, orders, nation
             WHERE s_suppkey = l_suppkey AND ps_suppkey = l_suppkey AND ps_partkey = l_partkey
               AND p_partkey = l_partkey AND o_orderkey = l_orderkey AND s_nationkey = n_nationkey
               AND p_name LIKE '%green%') AS profit
       GROUP BY nation, o_year""",
    10: """SELECT c_custkey, c_name, SUM(l_extendedprice * (1 - l_discount)) AS revenue, c_acctbal, n_name,
       c_address, c_phone, c_comment
       FROM customer, orders, lineitem, nation
       WHERE c_custkey = o_custkey AND l_orderkey = o_orderkey AND o_orderdate >= DATE '1993-10-01'
         AND o_orderdate < DATE '1993-10-01' + INTERVAL '3' MONTH AND l_returnflag = 'R'
         AND c_nationkey = n_nationkey
       GROUP BY c_custkey, c_name, c_acctbal, c_phone, n_name, c_address, c_comment ORDER BY revenue DESC""",
    11: """SELECT ps_partkey, SUM(ps_supplycost * ps_availqty) AS value FROM partsupp, supplier, nation
       WHERE ps_suppkey = s_suppkey AND s_nationkey = n_nationkey AND n_name = 'GERMANY'
       GROUP BY ps_partkey
       HAVING SUM(ps_supplycost * ps_availqty) > (SELECT SUM(ps_supplycost * ps_availqty) * 0.0001
                                                 FROM partsupp, supplier, nation
                                                 WHERE ps_suppkey = s_suppkey AND s_nationkey = n_nationkey
                                                   AND n_name = 'GERMANY')""",
    12: """SELECT l_shipmode,
       SUM(CASE WHEN o_orderpriority = '1-URGENT' OR o_orderpriority = '2-HIGH' THEN 1 ELSE 0 END) AS high_line_count,
       SUM(CASE WHEN o_orderpriority <> '1-URGENT' AND o_orderpriority <> '2-HIGH' THEN 1 ELSE 0 END)
         AS low_line_count
       FROM orders, lineitem
       WHERE o_orderkey = l_orderkey AND l_shipmode IN ('MAIL', 'SHIP') AND l_commitdate < l_receiptdate
         AND l_shipdate < l_commitdate AND l_receiptdate >= DATE '1994-01-01'
         AND l_receiptdate < DATE '1994-01-01' + INTERVAL '1' YEAR
       GROUP BY l_shipmode ORDER BY l_shipmode""",
    13: """SELECT c_count, COUNT(*) AS custdist
       FROM (SELECT c_custkey, COUNT(o_orderkey) AS c_count FROM customer LEFT OUTER JOIN orders
             ON c_custkey = o_custkey AND o_comment NOT LIKE '%special%requests%' GROUP BY c_custkey) AS c_orders
       GROUP BY c_count""",
    14: """SELECT 100.00 * SUM(CASE WHEN p_type LIKE 'PROMO%' THEN l_extendedprice * (1 - l_discount) ELSE 0 END)
         / SUM(l_extendedprice * (1 - l_discount)) AS promo_revenue
       FROM lineitem, part
       WHERE l_partkey = p_partkey AND l_shipdate >= DATE '1995-09-01'
         AND l_shipdate < DATE '1995-09-01' + INTERVAL '1' MONTH""",
    15: """WITH revenue0 AS (SELECT l_suppkey AS supplier_no, SUM(l_extendedprice * (1 - l_discount)) AS total_revenue
                       FROM lineitem WHERE l_shipdate >= DATE '1996-01-01'
                         AND l_shipdate < DATE '1996-01-01' + INTERVAL '3' MONTH GROUP BY l_suppkey)
       SELECT s_suppkey, s_name, s_address, s_phone, total_revenue FROM supplier, revenue0
       WHERE s_suppkey = supplier_no AND total_revenue = (SELECT MAX(total_revenue) FROM revenue0)""",
    16: """SELECT p_brand, p_type, p_size, COUNT(DISTINCT ps_suppkey) AS supplier_cnt FROM partsupp, part
       WHERE p_partkey = ps_partkey AND p_brand <> 'Brand#45' AND p_type NOT LIKE 'MEDIUM POLISHED%'
         AND p_size IN (49, 14, 23, 45, 19, 3, 36, 9)
         AND ps_suppkey NOT IN (SELECT s_suppkey FROM supplier WHERE s_comment LIKE '%Customer%Complaints%')
       GROUP BY p_brand, p_type, p_size""",
    17: """SELECT SUM(l_extendedprice) / 7.0 AS avg_yearly FROM lineitem, part
       WHERE p_partkey = l_partkey AND p_brand = 'Brand#23' AND p_container = 'MED BOX'
         AND l_quantity < (SELECT 0.2 * AVG(l_quantity) FROM lineitem WHERE l_partkey = p_partkey)""",
    18: """SELECT c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice, SUM(l_quantity) AS sum_qty
       FROM customer, orders, lineitem
       WHERE o_orderkey IN (SELECT l_orderkey FROM lineitem GROUP BY l_orderkey HAVING SUM(l_quantity) > 300)
         AND c_custkey = o_custkey AND o_orderkey = l_orderkey
       GROUP BY c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice ORDER BY o_totalprice DESC, o_orderdate""",
    19: """SELECT SUM(l_extendedprice * (1 - l_discount)) AS revenue FROM lineitem, part
       WHERE (p_partkey = l_partkey AND p_brand = 'Brand#12' AND p_container IN ('SM CASE', 'SM BOX', 'SM PACK', 'SM PKG')
              AND l_quantity >= 1 AND l_quantity <= 1 + 10 AND p_size BETWEEN 1 AND 5
              AND l_shipmode IN ('AIR', 'AIR REG') AND l_shipinstruct = 'DELIVER IN PERSON')
          OR (p_partkey = l_partkey AND p_brand = 'Brand#23' AND p_container IN ('MED BAG', 'MED BOX', 'MED PKG', 'MED PACK')
              AND l_quantity >= 10 AND l_quantity <= 10 + 10 AND p_size BETWEEN 1 AND 10
              AND l_shipmode IN ('AIR', 'AIR REG') AND l_shipinstruct = 'DELIVER IN PERSON')
          OR (p_partkey = l_partkey AND p_brand = 'Brand#34' AND p_container IN ('LG CASE', 'LG BOX', 'LG PACK', 'LG PKG')
              AND l_quantity >= 20 AND l_quantity <= 20 + 10 AND p_size BETWEEN 1 AND 15
              AND l_shipmode IN ('AIR', 'AIR REG') AND l_shipinstruct = 'DELIVER IN PERSON')""",
    20: """SELECT s_name, s_address FROM supplier, nation
       WHERE s_suppkey IN (SELECT ps_suppkey FROM partsupp
                           WHERE ps_partkey IN (SELECT p_partkey FROM part WHERE p_name LIKE 'forest%')
                             AND ps_availqty > (SELECT 0.5 * SUM(l_quantity) FROM lineitem
                                                WHERE l_partkey = ps_partkey AND l_suppkey = ps_suppkey
                                                  AND l_shipdate >= DATE '1994-01-01'
                                                  AND l_shipdate < DATE '1994-01-01' + INTERVAL '1' YEAR))
         AND s_nationkey = n_nationkey AND n_name = 'CANADA'
       ORDER BY s_name""",
    21: """SELECT s_name, COUNT(*) AS numwait FROM supplier, lineitem l1, orders, nation
       WHERE s_suppkey = l1.l_suppkey AND o_orderkey = l1.l_orderkey AND o_orderstatus = 'F'
         AND l1.l_receiptdate > l1.l_commitdate
         AND EXISTS (SELECT * FROM lineitem l2 WHERE l2.l_orderkey = l1.l_orderkey AND l2.l_suppkey <> l1.l_suppkey)
         AND NOT EXISTS (SELECT * FROM lineitem l3 WHERE l3.l_orderkey = l1.l_orderkey
                           AND l3.l_suppkey <> l1.l_suppkey AND l3.l_receiptdate > l3.l_commitdate)
         AND s_nationkey = n_nationkey AND n_name = 'SAUDI ARABIA'
       GROUP BY s_name ORDER BY numwait DESC, s_name""",
    22: """SELECT cntrycode, COUNT(*) AS numcust, SUM(c_acctbal) AS totacctbal
       FROM (SELECT SUBSTRING(c_phone, 1, 2) AS cntrycode, c_acctbal FROM customer
             WHERE SUBSTRING(c_phone, 1, 2) IN ('13', '31', '23', '29', '30', '18', '17')
               AND c_acctbal > (SELECT AVG(c_acctbal) FROM customer WHERE c_acctbal > 0.00
                                AND SUBSTRING(c_phone, 1, 2) IN ('13', '31', '23', '29', '30', '18', '17'))
               AND NOT EXISTS (SELECT * FROM orders WHERE o_custkey = c_custkey)) AS custsale
       GROUP BY cntrycode""",
}
