"""join on Arrow columns (issue 30) gives exactly what its row path gives, batch boundaries anywhere.

The oracle is the same box built with ``columnar=False``: the row path
(node/operators/join_rows.py) is the definition of the semantics, a tuple
at a time against the other side's buffer.  Hypothesis draws a stream of
batches for both sides -- keys that match often, None keys (``None ==
None`` holds), order values mostly rising but sometimes back or None, zero
divisors, nan -- cut anywhere, arriving as Arrow columns or as rows, with
time passing for ``timeout``; and predicates with an equality to narrow
pairs by, without one, and ones that fall back to rows.  After every batch
both emit the same tuples in the same order; at random points the columnar
box's state goes through msgpack into a fresh box, which goes on exactly
as the original would.  Separately: the columnar path is really taken, and
a node's dataflow joins Arrow batches and sends the pairs downstream.  (A
join fed a changelog is refused at submission: tests/test_changelog.py.)
"""

from __future__ import annotations


import msgspec
import pyarrow as pa
import pytest
from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.boxtypes import builtin_registry
from boreas.catalog.model import Box, Field, FieldType, InPort, Schema, Subscription
from boreas.node.dataflow import Dataflow
from boreas.node.inbox import Arrival
from boreas.node.journal import payload
from boreas.node.operators import join_columns
from boreas.node.operators.join import JoinOperator
from boreas.node.operators.join_columns import ColumnJoin
from boreas.node.operators.join_rows import RowJoin
from boreas.wire.columns import Columns, arrow_schema, as_rows, read_rows
from boreas.wire.frames import ARROW, Batch, decode
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.operators import normal
from support.property_scale import examples

TYPES = builtin_registry()
L = Schema("L", (Field("k", FieldType.INT), Field("t", FieldType.INT), Field("v", FieldType.DOUBLE),
                 Field("s", FieldType.STRING, 4)))
R = Schema("R", (Field("k", FieldType.LONG), Field("t", FieldType.INT), Field("w", FieldType.DOUBLE),
                 Field("s", FieldType.STRING, 4)))

PREDICATES = [  # all translate; some batches still fall back (a zero divisor, an ordering with None)
    "left.k = right.k", "left.s = right.s and left.v < right.w", "left.k = right.k and left.t <= right.t",
    "1 = 1", "left.t < right.t", "left.v / right.w > 1.0", "(left.k = right.k) and (left.s <> right.s)",
    "right.k = left.k or left.t = right.t", "left.k + 1 = right.k", "cast(left.v as varchar) = right.s",
]
ON_ROWS = ["min(left.k, left.v) + 1.0 > right.w"]  # arithmetic on an int-or-double value: no columnar translation
OUTS = [(), ("left.k", "right.t"), ("left.v / right.w", "concat(left.s, right.s)"), ("max(left.t, right.t)",),
        ("left.t - right.t", "left.s")]


def box_params(predicate: str, outs: tuple[str, ...], sides: list[tuple[str, int]], timeout: bool) -> dict[str, str]:
    params = {"predicate": predicate}
    for (by, size), side in zip(sides, ("left", "right")):
        params[f"{side}-buffer-size"] = str(size)
        if by == "VALUES":
            params[f"{side}-order-by"] = "VALUES"
            params[f"{side}-order-on-field"] = "t"
    for i, e in enumerate(outs):
        params[f"out-field.{i}"] = e
        params[f"out-field-name.{i}"] = f"o{i}"
    if timeout:
        params["timeout"] = "5"
    return params


#: Size choices (``JoinPaths.cut_at``): every batch on columns, cut-overs the drawn batches (0-12 tuples against
#: buffers of 0-6) straddle, so batches go one way then the other and the buffers are handed over between the
#: engines mid-stream, and the box's own (every drawn batch on rows).
CUTS = [-1, 4, 12, 30, None]


def build(params: dict[str, str], columnar: bool = True, rows_below: int | None = -1,
          sides: tuple[Schema, Schema] | None = None) -> JoinOperator:
    """The box; ``rows_below``: its size choice's cut-over (-1: every batch on columns; None: as built)."""
    left, right = sides or (L, R)
    box = Box("j", "join", (InPort("l"), InPort("r")), ("out",), tuple(params.items()))
    op = JoinOperator(box, [left, right], TYPES.infer(box, [left, right]), columnar=columnar)
    if rows_below is not None:
        op.paths.cut_at(rows_below)
    return op


