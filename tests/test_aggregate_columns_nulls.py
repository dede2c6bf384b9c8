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

import pytest
from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.node.operators import aggregate_emit, aggregate_runs
from boreas.node.operators.aggregate import AggregateOperator
from boreas.wire.columns import Columns
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import test_aggregate_columns as shared
from test_aggregate_columns import SCALE, TYPES, close

NROW = Schema("N", (Field("g", FieldType.INT), Field("s", FieldType.STRING, 4), Field("time", FieldType.INT),
                    Field("x", FieldType.DOUBLE, nullable=True), Field("n", FieldType.LONG, nullable=True)))
FUNCTIONS = [["sum(x)", "avg(x)", "count(x)", "count()"], ["sum(n)", "min(n)", "max(x)", "firstval(x)", "lastval(n)"],
             ["min(x)", "avg(n)", "count_distinct(n)", "sum(x)", "max(n)"], ["firstval(n)", "lastval(x)", "sum(n)"]]


def aggregate(params: dict[str, str]) -> AggregateOperator:
    return shared.aggregate(params, NROW)


def columns(rows: list[tuple], weights: list[int] | None = None) -> Columns:
    return shared.columns(rows, weights, NROW)


def moved(op: AggregateOperator, params: dict[str, str], now: float) -> AggregateOperator:
    return shared.moved(op, params, now, NROW)


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
def test_a_window_without_a_value_is_null(by, monkeypatch):
    """SQL's NULL for sum/avg/min/max/firstval/lastval of a window whose values are all NULL; counts 0.  On
    columns, the row loop never running (however few rows a run holds, and windows emitted from arrays
    however few: a review found this batch read rows, so the arrays' no-value results went untested)."""
    monkeypatch.setattr(aggregate_runs, "MAX_RUNS_PER_ROW", 2.0)
    monkeypatch.setattr(aggregate_emit, "MIN_INNER", 0)
    params = as_params({"by": by, "window-size": "3", "order-by": "TUPLENUM",
                        "functions": ["sum(x)", "avg(n)", "min(x)", "max(n)", "count(x)", "count()"]})
    data = [(0, "a", t, None, None) for t in range(3)] + [(0, "a", 3 + t, 1.5, 2) for t in range(3)] + [
        (0, "a", 9, None, None)]
    op = aggregate(params)
    loops: list = []
    for name in ("by_values", "by_tuples"):
        general = getattr(op._windows, name)
        setattr(op._windows, name, lambda *args, general=general: (loops.append(1), general(*args))[1])
    got = op.process(0, columns(data), 0.0) + op.end_of_input(1.0)
    rows = [r for _, out in got for r in out]
    assert rows[:2] == [(None, None, None, None, 0, 3), (4.5, 2.0, 1.5, 2, 3, 3)]
    assert loops == []


@settings(max_examples=max(10, int(40 * SCALE)), deadline=None)
@given(data=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 30),
                               st.one_of(st.floats(-1e3, 1e3, allow_nan=False), st.none(), st.none()),
                               st.one_of(st.integers(-2 ** 40, 2 ** 40), st.none(), st.none()),
                               st.sampled_from([1, 1, -1, 2, 0])), max_size=50),
       cuts=st.lists(st.integers(0, 50), max_size=4), advance=st.sampled_from([None, "5"]),
       functions=st.sampled_from([["sum(x)", "count(x)", "avg(n)", "count()"], ["sum(n)", "min(x)", "max(n)"],
                                  ["avg(x)", "sum(n)", "count_distinct(x)"]]))
def test_nullable_changelog_on_columns_gives_what_rows_give(data, cuts, advance, functions):
    """A changelog over nullable fields (signs: weights 2, 1, 0, -1), per (group, window) on columns
    (.aggregate_retract; before colAggF such a batch read rows) against the retracting row path (``fast=False``):
    the same -old/+new rows in the same order (SQL's NULL where a window's values all left), the same state."""
    params = {"window-size-by": "VALUES", "window-size": "10", "order-on-field": "time", "group-by": "g",
              "order-by": "FIELD", "independent-window-alignment": "1", **({"advance": advance} if advance else {}),
              **{f"aggregate-function.{i}": f for i, f in enumerate(functions)}}
    box = Box("b", "aggregate", (InPort("in"),), ("out",), tuple(params.items()))
    outs = TYPES.infer(box, [NROW])
    on_columns, on_rows = AggregateOperator(box, [NROW], outs), AggregateOperator(box, [NROW], outs, fast=False)
    assert on_columns._retract_columns is not None
    rows = [(g, "a", t, x, n) for g, t, x, n, _ in data]
    weights = [w for *_, w in data]
    shared.changelogs_agree(on_columns, on_rows, [columns(rows[a:b], weights[a:b]) for a, b in shared.cut(rows, cuts)],
                            counters=False)


# -- expression arguments over nullable fields, math, text casts (issue 30, item 7's per-box list) ------------------
# The argument translator takes the row code for the rows that need it (sqrt(-1), ln(0), a double's %, int64
# overflow, text that is no number): those rows' arguments are the row code's (None where it fails, skipped),
# the batch stays columns.

