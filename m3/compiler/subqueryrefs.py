"""What an operand of a subquery conjunct reads (the nested tuples :mod:`.subqueries` builds).

Why apart: :mod:`.subqueries` turns SQL into :class:`.subqueries.SubQuery` values; these functions only walk
the tuples it makes (operands ``("col", ref)``, ``("sub", SubQuery)``, arithmetic; predicates of
:mod:`.predicates`) to say which columns and subqueries they read, and keep one correlation per outer column.
"""

from __future__ import annotations

from sqlglot import exp

from .arithcmp import arith_refs, is_arith
from .resolve import ColRef


def subqueries_of(x) -> list:
    """The :class:`.subqueries.SubQuery` values an operand holds."""
    if isinstance(x, tuple) and x and x[0] == "sub":
        return [x[1]]
    return [s for y in x[1:] for s in subqueries_of(y)] if isinstance(x, tuple) else []


def all_refs_outer(x) -> bool:
    """Whether an operand reads an outer column directly (``("col", ref)``)."""
    if isinstance(x, tuple) and x and x[0] == "col":
        return True
    return isinstance(x, tuple) and x[:1] != ("sub",) and any(all_refs_outer(y) for y in x[1:])


def column_refs(x) -> list[ColRef]:
    """The outer columns an operand of :func:`nested_conjunct` reads directly (``("col", ref)``)."""
    if isinstance(x, tuple) and x and x[0] == "col":
        return [x[1]]
    if isinstance(x, tuple) and x[:1] != ("sub",):
        return [r for y in x[1:] for r in column_refs(y)]
    return []


def all_refs(x) -> list[ColRef]:
    """Every column reference in a nested tuple (view expressions, predicates, arithmetic)."""
    if isinstance(x, tuple) and len(x) == 2 and all(isinstance(y, str) for y in x):
        return [x]  # type: ignore[list-item]
    if isinstance(x, tuple):
        return [r for y in x for r in all_refs(y)]
    return []


def predicate_refs(p) -> list[ColRef]:
    """The column references of a predicate of :mod:`.predicates`."""
    if not isinstance(p, tuple) or len(p) < 2:
        return []
    if p[0] in ("and", "or"):
        return predicate_refs(p[1]) + predicate_refs(p[2])
    return [r for x in p[1:] for r in (arith_refs(x) if is_arith(x) else [x] if isinstance(x, tuple) and len(x) == 2
                                       and all(isinstance(y, str) for y in x) else [])]


def one_per_outer(correlation: list[tuple[ColRef, ColRef]], joins: list) -> list[tuple[ColRef, ColRef]]:
    """The correlation with each outer column once: ``s.d = r.a AND s.b = r.a`` (or ``r.a NOT IN (SELECT s.b
    ... WHERE s.d = r.a)``) is ``s.d = r.a AND s.b = s.d``, the second an equality of the subquery's own columns
    (appended to ``joins``).  Why: the subquery's maps are keyed by the outer columns, and a map keyed twice by
    one variable is not a map."""
    first: dict[ColRef, ColRef] = {}
    out = []
    for inner, outer in correlation:
        if outer in first:
            joins.append((first[outer], inner))
        else:
            first[outer] = inner
            out.append((inner, outer))
    return out
