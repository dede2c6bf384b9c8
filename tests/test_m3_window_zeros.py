"""A closed window's row whose values are all 0 is a row (issue 34): TUMBLE, HOP, SESSION and window joins in an
``m3`` box against DuckDB, on both backends, with values drawn so that zero sums and zero MIN/MAX are frequent.

A map holds no entry of value 0, so a window whose ``SUM(price)`` is 0 (rows of price 0, or +2 and -2) had no
entry, and the closing read "every value 0" as "no row": the window emitted nothing where Flink and DuckDB show
its row (docs/m3.md, "Event time").  Here each box is fed the drawn rows in event-time order (nothing late),
cut into batches anywhere, as rows or Arrow columns, its windows closing as the watermark passes them and the
rest at the end of input; DuckDB computes the same query over the rows with their windows assigned in Python
(TUMBLE and HOP by the definition; SESSION by sorting each key's rows and cutting at each gap of ``GAP`` or
more), the window table function replaced by that table.
"""

from __future__ import annotations

from collections import Counter

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.m3.boxtype import infer_m3
from boreas.node.operators.m3windows import WindowedM3Operator
from boreas.node.operators.registry import DEFAULT_REGISTRY
from boreas.wire.columns import Columns, from_rows

SIZE, SLIDE, GAP = 10, 5, 4
BID = Schema("Bid", (Field("auction", FieldType.INT), Field("price", FieldType.INT), Field("ts", FieldType.LONG)))
P = Schema("P", (Field("k", FieldType.INT), Field("ts", FieldType.INT)))
A = Schema("A", (Field("k", FieldType.INT), Field("v", FieldType.INT), Field("ts", FieldType.INT)))

#: the window table function a box reads, per kind (``{s}``: the stream, ``{key}``: SESSION's PARTITION BY)
CALLS = {"TUMBLE": f"TABLE(TUMBLE(TABLE {{s}}, DESCRIPTOR(ts), {SIZE}))",
         "HOP": f"TABLE(HOP(TABLE {{s}}, DESCRIPTOR(ts), {SLIDE}, {SIZE}))",
         "SESSION": f"TABLE(SESSION(TABLE {{s}} PARTITION BY {{key}}, DESCRIPTOR(ts), {GAP}))"}

#: a windowed view's items: a SUM alone, beside AVG or MAX, a MIN, a filtered COUNT, and beside COUNT(*)
ITEMS = ["SUM(price) AS s", "SUM(price) AS s, AVG(price) AS a", "MIN(price) AS m", "MAX(price) AS m, SUM(price) AS s",
         "COUNT(*) FILTER (WHERE price > 0) AS c", "COUNT(*) AS n, SUM(price) AS s", "MAX(price) AS m"]

price = st.sampled_from([0, 0, 0, 1, -1, 2, -2])  # zero sums, zero MIN/MAX and all-zero rows often


def starts(kind: str, t: int) -> list[int]:
    """The starts of TUMBLE's or HOP's windows ``[s, s + SIZE)`` holding event time ``t``."""
    slide = SIZE if kind == "TUMBLE" else SLIDE
    return list(range(t - t % slide, t - SIZE, -slide))


def windowed(kind: str, rows: list[tuple], key: int) -> list[tuple]:
    """Each row once per window it is in, with ``window_start`` and ``window_end`` (SESSION: per ``row[key]``)."""
    if kind != "SESSION":
        return [(*row, s, s + SIZE) for row in rows for s in starts(kind, row[-1])]
    out = []
    for k in {row[key] for row in rows}:
        mine = sorted((row for row in rows if row[key] == k), key=lambda row: row[-1])
        run: list[tuple] = []
        for row in mine + [None]:
            if run and (row is None or row[-1] - run[-1][-1] >= GAP):
                out.extend((*r, run[0][-1], run[-1][-1] + GAP) for r in run)
                run = []
            if row is not None:
                run.append(row)
    return out


def duckdb_rows(query: str, tables: dict[str, tuple[str, list[tuple]]]) -> tuple[Counter, int]:
    """``query`` in DuckDB over ``tables`` (name -> (its columns, its rows)), floats rounded; its width."""
    con = duckdb.connect()
    for name, (columns, rows) in tables.items():
        con.execute(f"CREATE TABLE {name}({columns})")
        if rows:
            con.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' * len(rows[0]))})", rows)
    result = con.execute(query)
    return Counter(_rounded(row) for row in result.fetchall()), len(result.description)


def _rounded(row) -> tuple:
    return tuple(round(v, 6) if isinstance(v, float) else v for v in row)


