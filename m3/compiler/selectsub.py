"""Uncorrelated scalar subqueries in the SELECT list, inside aggregates or beside them, as a plan over parts.

Why: ``SELECT A, SUM(B * (SELECT SUM(A) FROM R)) FROM R GROUP BY A`` reads a
value that is the same for every row of the outer query: in the calculus an
uncorrelated nested aggregate is a factor of its own (DBToaster lifts it into
a variable, ``AggSum([], R(A, B) * B) * (V ^= AggSum([], R(A, B) * A))``), so a
sum over the rows of ``e * v`` is ``SUM(e) * v``.  The aggregate's argument is
expanded into a sum of products (``+ - *`` and unary minus), each term a row
expression times subqueries: ``SUM(t1 * v1 + t2) = SUM(t1) * v1 + SUM(t2)``
(a term of subqueries alone is ``COUNT(*)`` times them; ``AVG`` likewise, with
``AVG(t)`` and 1).  The query then becomes a view over parts
(:class:`.lifted.Plan`), compiled from the general rules like any query:

* part 0, the outer query without its subqueries: its group columns, each
  aggregate term's ``SUM``/``AVG`` (and every other aggregate of the SELECT
  list as written), and ``COUNT(*)`` (the groups that exist);
* one part per scalar subquery, as a query without FROM reads it
  (:class:`.fromless.Parts`: its value, and ``COUNT(*)``: SQL's NULL, an
  aggregate of no rows, makes the column NULL, shown as 0).

The view is keyed by the group columns; each column is its arithmetic over
the parts' values, computed when read.  Refused by name: a correlated
subquery (it reads the outer row: not one value), a subquery under another
aggregate or function, HAVING, DISTINCT, and group columns not selected.

>>> import sqlglot
>>> from ..printer import format_view_expr
>>> from .examples import PlainErrors, stream
>>> rels = {"R": stream("R", A="INT", B="INT")}
>>> sel = sqlglot.parse_one("SELECT A, SUM(B * (SELECT SUM(r2.A) FROM R r2) + 1) AS s FROM R r1 GROUP BY A")
>>> has_select_subqueries(sel, rels)
True
>>> p = plan(sel, rels, PlainErrors())
>>> [q.sql() for q in p.parts]
['SELECT A AS g0, SUM(B) AS a0, SUM(1) AS a1, COUNT(*) AS n FROM R AS r1 GROUP BY A', 'SELECT SUM(r2.A) AS v, COUNT(*) AS n FROM R AS r2']
>>> p.keys, [(n, format_view_expr(e)) for n, e in p.columns], format_view_expr(p.where)
(('A',), [('s', '(#0.0[K0] * SUM(#1.0[] FOR  : #0.2[K0]) + #0.1[K0]) * LEAST(SUM(#1.1[] FOR  : #0.2[K0]), 1)')], '0 < #0.2[K0]')
"""

from __future__ import annotations

from sqlglot import exp

from ..ast import Cmp, Const, Expr, MapRef, RelationDecl, Var
from ..over import Over
from ..viewnodes import Arith
from .constants import NotConstant, fold, is_constant
from .fromless import Parts
from .lifted import ARITH, Plan, items_of, sql_conjuncts
from .nodes import sql_of
from .outputs import unique_names
from .resolve import Positions, unparen

_LINEAR = (exp.Sum, exp.Avg)  # aggregates a subquery factor may be taken out of
_CLAUSES = ("having", "distinct", "limit", "offset", "qualify", "windows")

Term = tuple[int, exp.Expression | None, tuple[exp.Subquery, ...]]  # sign, row expression (None: 1), subqueries


def has_select_subqueries(sel: exp.Expression, relations: dict[str, RelationDecl]) -> bool:
    """Whether ``sel`` is an aggregate query over relations whose SELECT list holds scalar subqueries, each
    uncorrelated or correlated with group columns only."""
    if type(sel) is not exp.Select or not items_of(sel) or sel.args.get("with") or \
            not all(type(i) is exp.Table for i in items_of(sel)):
        return False  # over derived tables or CTEs: theirs first (a grouped one's value beside: :mod:`.liftquery`)
    subs = [s for e in sel.expressions for s in e.find_all(exp.Subquery)  # each outermost: a part of its own,
            if s.find_ancestor(exp.Subquery, exp.Select) is sel]  # its own nesting the part's to compile
    if sel.args.get("group") is None and not any(  # a view of rows: its rows are keys, no aggregate to factor
            isinstance(x, exp.AggFunc) and x.find_ancestor(exp.Subquery) is None for e in sel.expressions
            for x in e.walk()):
        return False
    return bool(subs) and all(not correlated(s, relations) or group_correlation(s, sel, relations) is not None
                              for s in subs)


