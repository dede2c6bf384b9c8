"""aurorajoin on Arrow columns (issue 30) gives exactly what its row path gives, batch boundaries anywhere.

The oracle is the same box built with ``columnar=False``: the row path
(:class:`~boreas.node.operators.aurorajoin.AuroraRows`, itself checked
against a reference over the whole history in
tests/test_aurorajoin_operator.py) is the definition of the semantics.
Hypothesis draws a stream of batches for both sides (either arrival order,
cut anywhere, as Arrow columns or as rows) with order values mostly rising
but sometimes back, null, nan or past what a double holds exactly (the
trims' exact loop), keys that match often or are null, zero divisors (a
batch probed by the row path's code); predicates with an equality to
narrow pairs by, without one, and ones that do not translate (the box on
rows); ``TUPLES`` and ``VALUES`` per side.  After every batch both emit the
same tuples in the same order; at random points the columnar box's state
goes through msgpack into a fresh box.  Separately: the columnar path is
the one taken, and the trims' two ways agree.
"""

from __future__ import annotations

import msgspec
import pytest
import numpy as np
import pyarrow as pa
from boreas.catalog.boxtypes import builtin_registry
from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.node.operators import OperatorError
from boreas.node.operators.aurorajoin import AuroraJoinOperator
from boreas.node.operators.aurorajoin_columns import cuts_by_rows, value_cuts
from boreas.wire.columns import Columns, arrow_schema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.operators import normal
from support.property_scale import examples

TYPES = builtin_registry()
L = Schema("L", (Field("k", FieldType.INT), Field("t", FieldType.INT), Field("v", FieldType.DOUBLE)))
RIGHTS = {  # the right side's order field: a long (past 2**52 sometimes) or a double (nan sometimes)
    "long": Schema("R", (Field("k", FieldType.LONG), Field("t", FieldType.LONG), Field("w", FieldType.DOUBLE))),
    "double": Schema("R", (Field("k", FieldType.LONG), Field("t", FieldType.DOUBLE), Field("w", FieldType.DOUBLE))),
}

PREDICATES = ["left.k = right.k", "1 = 1", "left.t <= right.t", "left.v / right.w > 1.0",
              "left.k = right.k and left.v < right.w", "right.k = left.k or left.t = right.t",
              "cast(left.v as varchar) = 'x'"]
ON_ROWS = ["min(left.k, left.v) + 1.0 > right.t"]  # arithmetic on an int-or-double value: no columnar translation
OUTS = [(), ("left.k", "right.t"), ("left.v / right.w", "left.t")]


def build(params: dict[str, str], right: Schema, columnar: bool = True, left: Schema = L) -> AuroraJoinOperator:
    box = Box("j", "aurorajoin", (InPort("l"), InPort("r")), ("out",), tuple(params.items()))
    return AuroraJoinOperator(box, [left, right], TYPES.infer(box, [left, right]), columnar=columnar)


def box_params(predicate: str, outs: tuple[str, ...], sides: list[tuple[str, int]]) -> dict[str, str]:
    params = {"predicate": predicate, "down-size": str(sides[0][1]), "up-size": str(sides[1][1]),
              "left-order-by": sides[0][0], "right-order-by": sides[1][0],
              "left-order-on-field": "t", "right-order-on-field": "t"}
    for i, e in enumerate(outs):
        params[f"out-field.{i}"] = e
        params[f"out-field-name.{i}"] = f"o{i}"
    return params


@st.composite
def batch(draw, schema: Schema, start: int) -> Columns:
    n = draw(st.integers(0, 10))
    keys = st.one_of(st.integers(0, 3), st.none()) if draw(st.booleans()) else st.integers(0, 3)
    doubles = st.one_of(st.sampled_from([0.0, 0.5, 2.0, float("nan")]), st.floats(-10, 10), st.none())
    odd = [None, float("nan")] if schema.fields[1].type == FieldType.DOUBLE else [None]
    if schema.fields[1].type == FieldType.LONG:
        odd.append(2**60)
    times, t = [], start
    for _ in range(n):
        t += draw(st.integers(0, 4))
        times.append(draw(st.sampled_from([t] * 8 + [t - 7] + odd)))
    columns = [pa.array(draw(st.lists(keys, min_size=n, max_size=n))), pa.array(times),
               pa.array(draw(st.lists(doubles, min_size=n, max_size=n)))]
    target = arrow_schema(schema)
    return Columns(pa.RecordBatch.from_arrays([c.cast(f.type) for c, f in zip(columns, target)], schema=target))


