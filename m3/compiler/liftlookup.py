"""Several grouped derived tables in one FROM: each beside the first is a lookup, its values lifted at its key.

Why: ``SELECT b.k, SUM(a.x + b.y) FROM (SELECT k, SUM(x) AS x FROM R GROUP
BY k) a, (SELECT k, SUM(y) AS y FROM S GROUP BY k) b WHERE a.k = b.k GROUP
BY b.k`` (DBToaster's finance ``chrissedtrades``, mddb's ``query3``) joins
two nested aggregates.  In DBToaster's calculus each grouped derived table is
``AggSum([k], ...)``, a relation of one row per group, and the join is their
product under the join conditions; where every group column of ``b`` is equal
to a column the query already ranges over (the first grouped derived table's
group columns, a joined relation's columns, or a bound lookup's), ``b`` has
at most one group per source entry: its aggregates are *lifted values* read
at those variables, ``#b.y[K]``, and the join holds where that group exists,
``0 < #b.rows[K]``.  So the source, the weight and every rule of
:mod:`.liftquery` stay those of one grouped derived table (the first in FROM
order whose variables bind every other: :func:`.liftquery.plan` tries each
in turn, so a table grouped by ``(a, b)`` is the one beside a table grouped
by ``a`` joined on ``a``, wherever it is written); a lookup only
adds its parts (``t`` and ``a`` of :meth:`.lifted.Builder.table`), its
columns to :class:`.liftscope.Scope` and its existence to the condition of
every aggregate.

Exact under inserts and deletes: the parts are ordinary grouped queries
(first-order maps, each maintained by its own relations' triggers) and the
view reads them when read (*domain-bound*, as any query over a grouped
derived table read by value).

Refused by name: grouped derived tables of which none binds all the others
(``a`` grouped by ``(k, x)`` and ``b`` by ``(k, y)`` joined on ``k``: the join
would range over pairs of both tables' groups, not built), a lookup without an
alias, a group column bound to an aggregate's value (``b.k = a.total``).

>>> import sqlglot
>>> from ..printer import format_view_expr
>>> from .examples import PlainErrors, stream
>>> from .lifted import reads_grouped
>>> from .liftquery import plan
>>> rels = {"R": stream("R", k="INT", x="INT"), "S": stream("S", k="INT", y="INT")}
>>> sel = reads_grouped(sqlglot.parse_one('''SELECT b.k, SUM(a.x + b.y) AS s FROM
...     (SELECT k, SUM(x) AS x FROM R GROUP BY k) a, (SELECT k, SUM(y) AS y FROM S GROUP BY k) b
...     WHERE a.k = b.k GROUP BY b.k'''), PlainErrors())
>>> p = plan("Q1", sel, rels, PlainErrors())
>>> [q.sql() for q in p.parts]  # doctest: +NORMALIZE_WHITESPACE
['SELECT k AS g0, COUNT(*) AS rows FROM R GROUP BY k', 'SELECT k AS g0, SUM(x) AS x FROM R GROUP BY k',
 'SELECT k AS g0, COUNT(*) AS rows FROM S GROUP BY k', 'SELECT k AS g0, SUM(y) AS y FROM S GROUP BY k']
>>> print(format_view_expr(p.columns[0][1]))
SUM(#1.0[K] + #3.0[K] FOR  : #0.0[K] WHERE 0 < #2.0[K])
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from ..ast import Var
from .lifted import Lookup
from .nodes import sql_of
from .resolve import unparen

if TYPE_CHECKING:
    from .liftscope import Scope


def register(s: Scope, items: list[exp.Expression]) -> None:
    """Each grouped derived table of ``items`` as a lookup of ``s`` (its parts added), before any column of the
    query is resolved."""
    for item in items:
        if not item.alias_or_name:
            raise s.b.ctx.error(f"a grouped derived table beside another needs an alias ({sql_of(item)})", item)
        t = s.b.table(item)
        s.lookups[t.alias] = Lookup(t, [None] * t.groups)


def bind(s: Scope, conjuncts: list[exp.Expression]) -> list[exp.Expression]:
    """Bind every lookup's group columns through the equalities among ``conjuncts`` that equate one with a
    variable the query ranges over (repeatedly: a bound lookup binds others); the conjuncts left, the lookups'
    existence added to ``s.cond``.  Refused where a lookup keeps a group column unbound."""
    rest = list(conjuncts)
    changed = True
    while changed:
        changed = False
        for c in list(rest):
            sides = [unparen(c.this), unparen(c.expression)] if type(c) is exp.EQ else []
            if len(sides) != 2 or not all(type(x) is exp.Column for x in sides):
                continue
            r = [s.resolve(x) for x in sides]
            for mine, other in ((r[0], r[1]), (r[1], r[0])):
                if mine[0] != "l" or mine[2] != "g" or s.lookups[mine[1]].args[mine[3]] is not None:
                    continue
                var = _known(s, other)
                if var is not None:
                    s.lookups[mine[1]].args[mine[3]] = var
                    rest.remove(c)
                    changed = True
                    break
    for alias, lookup in s.lookups.items():
        if not lookup.bound():
            free = [n for n, (k, i) in lookup.table.columns.items() if k == "g" and lookup.args[i] is None]
            raise s.b.ctx.error(f"unsupported grouped derived table {alias} beside another whose group columns "
                                f"{', '.join(free) or '(not selected)'} no equality binds to the other's group "
                                "columns or a joined relation's (the pairs of two tables' groups are not built)", s.sel)
        s.cond.append(lookup.exists())
    return rest


def _known(s: Scope, r: tuple) -> Var | None:
    """The variable a resolved column already is (a group column of the first table, a relation's column, a
    bound lookup's group column), None where it is not one yet (an aggregate is a value, not a variable)."""
    if r[0] == "g":
        return Var(s.gvars[r[1]])
    if r[0] == "o":
        return Var(s.o_var(r[1], r[2]))
    if r[0] == "l" and r[2] == "g":
        return s.lookups[r[1]].args[r[3]]
    return None
