"""An Arrow batch as an ``m3`` box hands it to its runtime (node/operators/m3columns.py), and a frame's Arrow
payload read where it lies (wire/columns.py ``unwrap``): the values C reads, and the copies not made.

In process, no Head or node: the conversions are checked against values
computed here in Python (Hypothesis over every integer width, floats and
timestamps either side of 1970, slices), and the no-copy claims by asking
numpy whether the memory is shared.
"""

from __future__ import annotations

import datetime as dt

import msgspec
import numpy as np
import pyarrow as pa
import pytest
from boreas.m3.box_ports import PortPlan
from boreas.node.operators.m3columns import relation_columns, split
from boreas.wire.columns import Columns, decode, payload, read_ipc, unwrap
from hypothesis import given, settings
from hypothesis import strategies as st

from boreas.catalog.model import Field, FieldType, Schema

DAY_US = 86_400_000_000
EPOCH = dt.date(1970, 1, 1).toordinal()

INTS = {pa.int8(): 7, pa.int16(): 15, pa.int32(): 31, pa.int64(): 63, pa.uint8(): 8, pa.uint16(): 16,
        pa.uint32(): 32}


def _bounds(kind: pa.DataType) -> tuple[int, int]:
    bits = INTS[kind]
    return (0, (1 << bits) - 1) if kind in (pa.uint8(), pa.uint16(), pa.uint32()) else (-(1 << bits), (1 << bits) - 1)


@st.composite
def batches(draw):
    """A batch of an INT column of any width, a FLOAT column (float32 or float64), a DATE column (timestamps
    or plain int64 microseconds, before and after 1970), sliced at a random offset."""
    int_type = draw(st.sampled_from(list(INTS)))
    low, high = _bounds(int_type)
    n = draw(st.integers(1, 40))
    ints = draw(st.lists(st.integers(low, high), min_size=n, max_size=n))
    floats = draw(st.lists(st.floats(-1e6, 1e6, width=32), min_size=n, max_size=n))
    micros = draw(st.lists(st.integers(-400 * 365 * DAY_US, 400 * 365 * DAY_US), min_size=n, max_size=n))
    float_type = draw(st.sampled_from([pa.float32(), pa.float64()]))
    date_type = draw(st.sampled_from([pa.timestamp("us"), pa.int64()]))
    batch = pa.RecordBatch.from_arrays([pa.array(ints, int_type), pa.array(floats, float_type),
                                        pa.array(micros, date_type)], names=["i", "f", "d"])
    start = draw(st.integers(0, n - 1))
    return batch.slice(start), ints[start:], floats[start:], micros[start:]


PORT = PortPlan("r", (("i", "INT"), ("f", "FLOAT"), ("d", "DATE")), None)


