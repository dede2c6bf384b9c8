"""The aggregate on Arrow columns (node/operators/aggregate_columns.py) gives what its row path gives.

The oracle is the same box fed each batch's rows (``Columns.rows()``), the
definition of the semantics.  Hypothesis draws streams that are mostly in
order per group with some tuples going back, None order values and
arguments (what a failing map writes), several groups (ints and strings),
tumbling and hopping windows, slack, alignment, timeouts fired between
batches, ``order-by`` FIELD or TUPLENUM, empty windows dropped or not; the
stream is cut into batches at random places, so batch boundaries fall
inside windows and groups.  After every batch the outputs (rows and their
order), the counters and ``state()`` must be equal, and once the columnar
box moves mid-stream (``state()`` through msgpack into a new box).  Float
sums and averages may differ in the last bits (numpy adds a run pairwise),
so floats compare to 1e-9 relative; everything else exactly.

Changelog batches (with weights): count/sum/avg summed per (group, window)
on columns against the retracting row path (``fast=False``), and a batch
against its rows one batch each.
"""

from __future__ import annotations

import math
import os

import msgspec
import pyarrow as pa
import pytest
from boreas.catalog.boxtypes import builtin_registry
from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.node.operators import aggregate_emit, aggregate_runs
from boreas.node.operators.aggregate import AggregateOperator
from boreas.wire.columns import Columns, arrow_schema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

TYPES = builtin_registry()
ROW = Schema("R", (Field("g", FieldType.INT), Field("s", FieldType.STRING, 4), Field("time", FieldType.INT),
                   Field("x", FieldType.DOUBLE), Field("n", FieldType.LONG)))
#: x values that recur, so a float group-by forms groups; the zeros keep such batches on rows (float_keys_agree)
FLOAT_KEYS = [0.5, -2.0, 3.25, 0.5, -2.0, 3.25, 0.0, -0.0]
SCALE = float(os.environ.get("BOREAS_PROPERTY_SCALE", "1"))


def aggregate(params: dict[str, str], row: Schema | None = None) -> AggregateOperator:
    """An aggregate box over ``row`` (:data:`ROW` if not given)."""
    row = row or ROW
    b = Box("b", "aggregate", (InPort("in"),), ("out",), tuple(params.items()))
    return AggregateOperator(b, [row], TYPES.infer(b, [row]))


def columns(rows: list[tuple], weights: list[int] | None = None, row: Schema | None = None) -> Columns:
    """``rows`` of ``row`` (:data:`ROW` if not given) as one Arrow batch, with ``weights`` if given."""
    schema = arrow_schema(row or ROW)
    arrays = [pa.array([r[i] for r in rows], f.type) for i, f in enumerate(schema)]
    return Columns(pa.RecordBatch.from_arrays(arrays, schema=schema),
                   weights=None if weights is None else pa.array(weights, pa.int64()))


def moved(op: AggregateOperator, params: dict[str, str], now: float, row: Schema | None = None) -> AggregateOperator:
    """A new box of ``params`` restored from ``op``'s state through msgpack (a move)."""
    new = aggregate(params, row)
    new.restore(msgspec.msgpack.decode(msgspec.msgpack.encode(op.state())), now=now)
    return new


