"""SQL's order of FLOAT values for MIN and MAX: NaN above every number and equal to itself.

Why its own module: DuckDB and PostgreSQL order NaN above every number and
treat NaN as equal to NaN, so ``MAX`` is NaN where any value is NaN and
``MIN`` skips NaN unless every value is NaN.  Python's ``min``/``max``
compare with ``<``, false both ways with NaN, so their answer depended on
the order the slice's values came in (issue 33).  Every place a view's
``MIN`` or ``MAX`` is folded (the interpreter, the compiled row functions,
the slices' folds memo, a closed window's numpy fold) reads the order here.

A FLOAT map key holding NaN must be one key, however many rows carry it
(a delete must find the insert's entry): a dict finds a key by identity
before ``==``, so every NaN a FLOAT key column takes is made the one object
:data:`NAN` (:func:`canonical_rows` for a batch's rows on the Python backend
and for rows loaded, the native backend's decoded keys, a restored state).

>>> nan = float("nan")
>>> least([NAN, 2.0, 1.0]), least([1.0, NAN]), greatest([1.0, NAN, 2.0]), greatest([nan, 1.0]), greatest([3, 1])
(1.0, 1.0, nan, nan, 3)
>>> least([nan, float("nan")]), least2(nan, 4.0), greatest2(4.0, nan), least2("a", "b")
(nan, 4.0, nan, 'a')
>>> canonical_rows([(1, nan), (2, 0.5)], (1,))[0][1] is NAN
True
"""

from __future__ import annotations

from collections.abc import Sequence
from math import isnan
from operator import itemgetter

#: The one NaN object every FLOAT key holds (so dict lookups find it by identity).
NAN = float("nan")


def least(values: Sequence):
    """``MIN`` of non-empty ``values``: the least number, NaN only where every value is NaN.

    ``min`` skips a NaN after a number (``NaN < x`` is false) and keeps one that comes first, so only then is
    the slice read again: no pass more than ``min``'s where the first value is a number."""
    lo = min(values)
    if lo != lo:
        numbers = [v for v in values if v == v]
        return min(numbers) if numbers else NAN
    return lo


def greatest(values: Sequence):
    """``MAX`` of non-empty ``values``: NaN where any value is NaN, else the greatest.

    A FLOAT answer is checked for a NaN among the values, one C-level pass (``in`` tests identity first, and a
    NaN a map key holds is :data:`NAN`: a NaN made otherwise, by arithmetic a view computes, is missed unless
    it comes first)."""
    hi = max(values)
    if type(hi) is float and (hi != hi or NAN in values):
        return NAN
    return hi


def extremes(values: Sequence) -> tuple:
    """``(count, MIN, MAX)`` of ``values`` (``(0, None, None)`` where there are none)."""
    return (len(values), least(values), greatest(values)) if values else (0, None, None)


def least2(a, b):
    """``MIN`` of a fold's least value so far and one more value."""
    if a != a:
        return b
    if b != b:
        return a
    return b if b < a else a


def greatest2(a, b):
    """``MAX`` of a fold's greatest value so far and one more value."""
    if a != a or b != b:
        return NAN
    return b if b > a else a


def canonical(x):
    """``x``, or :data:`NAN` where it is a NaN."""
    return NAN if x != x else x


def canonical_rows(rows: Sequence[Sequence], positions: Sequence[int]) -> Sequence[Sequence]:
    """``rows`` with every NaN at ``positions`` (FLOAT columns) the object :data:`NAN`; ``rows`` itself where none
    is NaN (one pass per FLOAT column: the Python backend's cost per batch)."""
    if not positions or not isinstance(rows, (list, tuple)):  # (an Arrow table to load is joined as columns)
        return rows
    try:  # (C-level passes: about 16 ns per row and FLOAT column)
        fix = [i for i in positions if any(map(isnan, map(itemgetter(i), rows)))]
    except TypeError:  # (not a number there: the trigger says so, as before)
        fix = [i for i in positions if any(r[i] != r[i] for r in rows)]
    if not fix:
        return rows
    return [tuple(NAN if i in fix and v != v else v for i, v in enumerate(r)) for r in rows]
