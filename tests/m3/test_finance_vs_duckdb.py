"""The order-book queries of the DBToaster papers as streaming M3 views, against DuckDB (issue 14).

The SQL follows DBToaster's finance test queries (VWAP, missed trades,
price spread, brokers' spread, axis finder over ``bids``/``asks`` order
books; DBToaster's repository, ``test/queries/finance``), written in
standard SQL: ``CREATE STREAM`` without DBToaster's ``FROM FILE`` clauses, and
output columns named.  VWAP and missed trades compare a sum with the sum of
the volumes at higher prices (a subquery correlated by ``b2.price >
b1.price``): the inner sum is a map keyed by price, summed over the range
when the view is read, so they are domain-bound (cost grows with the
distinct prices, not with the order book).  Axis finder compares a
difference of prices across the books with a constant: an event loops over
the other book's map at its broker (keyed by price) and evaluates the
difference per entry, so it is domain-bound too.  After every batch of random
inserts and deletes each view equals DuckDB's; deleting every row empties
every map (``m3_harness``).
"""

from __future__ import annotations

import pytest
from boreas.m3 import compile_sql, compile_to_text
from changes_check import changes_rebuild_view
from hypothesis import strategies as st
from m3_harness import check_against_duckdb, value_strategy

BOOKS = """
CREATE STREAM bids(t DOUBLE, id INT, broker_id INT, volume DOUBLE, price DOUBLE);
CREATE STREAM asks(t DOUBLE, id INT, broker_id INT, volume DOUBLE, price DOUBLE);
"""

QUERIES = {
    "vwap": """SELECT SUM(b1.price * b1.volume) AS vwap FROM bids b1
        WHERE 0.25 * (SELECT SUM(b3.volume) FROM bids b3) > (SELECT SUM(b2.volume) FROM bids b2 WHERE b2.price > b1.price)""",
    "missed_trades": """SELECT b.broker_id, SUM(a.price * a.volume + -1 * b.price * b.volume) AS mst FROM bids b, asks a
        WHERE 0.25 * (SELECT SUM(a1.volume) FROM asks a1) > (SELECT SUM(a2.volume) FROM asks a2 WHERE a2.price > a.price)
          AND 0.25 * (SELECT SUM(b1.volume) FROM bids b1) > (SELECT SUM(b2.volume) FROM bids b2 WHERE b2.price > b.price)
        GROUP BY b.broker_id""",
    "price_spread": """SELECT SUM(a.price + -1 * b.price) AS psp FROM bids b, asks a
        WHERE b.volume > 0.0001 * (SELECT SUM(b1.volume) FROM bids b1)
          AND a.volume > 0.0001 * (SELECT SUM(a1.volume) FROM asks a1)""",
    "brokers_spread": """SELECT x.broker_id, SUM(x.volume * x.price - y.volume * y.price) AS bsp FROM bids x, bids y
        WHERE x.broker_id = y.broker_id AND x.t > y.t GROUP BY x.broker_id""",
    "axis_finder": """SELECT b.broker_id, SUM(a.volume + -1 * b.volume) AS axf FROM bids b, asks a
        WHERE b.broker_id = a.broker_id AND ((a.price + ((-1) * b.price) > 1000) OR (b.price + ((-1) * a.price) > 1000))
        GROUP BY b.broker_id""",
}


@pytest.mark.parametrize("name", ["vwap", "price_spread", "axis_finder",
                                  pytest.param("missed_trades", marks=pytest.mark.slow),
                                  pytest.param("brokers_spread", marks=pytest.mark.slow)])
def test_view_matches_duckdb(name):
    check_against_duckdb(BOOKS + QUERIES[name] + ";", examples=25, value=_prices if name == "axis_finder" else None)


def _prices(column: str, t: str):
    """Axis finder's prices in steps of 250, so a difference is above, at and below its 1000."""
    return st.integers(0, 8).map(lambda i: i * 250.0) if column == "price" else value_strategy(t)


@pytest.mark.parametrize("name", ["vwap", pytest.param("missed_trades", marks=pytest.mark.slow)])
def test_changes_rebuild_the_view(name):
    changes_rebuild_view(BOOKS + QUERIES[name] + ";", "auto", examples=15)


def test_vwap_is_domain_bound_over_prices():
    first = compile_to_text(BOOKS + QUERIES["vwap"]).splitlines()[0]
    assert first.startswith("-- view Q1: domain-bound: nested subquery"), first
    program = compile_sql(BOOKS + QUERIES["vwap"])
    assert any([k.type for k in m.keys] == ["FLOAT"] for m in program.maps if "_n2_" in m.name)


def test_axis_finder_loops_over_the_other_books_prices():
    """Axis finder compares ``a.price - b.price`` with a constant: an event of one book loops over the other
    book's map at the event's broker, keyed by price, and evaluates the difference per entry (domain-bound)."""
    text = compile_to_text(BOOKS + QUERIES["axis_finder"])
    assert text.startswith("-- view Q1: domain-bound: a comparison between columns"), text.splitlines()[0]
    assert "IF 1000 < (PRICE + -1 * PRICE_3) THEN" in text  # an asks event against the bids' prices
    program = compile_sql(BOOKS + QUERIES["axis_finder"])
    looped = {m.name: [k.name for k in m.keys] for m in program.maps if m.name.startswith("m")}
    assert all(keys[0] == "BROKER_ID" and keys[1].startswith("PRICE") for keys in looped.values()), looped