def group_correlation(sub: exp.Subquery, sel: exp.Select, relations: dict[str, RelationDecl]):
    """For a subquery correlated with the outer query only by ``inner.c = outer.g``, ``g`` a GROUP BY column of
    ``sel`` (so its value is one per group): ``(conjuncts of its own, [(inner column, group index)])``; else
    None."""
    inner = unparen(sub.this)
    group = sel.args.get("group")
    groups = [unparen(g) for g in group.expressions] if group is not None else []
    if type(inner) is not exp.Select or not items_of(inner) or inner.find(exp.Subquery) is not None:
        return None
    own, keys = [], []
    where = inner.args.get("where")
    for c in sql_conjuncts(where.this) if where is not None else []:
        outer = [x for x in c.find_all(exp.Column) if correlated(exp.Subquery(this=_reading(inner, x)), relations)]
        if not outer:
            own.append(c)
            continue
        sides = [unparen(c.this), unparen(c.expression)] if type(c) is exp.EQ else []
        if len(outer) != 1 or len(sides) != 2 or not all(type(x) is exp.Column for x in sides):
            return None
        mine = sides[1] if sides[0] is outer[0] else sides[0]
        at = next((i for i, g in enumerate(groups) if type(g) is exp.Column and g.name.lower() ==
                   outer[0].name.lower() and (not g.table or not outer[0].table or
                                               g.table.lower() == outer[0].table.lower())), None)
        if at is None:
            return None
        keys.append((mine, at))
    return own, keys


def _reading(inner: exp.Select, column: exp.Column) -> exp.Select:
    """A SELECT of one column over ``inner``'s FROM: whether the column is the subquery's own or an outer one."""
    probe = exp.Select(expressions=[column.copy()])
    from_ = inner.args.get("from_") or inner.args.get("from")
    probe.set("from_" if "from_" in inner.args else "from", from_.copy())
    if inner.args.get("joins"):
        probe.set("joins", [j.copy() for j in inner.args["joins"]])
    return probe


def correlated(sub: exp.Subquery, relations: dict[str, RelationDecl]) -> bool:
    """Whether a subquery reads a column of an enclosing query (one its own FROM items do not hold)."""
    aliases, names = set(), set()
    for t in sub.find_all(exp.Table):
        aliases.add(t.alias_or_name.lower())
        rel = next((r for n, r in relations.items() if n.lower() == t.name.lower()), None)
        names |= {c.name.lower() for c in rel.columns} if rel is not None else set()
    for s in sub.find_all(exp.Subquery):
        if s.alias_or_name:
            aliases.add(s.alias_or_name.lower())
        if isinstance(s.this, exp.Select):
            names |= {e.alias_or_name.lower() for e in s.this.expressions}
    return any(c.table.lower() not in aliases if c.table else c.name.lower() not in names
               for c in sub.find_all(exp.Column) if not isinstance(c.this, exp.Star))