def box_of(text: str, inputs: list[Schema], backend: str) -> WindowedM3Operator:
    ports = tuple(InPort(s.name) for s in inputs)
    box = Box("w", "m3", ports, ("Out",), (("sql", text), ("backend", backend)))
    op = DEFAULT_REGISTRY.build(box, inputs, infer_m3(box, inputs))
    assert isinstance(op, WindowedM3Operator)
    return op


def feed(op: WindowedM3Operator, batches: list[tuple[int, list[tuple], bool]], inputs: list[Schema],
         width: int) -> Counter:
    """Every out row of ``op`` fed ``batches`` (in port, rows, as Arrow columns?) then the end of input, as
    ``width`` columns (a window join of rows has one more: the row's count)."""
    counted = len(op.outputs[0].fields) > width
    out = []
    for n, (port, rows, columns) in enumerate(batches):
        batch = (from_rows(rows, inputs[port]) or []) if columns else rows
        out += op.process_from(port, batch, 0.1 * n, (inputs[port].name, "p", n + 1))
    out += op.end_of_input(0.1 * len(batches) + 1)
    got: Counter = Counter()
    for _, emitted in out:
        for row in (emitted.rows() if isinstance(emitted, Columns) else emitted):
            got[_rounded(row[:-1] if counted else row)] += int(row[-1]) if counted else 1
    assert op.state_entries() == 0
    return got


def in_order(rows: list[tuple], cuts: list[int], columns: list[bool], port: int = 0) -> list[tuple]:
    """``rows`` sorted by event time (nothing late), cut at ``cuts``: ``(port, rows, as columns)`` batches."""
    rows = sorted(rows, key=lambda row: row[-1])
    bounds = sorted({0, len(rows), *(c % (len(rows) + 1) for c in cuts)})
    return [(port, rows[a:b], columns[i % len(columns)]) for i, (a, b) in enumerate(zip(bounds, bounds[1:])) if b > a]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(sorted(CALLS)), items=st.sampled_from(ITEMS), by_auction=st.booleans(),
       rows=st.lists(st.tuples(st.integers(1, 3), price, st.integers(0, 40)), max_size=14),
       cuts=st.lists(st.integers(0, 14), max_size=4), columns=st.lists(st.booleans(), min_size=1, max_size=3))
@pytest.mark.parametrize("backend", ["python", "native"])
def test_windowed_views_show_every_window_with_rows_as_duckdb(backend, kind, items, by_auction, rows, cuts, columns):
    """Every (group, window) that had rows is emitted once, with DuckDB's values: a SUM of 0, a MIN or MAX of 0,
    a filtered COUNT of 0, an AVG of 0 (SESSION windows are per auction, so grouped by it)."""
    keys = "auction, " if by_auction or kind == "SESSION" else ""
    text = (f"SELECT {keys}window_start, window_end, {items} FROM {{w}} GROUP BY {keys}window_start, window_end")
    box = "CREATE STREAM Bid(auction INT, price INT, ts INT);\n" + text.format(
        w=CALLS[kind].format(s="Bid", key="auction"))
    columns_w = "auction INT, price INT, ts INT, window_start INT, window_end INT"
    want, width = duckdb_rows(text.format(w="w"), {"w": (columns_w, windowed(kind, rows, 0))})
    assert feed(box_of(box, [BID], backend), in_order(rows, cuts, columns), [BID], width) == want


def count_leaf(kind: str) -> str:
    return (f"(SELECT k, COUNT(*) AS n, window_start AS ws, window_end AS we FROM {CALLS[kind].format(s='P')} "
            "GROUP BY k, window_start, window_end) X")


def a_leaf(kind: str, items: str, alias: str = "Y") -> str:
    return (f"(SELECT k, {items}, window_start AS ws, window_end AS we FROM {CALLS[kind].format(s='A')} "
            f"GROUP BY k, window_start, window_end) {alias}")