@st.composite
def streams(draw, right: Schema, left: Schema = L) -> list[tuple[int, Columns, bool, bool]]:
    """(port, batch, given as rows?, move the box after it?) events."""
    events, clock = [], [0, 0]
    for _ in range(draw(st.integers(1, 10))):
        port = draw(st.integers(0, 1))
        columns = draw(batch(left if port == 0 else right, clock[port]))
        times = [t for t in columns.batch.column(1).to_pylist() if t is not None and t == t and t < 2**50]
        clock[port] = int(max([clock[port], *times]))
        events.append((port, columns, draw(st.booleans()), draw(st.integers(0, 5)) == 0))
    return events


#: Size choices (``JoinPaths.cut_at``): every batch on columns, cut-overs the drawn batches (0-10 tuples against
#: buffers of 0-20) straddle, so batches go one way then the other and the buffers are handed over between the
#: engines mid-stream, and the box's own (every drawn batch on rows).
CUTS = [-1, 4, 12, 30, None]


def sized(op: AuroraJoinOperator, rows_below: int | None) -> AuroraJoinOperator:
    """``op`` with batches of at most ``rows_below`` (tuple, buffered tuple) pairs joined on rows (None: as built)."""
    if rows_below is not None:
        op.paths.cut_at(rows_below)
    return op


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(predicate=st.sampled_from(PREDICATES + ON_ROWS), outs=st.sampled_from(OUTS), data=st.data(),
       right=st.sampled_from(sorted(RIGHTS)),
       sides=st.lists(st.tuples(st.sampled_from(["TUPLES", "VALUES"]), st.integers(0, 6)), min_size=2, max_size=2),
       small=st.sampled_from(CUTS))
def test_aurorajoin_on_columns_emits_what_the_row_path_emits(predicate, outs, data, right, sides, small):
    """``small``: the size choice's cut-over (:data:`CUTS`): batches on either side of it, and the buffers handed
    between the engines, give the row path's tuples and buffers."""
    schema = RIGHTS[right]
    params = box_params(predicate, outs, sides)
    op, reference = sized(build(params, schema), small), build(params, schema, columnar=False)
    assert op.columnar == (predicate in PREDICATES) and not reference.columnar
    agree(op, reference, data.draw(streams(schema)), lambda: sized(build(params, schema), small))


def agree(op: AuroraJoinOperator, reference: AuroraJoinOperator, events: list, fresh) -> None:
    """``op`` emits and keeps what ``reference`` (the row path) does, batch after batch (moved into ``fresh()``
    where an event says so)."""
    for port, columns, as_row, move in events:
        got = op.process(port, columns.rows() if as_row else columns, 0.0)
        want = reference.process(port, columns.rows(), 0.0)
        assert normal(got) == normal(want)
        for _, out in got:
            if isinstance(out, Columns):
                assert out.batch.schema.equals(arrow_schema(op.outputs[0]))
        if move:
            moved = fresh()
            moved.restore(msgspec.msgpack.decode(msgspec.msgpack.encode(op.state())))
            op = moved
        assert normal([(0, b) for b in op.state()["buffers"]]) == normal(
            [(0, b) for b in reference.state()["buffers"]])
    assert op.state_entries() == reference.state_entries()


# -- nullable fields, math functions, overflow-prone ints in the predicate (issue 30, item 7's per-box list) --------
# The pairs a flagged row of the pair batch stands for get the box's row code over (left, right); the batch stays
# columns.

BIG = 4611686018427387904  # 2**62
NL = Schema("NL", (Field("k", FieldType.INT), Field("t", FieldType.INT), Field("v", FieldType.DOUBLE, nullable=True)))
NR = Schema("NR", (Field("k", FieldType.LONG, nullable=True), Field("t", FieldType.LONG),
                   Field("w", FieldType.DOUBLE, nullable=True)))
