"""A batch's rows as numbers and group codes, for the aggregate's columnar paths.

:func:`group_codes` gives each row one int64 code for its group (the
group-by fields' dictionary encodings, combined) and the group key of a
code as the row path makes it, or None where Arrow's grouping is not
Python's (:func:`float_keys_agree`); :func:`numbers` a numeric column as
numpy.  Read by the value windows' runs (:mod:`.aggregate_runs`), the tuple
windows (:mod:`.aggregate_tuples`) and a changelog's partials
(:mod:`.aggregate_retract`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def numbers(column: pa.Array) -> np.ndarray:
    """A numeric column as numpy, nulls as 0 (callers mask them)."""
    if column.null_count:
        column = pc.fill_null(column, 0)
    return column.to_numpy(zero_copy_only=False)


def float_keys_agree(column: pa.Array) -> bool:
    """Whether Arrow's grouping of a column is Python's: not for a float column with a NaN (every NaN row is
    a group of its own in Python, one group in Arrow) or a zero (``-0.0 == 0.0`` is one group in Python, keyed
    by whichever came first, even in an earlier batch; two in Arrow).  Any other column: yes."""
    if not pa.types.is_floating(column.type) or not len(column):
        return True
    odd = pc.or_(pc.is_nan(column), pc.equal(column, pa.scalar(0.0, column.type)))
    return not pc.any(odd).as_py()


def group_codes(batch: pa.RecordBatch, groups: list[int]) -> tuple[np.ndarray | None, Callable[[int], Any], int]:
    """One int64 code per row for its group, the group key (as the row path makes it) of a code, and how many
    codes there can be."""
    n = batch.num_rows
    if not groups:
        return np.zeros(n, np.int64), lambda code: None, 1
    digits, dictionaries = [], []
    for i in groups:
        if not float_keys_agree(batch.column(i)):
            return None, lambda code: None, 0
        encoded = pc.dictionary_encode(batch.column(i), null_encoding="encode")
        digits.append(np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64))
        dictionaries.append(encoded.dictionary.to_pylist())
    if len(groups) == 1:
        values = dictionaries[0]
        return digits[0], values.__getitem__, len(values)
    radix = [len(d) for d in dictionaries]
    distinct = float(np.prod(np.asarray(radix, dtype=np.float64)))
    if distinct >= 2 ** 62:
        return None, lambda code: None, 0
    codes = np.zeros(n, np.int64)
    for d, r in zip(digits, radix):
        codes = codes * r + d

    def key(code: int) -> tuple:
        parts = []
        for values, r in zip(reversed(dictionaries), reversed(radix)):
            code, d = divmod(code, r)
            parts.append(values[d])
        return tuple(reversed(parts))
    return codes, key, int(distinct)