#: window joins (q8's equal windows, q5's aggregate of aggregates joined back) whose leaves or uppers sum to 0
JOINS = {
    "sum leaf": lambda kind: (f"SELECT X.k, X.n, Y.s FROM {count_leaf(kind)} JOIN {a_leaf(kind, 'SUM(v) AS s')} "
                              "ON X.k = Y.k AND X.ws = Y.ws AND X.we = Y.we"),
    "max leaf": lambda kind: (f"SELECT X.k, X.n, Y.m FROM {count_leaf(kind)} JOIN {a_leaf(kind, 'MAX(v) AS m')} "
                              "ON X.k = Y.k AND X.ws = Y.ws AND X.we = Y.we"),
    "upper sum": lambda kind: (f"SELECT X.k, X.ws, SUM(Y.m) AS t FROM {count_leaf(kind)} JOIN "
                               f"{a_leaf(kind, 'MIN(v) AS m')} ON X.k = Y.k AND X.ws = Y.ws AND X.we = Y.we "
                               "GROUP BY X.k, X.ws, X.we"),
    "hottest sums": lambda kind: (f"SELECT X.k, X.s FROM {a_leaf(kind, 'SUM(v) AS s', 'X')} JOIN (SELECT MAX(C.s) "
                                  f"AS m, C.ws, C.we FROM {a_leaf(kind, 'SUM(v) AS s', 'C')} GROUP BY C.ws, C.we) "
                                  "Y ON X.ws = Y.ws AND X.we = Y.we AND X.s >= Y.m"),
}


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query=st.sampled_from(sorted(JOINS)), kind=st.sampled_from(["TUMBLE", "HOP"]),
       p_rows=st.lists(st.tuples(st.integers(1, 3), st.integers(0, 40)), max_size=8),
       a_rows=st.lists(st.tuples(st.integers(1, 3), price, st.integers(0, 40)), max_size=12),
       cuts=st.lists(st.integers(0, 12), max_size=3), columns=st.lists(st.booleans(), min_size=1, max_size=3))
@pytest.mark.parametrize("backend", ["python", "native"])
def test_window_joins_over_zero_sums_match_duckdb(backend, query, kind, p_rows, a_rows, cuts, columns):
    """A leaf whose SUM or MAX is 0 joins, an upper SUM of 0 is a row, a window whose greatest SUM is 0 or below
    still has its hottest keys, as DuckDB says; the P and A batches interleaved, each stream in order."""
    text = JOINS[query](kind)
    box = ("CREATE STREAM P(k INT, ts INT);\nCREATE STREAM A(k INT, v INT, ts INT);\n" + text)
    duck = text.replace(CALLS[kind].format(s="P"), "pw").replace(CALLS[kind].format(s="A"), "aw")
    bounds = "window_start INT, window_end INT"
    want, width = duckdb_rows(duck, {"pw": (f"k INT, ts INT, {bounds}", windowed(kind, p_rows, 0)),
                                     "aw": (f"k INT, v INT, ts INT, {bounds}", windowed(kind, a_rows, 0))})
    ps, as_ = in_order(p_rows, cuts, columns, 0), in_order(a_rows, cuts[::-1], columns, 1)
    batches = [b for pair in zip(ps + [None] * len(as_), as_ + [None] * len(ps)) for b in pair if b is not None]
    assert feed(box_of(box, [P, A], backend), batches, [P, A], width) == want


@pytest.mark.parametrize("backend", ["python", "native"])
@pytest.mark.parametrize("kind", sorted(CALLS))
def test_a_window_whose_sum_is_zero_is_emitted(backend, kind):
    """The concrete rows: auction 1's one bid of price 0 and auction 2's +5 and -5 have SUM 0 in their window;
    main emitted only auction 3's row."""
    text = ("CREATE STREAM Bid(auction INT, price INT, ts INT);\nSELECT auction, window_start, window_end, "
            f"SUM(price) AS s FROM {CALLS[kind].format(s='Bid', key='auction')} GROUP BY auction, window_start, "
            "window_end")
    got = feed(box_of(text, [BID], backend), [(0, [(1, 0, 1), (2, 5, 2), (2, -5, 3), (3, 2, 4)], False)], [BID], 4)
    assert {(a, s) for a, _, _, s in got} == {(1, 0), (2, 0), (3, 2)}


@pytest.mark.parametrize("backend", ["python", "native"])
@pytest.mark.parametrize("group", ["1, 2, 3", "auction, ws, we"])
def test_a_window_grouped_by_position_or_alias_keeps_its_zero_sum(backend, group):
    """GROUP BY positions or SELECT aliases of the window columns: the view is windowed all the same (it
    closes), so its zero sums are rows too (the hidden count was added only where the GROUP BY named them)."""
    text = ("CREATE STREAM Bid(auction INT, price INT, ts INT);\nSELECT auction, window_start AS ws, window_end AS we, "
            f"SUM(price) AS s FROM {CALLS['TUMBLE'].format(s='Bid', key='auction')} GROUP BY {group}")
    got = feed(box_of(text, [BID], backend), [(0, [(1, 0, 1), (2, 5, 2), (2, -5, 3), (3, 2, 4)], False)], [BID], 4)
    assert {(a, s) for a, _, _, s in got} == {(1, 0), (2, 0), (3, 2)}
