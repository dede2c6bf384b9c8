"""The load-shedding boxes on Arrow columns: ``random_drop``'s mask and ``window_drop``'s windows, a batch at a time.

Both give exactly what their row paths (node/operators/shedding.py) give, the same rows kept, from the
same :class:`random.Random`, whatever the batch boundaries (tests/test_shedding_columns.py):

* :func:`uniforms` draws ``n`` numbers as ``n`` calls of ``rng.random()`` would, in one call: CPython's
  ``random()`` is two 32-bit Mersenne Twister outputs ``a``, ``b`` made ``(a>>5 * 2**26 + b>>6) / 2**53``, and
  ``getrandbits(64 * n)`` returns the next ``2n`` outputs as one integer, the first in its lowest bits.  So a
  batch costs one draw and a few numpy operations, the generator's state is the row path's (snapshots taken
  by either path restore into the other), and a box replaying its log decides as it did.
* :func:`window_drop_mask` runs window_drop's per-group state machine on a batch: a row opens a new window
  of its group (one draw, in row order) when its window is past every window its group saw before; it is
  dropped when its window is its group's current one and that window's draw said drop; an older window's
  row is kept; a null order value is kept and changes nothing.  Grouped rows are sorted by (group, arrival),
  a group's current window is a running maximum over the sorted rows (groups made disjoint by offsets), and
  each row's decision is the last draw of its group at or before it.  The groups' state stays the row path's
  dict (key -> [window, drop?, seen]), read and written once per group present in the batch.

What the columns cannot say exactly goes back to rows (:class:`RowPath`): a float order value that is NaN or
infinite (its window is NaN, which the row path keeps in a group's state, and a group whose window is so
goes by rows ever after), an int order value near int64's
limits (``v - v % size`` would overflow), a float group field holding NaN (each NaN is a group of its own in
a dict).
"""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_HIGH = 1 << 62  # int order values beyond this go by rows: v - v % size must not overflow int64


class RowPath(Exception):
    """This batch holds a value whose columnar treatment could differ from the row path's: read it as rows."""


def uniforms(rng: random.Random, n: int) -> np.ndarray:
    """``[rng.random() for _ in range(n)]`` as a float64 array, bit for bit, leaving ``rng`` where those calls would."""
    if n <= 0:
        return np.empty(0, np.float64)
    words = np.frombuffer(rng.getrandbits(64 * n).to_bytes(8 * n, "little"), dtype="<u4")
    high = (words[0::2] >> 5).astype(np.float64)
    low = (words[1::2] >> 6).astype(np.float64)
    return (high * 67108864.0 + low) * (1.0 / 9007199254740992.0)


def random_drop_mask(rng: random.Random, rate: float, n: int) -> np.ndarray:
    """Which of ``n`` rows ``random_drop`` keeps: row i when its draw is at least ``rate``, as the row path."""
    return uniforms(rng, n) >= rate