NULL_PREDICATES = ["left.k = right.k", "sqrt(left.v) > right.w", "coalesce(right.w, left.v) > 1.0",
                   "ln(left.v) < right.w or left.k = right.k", "left.v % right.w > 0.5", f"left.k * {BIG} > right.k",
                   "pow(right.w, 2.0) > left.v and right.k is not null", "exp(right.w) > left.v"]
NULL_OUTS = [(), ("coalesce(left.v, right.w)", "sqrt(right.w)"), (f"right.k * {BIG}", "ln(left.v)")]


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(predicate=st.sampled_from(NULL_PREDICATES), outs=st.sampled_from(NULL_OUTS), data=st.data(),
       sides=st.lists(st.tuples(st.sampled_from(["TUPLES", "VALUES"]), st.integers(0, 6)), min_size=2, max_size=2))
def test_nullable_fields_and_math_in_an_aurorajoin_on_columns_are_the_row_path(predicate, outs, data, sides):
    params = box_params(predicate, outs, sides)
    op, reference = sized(build(params, NR, left=NL), False), build(params, NR, columnar=False, left=NL)
    assert op.columnar
    agree(op, reference, data.draw(streams(NR, NL)), lambda: sized(build(params, NR, left=NL), False))


def test_a_batch_with_nulls_and_failing_math_is_joined_on_columns(monkeypatch):
    """NULLs, sqrt(-1), an int64 overflow in the predicate: those pairs take the row code, the batch is joined on
    columns (the row path's probe is never called)."""
    params = box_params(f"sqrt(left.v) > right.w or left.k * {BIG} > right.k", ("left.k", "right.w"),
                        [("TUPLES", 9), ("TUPLES", 9)])
    op, reference = sized(build(params, NR, left=NL), False), build(params, NR, columnar=False, left=NL)
    rights = Columns(pa.RecordBatch.from_pylist([{"k": 1, "t": 1, "w": 0.5}, {"k": None, "t": 2, "w": None},
                                                 {"k": 5, "t": 3, "w": -1.0}], schema=arrow_schema(NR)))
    lefts = Columns(pa.RecordBatch.from_pylist([{"k": 1, "t": 1, "v": 4.0}, {"k": 3, "t": 2, "v": -1.0},
                                                {"k": 0, "t": 3, "v": None}], schema=arrow_schema(NL)))
    want = reference.process(1, rights.rows(), 0.0) + reference.process(0, lefts.rows(), 0.0)
    monkeypatch.setattr(op.paths.columns, "probes", [lambda *a: pytest.fail("probed as rows")] * 2)
    got = op.process(1, rights, 0.0) + op.process(0, lefts, 0.0)
    assert normal(got) == normal(want) and all(isinstance(out, Columns) for _, out in got)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(-20, 40)), max_size=12),
       st.lists(st.one_of(st.none(), st.integers(-20, 40)), max_size=12), st.sampled_from([0.0, 2.5, 3.0, 100.0]))
def test_the_vectorised_trim_cuts_where_the_row_loop_cuts(arriving, buffered, size):
    """The running maximum and the binary search over the buffer's running maximum (module docstring) against
    the row path's loop, on unordered values with nulls."""
    if not arriving:
        return
    got = value_cuts(pa.array(arriving, pa.int64()), pa.array(buffered, pa.int64()), size)
    assert got is not None
    assert got.tolist() == cuts_by_rows(arriving, buffered, size).tolist()
    assert (np.diff(got) >= 0).all()


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.sampled_from([None, 4e15, 4e15 - 0.5, 4e15 - 1.0, 4e15 + 0.5]), min_size=1, max_size=6),
       st.lists(st.sampled_from([None, 4e15 - 1.5, 4e15 - 1.0, 4e15 - 0.5, 4e15]), max_size=6),
       st.sampled_from([0.3, 0.5, 0.7, 1.2]))
def test_the_vectorised_trim_is_exact_where_a_double_rounds(arriving, buffered, size):
    """Near 2**52 a double's step is 0.5: ``b >= M - size`` (the guess) and the row path's ``not M - b > size``
    part, and the guess is corrected."""
    got = value_cuts(pa.array(arriving, pa.float64()), pa.array(buffered, pa.float64()), size)
    assert got is not None and got.tolist() == cuts_by_rows(arriving, buffered, size).tolist()


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(2**52 - 40, 2**52 - 1)), min_size=1, max_size=8),
       st.lists(st.one_of(st.none(), st.integers(2**52 - 60, 2**52 - 1)), max_size=8),
       st.sampled_from([0.0, 3.0, 2.5, 17.0, 2.0**53, float("inf")]))