def plan(sel: exp.Select, relations: dict[str, RelationDecl], ctx: Positions) -> Plan:
    """The parts and the view (module doc)."""
    for key in _CLAUSES:
        if sel.args.get(key):
            raise ctx.error(f"unsupported {key.upper()} in a query with scalar subqueries in its SELECT list", sel)
    group = sel.args.get("group")
    groups = [unparen(g) for g in group.expressions] if group is not None else []
    b = _Translation(ctx, groups)
    b.sel, b.relations = sel, relations
    b.parts.parts.append(sel)  # part 0, the outer query: built once its aggregates are known
    b.parts.nullable.append(False)
    keys, columns, computed = [], [], 0
    for item in sel.expressions:
        node = unparen(item.this if type(item) is exp.Alias else item)
        alias = item.alias if type(item) is exp.Alias else ""
        if any(node == g for g in groups):
            keys.append(alias or node.alias_or_name)
            continue
        computed += 1
        name = alias or (f"{type(node).__name__.lower()}_{computed}" if isinstance(node, exp.AggFunc)
                         else f"expr_{computed}")
        value, reads = b.expr(node)
        for i in sorted(reads):
            value = Arith("*", value, Arith("LEAST", MapRef(f"#{i}.1", b.args.get(i, ())), Const(1)))
        columns.append((name, value))
    count = len(b.aggs)
    key_vars = tuple(f"K{i}" for i in range(len(groups)))
    groups_ref = MapRef(f"#0.{count}", tuple(Var(k) for k in key_vars))
    if groups:  # a keyed view reads a subquery's value (a map without keys) as an aggregate at its row
        columns = [(n, _at_row(v, groups_ref)) for n, v in columns]
    if len(keys) != len(groups):
        raise ctx.error(f"unsupported GROUP BY column not selected (or selected twice) in a query with scalar "
                        f"subqueries in its SELECT list ({sql_of(group)})", group)
    outer = sel.copy()
    outer.set("order", None)
    outer.set("expressions", [exp.alias_(g.copy(), f"g{i}") for i, g in enumerate(groups)] +
              [exp.alias_(a, f"a{j}") for j, a in enumerate(b.aggs)] +
              [exp.alias_(exp.Count(this=exp.Star()), "n")])
    b.parts.parts[0] = outer
    where = Cmp("<", Const(0), groups_ref) if groups else None
    names = unique_names(keys + [n for n, _ in columns])
    return Plan(tuple(b.parts.parts), tuple(names[:len(keys)]), key_vars,
                tuple(zip(names[len(keys):], (v for _, v in columns))), where)


def _at_row(e: Expr, groups: MapRef) -> Expr:
    """``e`` with each subquery's value (``#i.j[]``, no keys) read as ``SUM(#i.j[] FOR : groups)``: the value at
    the view's row (a view reads maps at its key variables; an aggregate over the row's group reads others)."""
    if isinstance(e, MapRef) and e.name.startswith("#") and not e.name.startswith("#0.") and \
            {a.name for a in e.args if isinstance(a, Var)} != {a.name for a in groups.args}:
        return Over("SUM", e, (), groups)
    if isinstance(e, Arith):
        return Arith(e.op, _at_row(e.left, groups), _at_row(e.right, groups))
    return e