def close(a, b) -> bool:
    """Equal, floats to 1e-9 relative (a run's float sum is added pairwise); an int and a float are not (a
    long's sum emitted as ``5.0`` is another value to a subscriber than ``5``)."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    return a == b and type(a) is type(b)


@st.composite
def streams(draw) -> list[tuple]:
    """Rows whose time mostly rises per group (so runs form), some going back or None."""
    out, t = [], 0
    n = draw(st.integers(0, 150))
    for _ in range(n):
        t += draw(st.sampled_from([0, 0, 1, 1, 2, 3, 40]))
        g = draw(st.integers(0, 3))
        odd = draw(st.integers(0, 19))
        time = None if odd == 0 else t - 9 if odd == 1 else t
        x = None if odd == 2 else draw(st.floats(-1e6, 1e6, allow_nan=False) | st.sampled_from(FLOAT_KEYS))
        out.append((g, draw(st.sampled_from(["a", "bb", ""])), time, x, draw(st.integers(-2**40, 2**40))))
    return out


params_strategy = st.fixed_dictionaries({
    "window-size": st.sampled_from(["3", "5", "10"]),
    "advance": st.sampled_from([None, "10", "12", "2", "4"]),  # 2 and 4: sliding (on the ends' grid or not)
    "slack": st.sampled_from([None, "0", "1", "2"]),
    "group-by": st.sampled_from(["", "g", "g, s", "s", "x", "g, x"]),
    "independent-window-alignment": st.sampled_from([None, "1"]),
    "drop-empty-outputs": st.sampled_from([None, "1"]),
    "timeout": st.sampled_from([None, None, "0.5", "2"]),
    "order-by": st.sampled_from(["FIELD", "TUPLENUM"]),
    "functions": st.sampled_from([["avg(x)", "count()"], ["sum(x)", "min(x)", "max(n)", "count(x)", "sum(n)"],
                                  ["firstval(x)", "lastval(time)", "firstval(s)", "min(s)", "avg(n)"],
                                  ["lastval(x)", "max(x)", "count(*)", "min(n)"],
                                  # expressions (.aggregate_args); x / g and time + 1 fail in some rows
                                  ["sum(x * 2.0)", "avg(n + g)", "max(g * 3)", "count(x - 1.0)", "min(n - 1)"],
                                  ["sum(x / g)", "firstval(time + 1)", "lastval(g * 2)", "sum(g + 1)"],
                                  # min/max of strings (ranks) and count_distinct
                                  ["count_distinct(g)", "max(s)", "count_distinct(s)", "min(s)", "count_distinct(x)",
                                   "count_distinct(n)"]]),
})


def as_params(drawn: dict) -> dict[str, str]:
    p = {"window-size-by": "VALUES", "order-on-field": "time"}
    for i, f in enumerate(drawn["functions"]):
        p[f"aggregate-function.{i}"] = f
    p.update({k: v for k, v in drawn.items() if k != "functions" and v})
    return p


@settings(max_examples=max(10, int(120 * SCALE)), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(drawn=params_strategy, data=streams(), cuts=st.lists(st.integers(0, 150), max_size=8),
       gaps=st.lists(st.sampled_from([0.0, 0.3, 1.0, 2.5]), min_size=8, max_size=8), move_at=st.integers(-1, 8),
       as_rows=st.lists(st.booleans(), min_size=9, max_size=9).map(lambda f: [x and i % 3 == 2 for i, x in enumerate(f)]),
       any_runs=st.booleans())
def test_columns_give_what_rows_give(drawn, data, cuts, gaps, move_at, as_rows, any_runs, monkeypatch):
    """Columns (now and then a batch of rows: a batch that came as msgpack rows) against rows only.  Half the
    examples take every batch on columns however few rows its runs hold (MAX_RUNS_PER_ROW), so the sparse
    streams drawn here exercise the runs, not only the fallback to rows."""
    if any_runs:
        monkeypatch.setattr(aggregate_runs, "MAX_RUNS_PER_ROW", 2.0)
    params = as_params(drawn)
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
    assert close(by_columns.end_of_input(now + 1), by_rows.end_of_input(now + 1))
    assert close(by_columns.state(), by_rows.state())


def test_in_order_runs_stay_off_the_per_tuple_code():
    """Not only equal: a batch in order goes to its windows a run at a time; the per-tuple code sees only
    each group's first tuple (a window's end is rolled over once per run: GroupWindows.roll)."""
    params = as_params({"window-size": "60", "group-by": "g", "order-by": "FIELD", "functions": ["avg(x)", "count()"],
                        "independent-window-alignment": "1"})
    op = aggregate(params)
    book = op._windows
    calls = []
    general = book.place
    book.place = lambda *a: (calls.append(a[2]), general(*a))[1]  # type: ignore[method-assign]
    data = [(t % 10, "a", t // 10, float(t), t) for t in range(6000)]
    out = op.process(0, columns(data), 0.0)
    assert calls == [0] * 10  # per sensor its first tuple (time 0); 9 more windows each opened by a run
    assert out[0][1][:2] == [(0, 0, sum(range(0, 600, 10)) / 60.0, 60), (1, 0, sum(range(1, 600, 10)) / 60.0, 60)]
    assert len(out[0][1]) == 90


def test_shapes_not_taken_read_rows():
    """An argument arrow_exprs does not translate (sqrt) keeps the box on rows, with the same results."""
    for extra in ({"aggregate-function.1": "sum(sqrt(x))"},):
        params = {**as_params({"window-size": "10", "group-by": "g", "order-by": "FIELD",
                               "functions": ["count()", "sum(x)"]}), **extra}
        a, b = aggregate(params), aggregate(params)
        data = [(t % 3, "a", t, float(t), t) for t in range(100)]
        assert a.process(0, columns(data), 0.0) == b.process(0, data, 0.0)
        assert a.state() == b.state()


@pytest.mark.parametrize("functions", [["sum(x)", "count()"], ["max(n)", "avg(x)"]])
@settings(max_examples=max(5, int(50 * SCALE)), deadline=None)
@given(data=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 30), st.integers(-5, 5), st.sampled_from([1, -1])),
                     max_size=40), cut=st.integers(0, 40))
def test_changelog_batches_retract_as_row_by_row(functions, data, cut):
    """Weights take the retracting path: a batch gives what its rows give one batch each, summed."""
    params = {"window-size-by": "VALUES", "window-size": "10", "order-on-field": "time", "group-by": "g",
              "independent-window-alignment": "1",
              **{f"aggregate-function.{i}": f for i, f in enumerate(functions)}}
    rows, weights, present = [], [], []
    for g, t, x, w in data:  # a valid changelog: a row leaves only after it came
        if w < 0 and present:
            rows.append(present.pop(x % len(present)))
            weights.append(-1)
        else:
            present.append((g, "a", t, float(x), x))
            rows.append(present[-1])
            weights.append(1)
    whole, single = aggregate(params), aggregate(params)
    for a, b in ((0, cut), (cut, len(rows))):
        if a < b:
            whole.process(0, columns(rows[a:b], weights[a:b]), 0.0)
    for i in range(len(rows)):
        single.process(0, columns(rows[i:i + 1], weights[i:i + 1]), 0.0)
    if rows:
        entries = [{(repr(k), s): e for k, s, e in op.state()["changelog"]["entries"]} for op in (whole, single)]
        assert close(entries[0], entries[1])


@settings(max_examples=max(10, int(100 * SCALE)), deadline=None)
@given(data=st.lists(st.tuples(st.integers(0, 2), st.one_of(st.integers(-30, 30), st.none()),
                               st.one_of(st.floats(-1e3, 1e3, allow_nan=False), st.none(),
                                         st.sampled_from(FLOAT_KEYS)),
                               st.integers(-2**40, 2**40) | st.integers(-3, 3), st.sampled_from([1, 1, -1, 2, 0]),
                               st.sampled_from(["a", "bb", ""])), max_size=60),
       cuts=st.lists(st.integers(0, 60), max_size=4), size=st.sampled_from(["5", "10", "2.5"]),
       advance=st.sampled_from([None, "5", "2", "10"]),
       group_by=st.sampled_from(["", "g", "g, s", "x", "s, x"]),
       functions=st.sampled_from([["count()", "sum(x)", "avg(n)"], ["count(x)", "sum(n)", "avg(x)"],
                                  # multisets (.aggregate_multisets), expression arguments (.aggregate_args)
                                  ["min(x)", "max(n)", "count_distinct(s)", "count()"],
                                  ["count_distinct(g)", "min(s)", "max(x * 2.0)", "count_distinct(n)", "max(s)"],
                                  ["sum(n - 1)", "avg(x + 1.0)", "min(n * 2)", "count(x / g)", "count_distinct(x)"]]))
def test_changelog_on_columns_gives_what_rows_give(data, cuts, size, advance, group_by, functions):
    """count/sum/avg and the multisets of min/max/count_distinct over a changelog, per (group, window) on
    columns (of fields or expressions, grouped by ints, strings or floats), against the retracting row path
    (``fast=False`` reads rows): the same -old/+new rows in the same order, and the same state.  Weights are
    any (0, 2, a -1 before its +1): the multisets' counts pass through 0 and below."""
    params = {"window-size-by": "VALUES", "window-size": size, "order-on-field": "time", "group-by": group_by,
              "order-by": "FIELD", "independent-window-alignment": "1",
              **({"advance": advance} if advance else {}),
              **{f"aggregate-function.{i}": f for i, f in enumerate(functions)}}
    box = Box("b", "aggregate", (InPort("in"),), ("out",), tuple(params.items()))
    outs = TYPES.infer(box, [ROW])
    on_columns, on_rows = AggregateOperator(box, [ROW], outs), AggregateOperator(box, [ROW], outs, fast=False)
    rows = [(g, s, t, x, n) for g, t, x, n, _, s in data]
    weights = [w for *_, w, _ in data]
    changelogs_agree(on_columns, on_rows, [columns(rows[a:b], weights[a:b]) for a, b in cut(rows, cuts)])


