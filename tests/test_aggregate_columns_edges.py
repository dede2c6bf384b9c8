"""The aggregate on columns at its edges (node/operators/aggregate_runs.py, aggregate_columns.py): values where
numpy and Python part (-0.0 under a float min or max, a sum at -2**63: on columns since colAggF, as Python
folds them), and a run of late rows costs
linear time; a changelog's multisets taken on columns; each against the row path (tests/test_aggregate_columns.py
has the property tests)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from boreas.catalog.model import Box, InPort
from boreas.node.operators import aggregate_changes, aggregate_runs
from boreas.node.operators.aggregate import AggregateOperator

from test_aggregate_columns import ROW, SCALE, TYPES, aggregate, close, columns


@pytest.mark.parametrize("advance", [None, "5"])
@pytest.mark.parametrize("expr", ["min(x)", "max(x)", "min(x * 1.0)"])
def test_float_min_max_keep_the_first_zero_as_rows_do(advance, expr):
    """0.0 and -0.0 are equal: Python's min and max keep whichever came first, numpy's need not, so a run
    keeps its first zero as Python's fold does (.aggregate_exact; compared by repr: 0.0 == -0.0)."""
    params = {"window-size-by": "VALUES", "order-on-field": "time", "window-size": "10",
              "aggregate-function.0": expr}
    if advance:
        params["advance"] = advance
    sign = -1.0 if expr.startswith("max") else 1.0  # the zeros are the extreme, both orders of them
    data = [(0, "a", 0, 2.5 * sign, 0), (0, "a", 1, 0.0, 0), (0, "a", 2, -0.0, 0),
            (0, "a", 11, -0.0, 0), (0, "a", 12, 0.0, 0), (0, "a", 13, 3.0 * sign, 0)]
    for batch in (data[:3], data, data[3:]):
        a, b = aggregate(params), aggregate(params)
        got = [a.process(0, columns(batch), 0.0), a.end_of_input(1.0)]
        assert repr(got) == repr([b.process(0, batch, 0.0), b.end_of_input(1.0)])


@pytest.mark.parametrize("expr", ["sum(n)", "avg(n)", "sum(n - 1)"])
def test_int64_sums_at_the_lowest_long_are_exact(expr):
    """abs(-2**63) wraps in int64: the overflow test takes the column's min and max as Python ints."""
    params = {"window-size-by": "VALUES", "order-on-field": "time", "window-size": "10", "aggregate-function.0": expr}
    n = -2 ** 63 + (1 if "- 1" in expr else 0)
    data = [(0, "a", t, 0.0, n) for t in range(4)]
    a, b = aggregate(params), aggregate(params)
    got = [a.process(0, columns(data), 0.0), a.end_of_input(1.0)]
    assert got == [b.process(0, data, 0.0), b.end_of_input(1.0)]


@pytest.mark.parametrize("extra", [
    {"group-by": "g", "aggregate-function.0": "count_distinct(n)", "aggregate-function.1": "min(s)"},
    {"group-by": "g", "advance": "2", "aggregate-function.0": "count()", "aggregate-function.1": "sum(n)"},
    {"aggregate-function.0": "count()", "aggregate-function.1": "sum(n)"},
])
def test_a_run_of_late_rows_is_not_rebuilt_per_row(extra, monkeypatch):
    """A run whose rows all go to the per-tuple code (late: before the window) tests its rest's bounds per row
    in O(1) and makes the rest's partials (Runs.part) only when they are added: not once per row."""
    params = {"window-size-by": "VALUES", "order-on-field": "time", "window-size": "10", **extra}
    calls = []
    part = aggregate_runs.Runs.part
    monkeypatch.setattr(aggregate_runs.Runs, "part", lambda self, r, at: (calls.append(r), part(self, r, at))[1])
    a, b = aggregate(params), aggregate(params)
    first = [(0, "z", 100, 0.0, 7)]
    late = [(0, "abcd"[t % 4], 5, 0.0, t % 7) for t in range(2000)]
    for batch in (first, late):
        assert a.process(0, columns(batch), 0.0) == b.process(0, batch, 0.0)
    assert a.end_of_input(1.0) == b.end_of_input(1.0)
    assert a.state() == b.state()
    assert len(calls) <= 2, len(calls)


