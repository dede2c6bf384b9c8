"""TOTALs correlated by equalities: a nested condition that reads its maps only at *correlation keys*.

Why: a ``TOTAL(K, Q : m[G, K, Q] WHERE cond)`` (:class:`~.viewnodes.Total`)
sums the entries of ``m`` at the row whose condition holds.  When every map
the condition reads is read at summed variables ``K`` (the subquery's
correlation columns, equated with the outer ones: TPC-H Q17's
``l_partkey = p_partkey``), the row's variables and constants — never at
``Q`` (a column compared with the subquery's value, Q17's ``l_quantity``),
and never through another ``TOTAL``, fold or aggregate — the sum splits by
``K``: each value of ``K`` contributes the entries of ``m`` at ``K`` whose
``Q`` meets the condition, and that contribution changes only when an entry
of ``m`` at ``K``, or of a condition's map at ``K``, does.  So the runtime
keeps each key's contribution and, after a batch, recomputes only the keys
its journals name (:mod:`.runtime.totals`), instead of every ``(K, Q)`` of
the row's group.

A subquery correlated by a comparison (VWAP's ``b2.price > b1.price``: a
``TOTAL`` inside the condition, over a range of prices) does not split so:
a change at one price moves the condition of every price below it.  Neither
does an uncorrelated one (no ``K``: a change of its maps moves every entry).
This module says which ``TOTAL`` splits and how (:func:`correlation`);
:func:`.compiler.views.cost_class` says so in ``boreas compile``.

>>> from .syntax import parse_program
>>> v = parse_program('''DECLARE MAP m[Q: INT, K: INT] : FLOAT; DECLARE MAP s[K: INT] : INT;
... DECLARE MAP c[K: INT] : INT;
... DECLARE VIEW v[](x := TOTAL(Q, K : m[Q, K] WHERE 0 < c[K] AND Q < 0.2 * (s[K] / c[K]))) WHERE 0 < c[1];''').views[0]
>>> t = correlations(v)[0]
>>> t.keys, t.outer, t.key_slots, [r.name for r in t.reads]
(('K',), (), (1,), ['c', 's', 'c'])
"""

from __future__ import annotations

from dataclasses import dataclass

from .ast import Call, Const, Expr, MapRef, Var, ViewDecl, walk
from .over import Over
from .viewnodes import Fold, Total


@dataclass(frozen=True)
class Correlation:
    """How one ``TOTAL`` splits by its correlation keys.

    ``keys``: its summed variables that the condition's maps read (``K``);
    ``outer``: the row's variables it reads (its value depends on them: what
    a memo of it is keyed by); ``key_slots``: the positions of ``keys`` in
    the summed map's arguments; ``reads``: the condition's map references.
    """

    total: Total
    keys: tuple[str, ...]
    outer: tuple[str, ...]
    key_slots: tuple[int, ...]
    reads: tuple[MapRef, ...]


def correlation(t: Total) -> Correlation | None:
    """The split of ``t`` by its correlation keys, or None when it does not split (see the module docstring).

    >>> from .viewnodes import BoolOp
    >>> from .ast import Cmp
    >>> m = MapRef("m", (Var("A"), Var("K")))
    >>> correlation(Total(("K",), m, Cmp("<", Var("K"), Var("A")))) is None  # no map in the condition
    True
    >>> correlation(Total(("K",), m, Cmp("<", Const(0), MapRef("n", (Var("K"),))))).outer
    ('A',)
    """
    if t.cond is None or any(isinstance(n, (Total, Fold, Over, Call)) for n in walk(t.cond)):
        return None
    own = set(t.vars)
    args = t.ref.args
    if any(not isinstance(a, (Var, Const)) for a in args):
        return None
    summed = [a.name for a in args if isinstance(a, Var) and a.name in own]
    if len(summed) != len(set(summed)) or set(summed) != own:  # each summed variable once, all of them keys of m
        return None
    reads = tuple(n for n in walk(t.cond) if isinstance(n, MapRef))
    if any(not isinstance(a, (Var, Const)) for r in reads for a in r.args):
        return None
    keys = tuple(x for x in t.vars if any(isinstance(a, Var) and a.name == x for r in reads for a in r.args))
    if not keys:
        return None
    outer = tuple(dict.fromkeys(n.name for e in (t.ref, t.cond) for n in walk(e)
                                if isinstance(n, Var) and n.name not in own))
    slots = tuple(next(i for i, a in enumerate(args) if isinstance(a, Var) and a.name == k) for k in keys)
    return Correlation(t, keys, outer, slots, reads)


def top_totals(v: ViewDecl) -> list[Total]:
    """The ``TOTAL`` nodes of a view that are read at the row itself (not inside another one's condition, a
    fold's or an aggregate's: those are read at the enclosing one's variables)."""
    exprs: list[Expr] = [c.expr for c in v.columns if c.expr is not None] + ([v.where] if v.where is not None else [])
    nodes = [n for e in exprs for n in walk(e)]
    inner = {id(x) for n in nodes if isinstance(n, (Total, Fold, Over)) for c in n.children() for x in walk(c)}
    return [n for n in nodes if isinstance(n, Total) and id(n) not in inner]


def correlations(v: ViewDecl) -> list[Correlation]:
    """The view's ``TOTAL`` nodes read at the row that split by correlation keys."""
    return [c for c in map(correlation, top_totals(v)) if c is not None]