@st.composite
def in_order(draw) -> list[tuple]:
    """Rows in order per group with no gap of empty windows and no None: batches the chained path takes
    (AggregateOperator's columns path, ColumnRuns._chained), window ends falling inside batches."""
    out, t = [], 0
    for _ in range(draw(st.integers(0, 200))):
        t += draw(st.sampled_from([0, 0, 1, 2, 3]))
        out.append((draw(st.integers(0, 3)), draw(st.sampled_from(["a", "bb"])), t,
                    draw(st.floats(-1e6, 1e6, allow_nan=False)), draw(st.integers(-2**40, 2**40))))
    return out


@settings(max_examples=max(10, int(40 * SCALE)), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=in_order(), cuts=st.lists(st.integers(0, 200), max_size=6), size=st.sampled_from(["3", "5", "10"]),
       group_by=st.sampled_from(["", "g", "g, s"]), functions=params_strategy.map(lambda d: d["functions"]),
       extra=st.sampled_from([{}, {"independent-window-alignment": "1"}, {"drop-empty-outputs": "1"},
                              {"order-by": "TUPLENUM"}]), move_at=st.integers(-1, 6))
def test_tumbling_in_order_batches_give_what_rows_give(data, cuts, size, group_by, functions, extra, move_at):
    """In-order tumbling windows, where a batch's runs roll each group's windows over in one pass: the same
    outputs, output order, counters and state as the rows, batch after batch and after a move."""
    params = as_params({"window-size": size, "group-by": group_by, "order-by": "FIELD", "functions": functions,
                        **extra})
    by_columns, by_rows = aggregate(params), aggregate(params)
    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    for k, (a, b) in enumerate(zip(bounds, bounds[1:])):
        if k == move_at:
            by_columns, by_rows = moved(by_columns, params, 0.0), moved(by_rows, params, 0.0)
        assert close(by_columns.process(0, columns(data[a:b]), 0.0), by_rows.process(0, data[a:b], 0.0)), (a, b)
        assert by_columns.counters() == by_rows.counters()
        assert close(by_columns.state(), by_rows.state())
    assert close(by_columns.end_of_input(1.0), by_rows.end_of_input(1.0))


