"""Nullable stream columns in a query: SQL's three-valued logic rewritten over value and indicator columns.

Why a pass of its own, on the tree and before any other (docs/m3.md "NULLs"): a
nullable column ``c`` is two ordinary columns of its relation, its value
(0 where NULL) and its indicator ``c__null`` (:mod:`boreas.m3.nullable`), so
once every reading of ``c`` says where it is present, the calculus, the maps
and both backends see numbers only and need nothing new:

* **Conditions** (WHERE, ON, a CASE's WHEN, an aggregate's FILTER) keep a row
  where they are TRUE; NOT is pushed down to the atoms first (De Morgan holds
  in three-valued logic), then each atom reading nullable columns is TRUE only
  where they are present: ``c > 3`` is ``c > 3 AND c__null = 0``, ``NOT (c > 3)``
  is ``c <= 3 AND c__null = 0`` (a NULL condition drops the row as FALSE does);
  ``c IS NULL`` is ``c__null = 1``.
* **Values**: an expression is present where its operands are (arithmetic),
  where one argument is (``COALESCE``, read as a CASE of the indicators), where
  its CASE branch is; ``NULLIF(x, y)`` is ``x`` where ``x = y`` is not TRUE.
* **Aggregates skip NULLs**: ``SUM(e)``, ``AVG(e)``, ``MIN(e)``, ``MAX(e)`` and
  ``COUNT(e)`` aggregate ``CASE WHEN present(e) THEN e END`` (a CASE's NULL is
  what they already skip, :mod:`.nulls`; the rule is :mod:`.nullaggs`'s).  A SUM/AVG/MIN/MAX item that may
  read no value (of a nullable expression, or filtered) is NULL where it reads
  none: the COUNT of what it reads is one more item, aliased ``__nonnull_<k>``
  (``k`` the item's position), which the view keeps as a hidden value column
  ``<item>__null`` (:func:`.outputs.view_names`, :func:`boreas.m3.nullable.null_values`).

* **Scope**: which columns of a SELECT's FROM items are nullable is :mod:`.nullscope`'s.

* **Keys**: a nullable column selected or in GROUP BY is a key of the view with
  its indicator beside it (:func:`.nullshown.key_indicators`): NULLs make one
  group, apart from the value 0's, and reads show the key as None.

* **Subqueries** are rewritten in their own scope (:mod:`.nullsub`), ``NOT IN`` a subquery selecting a nullable
  column three-valued; ``*`` lists the declared columns (:mod:`.nullstar`); HAVING and arithmetic over a
  SUM/AVG that may be NULL are TRUE / NULL where SQL's are (:mod:`.nullhaving`).

An outer join's query is only checked here (its joins read as inner ones), then rewritten part by part
(:mod:`.outernulls`); arithmetic keys over nullable columns are :mod:`.nullexprkeys`'.  Refused by name (docs/m3.md
"NULLs" lists each): other expressions of one as a key (or in ORDER BY), in a function other than COALESCE and
NULLIF, under DISTINCT but ``COUNT(DISTINCT c)``, MIN/MAX of it under an expression or in HAVING, a nullable value
NOT IN a subquery, set operations, windows, an outer join with a subquery; derived tables: :mod:`.nullderived`.

>>> import sqlglot
>>> from .examples import PlainErrors
>>> from ..ast import Column, RelationDecl
>>> rels = {"R": RelationDecl("R", "STREAM", (Column("a", "INT"), Column("c", "INT"), Column("c__null", "INT")))}
>>> def show(sql):
...     return rewrite(sqlglot.parse_one(sql), rels, PlainErrors()).sql()
>>> show("SELECT SUM(c) FROM R WHERE NOT (c > 3 OR a = 1)")
'SELECT SUM(CASE WHEN c__null = 0 THEN c END), COUNT(CASE WHEN c__null = 0 THEN c END) AS __nonnull_0 FROM R WHERE ((c <= 3 AND c__null = 0) AND NOT a = 1)'
>>> show("SELECT a, COUNT(COALESCE(c, 2)), MIN(c + a) FROM R WHERE c IS NULL GROUP BY a")
'SELECT a, COUNT(1), MIN(c + a) FILTER(WHERE c__null = 0), COUNT(c + a) FILTER(WHERE c__null = 0) AS __nonnull_2 FROM R WHERE NOT (c__null = 0) GROUP BY a'
>>> show("SELECT a, c FROM R"), show("SELECT a FROM R r LEFT JOIN R s ON r.c = s.c")  # the latter: :mod:`.outer`'s
('SELECT a, c, c__null FROM R', 'SELECT a FROM R AS r LEFT JOIN R AS s ON r.c = s.c')
>>> show("SELECT COUNT(*) FROM R GROUP BY c / 2")
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: unsupported nullable column c read outside an aggregate (GROUP BY c / 2): only the column itself is a key, selected or in GROUP BY (docs/m3.md, "NULLs")
"""

