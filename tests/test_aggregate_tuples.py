"""Windows by TUPLES on Arrow columns (node/operators/aggregate_tuples.py) give what the row path gives.

The oracle is the same box fed each batch's rows (``GroupWindows.by_tuples``).  Hypothesis draws streams
of several groups (ints, strings, floats), tumbling, sliding and gapped (advance > size) tuple windows,
timeouts fired between batches, ``order-by`` FIELD or TUPLENUM, every function the columnar path takes
(expression arguments that fail in some rows among them), and cuts the stream at random places, so
batch boundaries fall inside windows and groups.  After every batch the outputs (rows and their order),
the counters and ``state()`` must be equal, also after a move mid-stream (``state()`` through msgpack
into a new box).  Float sums compare to 1e-9 relative (a stretch is added pairwise); the rest exactly.
"""

from __future__ import annotations

import pytest
from boreas.node.operators import aggregate_runs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from test_aggregate_columns import SCALE, aggregate, close, columns, moved, streams

tuple_params = st.fixed_dictionaries({
    "window-size": st.sampled_from(["1", "2", "3", "5", "8"]),
    "advance": st.sampled_from([None, "1", "2", "3", "7"]),  # smaller: sliding; larger than size: gaps
    "group-by": st.sampled_from(["", "g", "g, s", "s", "x", "g, x"]),
    "drop-empty-outputs": st.sampled_from([None, "1"]),
    "timeout": st.sampled_from([None, None, "0.5", "2"]),
    "order-by": st.sampled_from(["FIELD", "TUPLENUM"]),
    "order-on-field": st.sampled_from(["time", "s"]),
    "functions": st.sampled_from([["avg(x)", "count()"], ["sum(x)", "min(x)", "max(n)", "count(x)", "sum(n)"],
                                  ["firstval(x)", "lastval(time)", "firstval(s)", "min(s)", "avg(n)"],
                                  ["lastval(x)", "max(x)", "count(*)", "min(n)"],
                                  ["sum(x * 2.0)", "avg(n + g)", "max(g * 3)", "count(x - 1.0)", "min(n - 1)"],
                                  ["sum(x / g)", "firstval(time + 1)", "lastval(g * 2)", "sum(g + 1)"],
                                  ["count_distinct(g)", "max(s)", "count_distinct(s)", "min(s)", "count_distinct(x)",
                                   "count_distinct(n)"]]),
})


def as_tuple_params(drawn: dict) -> dict[str, str]:
    p = {"window-size-by": "TUPLES"}
    for i, f in enumerate(drawn["functions"]):
        p[f"aggregate-function.{i}"] = f
    p.update({k: v for k, v in drawn.items() if k != "functions" and v})
    return p


