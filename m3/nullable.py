"""A nullable column as two numeric columns: its value (0 where NULL) and its indicator (1 where NULL).

Why its own module: the SQL front end declares the pair (``CREATE STREAM
R(a INT, c INT NULL)`` is the relation ``R(a, c, c__null)`` of the program)
and the runtime splits a row's ``None`` into the pair (both backends then
see ordinary numeric columns, docs/m3.md "NULLs"); both read the one naming
rule here, so a program's text needs no new syntax: an INT column named
``<c>__null`` right after ``c`` is ``c``'s indicator.

>>> expand_row((1, None, 2.5), ((1, "INT"),))
(1, 0, 1, 2.5)
>>> expand_row((1, 7, 2.5), ((1, "INT"),))
(1, 7, 0, 2.5)
>>> nullable_positions(("a", "c", "c__null", "d"))
(1,)

A view's key column ``k`` is nullable where the view has an internal key
``k__null`` (its indicator, put there by the front end:
:mod:`boreas.m3.compiler.threevalued`); its reads show ``k`` as None where the
indicator is 1:

>>> pairs = null_keys(("b", "n", "b__null"), ("b__null",))
>>> pairs, shown_key((0, "x", 1), pairs), shown_key((0, "x", 0), pairs)
(((0, 2),), (None, 'x', 1), (0, 'x', 0))
"""

from __future__ import annotations

import datetime
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

#: The suffix of an indicator column's name.
SUFFIX = "__null"

#: The value a NULL is read as in its value column, per M3 type (the indicator says it is NULL).
ZERO = {"INT": 0, "FLOAT": 0.0, "DATE": datetime.date(1970, 1, 1), "STRING": ""}


def indicator(column: str) -> str:
    """The name of ``column``'s indicator column."""
    return column + SUFFIX


def nullable_positions(names: Sequence[str]) -> tuple[int, ...]:
    """Positions (in the program's relation) of the columns followed by their indicator."""
    return tuple(i for i in range(len(names) - 1) if names[i + 1] == indicator(names[i]))


def declared(columns: Sequence) -> tuple[tuple[int, str], ...]:
    """A program relation's nullable columns (``Column`` each) as (position in a declared row, M3 type).

    >>> from .ast import Column
    >>> declared((Column("a", "INT"), Column("c", "FLOAT"), Column("c__null", "INT")))
    ((1, 'FLOAT'),)
    """
    names = [c.name for c in columns]
    return tuple((i - k, columns[i].type) for k, i in enumerate(nullable_positions(names)))


def is_indicator(names: Sequence[str], i: int) -> bool:
    """Whether ``names[i]`` is the indicator of the column before it."""
    return i > 0 and names[i] == indicator(names[i - 1])


def expand_row(row: Sequence, nullable: Sequence[tuple[int, str]]) -> tuple:
    """A declared row (``None`` for NULL) as the program's: each nullable column's value, then its indicator.

    ``nullable``: (position in the declared row, M3 type), in order.
    """
    out = list(row)
    for i, kind in reversed(nullable):
        v = out[i]
        out[i:i + 1] = (ZERO[kind], 1) if v is None else (v, 0)
    return tuple(out)


def expand_columns(columns: Sequence[Sequence], nullable: Sequence[tuple[int, str]]) -> list:
    """:func:`expand_row` for a batch given column by column.

    A column packed as C reads it (an ``array``, or a ``memoryview`` of an
    Arrow buffer without a NULL: node/operators/m3columns.py; a STRING
    column's intern ids, a DATE column's day numbers) holds no NULL: it stays
    as it is, in its encoding, and its indicator is all 0, packed too.
    Rewritten value by value it would become a list of plain numbers, which
    the runtime reads as STRING or DATE values, not as their codes (the batch
    refused: "a STRING column holds 0, not a string").

    >>> from array import array
    >>> ids = memoryview(array("q", [0, 2]))
    >>> cols = expand_columns([ids, ["x", None]], ((0, "STRING"), (1, "STRING")))
    >>> cols[0] is ids, list(cols[1]), cols[2:]
    (True, [0, 0], [['x', ''], [0, 1]])
    """
    out = list(columns)
    for i, kind in reversed(nullable):
        col = out[i]
        if isinstance(col, (array, memoryview)):  # (packed: no None can be in it)
            out[i:i + 1] = (col, array("q", bytes(8 * len(col))))
            continue
        zero = ZERO[kind]
        out[i:i + 1] = ([zero if v is None else v for v in col], [1 if v is None else 0 for v in col])
    return out



