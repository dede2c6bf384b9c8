"""``python_values`` (wire/pyvalues.py) against ``to_pylist``: the same values, of the same Python types, for every
column type and with nulls, slices and empty columns; and ``Columns.rows`` built from it."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from boreas.wire.columns import Columns
from boreas.wire.pyvalues import python_values

TYPES = [(pa.int8(), st.integers(-128, 127)), (pa.int32(), st.integers(-2**31, 2**31 - 1)),
         (pa.int64(), st.integers(-2**63, 2**63 - 1)), (pa.uint64(), st.integers(0, 2**64 - 1)),
         (pa.float64(), st.floats(allow_nan=False)), (pa.string(), st.text()), (pa.large_string(), st.text()),
         (pa.bool_(), st.booleans()), (pa.timestamp("us"), st.integers(0, 2**50))]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(range(len(TYPES))).flatmap(
    lambda i: st.tuples(st.just(TYPES[i][0]), st.lists(st.one_of(st.none(), TYPES[i][1]) if i % 2 else TYPES[i][1],
                                                        max_size=30))), st.integers(0, 5))
def test_python_values_are_to_pylists(typed, offset):
    kind, values = typed
    column = pa.array(values, kind).slice(min(offset, len(values)))
    got, want = python_values(column), column.to_pylist()
    assert got == want and [type(v) for v in got] == [type(v) for v in want]


def test_rows_are_the_columns_values():
    batch = pa.record_batch([pa.array([1, 2], pa.int32()), pa.array(["a", None]), pa.array([0.5, 1.0])],
                            names=["i", "s", "f"])
    assert Columns(batch).rows() == [(1, "a", 0.5), (2, None, 1.0)]