from __future__ import annotations

from sqlglot import exp

from ..ast import RelationDecl
from ..nullable import ROWS, SUFFIX, indicator
from .nodes import sql_of
from .nullcond import all_of, any_of, never, replaced
from .nullderived import derived_chain, derived_tables, rewrite_derived
from .nullaggs import AGGS, NULLABLE_AGGS, skip_nulls
from .nullscope import clause_of, in_scope, nullable_names, reads_nullable_relation
from .nullstar import star_columns
from .nullexprkeys import VALUED, expression_keys
from .nullsetops import rewrite_branches
from .nullsub import in_subquery, refuse_outer_presence, rewrite_subquery, subqueries
from .nullhaving import grouped_key, having_truth, one_count_per_item, unaliased
from .nullshown import COUNT_PREFIX, hidden_count, is_key, key_indicators, needs_rows
from .resolve import Positions

#: Comparisons (TRUE only where every operand is present), their negations, arithmetic (present where all are).
_ATOMS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between, exp.In, exp.Like, exp.ILike)
_NEGATED = {exp.EQ: exp.NEQ, exp.NEQ: exp.EQ, exp.GT: exp.LTE, exp.GTE: exp.LT, exp.LT: exp.GTE, exp.LTE: exp.GT}
_ARITH = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.Neg, exp.Paren, exp.Column, exp.Literal)


def rewrite(tree: exp.Expression, relations: dict[str, RelationDecl], ctx: Positions) -> exp.Expression:
    """``tree`` (a copy when changed) with every reading of a nullable column made explicit (module doc)."""
    names = nullable_names(relations)
    if any(type(n) is exp.Column and n.name.lower().endswith(SUFFIX) for n in tree.walk()):
        return tree  # rewritten already (CREATE VIEW's query: before desugaring, and as a query)
    if not names or not reads_nullable_relation(tree, relations) or not any(
            (type(n) is exp.Column and n.name.lower() in names) or
            (type(n) is exp.Star and type(n.parent) is not exp.Count) for n in tree.walk()):
        return tree  # (a query over relations without nullable columns compiles as if none were declared)
    if isinstance(tree, exp.SetOperation) and not any(isinstance(n, (exp.Window, exp.With)) for n in tree.walk()):
        return rewrite_branches(tree, lambda s: _Rewriter.of(s, relations, ctx).select(s), ctx)  # (:mod:`.nullsetops`)
    if type(tree) is not exp.Select or any(isinstance(n, (exp.SetOperation, exp.Window, exp.With)) for n in tree.walk()):
        raise ctx.error(f"unsupported query reading nullable columns ({', '.join(sorted(names))}) with set "
                        "operations inside or windows (docs/m3.md, \"NULLs\")", tree)
    for n in tree.walk():
        if type(n) is exp.Subquery and type(n.parent) in (exp.From, exp.Join) and not derived_chain(n, tree):
            raise ctx.error(f"unsupported query reading nullable columns ({', '.join(sorted(names))}) with a "
                            f"derived table inside a subquery ({sql_of(n)}) (docs/m3.md, \"NULLs\")", n)
    sel = tree.copy()
    outer = [j for j in sel.args.get("joins") or [] if j.side or j.kind not in ("", "INNER", "CROSS", None)]
    for j in outer:  # checked as its inner join; :mod:`.outer` rewrites each part (:mod:`.outernulls`)
        j.set("side", None), j.set("kind", None)
        if any(isinstance(n, exp.Select) for n in sel.walk() if n is not sel):
            raise ctx.error(f"unsupported nullable column in an outer join's query with a subquery (docs/m3.md, \"NULLs\")", j)
    checked = _Rewriter.of(sel, relations, ctx).select(sel)  # (an outer join's: checked only)
    return tree if outer else checked


