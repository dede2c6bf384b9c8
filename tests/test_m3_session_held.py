"""A ``SESSION`` box fed Arrow batches (its rows held as runs of the batches, closed sessions folded in as columns:
node/operators/m3session_held.py) against the same box fed the same rows as tuples (held and folded row by row),
on the python and native backends: the same rows emitted after every batch, poll, move and end, the same rows
held; and the batches a long session pins are let go (repacked) while its rows stay."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.m3.boxtype import infer_m3
from boreas.node.operators import m3session_held
from boreas.node.operators.m3windows import WindowedM3Operator
from boreas.node.operators.registry import DEFAULT_REGISTRY
from boreas.wire.columns import Columns, from_rows

BID = Schema("BidTuple", (Field("bidder", FieldType.INT), Field("url", FieldType.STRING),
                          Field("price", FieldType.INT), Field("ts", FieldType.LONG)))
SQL = ("CREATE STREAM Bid(bidder INT, url STRING, price INT, ts INT, WATERMARK FOR ts AS ts - 5);\n"
       "SELECT bidder, url, window_start, window_end, COUNT(*) AS n, SUM(price) AS total\n"
       "FROM TABLE(SESSION(TABLE Bid PARTITION BY bidder, DESCRIPTOR(ts), 10))\n"
       "GROUP BY bidder, url, window_start, window_end")


def build(backend: str) -> WindowedM3Operator:
    box = Box("s", "m3", (InPort("Bid"),), ("Out",), (("sql", SQL), ("backend", backend)))
    op = DEFAULT_REGISTRY.build(box, [BID], infer_m3(box, [BID]))
    assert isinstance(op, WindowedM3Operator)
    return op


def emitted(out) -> list[tuple]:
    return sorted(row for _, batch in out for row in (batch.rows() if isinstance(batch, Columns) else batch))


def moved(op: WindowedM3Operator, backend: str, now: float) -> WindowedM3Operator:
    """The box's state, open sessions and all, through msgpack into a new operator (a move)."""
    new = build(backend)
    new.restore(msgspec.msgpack.decode(msgspec.msgpack.encode(op.state())), now)
    return new


row = st.tuples(st.integers(1, 3), st.sampled_from(["a", "b/c", ""]), st.integers(0, 9), st.integers(0, 120))
step = st.one_of(st.tuples(st.just("batch"), st.lists(row, min_size=1, max_size=8)),
                 st.tuples(st.just("move"), st.just([])))


@pytest.mark.parametrize("backend", ["python", "native"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(steps=st.lists(step, max_size=20), repack=st.booleans())
def test_batches_held_as_runs_emit_what_rows_held_one_by_one_emit(backend, steps, repack, monkeypatch):
    monkeypatch.setattr(m3session_held, "FLOOR", 0 if repack else m3session_held.FLOOR)  # 0: repacked often
    by_columns, by_rows, now = build(backend), build(backend), 0.0
    for what, rows in steps:
        now += 0.5
        if what == "move":
            by_columns, by_rows = moved(by_columns, backend, now), moved(by_rows, backend, now)
            continue
        got = by_columns.process_from(0, from_rows(rows, BID), now, ("Bid", "p", 1))
        want = by_rows.process_from(0, list(rows), now, ("Bid", "p", 1))
        assert emitted(got) == emitted(want)
        assert by_columns.state_entries() == by_rows.state_entries()
        assert by_columns.counters()["late_tuples"] == by_rows.counters()["late_tuples"]
    assert emitted(by_columns.end_of_input(now)) == emitted(by_rows.end_of_input(now))
    assert by_columns.state_entries() == by_rows.state_entries() == 0


@pytest.mark.parametrize("backend", ["python", "native"])
def test_a_long_session_does_not_pin_every_batch_it_has_a_row_in(backend, monkeypatch):
    """Bidder 1 bids every 5 ms (one session that never closes); 200 others bid once per batch and close: the
    batches bidder 1's rows are in are let go for one batch of its rows (the pinned rows stay within twice the
    held ones plus a batch), and every session closes as fed as rows."""
    monkeypatch.setattr(m3session_held, "FLOOR", 0)
    by_columns, by_rows, got, want = build(backend), build(backend), [], []
    for b in range(30):
        rows = [(1, "x", 1, 100 * b + 5 * i) for i in range(20)] + [(2 + i, "y", 2, 100 * b) for i in range(200)]
        got += emitted(by_columns.process_from(0, from_rows(rows, BID), float(b), ("Bid", "p", 1)))
        want += emitted(by_rows.process_from(0, rows, float(b), ("Bid", "p", 1)))
        pins = by_columns.sessions.ports[0].pins
        assert pins.held == by_columns.sessions.held() == by_rows.sessions.held()
        assert pins.pinned_rows <= 2 * pins.held + len(rows)
    assert sorted(got) == sorted(want) and len(got) == 30 * 200  # (the others close in their own batch)
    assert emitted(by_columns.end_of_input(31.0)) == emitted(by_rows.end_of_input(31.0)) == [(1, "x", 0, 3005, 600, 600)]


@pytest.mark.parametrize("backend", ["python", "native"])
@pytest.mark.parametrize("variant", ["not nullable", "large_string"])
def test_batches_of_different_arrow_schemas_on_one_port_are_repacked_apart(backend, variant, monkeypatch):
    """A port's second batch marks its fields not nullable (or its ``url`` a large_string): the repack gathers
    each schema's runs apart (it raised ValueError after the closed sessions had left and their pins were
    cleared: those sessions were never emitted and the next release raised KeyError)."""
    import pyarrow as pa

    monkeypatch.setattr(m3session_held, "FLOOR", 0)
    by_columns, by_rows = build(backend), build(backend)
    rows1 = [(1, "x", 1, 50)] + [(2 + i, "y", 1, 0) for i in range(10)]
    rows2 = [(1, "x", 2, 58), (300, "w", 1, 70)] + [(200 + i, "z", 1, 46) for i in range(10)]
    first, second = from_rows(rows1, BID).batch, from_rows(rows2, BID).batch
    schema = pa.schema([f.with_nullable(False) if variant == "not nullable" else
                        f.with_type(pa.large_string()) if f.name == "url" else f for f in second.schema])
    second = pa.RecordBatch.from_arrays([c.cast(f.type) for c, f in zip(second.columns, schema)], schema=schema)
    got = emitted(by_columns.process_from(0, Columns(first), 1.0, ("Bid", "p", 1)))
    got += emitted(by_columns.process_from(0, Columns(second), 2.0, ("Bid", "p", 1)))
    got += emitted(by_columns.end_of_input(3.0))
    want = emitted(by_rows.process_from(0, rows1, 1.0, ("Bid", "p", 1)))
    want += emitted(by_rows.process_from(0, rows2, 2.0, ("Bid", "p", 1))) + emitted(by_rows.end_of_input(3.0))
    assert sorted(got) == sorted(want) and len(want) == 22