def null_keys(keys: Sequence[str], internal: Sequence[str]) -> tuple[tuple[int, int], ...]:
    """A view's nullable key columns as (position of the key, position of its internal indicator key)."""
    at = {k: i for i, k in enumerate(keys)}
    return tuple((i, at[indicator(k)]) for i, k in enumerate(keys) if indicator(k) in at and indicator(k) in internal)


def null_values(columns: Sequence[str]) -> tuple[tuple[int, int], ...]:
    """A view's value columns that may be NULL, as (position of the column, position of its hidden count).

    A SUM/AVG/MIN/MAX skipping NULLs is NULL where it reads no value; the
    front end adds the COUNT of the values it reads as a value column named
    ``<column>__null`` (:mod:`boreas.m3.compiler.threevalued`), which no output
    row holds: where it is 0 the column is NULL.
    """
    at = {c: i for i, c in enumerate(columns)}
    return tuple((i, at[indicator(c)]) for i, c in enumerate(columns) if indicator(c) in at)


ROWS = "__rows" + SUFFIX
"""The hidden COUNT(*) of a grouped view whose every value may be NULL or 0 while its group has rows (no item
counts every row: :func:`boreas.m3.compiler.nullshown.needs_rows`): its group has a row while it has rows (SQL's
``(a, NULL)`` for a SUM over only NULLs, ``(a, 0)`` for a COUNT(b) over only NULLs), which no output row holds."""


def hides(columns: Sequence[str]) -> bool:
    """Whether a view has hidden value columns (:func:`null_values`' counts, :data:`ROWS`): there a row in the
    view may show all zeros (``COUNT(b)`` 0 beside its hidden ``ROWS``), so its ``changes()`` say a row that
    left by :data:`GONE`, and its reads leave the hidden columns out.

    >>> hides(("n", "__rows__null")), hides(("s", "s__null")), hides(("n",))
    (True, True, False)
    """
    return bool(null_values(columns)) or ROWS in columns


def shown_columns(columns: Sequence[str]) -> tuple[int, ...]:
    """The positions of a view's value columns an output row holds (all but :func:`null_values`' counts and
    :data:`ROWS`).

    >>> shown_columns(("s", "s__null", "__rows__null"))
    (0,)
    """
    hidden = {j for _, j in null_values(columns)} | {i for i, c in enumerate(columns) if c == ROWS}
    return tuple(i for i in range(len(columns)) if i not in hidden)


class Gone:
    """The type of :data:`GONE` (one instance): equal to 0 and to an all-zero tuple, so a reader of ``changes()``
    written for views without NULLs (value 0 = removed) still reads a row that left as removed."""

    _one: Gone | None = None

    def __new__(cls) -> Gone:
        if cls._one is None:
            cls._one = super().__new__(cls)
        return cls._one

    def __eq__(self, other: object) -> bool:
        if isinstance(other, tuple):
            return all(x is not None and not isinstance(x, str) and x == 0 for x in other)
        return other is self or (other is not None and not isinstance(other, str) and other == 0)

    def __hash__(self) -> int:
        return 0

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "GONE"

    def __reduce__(self) -> str:
        return "GONE"