@st.composite
def dense(draw) -> list[tuple]:
    """In order per group with several tuples a window, no gap of empty windows: a batch closes many windows
    of several groups at once (aggregate_emit.BatchEmit), batch boundaries falling inside windows."""
    out, t = [], draw(st.integers(0, 7))
    for _ in range(draw(st.integers(0, 600) | st.integers(100, 600))):
        t += draw(st.sampled_from([0] * 12 + [1]))
        out.append((draw(st.integers(0, 2)), draw(st.sampled_from(["a", "bb"])), t,
                    draw(st.floats(-1e6, 1e6, allow_nan=False)), draw(st.integers(-2**40, 2**40))))
    return out


@settings(max_examples=max(10, int(40 * SCALE)), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=dense(), cuts=st.lists(st.integers(0, 600), max_size=3), size=st.sampled_from(["1", "2"]),
       group_by=st.sampled_from(["", "g", "g", "g, s"]),
       functions=st.sampled_from([["avg(x)", "count()"], ["sum(x)", "min(x)", "max(n)", "count(x)", "sum(n)"],
                                  ["avg(n)", "min(n)", "max(x)", "count(*)"], ["lastval(x)", "sum(n)"],
                                  ["sum(x * 2.0)", "avg(n + g)", "max(g * 3)", "count()"]]),
       extra=st.sampled_from([{}, {"independent-window-alignment": "1"}, {"drop-empty-outputs": "1"},
                              {"order-by": "TUPLENUM"}]), move_at=st.integers(-1, 4), first=st.integers(1, 40))
