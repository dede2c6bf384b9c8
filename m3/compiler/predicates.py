"""Selections as the front end hands them to the normaliser, and the rewrites that keep them in that form.

A predicate is ``(op, left, right)`` with op in ``= <> < <= > >=`` over a
column reference and a constant (or two column references), ``("LIKE" | "NOT LIKE",
column, pattern)``, ``("and" | "or", p, q)``, or the constants
:data:`TRUE` and :data:`FALSE`.  There is no NOT: :func:`negate` pushes it
into the comparisons (De Morgan), which is exact because the M3 runtime has
no NULLs (two-valued logic: ``NOT a < 3`` is ``a >= 3``).  IN lists and
exact and prefix LIKE patterns are rewritten into comparisons here too, so
the normaliser and the runtime see atomic comparisons (and LIKE with any
other pattern, matched by the runtime: :mod:`boreas.m3.like`).

>>> negate(("or", ("<", "x", 3), ("=", "y", "A")))
('and', ('>=', 'x', 3), ('<>', 'y', 'A'))
>>> in_list("x", [1, 2])
('or', ('=', 'x', 1), ('=', 'x', 2))
>>> like("s", "AB%")
('and', ('>=', 's', 'AB'), ('<', 's', 'AC'))
"""

from __future__ import annotations

from collections.abc import Iterable

TRUE = ("true",)
FALSE = ("false",)
COMPARISONS = {"=": "<>", "<>": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<",  # op -> its negation
               "LIKE": "NOT LIKE", "NOT LIKE": "LIKE"}
_MAX_CHAR = chr(0x10FFFF)


def negate(p: tuple) -> tuple:
    """``NOT p`` without a NOT: comparisons flip, AND and OR swap (De Morgan), TRUE and FALSE swap.

    >>> negate(TRUE), negate(("and", ("=", "x", 1), FALSE))
    (('false',), ('or', ('<>', 'x', 1), ('true',)))
    """
    op = p[0]
    if p == TRUE:
        return FALSE
    if p == FALSE:
        return TRUE
    if op == "and":
        return ("or", negate(p[1]), negate(p[2]))
    if op == "or":
        return ("and", negate(p[1]), negate(p[2]))
    return (COMPARISONS[op], p[1], p[2])


def conj(parts: Iterable[tuple]) -> tuple:
    """The AND of predicates, TRUE dropped, FALSE absorbing.

    >>> conj([TRUE, ("=", "x", 1), ("<", "y", 2)]), conj([("=", "x", 1), FALSE]), conj([])
    (('and', ('=', 'x', 1), ('<', 'y', 2)), ('false',), ('true',))
    """
    out = TRUE
    for p in parts:
        if p == FALSE:
            return FALSE
        if p != TRUE:
            out = p if out == TRUE else ("and", out, p)
    return out


def disj(parts: Iterable[tuple]) -> tuple:
    """The OR of predicates, FALSE dropped, TRUE absorbing.

    >>> disj([FALSE, ("=", "x", 1)]), disj([("=", "x", 1), TRUE]), disj([])
    (('=', 'x', 1), ('true',), ('false',))
    """
    out = FALSE
    for p in parts:
        if p == TRUE:
            return TRUE
        if p != FALSE:
            out = p if out == FALSE else ("or", out, p)
    return out


def in_list(ref, values: Iterable) -> tuple:
    """``ref IN (v1, v2, ...)`` as ``ref = v1 OR ref = v2 ...`` (FALSE for an empty list)."""
    return disj(("=", ref, v) for v in values)


def like(ref, pattern: str) -> tuple:
    """``ref LIKE pattern`` as comparisons where it has an exact comparison form, else the LIKE comparison itself.

    A pattern without wildcards is an equality; ``prefix%`` (any number of
    trailing ``%``) is the range ``prefix <= ref < successor(prefix)``,
    exact because strings compare by code point in Python and byte-wise
    (UTF-8, the same order) in DuckDB.  ``%`` alone is TRUE (no NULLs).
    DuckDB has no default escape character, so a backslash is an ordinary
    character here too.  Other patterns (``_``, or ``%`` before the end) are
    ``("LIKE", ref, pattern)``, matched by the runtime (:mod:`boreas.m3.like`).

    >>> like("s", "BUILDING"), like("s", "%%"), like("s", "%ING"), negate(like("s", "a_c"))
    (('=', 's', 'BUILDING'), ('true',), ('LIKE', 's', '%ING'), ('NOT LIKE', 's', 'a_c'))
    """
    prefix = pattern.rstrip("%")
    if "%" in prefix or "_" in prefix:
        return ("LIKE", ref, pattern)
    if prefix == pattern:
        return ("=", ref, pattern)
    if not prefix:
        return TRUE
    upper = successor(prefix)
    return (">=", ref, prefix) if upper is None else ("and", (">=", ref, prefix), ("<", ref, upper))


def successor(prefix: str) -> str | None:
    """The least string greater than every string starting with ``prefix`` (None: there is none).

    >>> successor("AB"), successor("A" + chr(0x10FFFF)), successor(chr(0x10FFFF))
    ('AC', 'B', None)
    """
    stem = prefix.rstrip(_MAX_CHAR)
    if not stem:
        return None
    return stem[:-1] + chr(ord(stem[-1]) + 1)
