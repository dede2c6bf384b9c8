"""``SUM(e FOR K : m[G, K] WHERE c)``: an aggregate over a map's entries, of a value computed at each entry.

Why a node of its own: an aggregate of aggregates (TPC-H Q13 groups
customers by their order count, Q15 takes the MAX of per-supplier sums) is
not an aggregate of the rows, so no map of the rows holds it.  DBToaster
writes it with a *lifted map value*, ``custdist[C] = Sum_K rows[K] * (C ^=
cnt[K])``: the inner aggregate's value becomes a variable.  A view reads it
the same way when it is read: ``COUNT(1 FOR K : rows[K] WHERE cnt[K] = C)``
counts the inner groups ``K`` (the entries of ``rows`` at the view's row, its
``vars`` free) whose count is ``C``; the value folded is any view expression
of the entry's variables (``MAX(rev[K] FOR K : rows[K])``), where
:class:`~.viewnodes.Fold` folds a key.

A view variable that no map key binds is *lifted*: a conjunct ``C = e`` of an
``Over``'s condition binds it, the view's rows are the values ``e`` takes over
the ``Over``'s entries (:func:`lifts`).  This module is the node and that
rule, shared by the checker and the runtime.

>>> from .syntax import parse_program
>>> v = parse_program("DECLARE VIEW v[c := C](n := COUNT(1 FOR K : r[K] WHERE c[K] = C));").views[0]
>>> v.columns[0].expr.vars, lifts(v, set())
(('K',), {'C': (MapRef(name='c', args=(Var(name='K'),)), Over(kind='COUNT', expr=Const(value=1), vars=('K',), ref=MapRef(name='r', args=(Var(name='K'),)), cond=Cmp(op='=', left=MapRef(name='c', args=(Var(name='K'),)), right=Var(name='C'))))})
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .ast import Cmp, Expr, MapRef, Var, ViewDecl, walk
from .viewnodes import BoolOp, Fold, Total
from .errors import Pos


@dataclass(frozen=True)
class Over:
    """``KIND(expr FOR vars : ref WHERE cond)``: over the entries of ``ref`` at the row (``vars`` free, entries
    of value 0 skipped) where ``cond`` holds, SUM, MIN or MAX of ``expr`` at the entry, or COUNT of the entries
    (0 over none)."""

    kind: str
    expr: Expr
    vars: tuple[str, ...]
    ref: MapRef
    cond: Expr | None = None
    pos: Pos | None = field(default=None, compare=False, repr=False, kw_only=True)

    def children(self) -> tuple[Expr, ...]:
        """The sub-expressions :func:`.ast.walk` visits."""
        return (self.expr, self.ref) + (() if self.cond is None else (self.cond,))


def conjuncts(e: Expr | None) -> list[Expr]:
    """The AND-ed parts of a condition.

    >>> conjuncts(BoolOp("AND", (Cmp("=", Var("A"), Var("B")), Cmp("<", Var("A"), Var("C")))))[1]
    Cmp(op='<', left=Var(name='A'), right=Var(name='C'))
    """
    if e is None:
        return []
    if isinstance(e, BoolOp) and e.op == "AND":
        return [x for a in e.args for x in conjuncts(a)]
    return [e]


def names(e: Expr) -> set[str]:
    """The variables ``e`` reads, less those a fold or an aggregate inside it ranges over (an inner MIN is a
    ``Fold`` over the values of its group: ``MIN(B FOR ... m[A, B])`` reads ``A``)."""
    own = {x for n in walk(e) for x in ((n.var,) if isinstance(n, Fold) else n.vars if isinstance(n, (Total, Over))
                                         else ())}
    return {n.name for n in walk(e) if isinstance(n, Var)} - own


def lifts(v: ViewDecl, bound: set[str]) -> dict[str, tuple[Expr, Over]]:
    """The view's lifted variables: each row variable not in ``bound`` (the ones map keys bind) that a conjunct
    ``X = e`` of an ``Over``'s condition binds, with ``e`` (reading only the ``Over``'s variables, bound row
    variables and variables lifted before it) and that ``Over``."""
    row = list(dict.fromkeys(v.key_vars))
    exprs = [c.expr for c in v.columns if c.expr is not None] + ([v.where] if v.where is not None else [])
    overs = [n for e in exprs for n in walk(e) if isinstance(n, Over)]
    out: dict[str, tuple[Expr, Over]] = {}
    for o in overs:
        for c in conjuncts(o.cond):
            if not isinstance(c, Cmp) or c.op != "=":
                continue
            for x, e in ((c.left, c.right), (c.right, c.left)):
                if isinstance(x, Var) and x.name in row and x.name not in bound and x.name not in out \
                        and names(e) <= set(o.vars) | bound | set(out):
                    out[x.name] = (e, o)
    return out


def lift_sources(v: ViewDecl, bound: set[str]) -> list[tuple[Over, dict[str, Expr]]]:
    """The aggregates whose entries give the view's rows, each with the expressions it binds every lifted
    variable (:func:`lifts`) to.  One, :func:`lifts`' source, unless the view's WHERE is an OR each of whose
    disjuncts holds an aggregate binding them all (a UNION of grouped queries' values, the lift bound per part as
    DBToaster's union of lifted maps): then the rows are those every disjunct's source gives, since a row none
    of them gives is in no disjunct.

    >>> from .syntax import parse_program
    >>> v = parse_program('''DECLARE VIEW v[d := D](n := 1) WHERE 0 < COUNT(1 FOR K : r[K] WHERE D = c[K])
    ...     OR 0 < COUNT(1 FOR J : s[J] WHERE D = e[J]);''').views[0]
    >>> [(o.ref.name, b["D"].name) for o, b in lift_sources(v, set())]
    [('r', 'c'), ('s', 'e')]
    """
    found = lifts(v, bound)
    if not found:
        return []
    first = next(iter(found.values()))[1]
    if isinstance(v.where, BoolOp) and v.where.op == "OR":
        out = []
        for d in v.where.args:
            binding = next(((o, b) for o in (n for n in walk(d) if isinstance(n, Over))
                            if len(b := _binds(o, set(found), bound)) == len(found)), None)
            if binding is None:
                break
            out.append(binding)
        else:
            return out
    return [(first, _binds(first, set(found), bound))]


def _binds(o: Over, lifted: set[str], bound: set[str]) -> dict[str, Expr]:
    """What ``o``'s condition binds the lifted variables to (``X = e``, ``e`` reading its variables, bound ones
    and ones it binds before)."""
    out: dict[str, Expr] = {}
    grew = True
    while grew:
        grew = False
        for c in conjuncts(o.cond):
            if isinstance(c, Cmp) and c.op == "=":
                for x, e in ((c.left, c.right), (c.right, c.left)):
                    if isinstance(x, Var) and x.name in lifted and x.name not in out \
                            and names(e) <= set(o.vars) | bound | set(out):
                        out[x.name] = e
                        grew = True
    return out


def rereads(v: ViewDecl) -> bool:
    """Whether ``changes()`` re-reads every row of the view after a batch that changed its maps.

    Why: a changed map entry names the row it belongs to only when the map is
    read at the row's variables.  A lifted key (:func:`lifts`) is a value, not
    a key; and a map an ``Over`` reads at its own variables only (a derived
    table's groups joined with a relation, an uncorrelated ``MAX`` of them), or
    at fewer than the row's (a scalar subquery's value, ``SUM(v[] FOR : g[K])``),
    belongs to every row that aggregates it.  Either way the affected rows are
    found by reading the view before and after the batch.  An ``Over`` whose every
    map is read at all the row's variables (and its own: Nexmark q4's
    ``SUM(MAX(P : final[G, C, P]) FOR G : rows[G, C])`` per category ``C``) is
    not re-read: an entry it changed names its row, as a map read at the row does.

    >>> from .syntax import parse_program
    >>> v = parse_program("DECLARE VIEW v[d := D](n := SUM(o[K, D] FOR K : o[K, D] WHERE 0 < g[K]));").views[0]
    >>> rereads(v), rereads(parse_program("DECLARE VIEW w[d := D](n := o[D]);").views[0])
    (True, False)
    >>> rereads(parse_program("DECLARE VIEW u[c := C](s := SUM(MAX(P : f[G, C, P]) FOR G : r[G, C]));").views[0])
    False
    """
    exprs = [c.expr for c in v.columns if c.expr is not None] + ([v.where] if v.where is not None else [])
    row = set(v.key_vars)

    def apart(o: Over) -> bool:  # reads a map at fewer than the row's variables (a scalar subquery's value)
        return any(isinstance(m, MapRef) and not row <= {a.name for a in m.args if isinstance(a, Var)}
                   for part in (o.ref, o.expr) + (() if o.cond is None else (o.cond,)) for m in walk(part))

    return bool(lifts(v, set())) or any(isinstance(n, Over) and (apart(n) or bool(n.vars and not row))
                                        for e in exprs for n in walk(e))
