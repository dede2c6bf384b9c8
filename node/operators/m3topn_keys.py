"""A top-N's sort and partition keys, generated once per top-N as plain Python functions (the hot path: a key per
row that changes).

Why its own module: the rank order is one concept read by both rankings (node/operators/m3topn.py's
``RankedRows`` and m3topn_append.py's ``AppendTops``, through ``RankedRows``): the ORDER BY columns (a DESC number
negated, any other DESC value wrapped), then the whole row ascending (the tie order), and where a column may be
NULL, SQL's NULL order: NULLs last unless the ORDER BY says NULLS FIRST (DuckDB's default, docs/m3.md "Top-N and
deduplication"), so a NULL is never compared with a value.
"""

from __future__ import annotations


class _Desc:
    """A value that sorts in reverse (a DESC column that cannot be negated: a string)."""

    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v

    def __lt__(self, other: "_Desc") -> bool:
        return other.v < self.v

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and other.v == self.v


def sort_key_of(order: tuple[tuple[int, bool, bool], ...], numbers: frozenset[int], nullable: frozenset[int],
                width: int):
    """``row -> (ORDER BY values..., row)``, generated once per top-N: a DESC number negated, any other DESC
    value wrapped in :class:`_Desc` (the key is computed once per row that changes, in the hot path).

    ``order``: (column, DESC, NULLS FIRST).  A ``nullable`` column's value is led by whether it is NULL (``r[i]
    is None``, or ``is not None`` for NULLS FIRST), so a NULL is never compared with a value (``int < None``)
    and ranks last (first); when a column of the row may be NULL, the ties' part (the whole row ascending) is
    each column so led too, NULLs last, before the row itself.  A top-N without nullable columns keeps the
    plain key.

    >>> key = sort_key_of(((1, True, False),), frozenset({1}), frozenset({1}), 2)
    >>> sorted([(1, None), (2, 5), (3, 7)], key=key)
    [(3, 7), (2, 5), (1, None)]
    >>> key = sort_key_of(((1, False, True),), frozenset({1}), frozenset({0, 1}), 2)
    >>> sorted([(2, 5), (None, None), (1, None)], key=key)
    [(1, None), (None, None), (2, 5)]
    """
    parts = []
    for i, desc, first in order:
        if i in nullable:
            parts.append(f"r[{i}] is {'not ' if first else ''}None")
        if not desc:
            parts.append(f"r[{i}]")
        elif i in numbers:
            parts.append(f"(None if r[{i}] is None else -r[{i}])" if i in nullable else f"-r[{i}]")
        else:
            parts.append(f"_Desc(r[{i}])")
    if nullable:
        for j in range(width):
            parts.extend([f"r[{j}] is None", f"r[{j}]"] if j in nullable else [f"r[{j}]"])
    source = f"def key(r):\n    return ({', '.join(parts + ['r'])},)\n"
    scope: dict = {"_Desc": _Desc}
    exec(compile(source, "<top-N sort key>", "exec"), scope)  # noqa: S102 - indexes only, no user text
    return scope["key"]


def part_key_of(partition: tuple[int, ...]):
    """``row -> (PARTITION BY values...)``, generated once per top-N (a tuple even of one column)."""
    source = f"def part(r):\n    return ({''.join(f'r[{i}], ' for i in partition)})\n"
    scope: dict = {}
    exec(compile(source, "<top-N partition key>", "exec"), scope)  # noqa: S102 - indexes only, no user text
    return scope["part"]