@st.composite
def batch(draw, schema: Schema, start: int) -> Columns:
    n = draw(st.integers(0, 12))
    keys = st.one_of(st.integers(0, 3), st.none()) if draw(st.booleans()) else st.integers(0, 3)
    doubles = st.one_of(st.sampled_from([0.0, -0.0, 0.5, 2.0, float("nan"), 1e300]), st.floats(-10, 10), st.none())
    times, t = [], start
    for _ in range(n):
        t += draw(st.integers(0, 4))
        times.append(draw(st.sampled_from([t] * 8 + [t - 7, None])))
    columns = [pa.array(draw(st.lists(keys, min_size=n, max_size=n))), pa.array(times),
               pa.array(draw(st.lists(doubles, min_size=n, max_size=n))),
               pa.array(draw(st.lists(st.sampled_from(["a", "b", "", None]), min_size=n, max_size=n)))]
    target = arrow_schema(schema)
    return Columns(pa.RecordBatch.from_arrays([c.cast(f.type) for c, f in zip(columns, target)], schema=target))


@st.composite
def streams(draw, sides: tuple[Schema, Schema] = (L, R)) -> list[tuple[int, Columns, float, bool, bool]]:
    """(port, batch, seconds since the last batch, given as rows?, move the box after it?) events."""
    events, clock = [], [0, 0]
    for _ in range(draw(st.integers(1, 10))):
        port = draw(st.integers(0, 1))
        columns = draw(batch(sides[port], clock[port]))
        times = [t for t in columns.batch.column(1).to_pylist() if t is not None]
        clock[port] = max([clock[port], *times])
        events.append((port, columns, draw(st.sampled_from([0.0, 1.0, 3.0, 6.0])), draw(st.booleans()),
                       draw(st.integers(0, 5)) == 0))
    return events


def moved(op: JoinOperator, params: dict[str, str], rows_below: int | None,
          sides: tuple[Schema, Schema] | None = None) -> JoinOperator:
    fresh = build(params, rows_below=rows_below, sides=sides)
    fresh.restore(msgspec.msgpack.decode(msgspec.msgpack.encode(op.state())))
    return fresh


@pytest.mark.slow  # a minute or more: hundreds of streams, each through both paths
@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(predicate=st.sampled_from(PREDICATES + ON_ROWS), outs=st.sampled_from(OUTS),
       sides=st.lists(st.tuples(st.sampled_from(["TUPLES", "VALUES"]), st.integers(0, 6)), min_size=2, max_size=2),
       timeout=st.booleans(), events=streams(), rows_below=st.sampled_from(CUTS))
def test_join_on_columns_emits_what_the_row_path_emits(predicate, outs, sides, timeout, events, rows_below):
    """``rows_below``: the size choice's cut-over (:data:`CUTS`): batches on either side of it, and the buffers
    handed between the engines, give the row path's tuples and buffers."""
    params = box_params(predicate, outs, sides, timeout)
    op, reference = build(params, rows_below=rows_below), build(params, columnar=False)
    assert op.columnar == (predicate in PREDICATES) and not reference.columnar
    agree(op, reference, events, params, rows_below=rows_below)


def agree(op: JoinOperator, reference: JoinOperator, events: list, params: dict[str, str],
          sides: tuple[Schema, Schema] | None = None, rows_below: int | None = -1) -> None:
    """``op`` emits and keeps what ``reference`` (the row path) does, batch after batch, moved where told."""
    now = 0.0
    for port, columns, passed, as_row, move in events:
        now += passed
        got = op.process(port, columns.rows() if as_row else columns, now)
        want = reference.process(port, columns.rows(), now)
        assert normal(got) == normal(want)
        for _, out in got:
            if isinstance(out, Columns):
                assert out.batch.schema.equals(arrow_schema(op.outputs[0]))
        if move:
            op = moved(op, params, rows_below, sides)
    assert normal([(0, [tuple(r) for r in b]) for b in op.state()["buffers"]]) == normal(
        [(0, [tuple(r) for r in b]) for b in reference.state()["buffers"]])
    assert op.state_entries() == reference.state_entries()


