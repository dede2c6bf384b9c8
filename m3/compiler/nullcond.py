"""Two-valued conditions built while three-valued ones are rewritten: TRUE and FALSE folded as Python constants.

Why its own module: :mod:`.threevalued` (a query's own conditions) and :mod:`.nullsub` (a subquery's, and NOT IN)
build the same conjunctions, where a part may be known TRUE (None) or FALSE (False) before the tree has it.

>>> import sqlglot
>>> a, b = sqlglot.parse_one("x = 1"), sqlglot.parse_one("y = 2")
>>> all_of([a, None, b]).sql(), any_of([a, None]), all_of([a, False])
('(x = 1 AND y = 2)', None, False)
"""

from __future__ import annotations

from sqlglot import exp


def all_of(parts: list):
    """The conjunction of conditions (None: TRUE, False: FALSE)."""
    return _fold(parts, exp.And, absorbing=False, identity=None)


def any_of(parts: list):
    """The disjunction of conditions (None: TRUE, False: FALSE)."""
    return _fold(parts, exp.Or, absorbing=None, identity=False)


def _fold(parts: list, node: type, absorbing: bool | None, identity: bool | None):
    """``parts`` joined by ``node`` (And, Or), the constants TRUE (None) and FALSE (False) folded: one
    ``absorbing`` part decides it, an ``identity`` part drops out."""
    if any(p is absorbing for p in parts):
        return absorbing
    parts = [p for p in parts if p is not identity]
    if not parts:
        return identity
    out = parts[0]
    for p in parts[1:]:
        out = node(this=out, expression=p)
    return exp.Paren(this=out) if len(parts) > 1 else out


def never() -> exp.Expression:
    """A condition never TRUE (an atom over a NULL constant)."""
    return exp.EQ(this=exp.Literal.number(1), expression=exp.Literal.number(0))


def replaced(tree: exp.Expression, node: exp.Expression, by: exp.Expression) -> exp.Expression:
    """A copy of ``tree`` with ``node`` (a node of it) replaced by ``by``."""
    path = []
    while node is not tree:
        path.append((node.arg_key, node.index))
        node = node.parent
    out = tree.copy()
    target = out
    for key, index in reversed(path):
        child = target.args[key]
        target = child[index] if index is not None else child
    if target is out:
        return by.copy()
    target.replace(by.copy())
    return out
