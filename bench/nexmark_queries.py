"""The Nexmark queries q0-q22: each one's Flink SQL (the suite's own text) and the form Boreas is given.

The Flink text is the ``SELECT`` of the suite's ``qN.sql`` (nexmark-flink's
``queries/``), over the views ``person``, ``auction`` and ``bid`` with the
standard columns.  Boreas is given the same query as an ``m3`` box's SQL
with the changes its types and dialect need: ``dateTime`` and ``expires``
are DOUBLE milliseconds since the epoch, written ``datetime`` (an ``m3``
box has no TIMESTAMP type, its DATE is a day and its INT travels as a 32-bit
``int``, too small for milliseconds; a double holds them exactly); ids and
prices are INT (they fit); a quoted name is in double quotes, not Flink's
backticks.  Nothing else is rewritten: what Boreas
cannot run yet it refuses, and the benchmark prints the refusal.  DuckDB
checks the non-windowed queries Boreas runs by running the Boreas form over
the same events.

``FLINK_SKIPS`` are the queries the Flink peer does not run, and why (the
issue's q6, q10 and q12, and the ones that need the suite's Java jar).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Each kind's columns as an ``m3`` box declares them (the generator's columns, timestamps as DOUBLE ms).
COLUMNS = {
    "person": "id INT, name VARCHAR, emailAddress VARCHAR, creditCard VARCHAR, city VARCHAR, state VARCHAR, "
              "datetime DOUBLE, extra VARCHAR",
    "auction": "id INT, itemName VARCHAR, description VARCHAR, initialBid INT, reserve INT, "
               "datetime DOUBLE, expires DOUBLE, seller INT, category INT, extra VARCHAR",
    "bid": "auction INT, bidder INT, price INT, channel VARCHAR, url VARCHAR, datetime DOUBLE, extra VARCHAR",
    "side_input": "key INT, value INT",  # q13's side input (``nexmark_gen.side_input``), published first
}

_RANKS = """count(*) AS total_bids,
     count(*) filter (where price < 10000) AS rank1_bids,
     count(*) filter (where price >= 10000 and price < 1000000) AS rank2_bids,
     count(*) filter (where price >= 1000000) AS rank3_bids"""
_DISTINCT = """count(distinct bidder) AS total_bidders,
     count(distinct bidder) filter (where price < 10000) AS rank1_bidders,
     count(distinct bidder) filter (where price >= 10000 and price < 1000000) AS rank2_bidders,
     count(distinct bidder) filter (where price >= 1000000) AS rank3_bidders,
     count(distinct auction) AS total_auctions,
     count(distinct auction) filter (where price < 10000) AS rank1_auctions,
     count(distinct auction) filter (where price >= 10000 and price < 1000000) AS rank2_auctions,
     count(distinct auction) filter (where price >= 1000000) AS rank3_auctions"""
_HOP = "TABLE(HOP(TABLE bid, DESCRIPTOR({t}), INTERVAL '2' SECOND, INTERVAL '10' SECOND))"
_CHANNEL_ID = "REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2)"


@dataclass(frozen=True)
class Query:
    """One Nexmark query: which kinds it reads, its text per engine (``{t}``: the event-time column's name)."""

    name: str
    title: str
    reads: tuple[str, ...]
    text: str
    windowed: bool = False
    side: tuple[str, ...] = ()  # tables published before the streams (q13's side input), declared first

    def flink(self) -> str:
        return self.text.format(t="`dateTime`")

    def select(self) -> str:
        """The query as Boreas (and DuckDB) reads it."""
        return self.text.format(t="datetime").replace("`", '"')

    def boreas(self) -> str:
        """The ``m3`` box's SQL: a ``CREATE TABLE`` per side input then a ``CREATE STREAM`` per kind read (in
        port order), then the query."""
        tables = "".join(f"CREATE TABLE {k}({COLUMNS[k]});\n" for k in self.side)
        streams = "".join(f"CREATE STREAM {k}({COLUMNS[k]});\n" for k in self.reads)
        return tables + streams + self.select()


QUERIES = [
    Query("q0", "pass through", ("bid",), "SELECT auction, bidder, price, {t}, extra FROM bid"),
    Query("q1", "currency conversion", ("bid",),
          "SELECT auction, bidder, 0.908 * price AS price, {t}, extra FROM bid"),
    Query("q2", "selection", ("bid",), "SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0"),
    Query("q3", "local item suggestion", ("auction", "person"),
          "SELECT P.name, P.city, P.state, A.id FROM auction AS A INNER JOIN person AS P ON A.seller = P.id "
          "WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA')"),
    Query("q4", "average price for a category", ("auction", "bid"),
          "SELECT Q.category, AVG(Q.final) AS avg_final FROM (SELECT MAX(B.price) AS final, A.category "
          "FROM auction A, bid B WHERE A.id = B.auction AND B.{t} BETWEEN A.{t} AND A.expires "
          "GROUP BY A.id, A.category) Q GROUP BY Q.category"),
    Query("q5", "hot items", ("bid",),
          "SELECT AuctionBids.auction, AuctionBids.num FROM (SELECT auction, count(*) AS num, "
          "window_start AS starttime, window_end AS endtime FROM " + _HOP + " GROUP BY auction, window_start, "
          "window_end) AS AuctionBids JOIN (SELECT max(CountBids.num) AS maxn, CountBids.starttime, "
          "CountBids.endtime FROM (SELECT count(*) AS num, window_start AS starttime, window_end AS endtime FROM "
          + _HOP + " GROUP BY auction, window_start, window_end) AS CountBids GROUP BY CountBids.starttime, "
          "CountBids.endtime) AS MaxBids ON AuctionBids.starttime = MaxBids.starttime AND "
          "AuctionBids.endtime = MaxBids.endtime AND AuctionBids.num >= MaxBids.maxn", windowed=True),
    Query("q6", "average selling price by seller", ("auction", "bid"),
          "SELECT Q.seller, AVG(Q.price) OVER (PARTITION BY Q.seller ORDER BY Q.{t} ROWS BETWEEN 10 PRECEDING "
          "AND CURRENT ROW) AS avg_price FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY A.id, A.seller "
          "ORDER BY B.price DESC) AS rownum FROM (SELECT A.id, A.seller, B.price, B.{t} FROM auction AS A, "
          "bid AS B WHERE A.id = B.auction and B.{t} between A.{t} and A.expires) WHERE rownum <= 1) AS Q",
          windowed=True),
    Query("q7", "highest bid", ("bid",),
          "SELECT B.auction, B.price, B.bidder, B.{t}, B.extra FROM bid B JOIN (SELECT MAX(price) AS maxprice, "
          "window_end AS {t} FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR({t}), INTERVAL '10' SECOND)) "
          "GROUP BY window_start, window_end) B1 ON B.price = B1.maxprice "
          "WHERE B.{t} BETWEEN B1.{t} - INTERVAL '10' SECOND AND B1.{t}", windowed=True),
    Query("q8", "monitor new users", ("person", "auction"),
          "SELECT P.id, P.name, P.starttime FROM (SELECT id, name, window_start AS starttime, "
          "window_end AS endtime FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR({t}), INTERVAL '10' SECOND)) "
          "GROUP BY id, name, window_start, window_end) P JOIN (SELECT seller, window_start AS starttime, "
          "window_end AS endtime FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR({t}), INTERVAL '10' SECOND)) "
          "GROUP BY seller, window_start, window_end) A ON P.id = A.seller AND P.starttime = A.starttime "
          "AND P.endtime = A.endtime", windowed=True),
    Query("q9", "winning bids", ("auction", "bid"),
          "SELECT id, itemName, description, initialBid, reserve, {t}, expires, seller, category, extra, "
          "auction, bidder, price, bid_dateTime, bid_extra FROM (SELECT A.*, B.auction, B.bidder, B.price, "
          "B.{t} AS bid_dateTime, B.extra AS bid_extra, ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY "
          "B.price DESC, B.{t} ASC) AS rownum FROM auction A, bid B WHERE A.id = B.auction AND "
          "B.{t} BETWEEN A.{t} AND A.expires) WHERE rownum <= 1"),
    Query("q10", "log to file system", ("bid",),
          "SELECT auction, bidder, price, {t}, extra, DATE_FORMAT({t}, 'yyyy-MM-dd') AS dt, "
          "DATE_FORMAT({t}, 'HH:mm') AS hm FROM bid"),
    Query("q11", "user sessions", ("bid",),
          "SELECT B.bidder, count(*) AS bid_count, SESSION_START(B.{t}, INTERVAL '10' SECOND) AS starttime, "
          "SESSION_END(B.{t}, INTERVAL '10' SECOND) AS endtime FROM bid B "
          "GROUP BY B.bidder, SESSION(B.{t}, INTERVAL '10' SECOND)", windowed=True),
    Query("q12", "processing-time windows", ("bid",),
          "SELECT bidder, count(*) AS bid_count, window_start AS starttime, window_end AS endtime FROM "
          "TABLE(TUMBLE(TABLE (SELECT *, PROCTIME() AS p_time FROM bid), DESCRIPTOR(p_time), "
          "INTERVAL '10' SECOND)) GROUP BY bidder, window_start, window_end", windowed=True),
    Query("q13", "bounded side input join", ("bid",),
          "SELECT B.auction, B.bidder, B.price, B.{t}, S.`value` FROM (SELECT *, PROCTIME() AS p_time FROM bid) B "
          "JOIN side_input FOR SYSTEM_TIME AS OF B.p_time AS S ON mod(B.auction, 10000) = S.key",
          side=("side_input",)),
    Query("q14", "calculation", ("bid",),
          "SELECT auction, bidder, 0.908 * price AS price, CASE WHEN HOUR({t}) >= 8 AND HOUR({t}) <= 18 "
          "THEN 'dayTime' WHEN HOUR({t}) <= 6 OR HOUR({t}) >= 20 THEN 'nightTime' ELSE 'otherTime' END "
          "AS bidTimeType, {t}, extra, count_char(extra, 'c') AS c_counts FROM bid "
          "WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000"),
    Query("q15", "bidding statistics report", ("bid",),
          f"SELECT DATE_FORMAT({{t}}, 'yyyy-MM-dd') AS `day`, {_RANKS}, {_DISTINCT} FROM bid "
          "GROUP BY DATE_FORMAT({t}, 'yyyy-MM-dd')"),
    Query("q16", "channel statistics report", ("bid",),
          f"SELECT channel, DATE_FORMAT({{t}}, 'yyyy-MM-dd') AS `day`, max(DATE_FORMAT({{t}}, 'HH:mm')) AS "
          f"`minute`, {_RANKS}, {_DISTINCT} FROM bid GROUP BY channel, DATE_FORMAT({{t}}, 'yyyy-MM-dd')"),
    Query("q17", "auction statistics report", ("bid",),
          f"SELECT auction, DATE_FORMAT({{t}}, 'yyyy-MM-dd') AS `day`, {_RANKS}, min(price) AS min_price, "
          "max(price) AS max_price, avg(price) AS avg_price, sum(price) AS sum_price FROM bid "
          "GROUP BY auction, DATE_FORMAT({t}, 'yyyy-MM-dd')"),
    Query("q18", "find last bid", ("bid",),
          "SELECT auction, bidder, price, channel, url, {t}, extra FROM (SELECT *, ROW_NUMBER() OVER "
          "(PARTITION BY bidder, auction ORDER BY {t} DESC) AS rank_number FROM bid) WHERE rank_number <= 1"),
    Query("q19", "auction top-10 price", ("bid",),
          "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS "
          "rank_number FROM bid) WHERE rank_number <= 10"),
    Query("q20", "expand bid with auction", ("bid", "auction"),
          "SELECT auction, bidder, price, channel, url, B.{t} AS bid_dateTime, B.extra AS bid_extra, itemName, "
          "description, initialBid, reserve, A.{t} AS auction_dateTime, expires, seller, category, "
          "A.extra AS auction_extra FROM bid AS B INNER JOIN auction AS A ON B.auction = A.id "
          "WHERE A.category = 10"),
    Query("q21", "add channel id", ("bid",),
          "SELECT auction, bidder, price, channel, CASE WHEN lower(channel) = 'apple' THEN '0' "
          "WHEN lower(channel) = 'google' THEN '1' WHEN lower(channel) = 'facebook' THEN '2' "
          f"WHEN lower(channel) = 'baidu' THEN '3' ELSE {_CHANNEL_ID} END AS channel_id FROM bid "
          f"WHERE {_CHANNEL_ID} IS NOT NULL OR lower(channel) IN ('apple', 'google', 'facebook', 'baidu')"),
    Query("q22", "get URL directories", ("bid",),
          "SELECT auction, bidder, price, channel, SPLIT_INDEX(url, '/', 3) AS dir1, "
          "SPLIT_INDEX(url, '/', 4) AS dir2, SPLIT_INDEX(url, '/', 5) AS dir3 FROM bid"),
]
BY_NAME = {q.name: q for q in QUERIES}

#: Queries the Flink peer does not run, and why.
FLINK_SKIPS = {
    "q6": "Flink does not run it (OVER ROWS on an updating input)",
    "q10": "writes partitioned files (the suite's filesystem sink), not a result to compare",
    "q12": "processing-time windows: no reproducible result",
    "q13": "a processing-time lookup join against the suite's side-input file",
    "q14": "needs the suite's Java UDF count_char (nexmark-flink's jar)",
}