@settings(max_examples=max(10, int(120 * SCALE)), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(drawn=tuple_params, data=streams(), cuts=st.lists(st.integers(0, 150), max_size=8),
       gaps=st.lists(st.sampled_from([0.0, 0.3, 1.0, 2.5]), min_size=8, max_size=8), move_at=st.integers(-1, 8),
       as_rows=st.lists(st.booleans(), min_size=9, max_size=9).map(lambda f: [x and i % 3 == 2 for i, x in enumerate(f)]),
       any_runs=st.booleans())
def test_tuple_windows_on_columns_give_what_rows_give(drawn, data, cuts, gaps, move_at, as_rows, any_runs,
                                                      monkeypatch):
    """Columns (now and then a batch of rows) against rows only.  Half the examples take every batch on
    columns however small its windows (MAX_RUNS_PER_ROW), so the short windows drawn here exercise the
    stretches, not only the fallback to rows."""
    if any_runs:
        monkeypatch.setattr(aggregate_runs, "MAX_RUNS_PER_ROW", 2.0)
    params = as_tuple_params(drawn)
    by_columns, by_rows = aggregate(params), aggregate(params)
    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    now = 0.0
    for k, (a, b) in enumerate(zip(bounds, bounds[1:])):
        now += gaps[k % len(gaps)]
        if k == move_at:
            by_columns, by_rows = moved(by_columns, params, now), moved(by_rows, params, now)
        if k % 2:
            assert close(by_columns.poll(now), by_rows.poll(now))
        got = by_columns.process(0, data[a:b] if as_rows[k] else columns(data[a:b]), now)
        want = by_rows.process(0, data[a:b], now)
        assert close(got, want), (a, b)
        assert by_columns.counters() == by_rows.counters()
        assert close(by_columns.state(), by_rows.state())
        assert by_columns.next_deadline() == by_rows.next_deadline()
    assert close(by_columns.end_of_input(now + 1), by_rows.end_of_input(now + 1))
    assert close(by_columns.state(), by_rows.state())


@pytest.mark.parametrize("advance", ["50", "25", "80"])
def test_tuple_windows_stay_off_the_row_loop(advance):
    """Not only equal: a batch of tuple windows of 50 is taken on columns; the row loop (by_tuples) never
    runs, and the windows are the row path's."""
    params = {"window-size-by": "TUPLES", "window-size": "50", "advance": advance, "group-by": "g",
              "order-by": "FIELD", "order-on-field": "time", "aggregate-function.0": "avg(x)",
              "aggregate-function.1": "count()", "aggregate-function.2": "max(s)"}
    op, reference = aggregate(params), aggregate(params)
    book = op._windows
    calls = []
    general = book.by_tuples
    book.by_tuples = lambda *a: (calls.append(len(a[0])), general(*a))[1]  # type: ignore[method-assign]
    data = [(t % 10, "abc"[t % 3], t, float(t), t) for t in range(6000)]
    for a in range(0, 6000, 1000):
        got = op.process(0, columns(data[a:a + 1000]), 0.0)
        assert got == reference.process(0, data[a:a + 1000], 0.0)
    assert calls == []
    assert op.state() == reference.state()
    assert op.state()["seq"] > 100


def test_sliding_tuple_windows_of_short_batches_read_rows():
    """Sliding windows of 2 tuples: more stretches than MAX_RUNS_PER_ROW of the rows, so the batch reads rows."""
    params = {"window-size-by": "TUPLES", "window-size": "2", "advance": "1", "group-by": "g",
              "aggregate-function.0": "count()"}
    op = aggregate(params)
    calls = []
    general = op._windows.by_tuples
    op._windows.by_tuples = lambda *a: (calls.append(len(a[0])), general(*a))[1]  # type: ignore[method-assign]
    op.process(0, columns([(t % 3, "a", t, 1.0, t) for t in range(100)]), 0.0)
    assert calls == [100]


@pytest.mark.parametrize("size", ["1", "2", "3"])
def test_small_tumbling_tuple_windows_stay_off_the_row_loop(size):
    """Tumbling windows of 1-3 tuples (they read rows before branch colAggF) are taken on columns at once
    (.aggregate_tumbling), with the row path's windows, order and state; batches cut inside windows."""
    params = {"window-size-by": "TUPLES", "window-size": size, "group-by": "g", "order-by": "FIELD",
              "order-on-field": "s", "timeout": "5", "aggregate-function.0": "avg(x)", "aggregate-function.1": "count()",
              "aggregate-function.2": "max(n)"}
    op, reference = aggregate(params), aggregate(params)
    calls = []
    general = op._windows.by_tuples
    op._windows.by_tuples = lambda *a: (calls.append(len(a[0])), general(*a))[1]  # type: ignore[method-assign]
    data = [(t % 3 if t < 500 else t % 7, "abc"[t % 3], t, float(t), t) for t in range(1000)]
    for a in range(0, 1000, 101):
        got = op.process(0, columns(data[a:a + 101]), float(a))
        assert got == reference.process(0, data[a:a + 101], float(a))
        assert op.state() == reference.state()
    assert calls == []
    assert op.end_of_input(2000.0) == reference.end_of_input(2000.0)
