"""Array fields on the data plane (issue 35 item 4): filter, map, union and join against a row reference.

A stream carries ``px byte(0...1, 0...2)`` (two lists of three bytes) and
``v double(0...*)`` (any number of doubles) beside scalars.  Hypothesis
draws rows, cuts them into batches anywhere (an empty batch included) and
sends each batch as rows, as Arrow columns made from rows, or as the IPC
bytes a publisher sends and the node checks; each box's out tuples must be
what a row-at-a-time reference of its documented semantics gives, arrays
included, element for element.  The join's state goes through msgpack into a
fresh box at a random batch (a move) and the result must not change.  A
changelog batch keeps its weights and arrays through filter, map,
revisionfilter and revisionmap.  Separately: bad
array values are refused row by row naming the field, and the client's and
CLI's readers see nested Python lists.
"""

from __future__ import annotations

from collections import deque

import msgspec
import pyarrow as pa
import pytest
from boreas.catalog.boxtypes import builtin_registry
from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.node.operators import build_operator
from boreas.wire.columns import Columns, check, decode, from_rows, payload
from boreas.wire.tuples import RowType
from hypothesis import given, settings
from hypothesis import strategies as st

TYPES = builtin_registry()
ARR = Schema("Arr", (Field("time", FieldType.INT), Field("k", FieldType.INT),
                     Field("px", None, array="byte(0...1, 0...2)"), Field("v", None, array="double(0...*)")))

rows = st.tuples(
    st.integers(0, 1000), st.integers(0, 3),
    st.lists(st.lists(st.integers(-128, 127), min_size=3, max_size=3), min_size=2, max_size=2),
    st.lists(st.floats(-1e6, 1e6), max_size=4),
)


def build(kind: str, params: dict[str, str], inputs: int = 1, outs: int = 1):
    box = Box("b", kind, tuple(InPort(f"in{i}") for i in range(inputs)), tuple(f"out{i}" for i in range(outs)),
              tuple(params.items()))
    return build_operator(box, [ARR] * inputs, TYPES.infer(box, [ARR] * inputs))


@st.composite
def batches(draw, ports: int = 1) -> list[tuple[int, list[tuple], str]]:
    """(port, rows, form) batches: the rows cut anywhere, each sent as rows, columns or checked IPC bytes."""
    drawn = draw(st.lists(rows, max_size=30))
    cuts = sorted(draw(st.lists(st.integers(0, len(drawn)), max_size=6))) + [len(drawn)]
    out, start = [], 0
    for end in cuts:
        out.append((draw(st.integers(0, ports - 1)), drawn[start:end], draw(st.sampled_from(FORMS))))
        start = end
    return out


FORMS = ("rows", "columns", "ipc")


def sent(part: list[tuple], form: str) -> list[tuple] | Columns:
    """A batch as it reaches a box: rows checked as the node checks them, or columns (from rows or IPC)."""
    checked, errors = RowType(ARR).check(part)
    assert not errors
    if form == "rows" or not checked:
        return checked
    columns = from_rows(checked, ARR)
    if form == "columns":
        return columns
    received, errors = decode(payload(Columns(columns.batch)), ARR)  # (the batch, not the rows it kept)
    assert not errors
    return received


def emitted(op, port: int, batch, now: float = 0.0) -> dict[int, list[tuple]]:
    out: dict[int, list[tuple]] = {}
    for p, got in op.process(port, batch, now):
        out.setdefault(p, []).extend(tuple(r) for r in (got.rows() if isinstance(got, Columns) else got))
    return out


def as_doubles(row: tuple) -> tuple:
    """A reference row as the box yields it (a double array's ints as floats)."""
    return row[:3] + ([float(x) for x in row[3]],)


@settings(max_examples=30, deadline=None)
@given(batches())
def test_filter_passes_arrays_to_the_port_of_the_first_true_predicate(stream):
    op = build("filter", {"expression.0": "k = 0", "expression.1": "k % 2 = 1", "pass-on-false-port": "1"},
               outs=3)
    got: dict[int, list[tuple]] = {}
    want: dict[int, list[tuple]] = {}
    for _, part, form in stream:
        for p, out in emitted(op, 0, sent(part, form)).items():
            got.setdefault(p, []).extend(out)
        for row in part:
            want.setdefault(0 if row[1] == 0 else 1 if row[1] % 2 == 1 else 2, []).append(as_doubles(row))
    assert got == want


@settings(max_examples=30, deadline=None)
@given(batches())
def test_map_passes_arrays_on_whole_beside_computed_fields(stream):
    op = build("map", {"expression.0": "v", "output-field-name.0": "v", "expression.1": "time * 2",
                       "output-field-name.1": "twice", "expression.2": "(px)", "output-field-name.2": "pixels"})
    assert [f.declared_type for f in op.outputs[0].fields] == ["double(0...*)", "int", "byte(0...1, 0...2)"]
    got, want = [], []
    for _, part, form in stream:
        got += emitted(op, 0, sent(part, form)).get(0, [])
        want += [(as_doubles(r)[3], r[0] * 2, r[2]) for r in part]
    assert got == want


