"""The vectorised slot hash (node/cumulus/slot_columns.py) gives exactly the per-value slot of every key value.

A coordinator routes an Arrow batch by :func:`column_slots`; a query client, a
Spark task or a member holding rows places the same keys one value at a time
with :func:`~boreas.m3.cumulus.hashing.slot`.  If the two ever differed, a
key's events would go to one member while its entries are read on another.
Each kind is checked over random values as the row path sees them: INTs of
every Arrow width, doubles (integral ones, -0.0, NaN, infinities, huge ones),
strings (empty, non-ASCII, repeated), and DATEs carried as microseconds on
both sides of 1970 (the row path turns them into dates with ``date_of``).
"""

import math

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from boreas.m3.cumulus.hashing import slot
from boreas.node.cumulus.slot_columns import column_slots
from boreas.node.operators.m3box import date_of

INT64 = st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=80, deadline=None)
@given(st.lists(INT64, max_size=60))
def test_int64_columns_hash_like_each_int(values):
    assert column_slots(pa.array(values, pa.int64()), "INT").tolist() == [slot(v) for v in values]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=60))
def test_int32_columns_hash_like_each_int(values):
    assert column_slots(pa.array(values, pa.int32()), "INT").tolist() == [slot(v) for v in values]


FLOATS = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                   st.integers(-(2**53), 2**53).map(float),  # integral: hashed as the INT of the same value
                   st.sampled_from([-0.0, 0.0, 2.0**63, -(2.0**63), 2.0**63 - 1024, 1e300, math.nan, -math.inf]))


@settings(max_examples=150, deadline=None)
@given(st.lists(FLOATS, max_size=60))
def test_double_columns_hash_like_each_float(values):
    assert column_slots(pa.array(values, pa.float64()), "FLOAT").tolist() == [slot(v) for v in values]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=False), max_size=40))
def test_single_columns_hash_like_the_double_a_row_reads(values):
    column = pa.array(values, pa.float32())
    assert column_slots(column, "FLOAT").tolist() == [slot(v) for v in column.to_pylist()]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=12), st.sampled_from(["", "BUILDING", "é", "ASIA"])), max_size=60))
def test_string_columns_hash_like_each_string(values):
    assert column_slots(pa.array(values, pa.string()), "STRING").tolist() == [slot(v) for v in values]


DAY = 86_400_000_000


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(-30_000 * DAY, 30_000 * DAY), max_size=60))
def test_date_columns_hash_like_each_date_the_row_path_reads(values):
    assert column_slots(pa.array(values, pa.int64()), "DATE").tolist() == [slot(date_of(v)) for v in values]


def test_a_chunked_column_hashes_like_its_values():
    column = pa.chunked_array([pa.array([1, 2], pa.int64()), pa.array([-3], pa.int64())])
    assert column_slots(column, "INT").tolist() == [slot(1), slot(2), slot(-3)]
    assert isinstance(column_slots(column, "INT"), np.ndarray)
