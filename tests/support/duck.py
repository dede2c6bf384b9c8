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


#: M3's column types as DuckDB's.
TYPES = {"INT": "BIGINT", "FLOAT": "DOUBLE", "STRING": "VARCHAR", "DATE": "DATE"}


def load_tables(con, live: dict, changed: set) -> None:
    """DuckDB's tables of the ``changed`` relations replaced by their live rows, one INSERT each (a statement per
    inserted or deleted row was much of a DuckDB test's time); the tables' declared types cast the values."""
    for name in sorted(changed):
        con.execute(f'DELETE FROM "{name}"')
        rows = [row for _, row in live[name]]
        if rows:
            row = "(" + ", ".join("?" * len(rows[0])) + ")"
            con.execute(f'INSERT INTO "{name}" VALUES ' + ", ".join([row] * len(rows)), [v for r in rows for v in r])


_CONNECTION: list = []  # (one per process: :func:`duck_tables`)


def duck_tables(relations: dict):
    """The process's DuckDB connection holding ``relations``' tables, empty.  One connection serves every example
    (opening one took ~30 ms, more than a small example's own work); each run drops the tables of the one before."""
    if not _CONNECTION:
        _CONNECTION.append(duckdb.connect())
    con = _CONNECTION[0]
    for (name,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall():
        con.execute(f'DROP TABLE "{name}"')
    for name, cols in relations.items():
        # no id column of our own: NATURAL JOIN would join on it
        con.execute(f'CREATE TABLE "{name}" (' + ", ".join(f'"{c}" {TYPES[t]}' for c, t in cols) + ")")
    return con