@settings(max_examples=150, deadline=None)
@given(batches())
def test_columns_hold_what_the_rows_hold(case):
    batch, ints, floats, micros = case
    i, f, d = relation_columns(batch, PORT, lambda strings: None)
    assert (i.format, f.format, d.format) == ("q", "d", "q")
    assert list(i) == ints
    assert list(f) == [float(np.float32(x)) if batch.column(1).type == pa.float32() else x for x in floats]
    assert list(d) == [(dt.date(1970, 1, 1) + dt.timedelta(microseconds=m)).toordinal() for m in micros]
    assert all(day == EPOCH + m // DAY_US for day, m in zip(d, micros))


def test_int64_and_float64_columns_are_read_where_they_lie():
    batch = pa.RecordBatch.from_arrays([pa.array(range(10), pa.int64()), pa.array([0.5] * 10, pa.float64()),
                                        pa.array([DAY_US] * 10, pa.timestamp("us"))], names=["i", "f", "d"]).slice(3)
    i, f, _ = relation_columns(batch, PORT, lambda strings: None)
    assert np.shares_memory(np.asarray(i), batch.column(0).to_numpy())
    assert np.shares_memory(np.asarray(f), batch.column(1).to_numpy())
    assert list(i) == list(range(3, 10))


def test_columns_at_an_odd_address_reach_the_core_aligned():
    """A frame's columns lie wherever its msgpack header left them; the generated C reads ``int64_t`` and
    ``double`` pointers, which must be aligned, so such a column is copied before it goes there."""
    def odd(values, kind):
        raw = np.zeros(len(values) * 8 + 1, np.uint8)
        raw[1:] = np.frombuffer(np.asarray(values, kind).tobytes(), np.uint8)
        return pa.Array.from_buffers(pa.from_numpy_dtype(kind), len(values), [None, pa.py_buffer(raw).slice(1)])
    ints, floats, times = odd(range(7), np.int64), odd([0.5] * 7, np.float64), odd([DAY_US] * 7, np.int64)
    batch = pa.RecordBatch.from_arrays([ints, floats, times.cast(pa.timestamp("us"))], names=["i", "f", "d"])
    assert batch.column(0).buffers()[1].address % 8 == 1
    i, f, d = relation_columns(batch, PORT, lambda strings: None)
    assert all(np.asarray(view).ctypes.data % 8 == 0 for view in (i, f, d))
    assert (list(i), list(f), list(d)) == (list(range(7)), [0.5] * 7, [EPOCH + 1] * 7)


def test_a_value_int64_cannot_hold_goes_to_the_row_path():
    """A uint64 past int64's range is not wrapped round: Arrow's safe cast refuses it (the box then takes the
    batch's rows, which name the value)."""
    batch = pa.RecordBatch.from_arrays([pa.array([1, 1 << 63], pa.uint64()), pa.array([0.0, 1.0]),
                                        pa.array([0, 0], pa.int64())], names=["i", "f", "d"])
    with pytest.raises(ValueError):
        split(Columns(batch), PORT, lambda strings: None)


def _frame_payload(n: int) -> tuple[bytes, pa.RecordBatch]:
    schema = Schema("S", (Field("a", FieldType.INT), Field("b", FieldType.DOUBLE)))
    cols = Columns(pa.RecordBatch.from_arrays(
        [pa.array(range(n), pa.int32()), pa.array([1.5] * n, pa.float64())], names=["a", "b"]))
    checked, _ = decode(payload(cols), schema)
    return payload(cols), checked.batch


@pytest.mark.parametrize("n", [0, 3, 20_000])  # bin 16 headers (the schema alone is over 255 bytes) and a bin 32; bin 8: unwrap's doctest
def test_a_frame_payload_is_read_without_a_copy(n):
    raw, batch = _frame_payload(n)
    data = unwrap(raw)
    assert bytes(data) == msgspec.msgpack.decode(raw)
    assert np.shares_memory(np.frombuffer(data, np.uint8), np.frombuffer(raw, np.uint8))
    assert read_ipc(data).equals(batch)


def test_columns_made_from_a_view_give_their_ipc_as_bytes():
    """A batch decoded from a frame keeps a view of it; what it hands on (a snapshot, a forward) is bytes."""
    raw, _ = _frame_payload(5)
    schema = Schema("S", (Field("a", FieldType.INT), Field("b", FieldType.DOUBLE)))
    columns, errors = decode(memoryview(raw), schema)
    assert not errors
    assert type(columns.ipc()) is bytes and columns.ipc() == msgspec.msgpack.decode(raw)


def test_a_payload_that_is_not_one_bin_is_refused():
    with pytest.raises(ValueError):
        unwrap(msgspec.msgpack.encode([1, 2]))
    with pytest.raises(msgspec.DecodeError):
        unwrap(msgspec.msgpack.encode(b"abc")[:-1])  # a bin shorter than its header says


def test_changelog_keys_narrowed_to_their_out_fields():
    """A view's INT keys come back from C as int64 and go out as the out field's int32: narrowed where every
    value fits, refused (Arrow's safe cast) where one does not, as before."""
    from boreas.node.operators.m3changes import _cast

    wide = pa.array([(1 << 31) - 1, -(1 << 31), 0], pa.int64()).slice(1)
    assert _cast(wide, pa.int32()).to_pylist() == [-(1 << 31), 0]
    assert _cast(wide, pa.int32()).type == pa.int32()
    with pytest.raises(pa.ArrowInvalid):
        _cast(pa.array([1 << 31], pa.int64()), pa.int32())