def _numbers(column: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(valid?, values) of a numeric column; nulls' values are 0 and masked out."""
    valid = ~np.asarray(column.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    values = column.fill_null(0).to_numpy(zero_copy_only=False)
    return valid, values


def _windows(column: pa.Array, size: float) -> tuple[np.ndarray, np.ndarray]:
    """(valid?, window start ``v - v % size`` as Python computes it) of each row of the order column."""
    valid, values = _numbers(column)
    if values.dtype.kind == "f":
        values = values.astype(np.float64)  # (a single's value is a double in a row)
        if not np.isfinite(values[valid]).all():
            raise RowPath("a NaN or infinite order value")
    elif values.dtype.kind in "iu":
        values = values.astype(np.int64)
        if valid.any() and (values[valid].min() <= -_HIGH or values[valid].max() >= _HIGH):
            raise RowPath("an order value near int64's limits")  # (both ends: np.abs(INT64_MIN) is negative)
    else:
        raise RowPath(f"an order field of Arrow type {column.type}")
    return valid, values - np.mod(values, size)


def _group_ids(batch: pa.RecordBatch, groups: list[int], rows: np.ndarray) -> tuple[np.ndarray, list[Any]]:
    """Each of ``rows``' group (0..G-1) and the G keys as the row path's dict holds them (a value, a tuple)."""
    if not groups:
        return np.zeros(len(rows), np.int64), [None]
    codes, values = [], []
    for i in groups:
        column = batch.column(i)
        if len(rows) < len(column):  # (only the rows with an order value)
            column = column.take(pa.array(rows, pa.int64()))
        if pa.types.is_integer(column.type) and not column.null_count:  # numpy's unique: ints, no nulls
            found, inverse = np.unique(column.to_numpy(), return_inverse=True)
            codes.append(inverse.reshape(-1).astype(np.int64))
            values.append(found.tolist())
            continue
        if pa.types.is_floating(column.type):
            if pc.any(pc.is_nan(column)).as_py():
                raise RowPath("a NaN group value")
            column = pc.add(column, pa.scalar(0.0, column.type))  # -0.0 is 0.0's group, as in a dict
        encoded = column.dictionary_encode(null_encoding="encode")
        codes.append(encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64))
        values.append(encoded.dictionary.to_pylist())
    if len(groups) == 1:  # (a dictionary's indices are dense group ids already)
        return codes[0], values[0]
    sizes = [len(v) for v in values]
    if float(np.prod(np.array(sizes, np.float64))) < 2.0 ** 62:  # the codes as one mixed-radix number
        mixed = np.zeros(len(rows), np.int64)
        for code, size in zip(codes, sizes):
            mixed = mixed * size + code
        firsts, ids = np.unique(mixed, return_index=True, return_inverse=True)[1:]
    else:
        firsts, ids = np.unique(np.stack(codes, axis=1), axis=0, return_index=True, return_inverse=True)[1:]
    combos = np.stack(codes, axis=1)[firsts].tolist()
    keys = [tuple(values[c][k] for c, k in enumerate(combo)) for combo in combos]
    return ids.reshape(-1).astype(np.int64), keys


def window_drop_mask(batch: pa.RecordBatch, state: dict[Any, list], rng: random.Random, rate: float,
                     size: float, order: int | None, groups: list[int]) -> tuple[np.ndarray, int]:
    """Which rows window_drop keeps (a bool array) and how many it dropped; ``state`` (key -> [window, drop?,
    seen]) and ``rng`` move on as the row path would have moved them.  :class:`RowPath`: read this batch as rows
(raised before ``state`` or ``rng`` changes)."""
    n = batch.num_rows
    if isinstance(size, int) and size >= _HIGH:
        raise RowPath("a window size near int64's limits")
    if order is not None:
        valid, windows = _windows(batch.column(order), size)
        rows = np.flatnonzero(valid)
        windows = windows[rows]
    else:
        rows = np.arange(n)
        windows = None
    keep = np.ones(n, dtype=bool)
    if not len(rows):
        return keep, 0
    gid, keys = _group_ids(batch, groups, rows)
    held = [state.get(k) for k in keys]
    if any(h is not None and not math.isfinite(h[0]) for h in held):
        raise RowPath("a group's window is NaN (a NaN order value opened it)")
    if any(h is not None and isinstance(h[0], int) and abs(h[0]) >= _HIGH for h in held):
        raise RowPath("a group's window near int64's limits (the row path stored it)")
    # The rows sorted by (group, arrival), each group led by a virtual row standing for its state (if any).
    olds = [g for g, h in enumerate(held) if h is not None]
    vgid = np.array(olds, np.int64)
    all_gid = np.concatenate([vgid, gid])
    order_all = np.argsort(all_gid, kind="stable")  # (virtual rows first, then arrival order, in each group)
    sgid = all_gid[order_all]
    virtual = order_all < len(olds)
    m = len(sgid)
    starts = np.ones(m, dtype=bool)
    starts[1:] = sgid[1:] != sgid[:-1]
    first = np.maximum.accumulate(np.where(starts, np.arange(m), 0))  # each sorted row's group's first position
    if windows is None:  # TUPLES: a row's window is (tuples its group saw before it) // size
        seen_before = np.array([held[g][2] if held[g] is not None else 0 for g in range(len(keys))], np.int64)
        has_old = np.array([h is not None for h in held])
        rank = np.arange(m) - first - has_old[sgid]  # (the virtual row is not a tuple)
        sw = (seen_before[sgid] + rank) // int(size)
        sw[virtual] = [held[g][0] for g in sgid[virtual]]
    else:
        sw = np.concatenate([np.array([held[g][0] for g in olds], dtype=windows.dtype), windows])[order_all]
    # A group's current window at each sorted row: the running maximum of the windows' ranks, groups offset apart.
    uniq, ranks = np.unique(sw, return_inverse=True)
    ranks = ranks.reshape(-1).astype(np.int64)
    key = sgid * (len(uniq) + 1) + ranks
    current = np.maximum.accumulate(key)
    before = np.empty(m, np.int64)
    before[0] = -1
    before[1:] = current[:-1]
    opens = ~virtual & (starts | (key > before))  # a draw: the group's first row ever, or a window past its current
    drawn_at = np.flatnonzero(opens)
    by_arrival = drawn_at[np.argsort(order_all[drawn_at], kind="stable")]
    decision = np.zeros(m, dtype=bool)
    decision[by_arrival] = uniforms(rng, len(by_arrival)) < rate
    decision[virtual] = [bool(held[g][1]) for g in sgid[virtual]]
    decided = np.maximum.accumulate(np.where(opens | virtual, np.arange(m), -1))
    drop = decision[decided] & (key == current) & ~virtual
    dropped_rows = order_all[drop] - len(olds)
    keep[rows[dropped_rows]] = False
    # Each group's state after the batch: its last sorted row's current window and decision, and its count.
    ends = np.flatnonzero(np.append(starts[1:], True))
    counts = np.bincount(gid, minlength=len(keys))
    ended = sgid[ends]
    windows_after = sw[decided[ends]].tolist()  # (the row that opened the current window: its -0.0 kept)
    drops_after = decision[decided[ends]].tolist()
    for g, window, drop_now in zip(ended.tolist(), windows_after, drops_after):
        h = held[g]
        state[keys[g]] = [window, drop_now, (h[2] if h is not None else 0) + int(counts[g])]
    return keep, int(drop.sum())