@pytest.mark.parametrize("functions, group_by", [
    (["min(x)", "max(n)", "count_distinct(s)", "count()"], "g"),   # multisets of fields
    (["max(x * 2.0)", "count_distinct(n)"], "x"),                 # of an expression; a float group-by
    (["sum(n - 1)", "avg(x + 1.0)", "min(s)"], "s, x"),           # sums of expressions
])
def test_changelog_multisets_stay_off_the_row_loop(functions, group_by, monkeypatch):
    """A changelog batch with min/max/count_distinct, expression arguments or a float group-by is taken on
    columns (.aggregate_multisets, .aggregate_retract): Retracting.apply, the row loop, never runs; the
    -old/+new rows are the row path's (``fast=False``)."""
    params = {"window-size-by": "VALUES", "window-size": "10", "order-on-field": "time", "group-by": group_by,
              "order-by": "FIELD", "independent-window-alignment": "1",
              **{f"aggregate-function.{i}": f for i, f in enumerate(functions)}}
    box = Box("b", "aggregate", (InPort("in"),), ("out",), tuple(params.items()))
    on_columns, on_rows = AggregateOperator(box, [ROW], TYPES.infer(box, [ROW])), AggregateOperator(
        box, [ROW], TYPES.infer(box, [ROW]), fast=False)
    rows = [(t % 3, "ab"[t % 2], t % 30, float(t % 7) + 0.5, t % 5) for t in range(150)]
    weights = [1] * 150 + [-1] * 50
    batch = columns(rows + rows[:50], weights)
    calls = []
    general = aggregate_changes.Retracting.apply
    monkeypatch.setattr(aggregate_changes.Retracting, "apply",
                        lambda self, *a: (calls.append(len(a[0])), general(self, *a))[1])
    got = on_columns.process(0, batch, 0.0)
    assert calls == []
    want = on_rows.process(0, batch, 0.0)
    assert calls == [200]
    assert close([(r, w) for _, c in got for r, w in zip(c.rows(), c.weight_list())],
                 [(r, w) for _, c in want for r, w in zip(c.rows(), c.weight_list())])
    assert close(on_columns.state(), on_rows.state())


@pytest.mark.parametrize("batches", [
    [[(-0.0, 1)], [(0.0, -1), (0.0, 1)]],           # the count passes through 0: the key becomes 0.0
    [[(-0.0, 1)], [(0.0, 1), (0.0, -1)]],           # it does not: the key stays -0.0
    [[(0.0, 1), (-0.0, 1), (1.5, 1)], [(-0.0, -2), (-0.0, 1), (2.5, 1)]],
])
def test_changelog_zeros_keep_the_key_rows_keep(batches):
    """0.0 and -0.0 are one key of a multiset in Python, kept as whichever was inserted (again) first: a
    float min/max over a changelog on columns gives the zero's sign the rows give (repr tells them apart)."""
    params = {"window-size-by": "VALUES", "window-size": "10", "order-on-field": "time", "group-by": "g",
              "independent-window-alignment": "1", "aggregate-function.0": "min(x)", "aggregate-function.1": "max(x)",
              "aggregate-function.2": "count_distinct(x)"}
    box = Box("b", "aggregate", (InPort("in"),), ("out",), tuple(params.items()))
    on_columns, on_rows = AggregateOperator(box, [ROW], TYPES.infer(box, [ROW])), AggregateOperator(
        box, [ROW], TYPES.infer(box, [ROW]), fast=False)
    for changes in batches:
        batch = columns([(1, "a", 3, x, 0) for x, _ in changes], [w for _, w in changes])
        got, want = on_columns.process(0, batch, 0.0), on_rows.process(0, batch, 0.0)
        assert repr([(c.rows(), c.weight_list()) for _, c in got]) == repr([(c.rows(), c.weight_list())
                                                                           for _, c in want])
        assert repr(on_columns.state()) == repr(on_rows.state())


