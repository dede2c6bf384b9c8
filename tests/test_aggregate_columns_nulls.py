"""The aggregate on columns over ``nullable`` fields (docs/xml.md, "Nullable fields") gives what its row path gives.

SQL's rule, as the row path keeps it (node/operators/accumulators.py): every function but ``count(*)`` skips
NULLs, and sum, avg, min, max, firstval and lastval of a window without a value are NULL, not a zero (a sum
keeps its count of values in the slot after it).  The columnar paths (.aggregate_columns by VALUES,
.aggregate_tuples by TUPLES) take such fields since branch colAggF; before, a nullable argument kept the box
on rows.  Hypothesis draws streams with NULLs in a double and a long field (often whole windows of them), cuts
them into batches at random places (boundaries inside windows and groups) and compares outputs, counters and
``state()`` after every batch, and after a move, with the same box fed rows.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.node.operators import aggregate_runs
from boreas.node.operators.aggregate import AggregateOperator
from boreas.wire.columns import Columns, arrow_schema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_aggregate_columns import SCALE, TYPES, close

NROW = Schema("N", (Field("g", FieldType.INT), Field("s", FieldType.STRING, 4), Field("time", FieldType.INT),
                    Field("x", FieldType.DOUBLE, nullable=True), Field("n", FieldType.LONG, nullable=True)))
FUNCTIONS = [["sum(x)", "avg(x)", "count(x)", "count()"], ["sum(n)", "min(n)", "max(x)", "firstval(x)", "lastval(n)"],
             ["min(x)", "avg(n)", "count_distinct(n)", "sum(x)", "max(n)"], ["firstval(n)", "lastval(x)", "sum(n)"]]


def aggregate(params: dict[str, str]) -> AggregateOperator:
    b = Box("b", "aggregate", (InPort("in"),), ("out",), tuple(params.items()))
    return AggregateOperator(b, [NROW], TYPES.infer(b, [NROW]))


def columns(rows: list[tuple]) -> Columns:
    schema = arrow_schema(NROW)
    arrays = [pa.array([r[i] for r in rows], f.type) for i, f in enumerate(schema)]
    return Columns(pa.RecordBatch.from_arrays(arrays, schema=schema))


def moved(op: AggregateOperator, params: dict[str, str], now: float) -> AggregateOperator:
    import msgspec
    new = aggregate(params)
    new.restore(msgspec.msgpack.decode(msgspec.msgpack.encode(op.state())), now=now)
    return new


@st.composite
def streams(draw) -> list[tuple]:
    """Rows mostly in order per group; x and n NULL often, in stretches (whole windows without a value)."""
    out, t, nulls = [], 0, False
    for _ in range(draw(st.integers(0, 120))):
        t += draw(st.sampled_from([0, 0, 1, 1, 2, 3, 25]))
        if draw(st.integers(0, 5)) == 0:
            nulls = not nulls
        x = None if nulls or draw(st.integers(0, 4)) == 0 else draw(st.floats(-1e3, 1e3, allow_nan=False))
        n = None if nulls or draw(st.integers(0, 4)) == 0 else draw(st.integers(-2 ** 40, 2 ** 40))
        time = t - 7 if draw(st.integers(0, 15)) == 0 else t
        out.append((draw(st.integers(0, 2)), draw(st.sampled_from(["a", "bb"])), time, x, n))
    return out


params_strategy = st.fixed_dictionaries({
    "by": st.sampled_from(["VALUES", "VALUES", "TUPLES"]),
    "window-size": st.sampled_from(["2", "5", "10"]),
    "advance": st.sampled_from([None, None, "2", "4"]),
    "slack": st.sampled_from([None, "1"]),
    "group-by": st.sampled_from(["", "g", "g, s"]),
    "drop-empty-outputs": st.sampled_from([None, "1"]),
    "order-by": st.sampled_from(["FIELD", "TUPLENUM"]),
    "functions": st.sampled_from(FUNCTIONS),
})


def as_params(drawn: dict) -> dict[str, str]:
    p = {"window-size-by": drawn["by"], "order-on-field": "time"}
    for i, f in enumerate(drawn["functions"]):
        p[f"aggregate-function.{i}"] = f
    p.update({k: v for k, v in drawn.items() if k not in ("functions", "by") and v})
    if drawn["by"] == "TUPLES":
        p.pop("slack", None)
    return p


def test_nullable_arguments_are_taken_on_columns():
    """Not only equal: a box over nullable fields has a columnar path now (it read rows before)."""
    for by in ("VALUES", "TUPLES"):
        params = as_params({"by": by, "window-size": "5", "group-by": "g", "order-by": "FIELD",
                            "functions": FUNCTIONS[0] + FUNCTIONS[1]})
        assert aggregate(params)._runs is not None


@settings(max_examples=max(10, int(50 * SCALE)), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(drawn=params_strategy, data=streams(), cuts=st.lists(st.integers(0, 120), max_size=6),
       move_at=st.integers(-1, 6), any_runs=st.booleans())
def test_nullable_arguments_on_columns_give_what_rows_give(drawn, data, cuts, move_at, any_runs, monkeypatch):
    if any_runs:  # every batch on columns however few rows its runs hold
        monkeypatch.setattr(aggregate_runs, "MAX_RUNS_PER_ROW", 2.0)
    params = as_params(drawn)
    by_columns, by_rows = aggregate(params), aggregate(params)
    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    now = 0.0
    for k, (a, b) in enumerate(zip(bounds, bounds[1:])):
        now += 0.5
        if k == move_at:
            by_columns, by_rows = moved(by_columns, params, now), moved(by_rows, params, now)
        got = by_columns.process(0, columns(data[a:b]), now)
        want = by_rows.process(0, data[a:b], now)
        assert close(got, want), (a, b)
        assert by_columns.counters() == by_rows.counters()
        assert close(by_columns.state(), by_rows.state())
    assert close(by_columns.end_of_input(now + 1), by_rows.end_of_input(now + 1))


@pytest.mark.parametrize("by", ["VALUES", "TUPLES"])
def test_a_window_without_a_value_is_null(by):
    """SQL's NULL for sum/avg/min/max/firstval/lastval of a window whose values are all NULL; counts 0."""
    params = as_params({"by": by, "window-size": "3", "order-by": "TUPLENUM",
                        "functions": ["sum(x)", "avg(n)", "min(x)", "max(n)", "count(x)", "count()"]})
    data = [(0, "a", t, None, None) for t in range(3)] + [(0, "a", 3 + t, 1.5, 2) for t in range(3)] + [
        (0, "a", 9, None, None)]
    op = aggregate(params)
    got = op.process(0, columns(data), 0.0) + op.end_of_input(1.0)
    rows = [r for _, out in got for r in out]
    assert rows[:2] == [(None, None, None, None, 0, 3), (4.5, 2.0, 1.5, 2, 3, 3)]