@settings(max_examples=30, deadline=None)
@given(batches(ports=3))
def test_union_merges_array_streams_in_arrival_order(stream):
    op = build("union", {}, inputs=3)
    got, want = [], []
    for port, part, form in stream:
        got += emitted(op, port, sent(part, form)).get(0, [])
        want += [as_doubles(r) for r in part]
    assert got == want


def join_reference(stream, sizes: tuple[int, int]) -> list[tuple]:
    """Borealis's join a tuple at a time: each arriving tuple against the other side's buffer, oldest first;
    a TUPLES buffer keeps its newest ``size`` tuples."""
    buffers = [deque(maxlen=sizes[0]), deque(maxlen=sizes[1])]
    out = []
    for port, part, _ in stream:
        for row in map(as_doubles, part):
            for other in buffers[1 - port]:
                left, right = (row, other) if port == 0 else (other, row)
                if left[1] == right[1]:
                    out.append((left[2], right[3], left[0] - right[0]))
            buffers[port].append(row)
    return out


@settings(max_examples=30, deadline=None)
@given(batches(ports=2), st.integers(0, 8))
def test_join_carries_arrays_into_its_pairs_and_moves_with_them(stream, move_at):
    params = {"predicate": "left.k = right.k", "left-buffer-size": "3", "right-buffer-size": "4",
              "out-field.0": "left.px", "out-field-name.0": "lpx", "out-field.1": "right.v",
              "out-field-name.1": "rv", "out-field.2": "left.time - right.time", "out-field-name.2": "dt"}
    op = build("join", params, inputs=2)
    got = []
    for i, (port, part, form) in enumerate(stream):
        if i == move_at:  # a move: the box's state through msgpack into a fresh box
            state = msgspec.msgpack.decode(msgspec.msgpack.encode(op.state()))
            op = build("join", params, inputs=2)
            op.restore(state)
        got += emitted(op, port, sent(part, form)).get(0, [])
    assert got == join_reference(stream, (3, 4))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(rows, st.sampled_from([1, -1, 2])), max_size=20))
def test_a_changelog_batch_keeps_its_weights_and_arrays_through_filter_and_map(changes):
    checked, _ = RowType(ARR).check([r for r, _ in changes])
    batch = Columns(from_rows(checked, ARR).batch, weights=pa.array([w for _, w in changes], pa.int64())) \
        if checked else None
    if batch is None:
        return
    kept = build("filter", {"expression.0": "k < 2"}).process(0, batch, 0.0)
    out = [(r, w) for _, c in kept for r, w in zip(c.rows(), c.weight_list())]
    assert out == [(as_doubles(r), w) for r, w in changes if r[1] < 2]
    mapped = build("map", {"expression.0": "px", "output-field-name.0": "p"}).process(0, batch, 0.0)
    assert [(r, w) for _, c in mapped for r, w in zip(c.rows(), c.weight_list())] == \
        [((r[2],), w) for r, w in changes]
    revised = build("revisionfilter", {"expression.0": "k < 2"}).process(0, batch, 0.0)
    assert [(r, w) for _, c in revised for r, w in zip(c.rows(), c.weight_list())] == out
    revised = build("revisionmap", {"expression.0": "v", "output-field-name.0": "v"}).process(0, batch, 0.0)
    assert [(r, w) for _, c in revised for r, w in zip(c.rows(), c.weight_list())] == \
        [((as_doubles(r)[3], None), w) for r, w in changes]  # (and Borealis's revised_value, unset)


@pytest.mark.parametrize("value, why", [
    ([[1, 2, 3]], "dimension 1 of byte(0...1, 0...2) holds 2 values, got 1"),
    ([[1, 2, 3], [4, 5]], "dimension 2 of byte(0...1, 0...2) holds 3 values, got 2"),
    ([[1, 2, 3], [4, 5, 300]], "300 is out of range for byte"),
    ("pixels", "expected byte(0...1, 0...2) (nested lists), got str 'pixels'"),
])
def test_a_bad_array_value_in_rows_is_refused_naming_the_row_and_field(value, why):
    good, errors = RowType(ARR).check([[1, 0, [[1, 2, 3], [4, 5, 6]], []], [2, 0, value, [1.5]]])
    assert good == [(1, 0, [[1, 2, 3], [4, 5, 6]], [])]
    [(row, field, reason)] = [(e.row, e.field, e.reason) for e in errors]
    assert (row, field, reason) == (1, "px", why)


@pytest.mark.parametrize("value", [[[1, 2, 3]], [[1, 2, 3], [4, 5, 6], [7, 8, 9]], [[1, 2, 3], [4, 5, None]],
                                   [[1, 2, 3], [4, 5, 300]]])
def test_a_bad_array_value_in_columns_is_refused_naming_the_row_and_field(value):
    batch = pa.record_batch({"time": [1, 2], "k": [0, 0], "px": [[[1, 2, 3], [4, 5, 6]], value], "v": [[], [1.0]]})
    good, errors = check(batch, ARR)
    assert good.rows() == [(1, 0, [[1, 2, 3], [4, 5, 6]], [])]
    assert [(e.row, e.field) for e in errors] == [(1, "px")]


def test_arrays_are_read_from_text_as_json():
    assert RowType(ARR).from_text(["5", "1", "[[1, 2, 3], [4, 5, 6]]", "[0.5, 2]"]) == \
        (5, 1, [[1, 2, 3], [4, 5, 6]], [0.5, 2.0])
