"""A grouped derived table joined with relations on some of its group columns: the pairs a view iterates.

Why: ``SELECT c.name, t.k, t.n FROM C c, (SELECT j, k, COUNT(*) AS n FROM R
GROUP BY j, k) t WHERE c.j = t.j`` (TPC-DS Q34/46/68/73/79's shape) pairs each
row of ``C`` with every group of ``t`` at its ``j``: the group column ``k``
is not bound by the relations' row, so the view (:mod:`.liftquery`) must
range over the pairs (row of ``C``, group of ``t``), not over ``C``'s rows.
The pairs are a sum-of-products query of their own, a *part*: ``SELECT
<the relations' columns the query reads>, <the unjoined group columns>,
COUNT(*) FROM <the relations>, <the derived table's FROM> WHERE <their
conditions> AND <the join> GROUP BY ...``, whose entries are exactly the
pairs (its value, the relations' count times the group's row count, is
above 0 exactly there).  The view's source is that part's map; each entry
still weighs the relations' row count (part ``o``), and reads the derived
table's aggregates at its group, so nothing else of the rule changes.

Cost: the pairs' map is the join of the relations with the derived table's
rows, maintained first-order as any join map (domain-bound when read: a row
of the view aggregates its pairs).

>>> import sqlglot
>>> from .examples import PlainErrors, stream
>>> from .lifted import reads_grouped
>>> from .liftquery import plan
>>> rels = {"R": stream("R", j="INT", k="INT"), "C": stream("C", j="INT", nm="INT")}
>>> sel = reads_grouped(sqlglot.parse_one('''SELECT c.nm, t.k, t.n FROM C c,
...     (SELECT j, k, COUNT(*) AS n FROM R GROUP BY j, k) t WHERE c.j = t.j AND t.n > 1'''), PlainErrors())
>>> p = plan("Q1", sel, rels, PlainErrors())
>>> p.parts[-1].sql()
'SELECT c.j AS o0, c.nm AS o1, R.k AS u0, COUNT(*) AS n FROM C AS c, R WHERE c.j = R.j GROUP BY c.j, c.nm, R.k'
"""

from __future__ import annotations

from sqlglot import exp

from ..ast import MapRef, Var
from .lifted import items_of, sql_conjuncts
from .liftscope import Scope


#: The most relations the pairs part may join (the derived table's and the query's): a join of k relations
#: is compiled into maps for its connected subsets.  TPC-DS Q46's and Q68's shape (7, one relation twice) ran for
#: minutes until deltas were factored and map definitions canonicalised without trying every key order
#: (:mod:`.materialize`); it now compiles in about 30 s of CPU time on a loaded machine (docs/m3.md).
MAX_RELATIONS = 7


def pairs(s: Scope, sel: exp.Select, others: list[exp.Expression], cols: list[exp.Alias],
          local: list[exp.Expression], joined: dict[int, tuple[str, str]], spelled: dict[str, str]) -> MapRef:
    """The part of the (relations' row, group) pairs (module doc), added to ``s.b.parts``; its map at the view's
    source variables (part ``o``'s, then the unjoined group columns')."""
    b, ctx = s.b, s.b.ctx
    rows = b.parts[s.t.rows].copy()  # SELECT g0, ..., COUNT(*) AS rows FROM <its FROM> WHERE <its WHERE> GROUP BY
    inner = items_of(rows)
    _qualify(rows, inner, b.relations)
    groups = [e.this for e in rows.expressions[:s.t.groups]]
    clash = {i.alias_or_name.lower() for i in inner} & {i.alias_or_name.lower() for i in others}
    if clash:
        raise ctx.error(f"unsupported grouped derived table joined with relations on some of its group columns "
                        f"whose FROM names {', '.join(sorted(clash))} as the query does (rename it)", sel)
    where = []
    for c in local:  # the relations' own conditions, qualified: the derived table's relations join them here
        c = c.copy()
        for col in c.find_all(exp.Column):
            if not col.table:
                col.set("table", exp.to_identifier(spelled[s.resolve(col)[1]]))
        where.append(c)
    where += [exp.EQ(this=exp.column(col, table=spelled[alias]), expression=groups[i].copy())
              for i, (alias, col) in sorted(joined.items())]
    if rows.args.get("where") is not None:
        where += sql_conjuncts(rows.args["where"].this)
    if len(others) + len(inner) > MAX_RELATIONS:
        raise ctx.error(f"unsupported grouped derived table joined with relations on some of its group columns "
                        f"where the pairs join {len(others) + len(inner)} relations (at most {MAX_RELATIONS}: the "
                        "pairs' join maps grow with every relation, and compiling them with it)", sel)
    free = [i for i in range(s.t.groups) if i not in joined]
    items = [c.copy() for c in cols] + [exp.Alias(this=groups[i].copy(), alias=exp.to_identifier(f"u{k}"))
                                        for k, i in enumerate(free)]
    items.append(exp.Alias(this=exp.Count(this=exp.Star()), alias=exp.to_identifier("n")))
    from_items = list(others) + [inner[0]] + list(rows.args.get("joins") or [])
    b.parts.append(b.select(items, from_items, where, [c.this for c in cols] + [groups[i] for i in free]))
    return MapRef(f"#{len(b.parts) - 1}.0", tuple(Var(v) for v in s.ovars.values()) +
                  tuple(Var(s.gvars[i]) for i in free))


def _qualify(rows: exp.Select, inner: list[exp.Expression], relations) -> None:
    """The derived table's unqualified columns named by the one FROM item of its own that has them (in place),
    so that the relations joined beside them do not make them ambiguous; others are left for the front end."""
    names = {}
    for i in inner:
        rel = next((r for n, r in relations.items() if type(i) is exp.Table and n.lower() == i.name.lower()), None)
        for c in rel.columns if rel is not None else ():
            names.setdefault(c.name.lower(), []).append(i.alias_or_name)
    for col in list(rows.find_all(exp.Column)):
        owners = names.get(col.name.lower(), [])
        if not col.table and isinstance(col.this, exp.Identifier) and len(owners) == 1 and \
                col.find_ancestor(exp.Select) is rows:
            col.set("table", exp.to_identifier(owners[0]))
