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

A float argument with a NaN (every NaN is a key of its own in Python) or a
zero (``0.0`` and ``-0.0`` are one key in Python, keyed by whichever came
first, possibly in an earlier batch; two in Arrow) is not taken: None, and
the batch reads rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .aggregate_groups import float_keys_agree

#: The functions a retracting aggregate keeps as a multiset of their argument's values.
MULTISETS = ("min", "max", "count_distinct")


def multiset_deltas(column: pa.Array, rows: np.ndarray, ws: np.ndarray, starts: np.ndarray) -> list | None:
    """Per entry, ``{value: net weight}`` of its rows' non-None values (nets of 0 left out), or None: read rows.

    ``rows`` are the batch rows of every entry, each entry's rows consecutive and in batch order (an entry
    starts at each of ``starts``), ``ws`` their weights.

    >>> col = pa.array(["b", "a", "b", None, "a"])
    >>> multiset_deltas(col, np.array([0, 1, 2, 3, 4]), np.array([1, 1, -1, 1, 2]), np.array([0, 3]))
    [{'a': 1}, {'a': 2}]
    """
    if not float_keys_agree(column):
        return None
    encoded = pc.dictionary_encode(column)
    values = encoded.dictionary.to_pylist()
    indices = encoded.indices
    ok = ~np.asarray(indices.is_null(), dtype=bool)[rows] if indices.null_count else np.ones(len(rows), bool)
    codes = np.asarray(pc.fill_null(indices, 0).to_numpy(zero_copy_only=False), dtype=np.int64)[rows]
    entry = np.repeat(np.arange(len(starts), dtype=np.int64), np.diff(np.concatenate((starts, [len(rows)]))))
    at = np.flatnonzero(ok)  # positions in entry order, then batch order
    pairs = entry[at] * (len(values) + 1) + codes[at]
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
    keep = net != 0
    by_first = np.argsort(first_at[keep], kind="stable")
    for e, code, d in zip(entry[first_at[keep]][by_first].tolist(), codes[first_at[keep]][by_first].tolist(),
                          net[keep][by_first].tolist()):
        deltas[e][values[code]] = d
    return deltas


def apply_delta(bag: dict, delta: dict[Any, int]) -> None:
    """A multiset changed by a batch's net weights per value: what the rows' weights make of it one by one.

    >>> bag = {3: 1, 5: 2}
    >>> apply_delta(bag, {5: -2, 7: 1}); bag
    {3: 1, 7: 1}
    """
    for x, d in delta.items():
        n = bag.get(x, 0) + d
        if n:
            bag[x] = n
        else:
            del bag[x]
