CREATE STREAM customer(c_custkey INT, c_mktsegment VARCHAR(10));
 CREATE STREAM orders(o_orderkey INT, o_custkey INT, o_orderdate DATE, o_shippriority INT);
 CREATE STREAM lineitem(l_orderkey INT, l_extendedprice DECIMAL(15,2), l_discount DECIMAL(15,2), l_shipdate DATE);
 SELECT l_orderkey, o_orderdate, o_shippriority, SUM(l_extendedprice * (1 - l_discount)) AS revenue
 FROM customer, orders, lineitem
 WHERE c_mktsegment = 'BUILDING' AND c_custkey = o_custkey AND l_orderkey = o_orderkey
   AND o_orderdate < DATE '1995-03-15' AND l_shipdate > DATE '1995-03-15'
 GROUP BY l_orderkey, o_orderdate, o_shippriority