# -- nullable fields, math functions, text casts, overflow-prone ints (issue 30, item 7's per-box list) -------------
# A flagged row of the pair batch (a pair where Python might compute otherwise) gets the box's row code over
# (left, right); the batch stays columns.

BIG = 4611686018427387904  # 2**62
NL = Schema("NL", (Field("k", FieldType.INT), Field("t", FieldType.INT), Field("v", FieldType.DOUBLE, nullable=True),
                   Field("s", FieldType.STRING, 4, nullable=True)))
NR = Schema("NR", (Field("k", FieldType.LONG, nullable=True), Field("t", FieldType.INT),
                   Field("w", FieldType.DOUBLE, nullable=True), Field("s", FieldType.STRING, 4)))
NULL_PREDICATES = ["left.k = right.k", "coalesce(right.k, 0) = left.k and sqrt(left.v) < right.w",
                   "ln(right.w) > left.v or left.s is null", "cast(left.s as int) = right.k",
                   "left.v % right.w > 0.5", f"left.k * {BIG} > right.k", "pow(left.v, right.w) > 1.0",
                   "cast(right.s as double) < left.v", "left.s = right.s and not (left.v > right.w)"]
NULL_OUTS = [(), ("coalesce(left.v, right.w)", "sqrt(right.w)"), ("cast(left.s as int) + right.k", "left.s"),
             (f"left.k * {BIG}",)]


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(predicate=st.sampled_from(NULL_PREDICATES), outs=st.sampled_from(NULL_OUTS),
       sides=st.lists(st.tuples(st.sampled_from(["TUPLES", "VALUES"]), st.integers(0, 6)), min_size=2, max_size=2),
       timeout=st.booleans(), events=streams((NL, NR)))
def test_nullable_fields_math_and_text_casts_in_a_join_on_columns_are_the_row_path(predicate, outs, sides, timeout,
                                                                                      events):
    params = box_params(predicate, outs, sides, timeout)
    op, reference = build(params, sides=(NL, NR)), build(params, columnar=False, sides=(NL, NR))
    assert op.columnar
    agree(op, reference, events, params, (NL, NR))


def test_a_batch_with_nulls_and_failing_math_is_joined_on_columns(monkeypatch):
    """NULLs, sqrt(-1), text that is no int: those pairs take the row code; the batch is joined on columns (the
    row path's probe is never called)."""
    params = box_params("sqrt(left.v) < right.w or cast(left.s as int) = right.k", ("left.k", "right.w"),
                        [("TUPLES", 9), ("TUPLES", 9)], False)
    op, reference = build(params, sides=(NL, NR)), build(params, columnar=False, sides=(NL, NR))
    rights = Columns(pa.RecordBatch.from_pylist([{"k": 1, "t": 1, "w": 0.5, "s": "a"},
                                                 {"k": None, "t": 2, "w": None, "s": "b"},
                                                 {"k": 3, "t": 3, "w": 9.0, "s": "c"}], schema=arrow_schema(NR)))
    lefts = Columns(pa.RecordBatch.from_pylist([{"k": 1, "t": 1, "v": 4.0, "s": " 3"},
                                                {"k": 3, "t": 2, "v": -1.0, "s": "x"},
                                                {"k": 0, "t": 3, "v": None, "s": None}], schema=arrow_schema(NL)))
    want = reference.process(1, rights.rows(), 0.0) + reference.process(0, lefts.rows(), 0.0)
    monkeypatch.setattr(join_columns.ColumnJoin, "_probed", lambda *a: pytest.fail("probed as rows"))
    got = op.process(1, rights, 0.0) + op.process(0, lefts, 0.0)
    assert normal(got) == normal(want) and all(isinstance(out, Columns) for _, out in got)
    assert normal(got) == normal([(0, [(1, 9.0)])])  # only (k 1, " 3") with (k 3, w 9.0); sqrt(-1): no pair


