"""DuckDB as the oracle of the box tests that follow a view's changelog: a query's answer over one table's rows.

The box tests (tests/m3/test_*_box.py, test_told_changelog.py, test_cumulus_keyless.py) feed a box batches of
rows and compare what a subscriber holds with SQL's answer over the rows live at that moment.
"""

from __future__ import annotations

from collections import Counter

import duckdb


def answer(rows: list[tuple], query: str, columns: str) -> Counter:
    """``query``'s rows (NULL as None) over a table ``R(columns)`` holding ``rows``, as a bag."""
    con = duckdb.connect()
    try:
        con.execute(f"CREATE TABLE R({columns})")
        if rows:
            con.executemany(f"INSERT INTO R VALUES ({', '.join('?' * len(rows[0]))})", rows)
        return Counter(tuple(r) for r in con.execute(query).fetchall())
    finally:
        con.close()
