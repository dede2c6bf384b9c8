"""delay, random_drop and window_drop on Arrow columns (issue 30) give exactly what their row paths give.

The oracle is the same box built with ``columnar=False`` fed each batch's
rows (``Columns.rows()``): the row loops are the definition of the
semantics.  Hypothesis draws a stream, cuts it into batches at random
points (so batches begin and end inside windows and groups), and feeds it
to both; every batch's output, the drop counts and the final state (the
generator's, the groups') must be equal -- the state also when some
batches reach the columnar box as rows (a restore, a peer that sent rows)
and when a snapshot of one is restored into the other.  None of the three
boxes reads a changelog (catalog/changelog.py refuses one), so there are no
signs to draw.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.node.operators.shedding import RandomDropOperator, WindowDropOperator
from boreas.node.operators.shedding_columns import uniforms
from boreas.node.operators.timers import DelayOperator
from boreas.wire.columns import Columns, arrow_schema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.operators import CATALOG_TYPES, msgpack_trip, normal
from support.property_scale import examples

W = Schema("W", (Field("g", FieldType.INT), Field("h", FieldType.STRING, 4), Field("t", FieldType.INT),
                 Field("x", FieldType.DOUBLE)))
CLASSES = {"random_drop": RandomDropOperator, "window_drop": WindowDropOperator, "delay": DelayOperator}
SETTINGS = settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def pair(type_: str, params: dict[str, str]):
    """The box on columns and the same box on rows."""
    box = Box("b", type_, (InPort("in0"),), ("out0", "out1"), tuple(params.items()))
    outs = CATALOG_TYPES.infer(box, [W])
    return CLASSES[type_](box, [W], outs), CLASSES[type_](box, [W], outs, columnar=False)


def columns(rows: list[tuple]) -> Columns:
    target = arrow_schema(W)
    return Columns(pa.RecordBatch.from_arrays([pa.array([r[i] for r in rows], f.type) for i, f in enumerate(target)],
                                              schema=target))


DOUBLES = st.one_of(st.integers(-40, 40).map(float), st.floats(-40, 40), st.sampled_from([-0.0, 0.5, 2.5]))
EDGY = st.one_of(DOUBLES, st.sampled_from([float("nan"), float("inf")]))


@st.composite
def streams(draw, edgy: bool = False):
    """Rows of W (small groups, out-of-order times, nulls) cut into batches at random points."""
    n = draw(st.integers(0, 60))
    row = st.tuples(st.one_of(st.none(), st.integers(-2, 2)), st.sampled_from([None, "a", "b"]),
                    st.one_of(st.none(), st.integers(-30, 60)),
                    st.one_of(st.none(), EDGY if edgy else DOUBLES))
    rows = draw(st.lists(row, min_size=n, max_size=n))
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=6)))
    bounds = [0, *cuts, n]
    return [rows[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


def groups_of(state: dict) -> dict:
    """A window_drop state's groups as a dict (the two paths may hold them in another order; a NaN window is
    equal to a NaN window, a -0.0 is not 0.0)."""
    return {tuple(parts): repr(rest) for parts, *rest in state.get("groups", [])}


def run_both(type_: str, params: dict[str, str], batches: list[list[tuple]], as_rows: set[int] = frozenset()):
    on_columns, on_rows = pair(type_, params)
    for i, batch in enumerate(batches):
        cols = columns(batch)
        got = on_columns.process(0, cols.rows() if i in as_rows else cols, 0.0)
        want = on_rows.process(0, cols.rows(), 0.0)
        assert normal(got) == normal(want), (i, batch)
    return on_columns, on_rows


@given(st.integers(0, 2**32), st.lists(st.integers(0, 40), max_size=5))
@SETTINGS
def test_uniforms_are_the_generators_own_numbers_in_any_chunks(seed, chunks):
    a, b = random.Random(seed), random.Random(seed)
    for n in chunks:
        assert uniforms(a, n).tolist() == [b.random() for _ in range(n)]
    assert a.getstate() == b.getstate()


@given(streams(), st.sampled_from(["0", "0.3", "0.5", "1"]), st.sets(st.integers(0, 6)))
@SETTINGS
def test_random_drop_on_columns_keeps_the_rows_the_row_path_keeps(batches, rate, as_rows):
    on_columns, on_rows = run_both("random_drop", {"drop_rate": rate, "seed": "7"}, batches, as_rows)
    assert on_columns.state() == on_rows.state()
    assert on_columns.counters() == on_rows.counters()


WINDOW_PARAMS = st.one_of(
    st.fixed_dictionaries({"window-size": st.sampled_from(["1", "4", "10", "2.5"]),
                           "order-on-field": st.sampled_from(["t", "x"])}),
    st.fixed_dictionaries({"window-size": st.sampled_from(["1", "3", "5"]), "window-size-by": st.just("TUPLES")}))


@given(streams(edgy=True), WINDOW_PARAMS, st.sampled_from(["", "g", "h", "g,h"]),
       st.sampled_from(["0", "0.4", "0.6", "1"]), st.sets(st.integers(0, 6)))
@SETTINGS
def test_window_drop_on_columns_drops_the_windows_the_row_path_drops(batches, params, group_by, rate, as_rows):
    params = {**params, "drop_rate": rate, "seed": "3", **({"group-by": group_by} if group_by else {})}
    on_columns, on_rows = run_both("window_drop", params, batches, as_rows)
    a, b = on_columns.state(), on_rows.state()
    assert a["rng"] == b["rng"] and a["dropped"] == b["dropped"]
    assert groups_of(a) == groups_of(b)


@given(streams(), streams(), st.sampled_from(["", "g,h"]))
@SETTINGS
def test_window_drop_continues_from_the_other_paths_snapshot(first, then, group_by):
    params = {"drop_rate": "0.5", "window-size": "4", "order-on-field": "t", "seed": "1",
              **({"group-by": group_by} if group_by else {})}
    on_columns, on_rows = run_both("window_drop", params, first)
    swapped_columns, swapped_rows = pair("window_drop", params)
    swapped_columns.restore(msgpack_trip(on_rows.state()))
    swapped_rows.restore(msgpack_trip(on_columns.state()))
    for batch in then:
        cols = columns(batch)
        assert normal(swapped_columns.process(0, cols, 0.0)) == normal(on_rows.process(0, cols.rows(), 0.0))
        assert normal(swapped_rows.process(0, cols.rows(), 0.0)) == normal(on_columns.process(0, cols, 0.0))


@given(streams(), st.lists(st.floats(0, 3), min_size=7, max_size=7), st.sets(st.integers(0, 6)))
@SETTINGS
def test_delay_on_columns_releases_what_the_row_path_releases(batches, gaps, as_rows):
    on_columns, on_rows = pair("delay", {"delay-ms": "1500"})
    now = 0.0
    for i, batch in enumerate(batches):
        now += gaps[i]
        cols = columns(batch)
        got = on_columns.process(0, cols.rows() if i in as_rows else cols, now)
        assert normal(got) == normal(on_rows.process(0, cols.rows(), now))
        if i == 2:  # a snapshot on the way: the queue's rows, restored into the row box's twin
            on_rows.restore(msgpack_trip(on_columns.state()))
    for late in (now + 1.0, now + 2.0):
        assert normal(on_columns.poll(late)) == normal(on_rows.poll(late))
    assert on_columns.state_entries() == on_rows.state_entries() == 0


def test_columns_stay_columns_through_the_three_boxes(monkeypatch):
    """The columnar paths make no rows: a batch of columns comes out as columns, the batch as it came when whole."""
    batch = columns([(1, "a", t, float(t)) for t in range(20)])
    monkeypatch.setattr(Columns, "rows", lambda self: pytest.fail("rows made on the columnar path"))
    delay, _ = pair("delay", {"delay-ms": "0"})
    assert delay.process(0, batch, 1.0) == [(0, batch), (1, batch)]
    assert pair("random_drop", {"drop_rate": "0"})[0].process(0, batch, 0.0)[0][1] is batch
    half, _ = pair("random_drop", {"drop_rate": "0.5", "seed": "2"})
    out = half.process(0, batch, 0.0)[0][1]
    assert isinstance(out, Columns) and 0 < len(out) < 20
    windows, _ = pair("window_drop", {"drop_rate": "0.5", "window-size": "5", "order-on-field": "t", "seed": "1"})
    out = windows.process(0, batch, 0.0)[0][1]
    assert isinstance(out, Columns) and out.batch.column(2).to_pylist() == [*range(5, 15)]  # windows 2, 3 of 5
    held, _ = pair("delay", {"delay-ms": "1000"})
    held.process(0, batch, 0.0)
    held.process(0, batch, 0.5)
    both = held.poll(2.0)[0][1]
    assert isinstance(both, Columns) and len(both) == 40


def test_a_nan_order_value_takes_the_row_path_and_keeps_its_window_as_rows_do():
    on_columns, on_rows = pair("window_drop", {"drop_rate": "1", "window-size": "2", "order-on-field": "x"})
    for batch in ([(1, "a", 1, float("nan")), (1, "a", 1, 3.0)], [(1, "a", 1, 5.0)]):
        cols = columns(batch)
        assert normal(on_columns.process(0, cols, 0.0)) == normal(on_rows.process(0, cols.rows(), 0.0))
    assert groups_of(on_columns.state()).keys() == groups_of(on_rows.state()).keys()


LONGS = Schema("L", (Field("g", FieldType.INT), Field("t", FieldType.LONG)))
INT64_MIN = -(2 ** 63)


@pytest.mark.parametrize("size, batches", [
    ("3", [[(1, INT64_MIN)], [(1, 0), (1, 5), (1, 20)]]),  # np.abs(INT64_MIN) is negative: the window wrapped
    ("10", [[(1, INT64_MIN + 1)], [(1, 5)]]),  # the row path stores a window below int64: the next batch too
    ("9223372036854775808", [[(1, 5), (1, 7)]]),  # a window size past int64
])
def test_window_drop_near_int64s_limits_goes_by_rows(size, batches):
    """Order values and window sizes whose windows numpy's int64 cannot hold: those batches take the row path."""
    box = Box("b", "window_drop", (InPort("in0"),), ("out0", "out1"),
              (("window-size", size), ("order-on-field", "t"), ("drop_rate", "1"), ("seed", "1")))
    outs = CATALOG_TYPES.infer(box, [LONGS])
    on_columns, on_rows = WindowDropOperator(box, [LONGS], outs), WindowDropOperator(box, [LONGS], outs, columnar=False)
    target = arrow_schema(LONGS)
    for batch in batches:
        cols = Columns(pa.RecordBatch.from_arrays(
            [pa.array([r[i] for r in batch], f.type) for i, f in enumerate(target)], schema=target))
        assert normal(on_columns.process(0, cols, 0.0)) == normal(on_rows.process(0, cols.rows(), 0.0))
    assert groups_of(on_columns.state()) == groups_of(on_rows.state())


def test_window_drop_keeps_a_windows_negative_zero_as_the_row_path_does():
    """A group's window opened by -0.0 is saved as -0.0 (the windows of all groups at once merged it with 0.0)."""
    params = {"window-size": "1", "order-on-field": "x", "group-by": "g", "drop_rate": "0", "seed": "1"}
    on_columns, on_rows = run_both("window_drop", params, [[(None, None, None, 0.0), (0, None, None, -0.0)]])
    assert groups_of(on_columns.state()) == groups_of(on_rows.state())