class _Translation:
    """The view expressions of one query's SELECT list over its parts (module doc)."""

    def __init__(self, ctx: Positions, groups: list[exp.Expression]) -> None:
        self.ctx, self.groups = ctx, groups
        self.parts = Parts(ctx)
        self.aggs: list[exp.Expression] = []  # part 0's aggregates, in column order
        self.args: dict[int, tuple[Var, ...]] = {}  # a correlated subquery's part -> the group variables it is read at
        self.sel: exp.Select | None = None
        self.relations: dict[str, RelationDecl] = {}

    def sub(self, e: exp.Subquery) -> tuple[Expr, set[int]]:
        """A subquery's value: uncorrelated, one part as a query without FROM reads it; correlated with group
        columns, a part grouped by its correlation columns, read at the group's variables."""
        found = group_correlation(e, self.sel, self.relations) if correlated(e, self.relations) else None
        if found is None:
            return self.parts.expr(e)
        own, keys = found
        inner = unparen(e.this)
        if len(inner.expressions) != 1 or inner.args.get("group") is not None or \
                unparen(inner.expressions[0]).find(exp.AggFunc) is None:
            raise self.ctx.error(f"unsupported scalar subquery {sql_of(e)} in the SELECT list (one aggregate "
                                 "without GROUP BY)", e)
        item = inner.expressions[0]
        value = (item.this if type(item) is exp.Alias else item).copy()
        part = inner.copy()
        part.set("where", exp.Where(this=exp.and_(*[c.copy() for c in own])) if own else None)
        part.set("expressions", [exp.alias_(k.copy(), f"c{j}") for j, (k, _) in enumerate(keys)] +
                 [exp.alias_(value, "v"), exp.alias_(exp.Count(this=exp.Star()), "n")])
        part.set("group", exp.Group(expressions=[k.copy() for k, _ in keys]))
        self.parts.parts.append(part)
        nullable = any(type(a) is not exp.Count for a in value.find_all(exp.AggFunc))
        self.parts.nullable.append(nullable)
        i = len(self.parts.parts) - 1
        self.args[i] = tuple(Var(f"K{at}") for _, at in keys)
        return MapRef(f"#{i}.0", self.args[i]), ({i} if nullable else set())

    def outer(self, agg: exp.Expression) -> Expr:
        """Part 0's column for ``agg`` (one column per distinct aggregate)."""
        at = next((j for j, a in enumerate(self.aggs) if a == agg), None)
        if at is None:
            self.aggs.append(agg)
            at = len(self.aggs) - 1
        return MapRef(f"#0.{at}", tuple(Var(f"K{i}") for i in range(len(self.groups))))

    def expr(self, e: exp.Expression) -> tuple[Expr, set[int]]:
        """A SELECT item as a view expression, and the nullable subquery parts it reads."""
        e = unparen(e)
        at = next((i for i, g in enumerate(self.groups) if e == g), None)
        if at is not None:
            return Var(f"K{at}"), set()
        if type(e) is exp.Subquery:
            return self.sub(e)
        if isinstance(e, exp.AggFunc):
            return self.aggregate(e)
        if type(e) is exp.Neg:
            x, reads = self.expr(e.this)
            return Arith("-", Const(0), x), reads
        if type(e) in ARITH:
            (a, ra), (d, rd) = self.expr(e.this), self.expr(e.expression)
            return Arith(ARITH[type(e)], a, d), ra | rd
        if is_constant(e):
            try:
                return Const(fold(e)), set()
            except NotConstant as bad:
                raise self.ctx.error(f"unsupported {sql_of(e)} in a query with scalar subqueries in its SELECT "
                                     f"list ({bad})", e) from None
        raise self.ctx.error(f"unsupported {sql_of(e)} in a query with scalar subqueries in its SELECT list "
                             "(group columns, aggregates, scalar subqueries, arithmetic and constants)", e)

    def aggregate(self, agg: exp.AggFunc) -> tuple[Expr, set[int]]:
        if agg.find(exp.Subquery) is None:
            return self.outer(agg.copy()), set()
        if type(agg) not in _LINEAR or isinstance(agg.this, exp.Distinct):
            raise self.ctx.error(f"unsupported scalar subquery inside {sql_of(agg)} (only inside SUM or AVG, as a "
                                 "factor of + - * arithmetic)", agg)
        total: Expr | None = None
        reads: set[int] = set()
        for sign, row, subs in self.terms(agg.this):
            inner = row.copy() if row is not None else exp.Literal.number(1)
            term: Expr = self.outer(type(agg)(this=inner))
            for s in subs:
                v, r = self.sub(s)
                term, reads = Arith("*", term, v), reads | r
            term = term if sign > 0 else Arith("-", Const(0), term)
            total = term if total is None else Arith("+", total, term)
        return total, reads

    def terms(self, e: exp.Expression) -> list[Term]:
        """``e`` as a sum of products of a row expression and subqueries (module doc)."""
        e = unparen(e)
        if e.find(exp.Subquery) is None:
            return [(1, e, ())]
        if type(e) is exp.Subquery:
            return [(1, None, (e,))]
        if type(e) is exp.Neg:
            return [(-s, r, q) for s, r, q in self.terms(e.this)]
        if type(e) in (exp.Add, exp.Sub):
            right = self.terms(e.expression)
            return self.terms(e.this) + ([(-s, r, q) for s, r, q in right] if type(e) is exp.Sub else right)
        if type(e) is exp.Mul:
            return [(s1 * s2, r1 if r2 is None else r2 if r1 is None else exp.Mul(this=r1.copy(), expression=r2.copy()),
                     q1 + q2) for s1, r1, q1 in self.terms(e.this) for s2, r2, q2 in self.terms(e.expression)]
        raise self.ctx.error(f"unsupported scalar subquery inside {sql_of(e)} within an aggregate (as a factor of "
                             "+ - * arithmetic only)", e)
