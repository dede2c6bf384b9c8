"""A batch's string values made distinct once: a costly string function per distinct value, and the encodings
that say which row holds which, remembered for the last few arrays shown (per thread: each held array,
and the frame it was read from, stays alive until it is evicted).

Why a module of its own: one stateless view can call several functions of
one column (Nexmark's q22: ``SPLIT_INDEX(url, '/', 3)``, ``.., 4)``,
``.., 5)``), each of which :func:`per_distinct` computes once per distinct
URL; and every STRING column the view selects is made distinct again to
intern its strings for the runtime (node/operators/m3columns.py).  Both
need the column's dictionary encoding, and for a function's result that
encoding is known already: the function's values over the argument's
dictionary, taken by the argument's indices.  :class:`Encodings` remembers
the encodings of the arrays it was shown, so each is made once per batch.

An array is recognised by its data, not by the Python object (a batch's
``column(i)`` is a new wrapper per call): the same type, offset, length and
buffer addresses are the same values, since Arrow arrays are immutable and
the remembered array holds its buffers alive.

>>> import pyarrow as pa, pyarrow.compute as pc
>>> urls = pa.array(["a/b", "c", "a/b", None, "a/b", "c"] * 20)
>>> upper = per_distinct(urls, pc.utf8_upper)
>>> upper.to_pylist()[:5]
['A/B', 'C', 'A/B', None, 'A/B']
>>> encoded(upper).dictionary.to_pylist()           # the function's values over the URLs' dictionary
['A/B', 'C']
>>> encoded(pa.array(["x", "y", "x"])).indices.to_pylist()   # an array never seen: encoded now
[0, 1, 0]
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

_KEEP = 8  # encodings remembered per thread: a batch's string functions' arguments and results, at most


def _identity(values: pa.Array) -> tuple:
    return (values.type, values.offset, len(values), tuple(b.address if b is not None else 0 for b in values.buffers()))


class Encodings(threading.local):
    """Owns, per thread (a node's boxes may run in several), the dictionary encodings of the last arrays shown,
    each with the array whose buffers it describes; the oldest forgotten past :data:`_KEEP`."""

    def __init__(self) -> None:
        self.held: dict[tuple, tuple[pa.Array, pa.DictionaryArray]] = {}

    def find(self, values: pa.Array) -> pa.DictionaryArray | None:
        got = self.held.get(_identity(values))
        return None if got is None else got[1]

    def remember(self, values: pa.Array, encoding: pa.DictionaryArray) -> None:
        if len(self.held) >= _KEEP:
            del self.held[next(iter(self.held))]
        self.held[_identity(values)] = (values, encoding)


_ENCODINGS = Encodings()


def encoded(values: pa.Array) -> pa.DictionaryArray:
    """``pc.dictionary_encode(values)``, or an encoding of the same rows remembered for them (its dictionary may
    repeat a value: a function's values over distinct arguments; a null row's index is null either way).  What
    is encoded here is not remembered: only :func:`per_distinct`'s arguments and results are (a box's every
    STRING column kept alive, q7's ``extra`` among them, would hold batches' worth of memory for nothing)."""
    got = _ENCODINGS.find(values)
    return pc.dictionary_encode(values) if got is None else got


def per_distinct(values: pa.Array | pa.Scalar, kernel: Callable[[pa.Array], pa.Array]) -> pa.Array | pa.Scalar:
    """``kernel`` (a string function that costs more than a hash of the value: a split, a regular expression) of
    a column computed once per distinct value and taken back to the rows, where the values repeat (at least twice
    each on average: Nexmark's bids carry about 9,500 URLs in 60,000 rows); else of the column as it is.  (Not
    under ``LOWER``/``UPPER``: one pass over the bytes costs less than making the values distinct.)  Exact: a row
    gets the kernel's value of its own value (a null's index is null, and so is its result).  The result's
    encoding is remembered (:func:`encoded`).

    >>> per_distinct(pa.array(["a/b", "c", "a/b", None, "a/b", "c"]), pc.utf8_upper).to_pylist()
    ['A/B', 'C', 'A/B', None, 'A/B', 'C']
    """
    if not isinstance(values, pa.Array) or len(values) < 64:
        return kernel(values)
    encoding = _ENCODINGS.find(values)
    if encoding is None:
        encoding = pc.dictionary_encode(values)
        _ENCODINGS.remember(values, encoding)
    if 2 * len(encoding.dictionary) > len(values):
        return kernel(values)
    mapped = kernel(encoding.dictionary)
    out = mapped.take(encoding.indices)
    if not mapped.null_count and mapped.type == out.type:
        _ENCODINGS.remember(out, pa.DictionaryArray.from_arrays(encoding.indices, mapped))
    return out