def test_int_order_values_with_an_integral_size_are_cut_without_the_check_and_exactly(arriving, buffered, size):
    """Ints under 2**52 and an integral size under it: every difference is exact in doubles, so the cut is taken
    as ``searchsorted`` gives it (the per-batch check cost about as much as the rest of a small batch); near
    2**52 and with other sizes (checked, or the row loop) it is still the row path's cut."""
    got = value_cuts(pa.array(arriving, pa.int64()), pa.array(buffered, pa.int64()), size)
    if size == float("inf"):
        assert got is None
        return
    assert got is not None and got.tolist() == cuts_by_rows(arriving, buffered, size).tolist()


def test_the_cut_of_ints_skips_the_check_and_of_doubles_makes_it(monkeypatch):
    from boreas.node.operators import aurorajoin_columns

    checked = []
    real = aurorajoin_columns._fits
    monkeypatch.setattr(aurorajoin_columns, "_fits", lambda *a: checked.append(1) or real(*a))
    value_cuts(pa.array([5, 9], pa.int32()), pa.array([1, 2, 8], pa.int32()), 3.0)
    assert not checked
    value_cuts(pa.array([5, 9], pa.int32()), pa.array([1, 2, 8], pa.int32()), 2.5)
    value_cuts(pa.array([5.0, 9.0]), pa.array([1.0, 2.0, 8.0]), 3.0)
    assert len(checked) == 4


def test_the_columnar_path_is_taken_and_emits_columns():
    """A batch of columns on a translatable box is joined on columns (Columns out, no row path probe)."""
    schema = RIGHTS["long"]
    params = box_params("left.k = right.k", ("left.k", "right.t"), [("VALUES", 3), ("VALUES", 5)])
    op = sized(build(params, schema), -1)
    assert op.columnar
    rights = pa.RecordBatch.from_pylist([{"k": 1, "t": 1, "w": 0.0}, {"k": 1, "t": 6, "w": 0.0},
                                         {"k": 2, "t": 7, "w": 0.0}], schema=arrow_schema(schema))
    assert op.process(1, Columns(rights), 0.0) == []
    lefts = pa.RecordBatch.from_pylist([{"k": 1, "t": 7, "v": 0.0}, {"k": 2, "t": 12, "v": 0.0}],
                                       schema=arrow_schema(L))
    [(port, out)] = op.process(0, Columns(lefts), 0.0)
    # (1,1) is more than up-size 5 behind 7; then 12 leaves (1,6) behind too
    assert port == 0 and isinstance(out, Columns) and out.rows() == [(1, 6), (2, 7)]
    assert op.columnar and op.state()["buffers"][1] == [[2, 7, 0.0]]


def test_a_batch_by_the_buffer_under_rows_below_is_joined_on_rows_and_a_larger_one_on_columns():
    """The choice by size: 2 tuples against 3 buffered (6 <= 6) are probed (rows out), the same against a limit of
    5 go on columns (Columns out); the out tuples and buffers the row path's either way."""
    schema = RIGHTS["long"]
    params = box_params("left.k = right.k", ("left.k", "right.t"), [("VALUES", 3), ("VALUES", 5)])
    rights = pa.RecordBatch.from_pylist([{"k": 1, "t": 1, "w": 0.0}, {"k": 1, "t": 6, "w": 0.0},
                                         {"k": 2, "t": 7, "w": 0.0}], schema=arrow_schema(schema))
    lefts = pa.RecordBatch.from_pylist([{"k": 1, "t": 7, "v": 0.0}, {"k": 2, "t": 12, "v": 0.0}],
                                       schema=arrow_schema(L))
    reference = build(params, schema, columnar=False)
    reference.process(1, Columns(rights).rows(), 0.0)
    want = reference.process(0, Columns(lefts).rows(), 0.0)
    for limit, kind in ((6, list), (5, Columns)):
        op = build(params, schema)
        op.paths.cut_at(limit)
        op.process(1, Columns(rights), 0.0)
        [(port, out)] = op.process(0, Columns(lefts), 0.0)
        assert isinstance(out, kind) and normal([(port, out)]) == normal(want) == normal([(0, [(1, 6), (2, 7)])])
        assert op.state() == reference.state()