@pytest.mark.parametrize("advance", [None, "5"])
def test_late_runs_are_counted_at_once(advance):
    """A run of late rows (before every open window, none opening) is counted at once
    (GroupWindows.ignores): the per-tuple code sees each run's first row only; counters and state as rows."""
    params = {"window-size-by": "VALUES", "order-on-field": "time", "window-size": "10", "group-by": "g",
              "aggregate-function.0": "count()", "aggregate-function.1": "sum(n)",
              **({"advance": advance} if advance else {})}
    a, b = aggregate(params), aggregate(params)
    calls = []
    general = a._windows.place
    a._windows.place = lambda *x: (calls.append(x[2]), general(*x))[1]  # type: ignore[method-assign]
    first = [(g, "z", 100, 0.0, 7) for g in range(3)]
    late = [(t % 3, "ab"[t % 2], (t // 3) % 50, 0.0, t % 7) for t in range(3000)]
    for batch in (first, late):
        assert a.process(0, columns(batch), 0.0) == b.process(0, batch, 0.0)
        assert a.counters() == b.counters()
        assert a.state() == b.state()
    assert a.counters()["late_tuples"] == 3000
    # each group's times wrap 20 times over 50 values: a run per window cell (5 or 10 of them), not per row
    assert len(calls) == 3 + 3 * 20 * (10 if advance else 5)


def test_window_starts_past_the_largest_long_read_rows():
    """A group's next window start past 2**63-1 (order values near the top of `long`, windows far apart) does not fit
    numpy's int64: the batch reads rows, with the row path's results (it raised OverflowError)."""
    params = {"window-size-by": "VALUES", "order-on-field": "n", "window-size": "3", "advance": "20",
              "independent-window-alignment": "1", "group-by": "g", "aggregate-function.0": "count()"}
    top = 2 ** 63 - 1
    first = [(0, "a", t, 0.0, top - 30 + t) for t in range(5)]
    second = [(0, "a", t, 0.0, top - 20 + t) for t in range(15)]
    third = [(0, "a", t, 0.0, top - 5 + t) for t in range(6)]
    a, b = aggregate(params), aggregate(params)
    for batch in (first, second, third):
        assert a.process(0, columns(batch), 0.0) == b.process(0, batch, 0.0)
    assert a.end_of_input(1.0) == b.end_of_input(1.0) and a.state() == b.state()



signed_values = st.lists(st.tuples(st.integers(0, 1), st.integers(0, 12),
                                   st.sampled_from([0.0, -0.0, 0.0, -0.0, 1.5, -1.5, None]),
                                   st.sampled_from([2 ** 63 - 1, -2 ** 63, 2 ** 62, -2 ** 62 - 7, 5, None])),
                         max_size=60)


@pytest.mark.parametrize("by", ["VALUES", "TUPLES"])
@settings(max_examples=max(10, int(40 * SCALE)), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=signed_values, cuts=st.lists(st.integers(0, 60), max_size=4),
       advance=st.sampled_from([None, "2"]))
def test_signed_zeros_and_long_sums_on_columns_are_the_rows(by, data, cuts, advance, monkeypatch):
    """Since branch colAggF such batches stay on columns (.aggregate_exact): a float min/max keeps the first
    zero of its extreme, as Python's fold does, and a long sum past int64 is summed wide, exactly.  Compared
    by repr (0.0 == -0.0) after every batch, with batch boundaries inside windows and groups; the row loop
    never runs (however few rows a run holds: MAX_RUNS_PER_ROW)."""
    monkeypatch.setattr(aggregate_runs, "MAX_RUNS_PER_ROW", 2.0)
    params = {"window-size-by": by, "window-size": "4", "group-by": "g", "aggregate-function.0": "min(x)",
              "aggregate-function.1": "max(x)", "aggregate-function.2": "sum(n)", "aggregate-function.3": "avg(n)",
              "aggregate-function.4": "min(n)"}
    if by == "VALUES":
        params["order-on-field"] = "time"
        if advance:
            params["advance"] = advance
    rows = [(g, "a", t, x, n) for g, t, x, n in sorted(data, key=lambda r: r[1])]
    a, b = aggregate(params), aggregate(params)
    loops = []
    for name in ("by_values", "by_tuples"):
        general = getattr(a._windows, name)
        setattr(a._windows, name, lambda *args, general=general: (loops.append(1), general(*args))[1])
    bounds = sorted({0, len(rows), *(c for c in cuts if c < len(rows))})
    for lo, hi in zip(bounds, bounds[1:]):
        assert repr(a.process(0, columns(rows[lo:hi]), 0.0)) == repr(b.process(0, rows[lo:hi], 0.0))
        assert repr(a.state()) == repr(b.state())
    assert repr(a.end_of_input(1.0)) == repr(b.end_of_input(1.0))
    assert loops == []


@pytest.mark.parametrize("by", ["VALUES", "TUPLES"])
def test_nan_under_sums_stays_on_columns(by, monkeypatch):
    """A NaN makes a float sum or average NaN on either path (IEEE addition), so since branch colAggF such a
    batch stays on columns; compared by repr (nan != nan), the row loop never running (however few rows a
    run holds: MAX_RUNS_PER_ROW)."""
    monkeypatch.setattr(aggregate_runs, "MAX_RUNS_PER_ROW", 2.0)
    params = {"window-size-by": by, "window-size": "3", "group-by": "g", "aggregate-function.0": "sum(x)",
              "aggregate-function.1": "avg(x)", "aggregate-function.2": "count(x)"}
    if by == "VALUES":
        params["order-on-field"] = "time"
    nan, inf = float("nan"), float("inf")
    data = [(t % 2, "a", t // 2, [1.0, nan, 2.5, inf, -inf, 4.0][t % 6], 0) for t in range(60)]
    a, b = aggregate(params), aggregate(params)
    loops = []
    for name in ("by_values", "by_tuples"):
        general = getattr(a._windows, name)
        setattr(a._windows, name, lambda *args, general=general: (loops.append(1), general(*args))[1])
    for lo in range(0, 60, 25):
        assert repr(a.process(0, columns(data[lo:lo + 25]), 0.0)) == repr(b.process(0, data[lo:lo + 25], 0.0))
    assert repr(a.end_of_input(1.0)) == repr(b.end_of_input(1.0))
    assert loops == []
