"""The outer query over a grouped derived table, translated to a view over its parts (:mod:`.lifted`): :func:`plan`.

Why apart from :mod:`.lifted` (which builds the parts): this is the SQL →
view-expression translation of the outer query, the rule of the construct:

* the *source* is the entries of part ``o`` (the joined relations' rows,
  weight = their count, the derived table's group found by the join) or of
  part ``t`` (the derived table's groups, weight 1);
* a GROUP BY key (or, without aggregates, a selected column) that is a
  source variable is a row variable; any other (an inner aggregate: Q13's
  ``c_count``, Q15's ``total_revenue``) is *lifted*: ``C = e`` in the
  condition of every aggregate, so the view's rows are the values it takes;
* ``SUM(e)`` is ``SUM(weight * e FOR <source vars not keys> : source WHERE
  cond)``, ``COUNT`` sums the weight, ``MIN``/``MAX`` fold ``e``, ``AVG`` is
  their quotient; a view of rows counts its rows (``count``), the row exists
  while that count is above 0;
* ``(SELECT AGG(x) FROM <grouped derived table> [WHERE ...])`` (uncorrelated)
  is such an aggregate over its own parts (Q15's ``MAX(total_revenue)``),
  compared only where it has groups (SQL's aggregate of nothing is NULL).

Anything else is refused by name.  What an expression means inside such a query
(columns, row values, conditions, aggregates) is :mod:`.liftscope`.

>>> import sqlglot
>>> from ..printer import format_view_expr
>>> from .examples import PlainErrors, stream
>>> rels = {"R": stream("R", a="INT", c="INT"),
...         "S": stream("S", b="INT", d="INT")}
>>> from .lifted import reads_grouped
>>> sel = reads_grouped(sqlglot.parse_one('''WITH t AS (SELECT a, SUM(c) AS s FROM R GROUP BY a)
...     SELECT S.d, s FROM S, t WHERE S.b = t.a AND s = (SELECT MAX(s) FROM t)'''), PlainErrors())
>>> p = plan("Q1", sel, rels, PlainErrors())
>>> [q.sql() for q in p.parts]  # doctest: +NORMALIZE_WHITESPACE
['SELECT a AS g0, COUNT(*) AS rows FROM R GROUP BY a', 'SELECT a AS g0, SUM(c) AS s FROM R GROUP BY a',
 'SELECT S.b AS o0, S.d AS o1 FROM S', 'SELECT a AS g0, COUNT(*) AS rows FROM R GROUP BY a',
 'SELECT a AS g0, SUM(c) AS s FROM R GROUP BY a']
>>> p.keys, p.key_vars, p.columns[0][0]
(('d', 's'), ('D', 'S'), 'count')
>>> print(format_view_expr(p.columns[0][1]))
SUM(#2.0[B, D] FOR B : #2.0[B, D] WHERE S = #1.0[B] AND 0 < #0.0[B] AND 0 < COUNT(1 FOR G0 : #3.0[G0]) AND #1.0[B] = MAX(#4.0[G0] FOR G0 : #3.0[G0]))
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from ..ast import Cmp, Const, Expr, MapRef, RelationDecl, Var
from ..errors import CompileError
from ..viewnodes import Arith
from .constants import is_constant
from .groupcalls import push_calls
from .liftlookup import bind, register
from .liftpairs import pairs
from .liftscope import Scope, scalar
from .lifted import AGGS, ARITH, Builder, Plan, and_all, is_grouped, items_of, sql_conjuncts
from .nodes import sql_of, unread_args
from .outputs import unique_names
from .resolve import Positions, unparen

_OUTER_ARGS = frozenset({"expressions", "from", "from_", "joins", "where", "group", "having", "order", "distinct"})


def translate(b: Builder, sel: exp.Select, first: int = 0) -> Plan:
    """The view of ``sel`` (one grouped derived table, maybe joined with relations, and others beside it read at
    its variables: :mod:`.liftlookup`) over the parts it adds; ``first``: which grouped derived table is the one."""
    ctx = b.ctx
    for node, arg in unread_args(sel):
        raise ctx.error(f"unsupported {arg.upper()} of {type(node).__name__.upper()} ({sql_of(node)})", node)
    for arg, value in sel.args.items():
        if arg not in _OUTER_ARGS and value not in (None, False, [], ""):
            raise ctx.error(f"unsupported {arg.rstrip('_').upper()} in a query over a grouped derived table", sel)
    distinct = sel.args.get("distinct")
    if distinct is not None and (distinct.args.get("on") is not None or distinct.expressions):
        raise ctx.error(f"unsupported DISTINCT ON ({sql_of(distinct)})", sel)
    items = items_of(sel)
    grouped = [i for i in items if is_grouped(i)]
    if not grouped:
        raise ctx.error("unsupported query over no grouped derived table (one is read by value)", sel)
    grouped.insert(0, grouped.pop(first))
    others: dict[str, str] = {}
    for i in items:
        if is_grouped(i):
            continue
        rel = next((r for r in b.relations if type(i) is exp.Table and r.lower() == i.name.lower()), None)
        if rel is None:
            raise ctx.error(f"unsupported FROM item {sql_of(i)} beside a grouped derived table (relations only)", i)
        others[i.alias_or_name.lower()] = rel
    conjuncts = sql_conjuncts(sel.args["where"].this) if sel.args.get("where") is not None else []
    for j in sel.args.get("joins") or []:
        if j.args.get("side") or j.args.get("using") or str(j.args.get("kind") or "").upper() not in ("", "INNER"):
            raise ctx.error(f"unsupported {sql_of(j)} beside a grouped derived table (inner joins only)", j)
        conjuncts += sql_conjuncts(j.args.get("on"))
    s = Scope(b, sel, b.table(grouped[0]), others)
    register(s, grouped[1:])  # the others: lookups at the first's variables (:mod:`.liftlookup`)
    _read_aliases(s, sel)
    joined: dict[int, tuple[str, str]] = {}
    rest: list[exp.Expression] = []
    for c in conjuncts:
        pair = [unparen(c.this), unparen(c.expression)] if type(c) is exp.EQ else []
        if len(pair) == 2 and all(type(x) is exp.Column for x in pair):
            r = [s.resolve(x) for x in pair]
            if {r[0][0], r[1][0]} == {"g", "o"}:
                g, o = (r[0], r[1]) if r[0][0] == "g" else (r[1], r[0])
                joined.setdefault(g[1], (o[1], o[2]))
                if joined[g[1]] == (o[1], o[2]):
                    continue
        rest.append(c)
    if others:
        s.gvars = [s.o_var(*joined[i]) if i in joined else
                   b.var(next((n for n, (k, j) in s.t.columns.items() if k == "g" and j == i), f"g{i}"))
                   for i in range(s.t.groups)]
    else:
        s.gvars = [b.var(next((n for n, (k, i) in s.t.columns.items() if k == "g" and i == g), f"g{g}"))
                   for g in range(s.t.groups)]
    rest = bind(s, rest)
    reads_t = [c for c in rest if any(type(x) is exp.Subquery or type(x) is exp.Column and
                                      x.find_ancestor(exp.Select) is sel and s.resolve(x)[0] != "o" for x in c.walk())]
    local = [c for c in rest if not any(c is x for x in reads_t)]
    for c in sel.find_all(exp.Column):  # part o's columns: every one the query reads (its own SELECT only)
        if c.find_ancestor(exp.Select) is sel and (r := s.resolve(c))[0] == "o":
            s.o_var(r[1], r[2])
    if others:
        relations = [i for i in items if not is_grouped(i)]
        spelled = {i.alias_or_name.lower(): i.alias_or_name for i in relations}
        cols = [exp.Alias(this=exp.column(col, table=spelled[a]), alias=exp.to_identifier(f"o{i}"))
                for i, (a, col) in enumerate(s.ovars)]
        b.parts.append(b.select(cols, relations, local, None))
        s.source = s.weight = MapRef(f"#{len(b.parts) - 1}.0", tuple(Var(v) for v in s.ovars.values()))
        if len(joined) != s.t.groups:  # the source is the relations' rows joined with the groups they meet
            s.source = pairs(s, sel, relations, cols, local, joined, spelled)
        s.cond.append(Cmp("<", Const(0), MapRef(f"#{s.t.rows}.0", tuple(Var(g) for g in s.gvars))))
    else:  # no relation's query to put them in: a constant condition holds or not for every row
        for c in local:
            if any(isinstance(x, (exp.Select, exp.Subquery, exp.Exists)) for x in c.walk()):
                raise ctx.error(f"unsupported condition {sql_of(c)} in WHERE of a query over a grouped derived "
                                "table with no relation joined (a subquery)", c)
        s.source = MapRef(f"#{s.t.rows}.0", tuple(Var(g) for g in s.gvars))
        reads_t += local
    s.cond += [s.condition(c, s.row) for c in reads_t]
    return _view(s, sel)


def _read_aliases(s: Scope, sel: exp.Select) -> None:
    """GROUP BY and HAVING reading an output alias (``GROUP BY k``, ``HAVING custdist > 1``), rewritten in
    place to the expression it names; one that is also a column of the FROM items is refused as ambiguous."""
    named = {e.alias.lower(): e.this for e in sel.expressions if type(e) is exp.Alias}
    for key in ("group", "having"):
        clause = sel.args.get(key)
        for c in list(clause.find_all(exp.Column)) if clause is not None else []:
            target = named.get(c.name.lower()) if not c.table and isinstance(c.this, exp.Identifier) else None
            if target is None or c.find_ancestor(exp.Select) is not sel or (
                    type(target) is exp.Column and target.name.lower() == c.name.lower()):
                continue
            if c.name.lower() in s.t.columns or any(s.has_column(r, c.name.lower()) for r in s.others.values()) or \
                    any(c.name.lower() in u.table.columns for u in s.lookups.values()):
                where = "GROUP BY" if key == "group" else "HAVING"
                raise s.b.ctx.error(f"ambiguous column {sql_of(c)} in {where}: an output alias and a column of the "
                                    "FROM items (rename the alias)", c)
            c.replace(target.copy())


def _view(s: Scope, sel: exp.Select) -> Plan:
    """The keys (row and lifted variables), columns and condition of the view."""
    ctx = s.b.ctx
    group = sel.args.get("group")
    aggregated = group is not None or sel.args.get("having") is not None or any(
        isinstance(x, exp.AggFunc) and x.find_ancestor(exp.Subquery) is None for e in sel.expressions for x in e.walk())
    outs = _outputs(sel)
    if any(type(x) is exp.Star or type(x) is exp.Column and type(x.this) is exp.Star for _, x in outs):
        raise ctx.error(f"unsupported * over a grouped derived table ({sql_of(sel)}): name its columns", sel)
    if group is not None:
        if group.args.get("all"):
            raise ctx.error("unsupported GROUP BY ALL over a grouped derived table", group)
        exprs = []
        for g in group.expressions:
            g = unparen(g)
            if type(g) is exp.Literal and g.is_int and 1 <= int(g.this) <= len(outs):
                g = outs[int(g.this) - 1][1]
            elif type(g) is exp.Column and not g.table and any(n.lower() == g.name.lower() and not (
                    type(x) is exp.Column and x.name.lower() == g.name.lower()) for n, x in outs):
                g = next(x for n, x in outs if n.lower() == g.name.lower())  # a SELECT alias
            elif type(g) is exp.Column:  # the selected column it names, however qualified (``t.c`` for ``c``)
                g = next((x for _, x in outs if type(x) is exp.Column and s.resolve(x) == s.resolve(g)), g)
            exprs.append(g)
    else:
        exprs = [] if aggregated else [x for _, x in outs]
    if aggregated:
        for n, x in outs:
            if not any(x == g for g in exprs) and not any(isinstance(a, exp.AggFunc) for a in x.walk()):
                raise ctx.error(f"column {sql_of(x)} must be in GROUP BY or in an aggregate", x)
        key_items = [(n, x) for n, x in outs if any(x == g for g in exprs)]
        if len(key_items) != len(exprs) or not all(any(x == g for _, x in key_items) for g in exprs):
            raise ctx.error("unsupported GROUP BY key not selected (or selected twice) over a grouped derived table",
                            group)
    else:
        key_items = outs
    source_vars = {a.name for a in s.source.args}
    key_vars, lifts = [], []
    for n, x in key_items:
        e = s.row(x)
        if isinstance(e, Var) and e.name in source_vars:
            key_vars.append(e.name)
        else:
            key_vars.append(s.b.var(n))
            lifts.append(Cmp("=", Var(key_vars[-1]), e))
    s.cond = lifts + s.cond
    keys = set(key_vars)
    view = _ViewSide(s, {_key(x): v for (_, x), v in zip(key_items, key_vars)}, keys)
    values = [(n, view.expr(x)) for n, x in outs if not any(x == g for g in exprs)] if aggregated else []
    count = s.aggregate(exp.Count(this=exp.Star()), keys)
    if not aggregated:
        values = [("count", Const(1) if sel.args.get("distinct") else count)]
    elif sel.args.get("distinct"):
        raise ctx.error("unsupported SELECT DISTINCT with aggregates over a grouped derived table", sel)
    where = [Cmp("<", Const(0), count)]
    if sel.args.get("having") is not None:
        where.append(s.condition(sel.args["having"].this, view.expr))
    out_names = unique_names([n for n, _ in key_items])
    value_names = unique_names([n for n, _ in values], set(out_names))
    return Plan(tuple(s.b.parts), tuple(out_names), tuple(key_vars), tuple(zip(value_names, (v for _, v in values))),
                and_all(where))


def _outputs(sel: exp.Select) -> list[tuple[str, exp.Expression]]:
    """The SELECT list as ``(name, expression)``: an alias, a column's name, else named as the front end names an
    unaliased item of any query (:func:`.outputs.select_items`: ``max_1``, ``expr_2``; DuckDB's ``max(x.n)`` is
    not an M3 name).

    >>> import sqlglot
    >>> [n for n, _ in _outputs(sqlglot.parse_one("SELECT t.a, MAX(t.n), t.a + 1, COUNT(*) AS c FROM t"))]
    ['a', 'max_1', 'expr_2', 'c']
    """
    out, computed = [], 0
    for e in sel.expressions:
        x = unparen(e.this if type(e) is exp.Alias else e)
        name = e.alias if type(e) is exp.Alias else ""
        if not name and type(x) is exp.Column:
            name = x.name
        elif not name:
            computed += 1
            name = f"{type(x).__name__.lower()}_{computed}" if isinstance(x, exp.AggFunc) else f"expr_{computed}"
        out.append((name, x))
    return out


def _key(e: exp.Expression) -> str:
    return sql_of(unparen(e)).lower()


class _ViewSide:
    """Expressions of the view's rows: aggregates over the source, group keys as their variables."""

    def __init__(self, s: Scope, keys: dict[str, str], key_set: set[str]):
        self.s, self.keys, self.key_set = s, keys, key_set

    def expr(self, e: exp.Expression) -> Expr:
        e = unparen(e)
        if _key(e) in self.keys:
            return Var(self.keys[_key(e)])
        if type(e) in AGGS:
            return self.s.aggregate(e, self.key_set)
        if type(e) is exp.Subquery:
            return scalar(self.s.b, e)
        if type(e) is exp.Neg:
            return Arith("*", Const(-1), self.expr(e.this))
        if type(e) in ARITH:
            return Arith(ARITH[type(e)], self.expr(e.this), self.expr(e.expression))
        if is_constant(e):
            return self.s.row(e)
        raise self.s.b.ctx.error(f"unsupported {sql_of(e)} in the SELECT list or HAVING of a query over a grouped "
                                 "derived table (group keys, aggregates, arithmetic, constants)", e)


def plan(name: str, sel: exp.Select, relations: dict[str, RelationDecl], ctx: Positions) -> Plan:
    """The parts and the view of a query over one grouped derived table (joined with relations or not)."""
    body = sel.copy()  # ORDER BY noted below, not applied; aliases rewritten in place (:func:`_read_aliases`)
    body.set("order", None)
    body = push_calls(body, [n for n, _ in _outputs(body)], relations)  # a function of a group column: a group column
    refused = None
    for first in range(max(1, sum(is_grouped(i) for i in items_of(body)))):  # the first whose variables bind the
        b = Builder(name, relations, ctx, "from_" if "from_" in sel.args else "from")  # others (:mod:`.liftlookup`)
        try:
            p = translate(b, body.copy(), first)
            break
        except CompileError as why:
            refused = refused or why
        except (AttributeError, TypeError) as bad:  # a tree built by hand, not as sqlglot parses (test_sql_nodes)
            raise ctx.error(f"malformed query over a grouped derived table ({bad})", sel) from None
    else:
        raise refused
    if sel.args.get("order") is not None:
        p = replace(p, notes=(f"{name}: ORDER BY ignored: a view is a set of rows (sort them when reading the view)",))
    return p
