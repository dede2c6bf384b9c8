"""A changelog batch's multiset changes per (group, window), on columns: ``min``, ``max``, ``count_distinct``.

Over a changelog the retracting aggregate (:mod:`.aggregate_changes`) keeps
these functions as a multiset of their argument's values (value -> the sum
of its rows' weights), so a retraction knows the minimum left without the
rows.  Row by row it adds each row's weight to its value's count and drops
a value whose count reaches 0.  What a batch leaves in an entry's multiset
is the old count plus the *net* weight of each value the batch brings it
(a count that passes through 0 and comes back is where it would be), so
:func:`multiset_deltas` computes, for every (group, window) entry of the
batch, each value's net weight with numpy: the batch's values
dictionary-encoded, one sort by (entry, value), one ``reduceat`` of the
weights.  The values are handed over in the order they first come in the
entry's rows, so a value new to the multiset is added where the row path
adds it (:func:`apply_delta`).

A float argument's zeros are not netted: ``0.0`` and ``-0.0`` are one key
in Python, keyed by whichever was inserted first (possibly in an earlier
batch, and again after the count passed through 0), two in Arrow; so the
zero rows' ``(value, weight)`` are handed over in row order and applied one
by one (:data:`ZEROS`).  A float argument with a NaN (every NaN a key of
its own in Python) is not taken: None, and the batch reads rows.  A value's
net weight is exact: weights are int64 and a batch's sum of them cannot
overflow.  The multisets' key order (a dict in ``state()``) may differ from
the row path's where a value leaves and comes back within a batch; no
result depends on it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


#: The functions a retracting aggregate keeps as a multiset of their argument's values.
MULTISETS = ("min", "max", "count_distinct")


#: A multiset delta's key for a float argument's zeros: their ``(value, weight)`` in row order, applied one by one.
ZEROS: Any = type("Zeros", (), {"__repr__": lambda self: "ZEROS"})()  # no column's value: a key of its own


def multiset_deltas(column: pa.Array, rows: np.ndarray, ws: np.ndarray, starts: np.ndarray) -> list | None:
    """Per entry, ``{value: net weight}`` of its rows' non-None values (nets of 0 left out), or None: read rows.

    ``rows`` are the batch rows of every entry, each entry's rows consecutive and in batch order (an entry
    starts at each of ``starts``), ``ws`` their weights.  A float column's zeros (``0.0`` and ``-0.0`` are one
    key in Python, keyed by whichever is inserted first) are not netted: their rows' ``(value, weight)`` go
    under :data:`ZEROS`, for :func:`apply_delta` to apply one by one as the rows would.

    >>> col = pa.array(["b", "a", "b", None, "a"])
    >>> multiset_deltas(col, np.array([0, 1, 2, 3, 4]), np.array([1, 1, -1, 1, 2]), np.array([0, 3]))
    [{'a': 1}, {'a': 2}]
    >>> multiset_deltas(pa.array([0.0, 1.5, -0.0]), np.array([0, 1, 2]), np.array([1, 1, -1]), np.array([0]))
    [{ZEROS: [(0.0, 1), (-0.0, -1)], 1.5: 1}]
    """
    floating = pa.types.is_floating(column.type)
    if floating and len(column) and pc.any(pc.is_nan(column)).as_py():
        return None  # every NaN is a key of its own in Python
    encoded = pc.dictionary_encode(column)
    dictionary = encoded.dictionary
    indices = encoded.indices
    ok = ~np.asarray(indices.is_null(), dtype=bool)[rows] if indices.null_count else np.ones(len(rows), bool)
    codes = np.asarray(pc.fill_null(indices, 0).to_numpy(zero_copy_only=False), dtype=np.int64)[rows]
    zero = -1
    if floating and len(dictionary):
        zeros = np.flatnonzero(np.asarray(dictionary.to_numpy(zero_copy_only=False)) == 0)
        if len(zeros):  # 0.0 and -0.0: one code, as one key in Python
            zero = int(zeros[0])
            codes = np.where(np.isin(codes, zeros), zero, codes)
    entry = np.repeat(np.arange(len(starts), dtype=np.int64), np.diff(np.concatenate((starts, [len(rows)]))))
    at = np.flatnonzero(ok)  # positions in entry order, then batch order
    pairs = entry[at] * (len(dictionary) + 1) + codes[at]
    order = np.argsort(pairs, kind="stable")
    sorted_pairs = pairs[order]
    cut = np.ones(len(sorted_pairs), bool)
    cut[1:] = sorted_pairs[1:] != sorted_pairs[:-1]
    firsts = np.flatnonzero(cut)
    deltas: list[dict] = [{} for _ in range(len(starts))]
    if not len(firsts):
        return deltas
    net = np.add.reduceat(ws[at][order], firsts)
    first_at = at[order][firsts]  # where each (entry, value) first comes
    keep = (net != 0) | (codes[first_at] == zero)
    first_at, net = first_at[keep], net[keep]
    by_first = np.argsort(first_at, kind="stable")
    first_at, net = first_at[by_first], net[by_first]
    es = entry[first_at]
    values = dictionary.take(pa.array(codes[first_at])).to_pylist()
    nets = net.tolist()
    bounds = [0, *(np.flatnonzero(es[1:] != es[:-1]) + 1).tolist(), len(es)] if len(es) else [0]
    for a, b in zip(bounds, bounds[1:]):
        deltas[int(es[a])] = dict(zip(values[a:b], nets[a:b]))
    if zero >= 0:
        _zeros(deltas, column, rows, ws, entry, at[codes[at] == zero])
    return deltas


def _zeros(deltas: list[dict], column: pa.Array, rows: np.ndarray, ws: np.ndarray, entry: np.ndarray,
           where: np.ndarray) -> None:
    """The zeros' ``(value, weight)`` per entry, in row order, under :data:`ZEROS` where the netted zero was."""
    if not len(where):
        return
    signed = column.take(pa.array(rows[where])).to_pylist()
    per: dict[int, list] = {}
    for e, v, w in zip(entry[where].tolist(), signed, ws[where].tolist()):
        per.setdefault(e, []).append((v, w))
    for e, changes in per.items():  # (the column is a float's: its one zero key is where the zeros go)
        deltas[e] = {(ZEROS if k == 0 else k): (changes if k == 0 else d) for k, d in deltas[e].items()}


def apply_delta(bag: dict, delta: dict[Any, Any]) -> None:
    """A multiset changed by a batch's net weights per value (a float's zeros row by row, :data:`ZEROS`):
    what the rows' weights make of it one by one.

    >>> bag = {3: 1, 5: 2}
    >>> apply_delta(bag, {5: -2, 7: 1}); bag
    {3: 1, 7: 1}
    >>> bag = {-0.0: 1}
    >>> apply_delta(bag, {ZEROS: [(0.0, -1), (0.0, 1)]}); bag
    {0.0: 1}
    """
    if not bag and ZEROS not in delta:  # every net is not 0: the values enter in the order they came
        bag.update(delta)
        return
    for x, d in delta.items():
        if x is ZEROS:
            for v, w in d:
                n = bag.get(v, 0) + w
                if n:
                    bag[v] = n
                else:
                    del bag[v]
            continue
        n = bag.get(x, 0) + d
        if n:
            bag[x] = n
        else:
            del bag[x]
