"""Pass 3, delta: the change of a query when one tuple is inserted into (or deleted from) a relation.

For a single-tuple update ``R += sign * {t}``, a product with k atoms over R
changes by the sum, over every non-empty subset S of those atoms, of the
product with the atoms in S replaced by the tuple, times ``sign**|S|`` (the
product rule; the subsets of size > 1 are what self-joins need).  Replacing
an atom binds its variables to the trigger's *event variables*; a variable
bound twice to different event variables (or an atom argument that is a
constant) leaves an equality guard.

The result is a list of :class:`DeltaTerm` because a key of the query may be
bound to an event variable in one term and stay a loop variable in another.

>>> from ..calculus import Agg, Atom, Term, V, poly_var
>>> A, B, C = V("A", "INT"), V("B", "INT"), V("C", "INT")
>>> q = Agg((A,), (Term(1, (Atom("R", (A, B)), Atom("S", (B, C))), (), (poly_var(C),)),))
>>> for d in delta(q, "S", -1, (V("B", "INT"), V("C", "INT"))): print(d)
[A] += -1 * R(A, B) * C
>>> q2 = Agg((), (Term(1, (Atom("R", (A, B)), Atom("R", (B, C)))),))   # self-join
>>> for d in delta(q2, "R", 1, (V("X", "INT"), V("Y", "INT"))): print(d)
[] += R(Y, C)
[] += R(A, X)
[] += {X = Y}
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from ..ast import RelationDecl
from ..calculus import Agg, Cond, Lit, Term, V, Value, substitute
from .normalize import variable_names


@dataclass(frozen=True)
class DeltaTerm:
    """One term of a delta: ``target[keys] += term``."""

    keys: tuple[Value, ...]
    term: Term

    def __str__(self) -> str:
        return f"[{', '.join(map(str, self.keys))}] += {self.term}"


def event_vars(relation: RelationDecl) -> tuple[V, ...]:
    """The trigger parameters for a relation: its column names, upper-cased (seed style)."""
    names = variable_names([c.name for c in relation.columns])
    return tuple(V(n, c.type) for n, c in zip(names, relation.columns))


def rename_apart(q: Agg, avoid: set[str]) -> Agg:
    """Rename the query's variables whose names are in ``avoid`` (so event variables cannot be captured)."""
    used = {v.name for t in q.terms for v in t.vars()} | {k.name for k in q.keys if isinstance(k, V)}
    mapping: dict[V, Value] = {}
    taken = used | avoid
    for v in sorted({v for t in q.terms for v in t.vars()} | {k for k in q.keys if isinstance(k, V)}):
        if v.name in avoid:
            n = 2
            while f"{v.name}_{n}" in taken:
                n += 1
            taken.add(f"{v.name}_{n}")
            mapping[v] = V(f"{v.name}_{n}", v.type)
    return substitute(q, mapping) if mapping else q


def delta(q: Agg, relation: str, sign: int, event: tuple[V, ...]) -> tuple[DeltaTerm, ...]:
    """∆ of ``q`` for one ``sign`` (+1 insert, -1 delete) event on ``relation`` with parameters ``event``."""
    q = rename_apart(q, {e.name for e in event})
    out: list[DeltaTerm] = []
    for term in q.terms:
        hits = [i for i, a in enumerate(term.atoms) if a.rel == relation]
        for size in range(1, len(hits) + 1):
            for subset in itertools.combinations(hits, size):
                binding: dict[V, Value] = {}
                guards: list[Cond] = []
                for i in subset:
                    for arg, ev in zip(term.atoms[i].args, event):
                        if isinstance(arg, Lit):
                            guards.append(Cond("=", ev, arg))
                        elif arg in binding:
                            guards.append(Cond("=", ev, binding[arg]))
                        else:
                            binding[arg] = ev
                rest = Term(
                    term.coef * sign**size,
                    tuple(a for i, a in enumerate(term.atoms) if i not in subset),
                    term.conds + tuple(guards),
                    term.polys,
                )
                out.append(DeltaTerm(tuple(substitute(k, binding) for k in q.keys), substitute(rest, binding)))
    return tuple(out)
