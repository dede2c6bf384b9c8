"""A batch of columns framed for the wire in one write (``Columns.framed``), and an m3 box's one-sign test by
numpy: the same bytes, digests and decisions as before, with fewer copies and no compute call."""

from __future__ import annotations

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from boreas.catalog.changelog import WEIGHT
from boreas.node.operators.m3columns import _one_sign
from boreas.wire.columns import Columns, read_ipc, unwrap
from boreas.wire.digests import rows_digest
from boreas.wire.frames import decode, encode, make_batch
from hypothesis import given, settings
from hypothesis import strategies as st


def written_apart(batch: pa.RecordBatch, weights: pa.Array | None) -> bytes:
    """The oracle: the IPC stream written to a growing buffer, then encoded as a msgpack ``bin`` by msgspec (what a
    frame carried before ``framed``, and what its digest hashed)."""
    if weights is not None:
        batch = pa.RecordBatch.from_arrays([*batch.columns, weights],
                                           schema=batch.schema.append(pa.field(WEIGHT, pa.int64())))
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return msgspec.msgpack.encode(sink.getvalue().to_pybytes())


def a_batch(rows: int, seed: int) -> pa.RecordBatch:
    rng = np.random.default_rng(seed)
    return pa.record_batch({"k": pa.array(rng.integers(-9, 9, rows, dtype=np.int32)),
                            "v": pa.array(rng.random(rows)),
                            "s": pa.array([f"s{i % 7}" for i in range(rows)])})


# Row counts either side of msgpack's bin 16 / bin 32 headers (a stream's bytes under 65,536, more); bin 8 below
@settings(max_examples=40, deadline=None)
@given(st.sampled_from([0, 1, 2, 5, 50, 2_000, 3_500, 5_000, 20_000]), st.booleans(), st.integers(0, 2**32 - 1))
def test_framed_is_the_bin_of_the_stream_byte_for_byte(rows, weighted, seed):
    batch = a_batch(rows, seed)
    weights = pa.array(np.where(np.arange(rows) % 3, 1, -1), pa.int64()) if weighted else None
    want = written_apart(batch, weights)
    cols = Columns(batch, weights=weights)
    got = cols.framed()
    assert bytes(got) == want
    assert cols.ipc() == bytes(unwrap(want))  # read back from the framed bytes, not written again
    back = read_ipc(unwrap(got))
    assert back.column(0).equals(batch.column(0)) and back.num_rows == rows


def test_a_stream_under_256_bytes_takes_the_bin_8_header():
    """Only a batch of no columns writes an IPC stream this short; its frame is still the old bytes."""
    batch = pa.record_batch({"x": [1]}).select([])
    want = written_apart(batch, None)
    assert want[0] == 0xC4  # msgpack bin 8
    assert bytes(Columns(batch).framed()) == want


def test_a_publishers_frame_keeps_its_digest():
    """A re-run under this release drops what an older one's run took: the digest hashes the same bytes."""
    batch = a_batch(20_000, 7)
    frame = decode(encode(make_batch("S", "p", 3, Columns(batch), digest=True)))
    want = written_apart(batch, None)
    assert bytes(frame.rows) == want
    assert frame.digest == rows_digest(want)


def test_columns_that_came_as_bytes_are_framed_from_them():
    """A batch read from a frame (its IPC bytes at hand) goes on as those bytes, not written again."""
    want = written_apart(a_batch(300, 1), None)
    cols = Columns(read_ipc(unwrap(want)), unwrap(want))
    assert bytes(cols.framed()) == want


def by_kernel(sign: pa.Array | None, weights: pa.Array | None) -> int | None:
    """The one-sign decision by Arrow's min_max (the oracle)."""
    product = None
    for column in (sign, weights):
        if column is None:
            continue
        bounds = pc.min_max(column)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        if low != high or low not in (1, -1):
            return None
        product = low if product is None else product * low
    return product


signs = st.lists(st.sampled_from([1, -1, 0, 2, -3]), max_size=30)


@settings(max_examples=200, deadline=None)
@given(signs, st.one_of(st.none(), signs), st.sampled_from([pa.int8(), pa.int32(), pa.int64()]),
       st.booleans())
def test_one_sign_by_numpy_decides_as_the_kernel_did(sign, weights, kind, same):
    if same and sign:
        sign = [sign[0]] * len(sign)
    s = pa.array(sign, kind)
    w = None if weights is None else pa.array((weights + [1] * len(sign))[:len(sign)], pa.int64())
    assert _one_sign(s, w) == by_kernel(s, w)
    assert _one_sign(None, w) == by_kernel(None, w)
