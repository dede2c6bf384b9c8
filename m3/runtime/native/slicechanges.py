"""A counted map's batch read from C as the changes of its slices' counts: grouped in numpy, decoded per slice.

Why: a map kept as counts alone (:mod:`..slicecounts`, a ``COUNT(DISTINCT x)``'s
multiplicity map) changes a count only where an entry went from 0 to
non-zero or back, and only the slice's count is read.  Decoding every key
the batch wrote into a Python tuple (one per bid for Nexmark q16's eight
``(channel, day, bidder)`` maps) and adding each transition to a dict costs
per row; here the batch's distinct written keys with their values before
and now (``rt_last_distinct``, one C call) are masked to the transitions,
grouped by their codes at the bound positions (``numpy.unique``) and summed
(``bincount``), and only one key per slice whose count changed is decoded:
per batch O(the transitions) in numpy and O(the changed slices) in Python.  Since branch ``nx16`` the
grouping is one hash pass in C (:mod:`.crt_slices`); the numpy reading is its reference and fallback.
"""

from __future__ import annotations

from array import array

import numpy as np

from .backend import NativeMaps, ffi


def slice_changes(native: NativeMaps, name: str, at: int) -> tuple[list[tuple], list[int]]:
    """:func:`slice_changes_numpy`'s answer found in C by one hash pass (``rt_slice_changes``,
    :mod:`.crt_slices`): only the slices whose count changed leave C, one key each, decoded."""
    m, arity = native.map_no[name], native.arity[name]
    lib = native.lib
    cap = lib.rt_last(native.rt, m, ffi.NULL) // (arity + 1)
    if not cap:
        return [], []
    keys, deltas = array("q", bytes(8 * cap * arity)), array("q", bytes(8 * cap))
    n = lib.rt_slice_changes(native.rt, m, at, cap, ffi.from_buffer("int64_t[]", keys),
                             ffi.from_buffer("int64_t[]", deltas))
    if n == -2:  # (more key columns than the C pass takes)
        return slice_changes_numpy(native, name, at)
    if n < 0:
        raise MemoryError("rt_slice_changes")
    return native.codec.decode_keys(name, keys[:n * arity], n), deltas[:n].tolist()


def slice_changes_numpy(native: NativeMaps, name: str, at: int) -> tuple[list[tuple], list[int]]:
    """The slices (bound at every key position but ``at``) of map ``name`` whose count of non-zero entries the
    last committed batch changed, each as one key of it that the batch wrote (key tuple, decoded), in the order
    first written, with the change of its count; none for a slice whose entries came and went in equal
    numbers.  The map's values are INT (:func:`..slicecounts.counted_maps`)."""
    m, arity = native.map_no[name], native.arity[name]
    lib = native.lib
    cap = lib.rt_last(native.rt, m, ffi.NULL) // (arity + 1)
    if not cap:
        return [], []
    keys = array("q", bytes(8 * max(1, cap * arity)))
    olds, news = array("q", bytes(8 * cap)), array("q", bytes(8 * cap))
    n = lib.rt_last_distinct(native.rt, m, cap, *(ffi.from_buffer("int64_t[]", a) for a in (keys, olds, news)))
    if n < 0:
        raise MemoryError("rt_last_distinct")
    old, new = np.frombuffer(olds, np.int64, n), np.frombuffer(news, np.int64, n)
    moved = np.flatnonzero((old == 0) != (new == 0))
    if not moved.size:
        return [], []
    codes = np.frombuffer(keys, np.int64, n * arity).reshape(n, arity)[moved]
    delta = np.where(old[moved] == 0, 1, -1)
    bound = np.delete(codes, at, axis=1)
    if bound.shape[1] == 0:
        first, inverse = np.zeros(1, np.int64), np.zeros(len(moved), np.int64)
    else:
        rows = np.ascontiguousarray(bound).view(np.dtype((np.void, 8 * bound.shape[1]))).ravel()
        _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
    sums = np.bincount(inverse.ravel(), weights=delta, minlength=len(first)).astype(np.int64)
    kept = np.flatnonzero(sums)
    kept = kept[np.argsort(first[kept], kind="stable")]  # in the order the batch first wrote them
    reps = array("q", np.ascontiguousarray(codes[first[kept]]).tobytes())
    return native.codec.decode_keys(name, reps, len(kept)), sums[kept].tolist()