GONE = Gone()
"""What ``changes()`` reports for a row that left a view with NULL values (:func:`null_values`).  There a row in
the view may read all zeros (a SUM of 0, a COUNT(c) over only NULLs beside a NULL MAX(c) read as its count 0,
the one row of a view without GROUP BY over only NULLs), so 0 cannot mean "left" as it does elsewhere; a reader
tests ``value is GONE`` (:func:`left`).

>>> GONE == 0, GONE == (0, 0), GONE == (0, None), GONE is Gone(), left(0, True), left(0, False), left(GONE, True)
(True, True, False, True, False, True, True)
"""


def left(value, marked: bool) -> bool:
    """Whether a ``changes()`` value says its row left the view: GONE in a view whose changes mark it
    (``marked``: a view with NULL values), 0 or an all-zero tuple in any other."""
    if value is GONE or marked:
        return value is GONE
    return not any(value) if isinstance(value, tuple) else value == 0


@dataclass(frozen=True)
class ViewNulls:
    """How a view's reads show its NULLs: nullable keys None where their indicator is 1, nullable values None
    where their count is 0, the counts left out (a view of one shown column reads a value, not a tuple).

    >>> nulls = ViewNulls.of(("b", "b__null"), ("b__null",), ("s", "n", "s__null"))
    >>> nulls.row((0, 1), (0, 3, 0)), nulls.row((2, 0), (5, 3, 1)), nulls.row((2, 0), (0, 0, 0))
    (((None, 1), (None, 3)), ((2, 0), (5, 3)), ((2, 0), GONE))
    >>> nulls.row((2, 0), (0, 0, 0), present=True)
    ((2, 0), (None, 0))
    >>> counts = ViewNulls.of(("a",), (), ("n", "__rows__null"))  # COUNT(b) beside its group's hidden COUNT(*)
    >>> counts.row((1,), (0, 2)), counts.row((1,), (0, 0))
    (((1,), 0), ((1,), GONE))

    A windowed view's SUM beside its group's hidden :data:`ROWS` (m3/compiler/winrows.py): a SUM of 0 is a row
    while the count is not 0.
    """

    keys: tuple[tuple[int, int], ...]
    values: tuple[tuple[int, int], ...]
    shown: tuple[int, ...]
    hidden: bool = False  # hidden value columns (:func:`hides`): a NULL value's count, or ROWS

    @classmethod
    def of(cls, keys: Sequence[str], internal: Sequence[str], columns: Sequence[str]) -> ViewNulls | None:
        """The view's, or None where it has no NULLs to show."""
        nk, nv = null_keys(keys, internal), null_values(columns)
        return cls(nk, nv, shown_columns(columns), hides(columns)) if nk or hides(columns) else None

    def row(self, key: tuple, value, present: bool = False) -> tuple[tuple, object]:
        """A (key, value) as the runtime holds it, shown.  A view with NULL values: :data:`GONE` stays GONE, and
        an all-zero value (every hidden count 0: no entry) is GONE unless ``present`` (a view read holds only
        rows in it; a general view's change says GONE itself where its row left).  Else an all-zero value
        stays all zero (a change's all-zero value is a row that left)."""
        key = shown_key(key, self.keys) if self.keys else key
        if not self.hidden or value is GONE:
            return key, value
        if not present and not any(value):
            return key, GONE
        out = list(value)
        for i, j in self.values:
            if not value[j]:
                out[i] = None
        return key, out[self.shown[0]] if len(self.shown) == 1 else tuple(out[i] for i in self.shown)

    def rows(self, rows, present: bool = False) -> list[tuple[tuple, object]]:
        return [self.row(k, v, present) for k, v in rows]


def shown_key(key: tuple, pairs: Sequence[tuple[int, int]]) -> tuple:
    """A view's key with each nullable key column None where its indicator says NULL (1)."""
    if not any(key[j] for _, j in pairs):
        return key
    out = list(key)
    for i, j in pairs:
        if key[j]:
            out[i] = None
    return tuple(out)