BIG = 4611686018427387904  # 2**62
EXPRESSIONS = [["sum(sqrt(x))", "avg(ln(x) * 2.0)", "min(coalesce(n, g))", "count(x % 2.0)", "count()"],
               ["max(coalesce(x, 0.5) / time)", "firstval(exp(x))", "lastval(n % 3)", "sum(pow(x, 0.5))"],
               ["sum(cast(s as int))", "avg(cast(s as double))", "count(cast(s as int) + n)", "max(g * n)"],
               [f"count(n * {BIG})", "avg(n + g)", "sum(coalesce(n, 0) - g)", "min(log(2, x))"]]
# (count of the overflowing product: a batch where it overflows reads rows, and a window's state stays within what
# msgpack moves; a sum of it would not, on either path)
EDGES = [0.0, -0.0, -1.0, 0.5, 2.0, 800.0, float("inf"), float("-inf")]
TEXTS = ["1", " 2", "-3", "1.5", "x", "", "9e9"]


@st.composite
def edgy_streams(draw) -> list[tuple]:
    """:func:`streams` with text in ``s`` that may or may not be a number, and doubles at math's edges."""
    out = []
    for g, _, time, x, n in draw(streams()):
        x = draw(st.sampled_from(EDGES)) if x is not None and draw(st.integers(0, 2)) == 0 else x
        out.append((g, draw(st.sampled_from(TEXTS)), time, x, n))
    return out


def test_expressions_over_nullable_fields_and_math_are_taken_on_columns():
    for functions in EXPRESSIONS:
        for by in ("VALUES", "TUPLES"):
            params = as_params({"by": by, "window-size": "5", "group-by": "g", "order-by": "FIELD",
                                "functions": functions})
            assert aggregate(params)._runs is not None, (by, functions)


@settings(max_examples=max(10, int(40 * SCALE)), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(drawn=params_strategy, functions=st.sampled_from(EXPRESSIONS), data=edgy_streams(),
       cuts=st.lists(st.integers(0, 120), max_size=6), move_at=st.integers(-1, 6), any_runs=st.booleans())
def test_expression_arguments_on_columns_give_what_rows_give(drawn, functions, data, cuts, move_at, any_runs,
                                                              monkeypatch):
    test_nullable_arguments_on_columns_give_what_rows_give.hypothesis.inner_test(
        {**drawn, "functions": functions}, data, cuts, move_at, any_runs, monkeypatch)


@settings(max_examples=max(10, int(30 * SCALE)), deadline=None)
@given(data=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 30),
                               st.one_of(st.floats(-1e3, 1e3, allow_nan=False), st.sampled_from(EDGES), st.none()),
                               st.one_of(st.integers(-2 ** 40, 2 ** 40), st.none(), st.none()),
                               st.sampled_from([1, 1, -1, 2, 0]), st.sampled_from(TEXTS)), max_size=50),
       cuts=st.lists(st.integers(0, 50), max_size=4), advance=st.sampled_from([None, "5"]),
       functions=st.sampled_from([["sum(sqrt(x))", "count(ln(x))", "avg(coalesce(n, 1) * 2)", "count()"],
                                  ["sum(n * 3)", "avg(cast(s as int))", "sum(x % 2.0)"],
                                  ["sum(coalesce(n, 0))", "sum(coalesce(x, -1.5))", "count()"]]))
def test_nullable_expression_changelog_on_columns_gives_what_rows_give(data, cuts, advance, functions):
    test_nullable_changelog_on_columns_gives_what_rows_give.hypothesis.inner_test(
        [(g, t, x, n, w) for g, t, x, n, w, _ in data], cuts, advance, functions)


@pytest.mark.parametrize("by", ["VALUES", "TUPLES"])
def test_a_batch_with_nulls_and_failing_math_is_not_read_as_rows(by, monkeypatch):
    """NULLs, sqrt(-1), ln(0), a text that is no int: those rows' arguments are the row code's, and no row of the
    batch goes through the per-tuple code (it read rows whole before)."""
    monkeypatch.setattr(aggregate_runs, "MAX_RUNS_PER_ROW", 2.0)
    monkeypatch.setattr(aggregate_emit, "MIN_INNER", 0)
    params = as_params({"by": by, "window-size": "3", "order-by": "TUPLENUM",
                        "functions": ["sum(sqrt(x))", "avg(ln(x))", "sum(cast(s as int))", "min(coalesce(n, g))"]})
    data = [(0, "1", 0, 4.0, None), (0, "x", 1, -1.0, 5), (0, " 2", 2, None, 2), (0, "3", 3, 0.0, None),
            (0, "", 4, 9.0, -1), (0, "4", 5, 1.0, None)]
    op, reference = aggregate(params), aggregate(params)
    loops: list = []
    for name in ("by_values", "by_tuples"):
        general = getattr(op._windows, name)
        setattr(op._windows, name, lambda *args, general=general: (loops.append(1), general(*args))[1])
    got = op.process(0, columns(data), 0.0) + op.end_of_input(1.0)
    want = reference.process(0, data, 0.0) + reference.end_of_input(1.0)
    assert close(got, want)
    assert loops == []