def test_batches_closing_many_windows_give_what_rows_give(data, cuts, size, group_by, functions, extra, move_at,
                                                           first, monkeypatch):
    """Batches that each close many windows of several groups, emitted as columns at once: the same rows in
    the same order, counters and state (window numbers, starts, horizons) as the rows, batch after batch.
    The batch emission takes every batch of its case here, however few windows it closes (MIN_INNER 0)."""
    monkeypatch.setattr(aggregate_emit, "MIN_INNER", 0)
    params = as_params({"window-size": size, "group-by": group_by, "order-by": "FIELD", "functions": functions,
                        **extra})
    by_columns, by_rows = aggregate(params), aggregate(params)
    # a first small batch opens the groups' windows: the later batches find them hot (the batch emission's case)
    bounds = sorted({0, len(data), *(c for c in [first, *cuts] if c < len(data))})
    for k, (a, b) in enumerate(zip(bounds, bounds[1:])):
        if k == move_at:
            by_columns, by_rows = moved(by_columns, params, 0.0), moved(by_rows, params, 0.0)
        assert close(by_columns.process(0, columns(data[a:b]), 0.0), by_rows.process(0, data[a:b], 0.0)), (a, b)
        assert by_columns.counters() == by_rows.counters()
        assert close(by_columns.state(), by_rows.state())
    assert close(by_columns.end_of_input(1.0), by_rows.end_of_input(1.0))