def test_the_trade_join_runs_on_columns_and_narrows_pairs_by_its_equality():
    """The example's box takes the columnar path; a quote joins only the trades of its symbol, oldest first."""
    trade = Schema("Trade", (Field("time", FieldType.INT), Field("symbol", FieldType.STRING, 4),
                             Field("price", FieldType.DOUBLE)))
    quote = Schema("Quote", (Field("time", FieldType.INT), Field("symbol", FieldType.STRING, 4),
                             Field("bid", FieldType.DOUBLE)))
    params = {"predicate": "left.symbol = right.symbol", "left-buffer-size": "100", "right-buffer-size": "100",
              "out-field.0": "max(left.time, right.time)", "out-field-name.0": "time",
              "out-field.1": "left.symbol", "out-field-name.1": "symbol",
              "out-field.2": "left.price - right.bid", "out-field-name.2": "spread"}
    box = Box("match", "join", (InPort("t"), InPort("q")), ("out",), tuple(params.items()))
    op = JoinOperator(box, [trade, quote], TYPES.infer(box, [trade, quote]))
    op.paths.cut_at(-1)  # 2 quotes against 3 trades would be joined on rows (test_small_batches_...)
    assert op.columnar
    trades = pa.RecordBatch.from_pylist([{"time": 1, "symbol": "IBM", "price": 100.5},
                                         {"time": 2, "symbol": "HP", "price": 20.0},
                                         {"time": 3, "symbol": "IBM", "price": 101.0}], schema=arrow_schema(trade))
    assert op.process(0, Columns(trades), 0.0) == []
    quotes = pa.RecordBatch.from_pylist([{"time": 4, "symbol": "IBM", "bid": 100.0},
                                         {"time": 5, "symbol": "SUN", "bid": 5.0}], schema=arrow_schema(quote))
    [(port, out)] = op.process(1, Columns(quotes), 0.0)
    assert port == 0 and isinstance(out, Columns) and out.rows() == [(4, "IBM", 0.5), (4, "IBM", 1.0)]


def test_rows_the_columns_cannot_hold_move_the_box_to_its_row_path_with_its_buffers():
    """An int in a double field (as rows may carry it) is kept as the row path keeps it: the box goes on rows."""
    params = box_params("left.k = right.k", (), [("TUPLES", 5), ("TUPLES", 5)], False)
    op = build(params)
    op.process(0, [(1, 1, 2.0, "a")], 0.0)
    assert op.columnar
    assert op.process(1, [(1, 2, 3, "b")], 0.0) == [(0, [(1, 1, 2.0, "a", 1, 2, 3, "b")])]
    assert not op.columnar
    assert op.process(0, [(1, 3, 4.0, "c")], 0.0) == [(0, [(1, 3, 4.0, "c", 1, 2, 3, "b")])]


def test_batches_join_on_rows_or_columns_by_size_and_hand_the_buffers_and_times_over():
    """The size choice (``JoinPaths.cut_at``): a batch of at most that many (tuple, buffered tuple) pairs is
    joined by the row engine (rows out), a larger one by the columns (Columns out), the buffers and their arrival
    times handed over each time the engine changes; tuples, buffers and the timeout's expiry the row path's."""
    params = box_params("left.k = right.k", ("left.t", "right.t"), [("VALUES", 6), ("TUPLES", 4)], True)
    op, reference = build(params, rows_below=6), build(params, columnar=False)

    def side(port: int, ts: list[int]) -> Columns:
        names = ["k", "t", "v" if port == 0 else "w", "s"]
        return Columns(pa.RecordBatch.from_pylist([dict(zip(names, (1, t, 1.0, "a"))) for t in ts],
                                                  schema=arrow_schema(L if port == 0 else R)))

    # (port, order values, seconds passed, the engine that takes the batch); pairs: the batch times the other buffer
    feed = [(0, [1, 2], 0.0, RowJoin), (1, [1, 2, 3, 4], 1.0, ColumnJoin), (0, [3], 1.0, RowJoin),
            (1, [5], 1.0, RowJoin), (0, [4, 5, 6], 4.0, ColumnJoin), (1, [6, 7], 0.0, RowJoin),
            (0, [9, 10], 6.0, RowJoin), (1, [8, 9, 10, 11], 0.5, ColumnJoin)]
    now, emitted = 0.0, set()
    for port, ts, passed, engine in feed:
        now += passed
        columns = side(port, ts)
        got, want = op.process(port, columns, now), reference.process(port, columns.rows(), now)
        assert normal(got) == normal(want)
        assert isinstance(op.paths.engine, engine)
        emitted |= {(engine, type(out)) for _, out in got}
        assert op.state()["buffers"] == reference.state()["buffers"]
        assert op.state()["times"] == reference.state()["times"]
    assert emitted == {(RowJoin, list), (ColumnJoin, Columns)}
    assert op.columnar


