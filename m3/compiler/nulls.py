"""Where an aggregated expression is NULL: what COUNT counts, shared by normalising and by the columns' builder.

Its own module because :mod:`.normalize` (which turns COUNT into a sum of
:func:`nonnull`) and :mod:`.columns` (which asks whether a COUNT counts every
row of a group) both need it, and :mod:`.normalize` imports :mod:`.columns`.
"""

from __future__ import annotations


def nonnull(expr):
    """The 0/1 arithmetic that is 1 where an aggregated expression is not NULL (what COUNT counts).

    The front end allows NULL (``None``) only as the whole argument or as a
    branch of a CASE that is the whole argument, so only CASE chains need a look.

    >>> nonnull(("case", ((("=", ("R", "a"), 1), ("R", "b")),), None))
    ('case', ((('=', ('R', 'a'), 1), 1),), 0)
    >>> nonnull(("+", ("R", "b"), 2)), nonnull(None), nonnull(("case", ((("=", ("R", "a"), 1), 2),), 0))
    (1, 0, 1)
    """
    if expr is None:
        return 0
    if is_case(expr) and may_be_null(expr):
        return ("case", tuple((c, nonnull(v)) for c, v in expr[1]), nonnull(expr[2]))
    return 1


def may_be_null(expr) -> bool:
    """Whether an aggregated expression may be NULL: it is, or a CASE with a branch that may be."""
    return expr is None or is_case(expr) and (any(may_be_null(v) for _, v in expr[1]) or may_be_null(expr[2]))


def is_ref(e) -> bool:
    """A column reference ``(alias, column)`` (an alias may be spelt like an operator: ``FROM R neg``)."""
    return isinstance(e, tuple) and len(e) == 2 and isinstance(e[0], str) and isinstance(e[1], str)


def is_case(e) -> bool:
    """A CASE chain ``("case", ((condition, value), ...), otherwise)``."""
    return isinstance(e, tuple) and len(e) == 3 and e[0] == "case" and isinstance(e[1], tuple) and not is_ref(e)