def test_closed_windows_leave_as_one_batch_of_columns():
    """A batch closing 90 windows of 10 sensors emits them at once (no window rolled over one at a time), in
    the order the rows close them, each with its run's count and average."""
    params = as_params({"window-size": "60", "group-by": "g", "order-by": "FIELD", "functions": ["avg(x)", "count()"],
                        "independent-window-alignment": "1"})
    op = aggregate(params)
    op.process(0, columns([(g, "a", 0, 0.0, 0) for g in range(10)]), 0.0)  # every sensor's first window
    book = op._windows
    rolled = []
    one_by_one = book.next_window
    book.next_window = lambda *a: (rolled.append(a[0]), one_by_one(*a))[1]  # type: ignore[method-assign]
    data = [(t % 10, "a", t // 10, float(t), t) for t in range(10, 6000)]
    out = op.process(0, columns(data), 0.0)[0][1]
    assert rolled == []
    assert len(out) == 90
    assert [(g, start) for g, start, _, _ in out] == [(g, start) for start in range(0, 540, 60) for g in range(10)]
    assert out[0] == (0, 0, sum(range(10, 600, 10)) / 60.0, 60)
    assert out[11] == (1, 60, sum(range(601, 1200, 10)) / 60.0, 60)


@pytest.mark.parametrize("extra", [
    {"advance": "2"},                                   # sliding, ends on the starts' grid
    {"advance": "4"},                                   # sliding, ends off it
    {"aggregate-function.1": "sum(x * 2.0)"},           # an expression argument (.aggregate_args)
    {"group-by": "x"},                                  # a float group-by
    {"aggregate-function.1": "max(s)"},                 # max of strings (ranks)
    {"aggregate-function.1": "count_distinct(s)"},      # count_distinct
])
def test_moved_shapes_stay_off_the_per_tuple_code(extra):
    """Not only equal: each shape taken off the row path goes to its windows a run at a time (the batch is not
    read as rows), the per-tuple code seeing a few rows per window (where windows open and close)."""
    params = {**as_params({"window-size": "10", "group-by": "g", "order-by": "FIELD",
                           "functions": ["count()", "sum(x)"]}), **extra}
    op, rows = aggregate(params), aggregate(params)
    book = op._windows
    calls, read_rows = [], []
    general, by_rows = book.place, book.by_values
    book.place = lambda *a: (calls.append(a[2]), general(*a))[1]  # type: ignore[method-assign]
    book.by_values = lambda *a: (read_rows.append(len(a[0])), by_rows(*a))[1]  # type: ignore[method-assign]
    data = [(t % 3, "ab"[t % 2] * (1 + t % 5), t // 30, float(t % 3) + 0.5, t) for t in range(3000)]
    got = op.process(0, columns(data), 0.0)
    assert close(got, rows.process(0, data, 0.0))
    assert close(op.state(), rows.state())
    assert read_rows == []  # the batch was not read as rows (GroupWindows.by_values)
    assert len(calls) < len(data) // 10, len(calls)


def test_float_group_keys_as_python_groups_them(monkeypatch):
    """-0.0 and 0.0 are one group in Python, keyed by whichever came first (even in an earlier batch), and every
    NaN row a group of its own; Arrow groups them otherwise, so such a batch reads rows: the same keys, signs
    and groups (compared by repr: 0.0 == -0.0 and nan != nan)."""
    monkeypatch.setattr(aggregate_runs, "MAX_RUNS_PER_ROW", 2.0)  # every batch on columns but for its keys
    params = as_params({"window-size": "10", "group-by": "x", "order-by": "FIELD", "functions": ["count()"]})
    a, b = aggregate(params), aggregate(params)
    first = [(0, "a", t, -0.0 if t % 2 else 1.5, t) for t in range(20)]
    then = [(0, "a", 20 + t, [0.0, -0.0, 1.5, math.nan][t % 4], t) for t in range(40)]
    for batch in (first, then):
        assert repr(a.process(0, columns(batch), 0.0)) == repr(b.process(0, columns(batch).rows(), 0.0))
    assert repr(a.end_of_input(1.0)) == repr(b.end_of_input(1.0))


def cut(rows: list, cuts: list[int]) -> list[tuple[int, int]]:
    """``rows``' batch bounds at ``cuts`` (those inside it), first to last."""
    bounds = sorted({0, len(rows), *(c for c in cuts if c < len(rows))})
    return list(zip(bounds, bounds[1:]))


def changelogs_agree(on_columns: AggregateOperator, on_rows: AggregateOperator, batches: list[Columns],
                     counters: bool = True) -> None:
    """Each changelog batch through both boxes: the same signed out rows and state after each (and counters)."""
    for batch in batches:
        got, want = on_columns.process(0, batch, 0.0), on_rows.process(0, batch, 0.0)
        got_rows = [(r, w) for _, c in got for r, w in zip(c.rows(), c.weight_list())]
        want_rows = [(r, w) for _, c in want for r, w in zip(c.rows(), c.weight_list())]
        assert close(got_rows, want_rows)
        assert close(on_columns.state(), on_rows.state())
        if counters:
            assert on_columns.counters() == on_rows.counters()