def rewriter(sel: exp.Select, relations: dict[str, RelationDecl], ctx: Positions, known: frozenset = frozenset()):
    """The rewriter of an outer join's part (:mod:`.outernulls`), its columns ``known`` ((alias, name)) present."""
    scope = {a: (cols, {n for n in nl if (a, n) not in known}) for a, (cols, nl) in in_scope(sel, relations).items()}
    return _Rewriter(scope, ctx, relations)


class _Rewriter:
    """One SELECT's rewrite: knows which column references are nullable (by alias, or unqualified by the one
    FROM item holding the name)."""

    def __init__(self, scope: dict[str, tuple[set[str], set[str]]], ctx: Positions,
                 relations: dict[str, RelationDecl], outer: _Rewriter | None = None):
        self.scope = scope
        self.ctx = ctx
        self.relations = relations
        self.outer = outer  # the enclosing query's, for a subquery: its columns are read by correlation
        self.counted: dict[str, dict[str, str]] = {}  # derived table alias -> column -> its count column

    @classmethod
    def of(cls, sel: exp.Select, relations: dict[str, RelationDecl], ctx: Positions) -> _Rewriter:
        """The rewriter of a query ``sel``; its derived tables rewritten in place first (:mod:`.nullderived`)."""
        rw = cls(in_scope(sel, relations), ctx, relations)
        for sub in derived_tables(sel):
            alias, d = rewrite_derived(sub, lambda inner: cls.of(inner, relations, ctx), rw.refuse)
            rw.scope[alias] = (d.columns, d.nullable)
            rw.counted[alias] = d.counted
        return rw

    def count_of(self, col: exp.Column) -> str | None:
        """The count column saying where ``col`` is present, if it is a derived table's NULL-skipping aggregate."""
        table = col.table.lower()
        if not table and self.local(col):
            table = self.holder(col)
        if table in self.scope:
            return self.counted.get(table, {}).get(col.name.lower())
        return self.outer.count_of(col) if self.outer is not None else None

    def child(self, sub: exp.Select) -> _Rewriter:
        """The rewriter of a subquery of this SELECT: its FROM items first, then this one's (correlation)."""
        return _Rewriter(in_scope(sub, self.relations), self.ctx, self.relations, self)

    def nullable(self, col: exp.Expression) -> bool:
        if type(col) is not exp.Column:
            return False
        name, table = col.name.lower(), col.table.lower()
        if table:
            if table in self.scope:
                return name in self.scope[table][1]
            return self.outer is not None and self.outer.nullable(col)
        holders = [a for a, (cols, _) in self.scope.items() if name in cols]
        if not holders:
            return self.outer is not None and self.outer.nullable(col)
        return len(holders) == 1 and name in self.scope[holders[0]][1]

    def local(self, col: exp.Column) -> bool:
        """Whether ``col`` is a column of this SELECT's own FROM items (not an enclosing query's)."""
        return col.table.lower() in self.scope if col.table else any(col.name.lower() in c for c, _ in self.scope.values())

    def holder(self, col: exp.Column) -> str:
        """The alias of the FROM item an unqualified column belongs to."""
        return next(a for a, (cols, _) in self.scope.items() if col.name.lower() in cols)

    def reads(self, e: exp.Expression) -> bool:
        """Whether ``e`` reads a nullable column itself (a subquery in it reads its own: :mod:`.nullsub`)."""
        return any(self.nullable(n) for n in _own(e))

    def decides(self, cond: exp.Expression) -> bool:
        """Whether a condition needs :meth:`truth`: it reads a nullable column, or has an IN of a subquery (whose
        column may be: :func:`.nullsub.in_subquery`) or an EXISTS (:func:`.nullsub.refuse_outer_presence`)."""
        return self.reads(cond) or any(type(n) is exp.Exists or (type(n) is exp.In and n.args.get("query") is not None)
                                       for n in _own(cond))

    def refuse(self, what: str, node: exp.Expression):
        return self.ctx.error(f"unsupported nullable column {what} (docs/m3.md, \"NULLs\")", node)

    # -- the statement ----------------------------------------------------
    def select(self, sel: exp.Select) -> exp.Select:
        for j in sel.args.get("joins") or []:  # (a derived table's: the query's own are checked as inner joins)
            if j.side or j.kind not in ("", "INNER", "CROSS", None):
                raise self.refuse(f"in a query with an outer join ({sql_of(j)})", j)
        derived = {id(d.this) for d in derived_tables(sel)}
        for sub in subqueries(sel):
            if id(sub) not in derived:
                rewrite_subquery(self, sub)
        if any(nl for _, nl in self.scope.values()):  # a * over relations without one is SQL's own
            sel = star_columns(sel, self.relations, self.ctx)
        expression_keys(self, sel)  # GROUP BY b + a: a key zeroed where NULL, and its indicator (:mod:`.nullexprkeys`)
        keys: list[exp.Column] = []
        for n in _own(sel):
            if type(n) is exp.Star and type(n.parent) is not exp.Count and any(nl for _, nl in self.scope.values()) \
                    and n.find_ancestor(exp.Select) is sel:  # (a subquery's *: it reads no nullable column)
                raise self.refuse("listed by * (name the columns)", n)
            if self.nullable(n) and not n.meta.get(VALUED) and n.find_ancestor(exp.AggFunc) is None and \
                    clause_of(n, sel) is None:
                if is_key(n, sel):
                    if self.count_of(n) is not None:
                        raise self.refuse(f"{n.sql()} as a key: a derived table's SUM/AVG/MIN/MAX that may be NULL "
                                          "(grouping by it needs an indicator, not a count)", n)
                    keys.append(n)
                    continue
                if grouped_key(self, n, sel):  # HAVING r.b IS NULL: a group key read by name (:mod:`.nullhaving`)
                    continue
                clause = n.find_ancestor(exp.Group, exp.Order, exp.Having)
                where = f" ({sql_of(clause)})" if clause is not None else ""
                raise self.ctx.error(f"unsupported nullable column {n.name} read outside an aggregate{where}: only "
                                     "the column itself is a key, selected or in GROUP BY (docs/m3.md, \"NULLs\")", n)
        grouped = any(d.this.args.get("group") is not None or d.this.args.get("distinct") is not None
                      for d in derived_tables(sel))
        if keys and grouped and sel.args.get("joins"):
            raise self.refuse(f"{keys[0].sql()} as a key of a query joining a grouped derived table (the join's "
                              "lifted view does not keep its indicator internal)", keys[0])
        key_indicators(sel, keys, self.holder, selected=grouped)
        having = sel.args.get("having")
        if having is not None:
            having.set("this", having_truth(self, unaliased(self, having.this, sel)))
        counts = []
        for agg in [n for n in _own(sel) if isinstance(n, AGGS)]:
            empty = isinstance(agg, NULLABLE_AGGS) and (type(agg.parent) is exp.Filter or (
                agg.this is not None and type(agg.this) not in (exp.Star, exp.Distinct) and self.reads(agg.this)
                and self.present(agg.this) is not None))
            agg = skip_nulls(self, agg)
            count = hidden_count(agg, sel) if empty else None
            if count is not None:
                counts.append(count)
        counts = one_count_per_item(counts, self.refuse)
        for i, count in counts:  # after the items: CREATE VIEW v(names) renames the selected ones
            sel.append("expressions", exp.alias_(count, f"{COUNT_PREFIX}{i}"))
        if needs_rows(sel):  # the group's row while it has rows, every value 0 or NULL (ROWS, :mod:`.nullshown`)
            sel.append("expressions", exp.alias_(exp.Count(this=exp.Star()), ROWS))
        where = sel.args.get("where")
        if where is not None and self.decides(where):
            where.set("this", self.truth(where.this))
        for j in sel.args.get("joins") or []:
            on = j.args.get("on")
            if on is not None and self.decides(on):
                j.set("on", self.truth(on))
        return sel

    # -- conditions: where TRUE --------------------------------------------
    def truth(self, c: exp.Expression, negated: bool = False) -> exp.Expression:
        """A two-valued condition over values and indicators, TRUE where ``c`` (``NOT c`` if ``negated``) is."""
        t = type(c)
        if t is exp.Null:  # an outer join's padded column folded (:mod:`.padding`): never TRUE, nor its NOT
            return never()
        if t is exp.Paren:
            return exp.Paren(this=self.truth(c.this, negated))
        if t is exp.Not:
            return self.truth(c.this, not negated)
        if t in (exp.And, exp.Or):
            join = (exp.Or if t is exp.And else exp.And) if negated else t
            return join(this=self.truth(c.this, negated), expression=self.truth(c.expression, negated))
        if t is exp.Is and type(c.expression) is exp.Null:
            present = self.present(c.this)
            if present is None or present is False:  # folded later (:mod:`.sugar`)
                return exp.Not(this=c.copy()) if negated else c.copy()
            return present if negated else exp.Not(this=exp.Paren(this=present))
        if t is exp.In and c.args.get("query") is not None:
            return in_subquery(self, c, negated)
        if t is exp.Exists and negated:
            refuse_outer_presence(self, c)
        if not self.reads(c):
            return exp.Not(this=c.copy()) if negated else c.copy()
        if isinstance(c, _ATOMS):
            branched = next((n for n in c.walk() if type(n) in (exp.Coalesce, exp.Nullif)
                             or (type(n) is exp.Case and n.args.get("this") is None)), None)
            if branched is not None:  # the atom per branch of its first CASE-like part, each where it applies
                return any_of([all_of([cond, self.truth(replaced(c, branched, v), negated)])
                            for cond, v in self.branches(branched) if type(v) is not exp.Null]) or never()
            operands = [x for x in c.iter_expressions()]
            if t is exp.EQ and not negated and self.correlates(c.this, c.expression):
                return self.correlation(c.this, c.expression)
            present = all_of([self.present(x) for x in operands])
            atom = c.copy()
            for old, new in zip(list(atom.iter_expressions()), operands):
                old.replace(self.value(new))
            if negated:
                atom = _NEGATED[t](this=atom.this, expression=atom.expression) if t in _NEGATED else \
                    exp.Not(this=exp.Paren(this=atom))
            if present is False:
                return never()
            return atom if present is None else exp.Paren(this=exp.And(this=atom, expression=present))
        raise self.refuse(f"in the condition {sql_of(c)}", c)

    def correlates(self, x: exp.Expression, y: exp.Expression) -> bool:
        """Whether ``x = y`` equates a nullable column of this (sub)query with one of an enclosing query."""
        if self.nullable(x) and self.nullable(y) and self.local(x) != self.local(y):
            if self.count_of(x) is not None or self.count_of(y) is not None:
                raise self.refuse(f"correlating by a derived table's aggregate that may be NULL ({x.sql()} = "
                                  f"{y.sql()})", x)
            return True
        return False

    def correlation(self, x: exp.Column, y: exp.Column) -> exp.Expression:
        """``x = y`` TRUE where SQL's is, as equalities and a condition on this subquery's column alone:
        ``x = y AND x__null = y__null AND <inner>__null = 0`` (no condition on the outer column alone is left
        inside, which a NOT EXISTS or a scalar subquery could not take out: :mod:`.nullsub`)."""
        inner = x if self.local(x) else y
        flag = lambda col: exp.column(indicator(col.name), col.table or None)  # noqa: E731
        return all_of([exp.EQ(this=x.copy(), expression=y.copy()), exp.EQ(this=flag(x), expression=flag(y)),
                       exp.EQ(this=flag(inner), expression=exp.Literal.number(0))])

    def branches(self, e: exp.Expression) -> list[tuple]:
        """A COALESCE, NULLIF or CASE as (condition where this branch is taken, its expression) pairs."""
        if type(e) is exp.Coalesce:
            rest = e.expressions
            present = self.present(e.this)
            tail = rest[0] if len(rest) == 1 else exp.Coalesce(this=rest[0].copy(), expressions=[x.copy() for x in rest[1:]])
            return [(present, e.this), (False if present is None else exp.Not(this=exp.Paren(this=present)), tail)]
        if type(e) is exp.Nullif:
            equal = self.truth(exp.EQ(this=e.this.copy(), expression=e.expression.copy()))
            return [(exp.Not(this=exp.Paren(this=equal)), e.this)]
        out, before = [], []
        for i in e.args["ifs"]:
            cond = self.truth(i.this)
            out.append((all_of([*before, cond]), i.args["true"]))
            before.append(exp.Not(this=exp.Paren(this=cond)))
        out.append((all_of(before), e.args.get("default") or exp.Null()))
        return out

    # -- values: where present, and what --------------------------------------
    def present(self, e: exp.Expression):
        """A condition TRUE where ``e`` is not NULL; None: always; False: never."""
        t = type(e)
        if t is exp.Null:
            return False
        if t is exp.Column:
            if not self.nullable(e):
                return None
            count = self.count_of(e)
            if count is not None:
                return exp.NEQ(this=exp.column(count, e.table or None), expression=exp.Literal.number(0))
            return exp.EQ(this=exp.column(indicator(e.name), e.table or None), expression=exp.Literal.number(0))
        if t is exp.Coalesce:
            return any_of([self.present(x) for x in [e.this, *e.expressions]])
        if t is exp.Nullif:
            equal = self.truth(exp.EQ(this=e.this.copy(), expression=e.expression.copy()))
            return all_of([self.present(e.this), exp.Not(this=exp.Paren(this=equal))])
        if t is exp.Case and e.args.get("this") is None:
            branches, before = [], []
            for i in e.args["ifs"]:
                cond = self.truth(i.this)
                branches.append(all_of([*before, cond, self.present(i.args["true"])]))
                before.append(exp.Not(this=exp.Paren(this=cond)))
            default = e.args.get("default")
            branches.append(all_of([*before, False if default is None else self.present(default)]))
            return any_of(branches)
        if isinstance(e, _ARITH):
            return all_of([self.present(x) for x in e.iter_expressions() if not isinstance(x, exp.Identifier)])
        if not self.reads(e):
            return None
        raise self.refuse(f"in {sql_of(e)} (only arithmetic, CASE, COALESCE and NULLIF read one)", e)

    def value(self, e: exp.Expression) -> exp.Expression:
        """``e`` with NULL-handling functions spelt as CASEs; its value where it is present."""
        t = type(e)
        if t is exp.Null:
            return exp.Literal.number(0)
        if isinstance(e, exp.Select):  # a subquery: rewritten in its own scope already (:mod:`.nullsub`)
            return e.copy()
        if t is exp.Coalesce:
            first, rest = e.this, e.expressions
            if not rest:
                return self.value(first)
            tail = self.value(exp.Coalesce(this=rest[0].copy(), expressions=[x.copy() for x in rest[1:]]))
            present = self.present(first)
            if present is None:
                return self.value(first)
            if present is False:
                return tail
            return exp.Case(ifs=[exp.If(this=present, true=self.value(first))], default=tail)
        if t is exp.Nullif:
            return self.value(e.this)
        if t is exp.Case and e.args.get("this") is None:
            default = e.args.get("default")
            return exp.Case(ifs=[exp.If(this=self.truth(i.this), true=self.value(i.args["true"])) for i in e.args["ifs"]],
                            default=self.value(default) if default is not None else None)
        out = e.copy()
        for old, new in zip(list(out.iter_expressions()), list(e.iter_expressions())):
            old.replace(self.value(new))
        return out


def _own(e: exp.Expression):
    """The nodes of ``e`` outside the subqueries in it (each read in its own scope, :mod:`.nullsub`)."""
    return e.walk(prune=lambda n: isinstance(n, exp.Select) and n is not e)