def test_the_size_choice_weighs_pairs_against_the_columns_costs_and_hands_over_when_the_regret_pays_for_it():
    """As built (``JoinPaths.on_rows``): rows cost the batch times the other buffer (and a little a tuple), the
    columns a fixed cost plus one per tuple of the other buffer; the engine holding the buffers keeps them until
    what it cost more, summed since it last cost less, passes the hand-over's cost: small batches against a large
    buffer held as columns go to rows only after a few of them, against a small one at once; and back again when
    batches grow."""
    params = box_params("left.k = right.k", (), [("TUPLES", 1000), ("TUPLES", 1000)], False)
    paths = build(params, rows_below=None).paths
    costs = paths.costs

    def rows(count: int, start: int = 0) -> list[list]:
        return [[1, t, 1.0, "a"] for t in range(start, start + count)]

    def batches_to_switch(tuples: int, other: int, entries: int, held_rows: bool) -> int:
        rows, columns = tuples * (other + costs.per_tuple), costs.fixed + costs.per_buffered * other
        step = rows - columns if held_rows else columns - rows + 1
        return costs.handover(entries) // step + 1

    paths.restore({"buffers": [rows(500), rows(500)], "times": None})
    assert isinstance(paths.engine, ColumnJoin)
    k = batches_to_switch(1, 500, 1000, False)
    assert k > 1 and [paths.on_rows(1, 0) for _ in range(k)] == [False] * (k - 1) + [True]
    paths.restore({"buffers": [rows(10), rows(10)], "times": None})
    assert batches_to_switch(5, 10, 20, False) == 2  # against a small buffer: at the second batch
    paths.process(0, [tuple(r) for r in rows(5, 10)], 0.0)
    assert isinstance(paths.engine, ColumnJoin)
    paths.process(0, [tuple(r) for r in rows(5, 15)], 0.0)
    assert isinstance(paths.engine, RowJoin)
    tuples = (costs.fixed + costs.per_buffered * 10) // (10 + costs.per_tuple) + 1  # a little over the columns' cost
    k = batches_to_switch(tuples, 10, 30, True)
    assert k > 1 and [paths.on_rows(tuples, 0) for _ in range(k)] == [True] * (k - 1) + [False]


JOIN_APP = """<borealis>
  <schema name="Trade"><field name="time" type="int"/><field name="symbol" type="string" size="4"/>
    <field name="price" type="double"/></schema>
  <schema name="Quote"><field name="time" type="int"/><field name="symbol" type="string" size="4"/>
    <field name="bid" type="double"/></schema>
  <input stream="Trades" schema="Trade"/><input stream="Quotes" schema="Quote"/>
  <box name="match" type="join"><in stream="Trades"/><in stream="Quotes"/><out stream="Spread"/>
    <parameter name="predicate" value="left.symbol = right.symbol"/>
    <parameter name="left-buffer-size" value="3"/><parameter name="right-buffer-size" value="3"/>
    <parameter name="out-field.0" value="left.time"/><parameter name="out-field-name.0" value="t"/>
    <parameter name="out-field.1" value="right.time"/><parameter name="out-field-name.1" value="q"/>
    <parameter name="out-field.2" value="left.price - right.bid"/><parameter name="out-field-name.2" value="d"/>
  </box>
</borealis>"""


