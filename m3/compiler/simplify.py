"""Pass 4, simplify: fold what the event has made constant, drop zero terms, merge equal terms.

* a comparison between constants (or of a variable with itself) is decided:
  a true one disappears, a false one removes its term;
* repeated comparisons in a product are kept once (they are 0/1);
* polynomial factors without variables fold into the coefficient;
* terms that differ only in their coefficient are added, and zero terms go.

>>> from ..calculus import Cond, Lit, Term, V, poly_const, poly_var
>>> from .delta import DeltaTerm
>>> X = V("X", "INT")
>>> ts = (DeltaTerm((X,), Term(2, (), (Cond("<", Lit(1), Lit(2)), Cond("=", X, X)), (poly_const(3), poly_var(X)))),
...       DeltaTerm((X,), Term(-6, (), (), (poly_var(X),))),
...       DeltaTerm((X,), Term(1, (), (Cond("<", X, X),))))
>>> simplify(ts)
()
"""

from __future__ import annotations

from ..ast import LIKE_OPS
from ..calculus import Cond, Lit, Term
from ..like import COMPARE
from .delta import DeltaTerm

_OPS = COMPARE


def decide(c: Cond) -> bool | None:
    """True/False when the comparison's outcome is known without data, else None.

    >>> from ..calculus import V
    >>> decide(Cond("<=", V("A", "INT"), V("A", "INT"))), decide(Cond("<", Lit(3), Lit(2))), decide(Cond("=", V("A", "INT"), Lit(1)))
    (True, False, None)
    """
    if isinstance(c.left, Lit) and isinstance(c.right, Lit):
        try:
            return bool(_OPS[c.op](c.left.value, c.right.value))
        except TypeError:
            return c.op == "<>"
    if c.left == c.right and c.op not in LIKE_OPS:
        return c.op in ("=", "<=")
    return None


def simplify_term(t: Term) -> Term | None:
    """One term simplified, or None when it is zero."""
    conds: list[Cond] = []
    for c in t.conds:
        outcome = decide(c)
        if outcome is False:
            return None
        if outcome is None and c not in conds:
            conds.append(c)
    coef = t.coef
    polys = []
    for p in t.polys:
        if not p:
            return None
        if all(not vs for _, vs in p):
            coef *= sum(c for c, _ in p)
        else:
            polys.append(p)
    if not coef:
        return None
    if isinstance(coef, float) and coef.is_integer() and not isinstance(t.coef, float):
        coef = int(coef)
    return Term(coef, t.atoms, tuple(conds), tuple(polys))


def simplify(terms: tuple[DeltaTerm, ...]) -> tuple[DeltaTerm, ...]:
    """Simplify every term and merge those equal up to their coefficient (order kept)."""
    acc: dict[tuple, DeltaTerm] = {}
    for d in terms:
        t = simplify_term(d.term)
        if t is None:
            continue
        key = (d.keys, t.atoms, tuple(sorted(t.conds, key=str)), tuple(sorted(t.polys, key=str)))
        if key in acc:
            old = acc[key]
            acc[key] = DeltaTerm(old.keys, Term(old.term.coef + t.coef, old.term.atoms, old.term.conds, old.term.polys))
        else:
            acc[key] = DeltaTerm(d.keys, t)
    return tuple(d for d in acc.values() if d.term.coef)