def test_rows_the_columns_cannot_hold_move_the_box_to_its_row_path_with_its_buffers():
    """An int in a double field (as rows may carry it) is kept as the row path keeps it: the box goes on rows."""
    params = box_params("left.k = right.k", (), [("TUPLES", 5), ("TUPLES", 5)])
    op = sized(build(params, RIGHTS["long"]), -1)
    op.process(0, [(1, 1, 2.0)], 0.0)
    assert op.columnar
    assert op.process(1, [(1, 2, 3)], 0.0) == [(0, [(1, 1, 2.0, 1, 2, 3)])]
    assert not op.columnar
    assert op.process(0, [(1, 3, 4.0)], 0.0) == [(0, [(1, 3, 4.0, 1, 2, 3)])]


def test_rows_joined_on_rows_for_their_size_that_the_columns_cannot_hold_keep_the_box_on_rows_when_a_batch_grows():
    """A small batch of rows is joined by the row engine unconverted; when a large batch would hand the buffers to
    the columns, the int in a double field does not fit: the box stays on rows, with its buffers, for good."""
    params = box_params("left.k = right.k", (), [("TUPLES", 5), ("TUPLES", 5)])
    op = sized(build(params, RIGHTS["long"]), 1)
    op.process(0, [(1, 1, 2.0)], 0.0)
    assert op.process(1, [(1, 2, 3)], 0.0) == [(0, [(1, 1, 2.0, 1, 2, 3)])]
    assert op.columnar and op.paths.engine is op.paths.rows
    lefts = pa.RecordBatch.from_pylist([{"k": 1, "t": 3, "v": 4.0}, {"k": 2, "t": 4, "v": 5.0}],
                                       schema=arrow_schema(L))
    assert op.process(0, Columns(lefts), 0.0) == [(0, [(1, 3, 4.0, 1, 2, 3)])]
    assert not op.columnar and op.state()["buffers"] == [[[1, 1, 2.0], [1, 3, 4.0], [2, 4, 5.0]], [[1, 2, 3]]]


def test_a_changelog_batch_is_refused_as_join_refuses_it():
    """The catalog refuses a changelog into an aurorajoin; a weighted batch reaching one anyway is an error, not
    joined as if every row were +1."""
    op = build(box_params("left.k = right.k", (), [("TUPLES", 5), ("TUPLES", 5)]), RIGHTS["long"])
    batch = pa.RecordBatch.from_pylist([{"k": 1, "t": 1, "v": 0.0}], schema=arrow_schema(L))
    with pytest.raises(OperatorError, match="cannot read a changelog"):
        op.process(0, Columns(batch, weights=pa.array([-1], pa.int64())), 0.0)


def test_equal_keys_are_probed_only_past_the_first_cut(monkeypatch):
    """The other side's buffer may hold far more than its window (it is trimmed only when this side receives):
    equal keys are paired against the buffer past the batch's first cut, not all of it (all of it took memory as
    batch x buffer: 258 MB for 40 tuples against 200,000 buffered)."""
    from boreas.node.operators import aurorajoin_columns

    seen = []
    real = aurorajoin_columns.equal_pairs
    monkeypatch.setattr(aurorajoin_columns, "equal_pairs", lambda new, old: (seen.append(len(old)), real(new, old))[1])
    schema = RIGHTS["long"]
    op, reference = (build(box_params("left.k = right.k", (), [("TUPLES", 5), ("TUPLES", 5)]), schema, columnar=c)
                     for c in (True, False))
    sized(op, -1)  # (3 tuples against 2,000 would be probed on rows)
    rights = pa.RecordBatch.from_pylist([{"k": 1, "t": t, "w": 0.0} for t in range(2000)], schema=arrow_schema(schema))
    lefts = pa.RecordBatch.from_pylist([{"k": 1, "t": t, "v": 0.0} for t in range(3)], schema=arrow_schema(L))
    for port, batch in ((1, rights), (0, lefts)):
        assert normal(op.process(port, Columns(batch), 0.0)) == normal(reference.process(port, Columns(batch).rows(), 0.0))
    assert seen == [5]