async def test_a_node_joins_arrow_batches_and_sends_the_pairs_downstream():
    """In a node's dataflow: Arrow batches on both in streams are joined on columns and leave as the row path's
    pairs, in order."""
    catalog = plan_submission(Catalog(), [read_document(JOIN_APP, "app.xml")]).catalog
    catalog.subscriptions["Spread|c:9"] = Subscription("Spread", "c:9")
    flow = Dataflow("n:1", None, "n:1#a")
    flow.reconfigure(catalog)
    assert flow.state.operators["match"].columnar
    trades, quotes = catalog.schemas["Trade"], catalog.schemas["Quote"]
    feed = [("Trades", trades, [(1, "A", 10.0), (2, "B", 20.0), (3, "A", 11.0)]),
            ("Quotes", quotes, [(4, "A", 9.5), (5, "C", 1.0)]),
            ("Trades", trades, [(6, "A", 12.0), (7, "A", 13.0), (8, "A", 14.0), (9, "A", 15.0)]),
            ("Quotes", quotes, [(10, "A", 10.0), (11, "B", 19.0)])]
    seq = {"Trades": 0, "Quotes": 0}
    for stream, schema, rows in feed:
        columns = Columns(pa.RecordBatch.from_pylist(
            [dict(zip([f.name for f in schema.fields], r)) for r in rows], schema=arrow_schema(schema)))
        await flow.task.take(Arrival(stream, columns, "pub", seq[stream], "", payload(columns), None, 0))
        seq[stream] += 1
    out = []
    for endpoint, data, *_ in flow.out.unacknowledged():
        batch = decode(bytes(data))
        assert isinstance(batch, Batch) and endpoint == "c:9" and batch.stream == "Spread"
        rows = read_rows(bytes(batch.rows)) if batch.fmt == ARROW else msgspec.msgpack.decode(bytes(batch.rows))
        out += [tuple(r) for r in rows]
    # quote 4 meets trades 1 and 3; trades 6-9 meet quote 4; quote 10 meets the newest 3 trades (7, 8, 9)
    assert out == [(1, 4, 0.5), (3, 4, 1.5), (6, 4, 2.5), (7, 4, 3.5), (8, 4, 4.5), (9, 4, 5.5),
                   (7, 10, 3.0), (8, 10, 4.0), (9, 10, 5.0)]


def _trades(port: int, count: int, start: int) -> Columns:
    names = ["k", "t", "v" if port == 0 else "w", "s"]
    return Columns(pa.RecordBatch.from_pylist([dict(zip(names, (t % 7, t, 1.0, "a"))) for t in range(start, start + count)],
                                              schema=arrow_schema(L if port == 0 else R)))


def test_batch_sizes_swinging_around_the_cut_over_do_not_move_the_buffers_at_every_swing():
    """As built, window 20: batches of 50 and 200 tuples in turn (each size twice, both sides) cost about what a
    hand-over costs either way; the buffers settle with one engine instead of moving at every swing (80 moves in
    160 batches before), and the engine that handed them over keeps no copy of them."""
    params = box_params("left.k = right.k", ("left.t", "right.t"), [("TUPLES", 20), ("TUPLES", 20)], False)
    op, reference = build(params, rows_below=None), build(params, columnar=False)
    holders, start = [], 0
    for i in range(160):
        size = 50 if (i // 2) % 2 == 0 else 200
        batch = _trades(i % 2, size, start)
        start += size
        assert normal(op.process(i % 2, batch, 0.0)) == normal(reference.process(i % 2, batch.rows(), 0.0))
        holders.append(type(op.paths.engine))
        idle = op.paths.rows if op.paths.engine is not op.paths.rows else op.paths.columns
        assert idle.entries() == 0  # one holder of the buffers
    moves = sum(a is not b for a, b in zip(holders, holders[1:]))
    assert moves <= 2, moves
    assert op.state()["buffers"] == reference.state()["buffers"]


def test_a_restore_forgets_the_regret_of_the_holder_before():
    params = box_params("left.k = right.k", (), [("TUPLES", 1000), ("TUPLES", 1000)], False)
    paths = build(params, rows_below=None).paths
    paths.restore({"buffers": [[[1, t, 1.0, "a"] for t in range(500)]] * 2, "times": None})
    costs = paths.costs
    step = costs.fixed + costs.per_buffered * 500 - 1 * (500 + costs.per_tuple) + 1
    k = costs.handover(1000) // step + 1  # batches of one tuple until the columns hand over
    assert k > 1 and [paths.on_rows(1, 0) for _ in range(k - 1)] == [False] * (k - 1)  # regret counted
    paths.restore({"buffers": [[[1, t, 1.0, "a"] for t in range(500)]] * 2, "times": None})
    assert [paths.on_rows(1, 0) for _ in range(k - 1)] == [False] * (k - 1)  # from nothing again
    assert paths.on_rows(1, 0)

