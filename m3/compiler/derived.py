"""Subqueries in FROM (derived tables) and WITH (CTEs) without aggregates, flattened into the query that reads them.

Why flatten rather than materialise: a derived table that only selects,
joins and computes per-row expressions is a *view* over its relations, and
the query over it is the same query over those relations with the view's
expressions put where its columns are read (TPC-H Q7-Q9).  The flattened
query is an ordinary SELECT, so everything downstream (maps, deltas, cost
classes) is unchanged and it stays first-order.

* ``WITH c AS (SELECT ...)`` is inlined as ``(SELECT ...) AS c`` wherever
  ``c`` is read as a table (also inside a nested subquery: TPC-H Q15 reads
  its CTE twice); ``WITH c(x, y)`` renames the columns in order.
* A derived table ``(SELECT e1 AS x, ... FROM R r, ... WHERE p) AS d``
  becomes its FROM items (aliases renamed where they would clash with the
  outer ones) and its WHERE (ANDed); every read of ``d.x`` (or of ``x``
  unqualified, when no other FROM item has an ``x``) becomes a copy of
  ``e1``; a bare ``x`` in the SELECT list keeps its name (``e1 AS x``).
* Inner first: a derived table inside a derived table is flattened before
  the one that holds it.

A derived table with aggregates, GROUP BY, DISTINCT, HAVING, ORDER BY or
LIMIT (an aggregate of aggregates: TPC-H Q13, Q15), a recursive CTE, or any
clause not listed above is refused with the construct named.  A ``UNION
ALL`` in FROM is split into one query per branch by :mod:`.union` first.

>>> import sqlglot
>>> from .examples import PlainErrors, stream
>>> rels = {"R": stream("R", a="INT", b="INT"),
...         "S": stream("S", b="INT", c="INT")}
>>> sel = sqlglot.parse_one('''WITH v AS (SELECT r.a AS k, r.b * 2 AS w FROM R r WHERE r.a > 1)
...     SELECT k, SUM(w * c) AS s FROM v, S r WHERE v.k = r.b GROUP BY k''')
>>> flatten(sel, rels, PlainErrors()).sql()
'SELECT r_2.a AS k, SUM((r_2.b * 2) * c) AS s FROM R AS r_2, S AS r WHERE r_2.a = r.b AND r_2.a > 1 GROUP BY r_2.a'
>>> flatten(sqlglot.parse_one("SELECT SUM(n) FROM (SELECT a, COUNT(*) AS n FROM R GROUP BY a) t"), rels, PlainErrors())
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: unsupported derived table with aggregates (an aggregate of aggregates; only a SELECT of expressions over joins and WHERE is flattened) (SELECT a, COUNT(*) AS n FROM R GROUP BY a)
"""

from __future__ import annotations

from sqlglot import exp

from ..ast import RelationDecl
from .nodes import ancestors, describe, present, sql_of, unread_args
from .resolve import Positions

_BODY_ARGS = frozenset({"expressions", "from", "from_", "joins", "where"})  # what a flattened body may hold
_REFUSED_BODY = {"group": "GROUP BY", "having": "HAVING", "distinct": "DISTINCT", "order": "ORDER BY",
                 "limit": "LIMIT", "offset": "OFFSET"}


def flatten(sel: exp.Select, relations: dict[str, RelationDecl], ctx: Positions) -> exp.Select:
    """``sel`` (a copy) with its CTEs inlined and its derived tables without aggregates flattened (module doc)."""
    if not _has_derived(sel):
        return sel
    _refuse_unread(sel, ctx)  # flattening drops nodes (a derived column's name, its alias): check them first
    sel = sel.copy()
    inline_ctes(sel, ctx)
    for scope in reversed([s for s in sel.walk(bfs=True) if isinstance(s, exp.Select)]):
        while (item := _first_derived(scope)) is not None:
            _flatten_one(scope, item, relations, ctx)
    return sel


def inline_ctes(sel: exp.Select, ctx: Positions) -> None:
    """Inline every CTE of ``sel``'s tree where it is read (in place)."""
    for scope in [s for s in sel.walk() if isinstance(s, exp.Select)]:
        _inline_ctes(scope, ctx)


def _has_derived(sel: exp.Select) -> bool:
    return any(isinstance(n, (exp.With, exp.CTE)) or _is_from_item(n) and type(n) is exp.Subquery
               for n in sel.walk())


def _is_from_item(n: exp.Expression) -> bool:
    return type(n.parent) in (exp.From, exp.Join) and n.arg_key == "this"


def _with(sel: exp.Select):
    return sel.args.get("with_") or sel.args.get("with")


def _inline_ctes(scope: exp.Select, ctx: Positions) -> None:
    """Replace each table read of a CTE of ``scope`` by a derived table holding the CTE's body."""
    w = _with(scope)
    if w is None:
        return
    if type(w) is not exp.With:
        raise ctx.error(f"malformed WITH clause ({sql_of(w)})", scope)
    for arg in ("recursive", "search", "cycle", "udfs"):
        if w.args.get(arg):
            raise ctx.error(f"unsupported {arg.upper()} of WITH ({sql_of(w)}): only plain CTEs are inlined", w)
    ctes: dict[str, exp.Expression] = {}
    for cte in w.expressions:
        alias = cte.args.get("alias") if type(cte) is exp.CTE else None
        body_ok = type(cte.this) is exp.Select or isinstance(cte.this, exp.SetOperation)  # a UNION ALL: :mod:`.union`
        if not body_ok or type(alias) is not exp.TableAlias or type(alias.this) is not exp.Identifier:
            raise ctx.error(f"unsupported CTE {sql_of(cte)} (only name AS (SELECT ...) or a UNION ALL)", cte)
        for arg in ("scalar", "materialized", "key_expressions"):
            if cte.args.get(arg) not in (None, False, []):
                raise ctx.error(f"unsupported {arg.upper().replace('_', ' ')} of a CTE ({sql_of(cte)})", cte)
        body = cte.this.copy()
        for name, earlier in ctes.items():  # a CTE may read the ones before it
            _replace_reads(body, name, earlier)
        name = cte.alias.lower()
        if name in ctes:
            raise ctx.error(f"CTE {cte.alias} defined twice", cte)
        ctes[name] = exp.Subquery(this=body, alias=cte.args["alias"].copy())
    scope.set("with_" if "with_" in scope.args else "with", None)
    for name, derived in ctes.items():
        _replace_reads(scope, name, derived)


def _replace_reads(scope: exp.Expression, name: str, derived: exp.Subquery) -> None:
    """Every FROM/JOIN item of ``scope``'s tree reading table ``name`` becomes a copy of ``derived`` (its alias kept)."""
    for table in [t for t in scope.walk() if type(t) is exp.Table and _is_from_item(t)]:
        if table.name.lower() != name or table.args.get("db") or table.args.get("catalog"):
            continue
        copy = derived.copy()
        alias = table.args.get("alias")
        if alias is not None and alias.name:
            columns = copy.args["alias"].args.get("columns")
            copy.set("alias", exp.TableAlias(this=exp.to_identifier(alias.name), columns=columns))
        table.replace(copy)


def _first_derived(scope: exp.Select) -> exp.Subquery | None:
    from_ = scope.args.get("from_") or scope.args.get("from")
    items = ([from_.this] if isinstance(from_, exp.From) else []) + \
        [j.this for j in scope.args.get("joins") or [] if isinstance(j, exp.Join)]
    return next((i for i in items if type(i) is exp.Subquery), None)


def _aliases(scope: exp.Select) -> set[str]:
    from_ = scope.args.get("from_") or scope.args.get("from")
    items = ([from_.this] if isinstance(from_, exp.From) else []) + \
        [j.this for j in scope.args.get("joins") or [] if isinstance(j, exp.Join)]
    return {i.alias_or_name.lower() for i in items if isinstance(i, (exp.Table, exp.Subquery))}


def _flatten_one(scope: exp.Select, item: exp.Subquery, relations: dict[str, RelationDecl], ctx: Positions) -> None:
    body = item.this
    if type(body) is not exp.Select:
        what = "UNION" if isinstance(body, exp.SetOperation) else type(body).__name__.upper()
        raise ctx.error(f"unsupported derived table of {what} ({sql_of(item)}): a UNION ALL in FROM is split "
                        "into branches only under the SELECT that reads it, or under derived tables of rows over it "
                        "(no aggregates, DISTINCT or LIMIT)", item)
    _check_body(item, body, ctx)
    d_alias = item.alias_or_name.lower() if item.args.get("alias") is not None else ""
    tables = _body_tables(body, relations, ctx)
    taken = _aliases(scope) - {d_alias}
    for alias, _ in tables:  # rename the body's aliases that clash with the outer FROM's
        if alias.lower() in taken:
            n = 2
            while f"{alias}_{n}".lower() in taken | {a.lower() for a, _ in tables}:
                n += 1
            _rename_alias(body, alias, f"{alias}_{n}")
            taken.add(f"{alias}_{n}".lower())
        else:
            taken.add(alias.lower())
    tables = _body_tables(body, relations, ctx)
    outputs = _outputs(item, body, tables, relations, ctx)
    _expand_stars(scope, item, d_alias, outputs, ctx)
    others = _other_columns(scope, item, relations)
    _substitute(scope, item, d_alias, outputs, others, relations, ctx)
    # splice: the body's FROM item takes the derived table's place, its joins follow, its WHERE is ANDed
    from_ = body.args.get("from_") or body.args.get("from")
    first, joins = from_.this, list(body.args.get("joins") or [])
    holder = item.parent
    holder.set("this", first)
    where = body.args.get("where")
    if type(holder) is exp.From:
        scope.set("joins", joins + list(scope.args.get("joins") or []))
    else:
        outer_joins = list(scope.args.get("joins") or [])
        i = next(k for k, j in enumerate(outer_joins) if j is holder)
        scope.set("joins", outer_joins[:i + 1] + joins + outer_joins[i + 1:])
    if where is not None:
        old = scope.args.get("where")
        scope.set("where", exp.Where(this=where.this if old is None else exp.and_(old.this, where.this)))


def _check_body(item: exp.Subquery, body: exp.Select, ctx: Positions) -> None:
    for arg, value in item.args.items():
        if arg not in ("this", "alias") and value not in (None, False, [], ""):
            raise ctx.error(f"unsupported {arg.rstrip('_').upper()} of a derived table ({sql_of(item)})", item)
    alias = item.args.get("alias")
    if alias is not None and (type(alias) is not exp.TableAlias or type(alias.this) is not exp.Identifier):
        raise ctx.error(f"malformed derived table alias ({sql_of(item)})", item)
    if any(isinstance(n, exp.AggFunc) for e in body.expressions for n in e.walk()
           if not any(isinstance(a, exp.Select) and a is not body for a in ancestors(n, body))):
        raise ctx.error("unsupported derived table with aggregates (an aggregate of aggregates; only a SELECT of "
                        f"expressions over joins and WHERE is flattened) ({sql_of(body)})", item)
    for arg, word in _REFUSED_BODY.items():
        if body.args.get(arg) not in (None, False, []):
            raise ctx.error(f"unsupported {word} in a derived table ({sql_of(body)}): only a SELECT of expressions "
                            "over joins and WHERE is flattened", item)
    for arg, value in body.args.items():
        if arg not in _BODY_ARGS and value not in (None, False, [], ""):
            raise ctx.error(f"unsupported {arg.rstrip('_').upper()} clause in a derived table ({sql_of(body)})", item)
    from_ = body.args.get("from_") or body.args.get("from")
    if type(from_) is not exp.From:
        raise ctx.error(f"a derived table needs a FROM clause ({sql_of(body)})", item)
    where, joins = body.args.get("where"), body.args.get("joins") or []
    if where is not None and type(where) is not exp.Where or \
            not isinstance(joins, list) or not all(type(j) is exp.Join for j in joins):
        raise ctx.error(f"malformed derived table ({sql_of(body)})", item)
    if not isinstance(body.expressions, list) or not body.expressions:
        raise ctx.error(f"malformed SELECT list of a derived table ({sql_of(body)})", item)


def _body_tables(body: exp.Select, relations: dict[str, RelationDecl], ctx: Positions) -> list[tuple[str, str]]:
    """The body's FROM items as ``(alias, relation)`` (other items stay for the front end to refuse)."""
    from_ = body.args.get("from_") or body.args.get("from")
    items = [from_.this] + [j.this for j in body.args.get("joins") or [] if isinstance(j, exp.Join)]
    out = []
    for t in items:
        if type(t) is not exp.Table:
            raise ctx.error(f"unsupported FROM item {type(t).__name__.upper()} in a derived table ({sql_of(t)})", t)
        rel = next((r for r in relations if r.lower() == t.name.lower()), None)
        if rel is None:
            raise ctx.error(f"unknown relation {t.name} (relations: {', '.join(relations) or 'none declared'})", t)
        out.append((t.alias_or_name, rel))
    return out


def _rename_alias(body: exp.Select, old: str, new: str) -> None:
    """Rename a body's FROM alias and every column qualified by it (not inside a subquery that declares ``old``)."""
    for t in [t for t in _scope_nodes(body, old) if type(t) is exp.Table and _is_from_item(t)]:
        if t.alias_or_name.lower() == old.lower() and t.find_ancestor(exp.Select) is body:
            t.set("alias", exp.TableAlias(this=exp.to_identifier(new)))
    for c in [c for c in _scope_nodes(body, old) if type(c) is exp.Column]:
        if c.table.lower() == old.lower():
            c.set("table", exp.to_identifier(new))


def _scope_nodes(root: exp.Select, alias: str):
    """``root``'s nodes, not descending into a nested SELECT whose own FROM declares ``alias``."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node is not root and isinstance(node, exp.Select) and alias.lower() in _aliases(node):
            continue
        yield node
        stack.extend(node.iter_expressions())


def _columns_of(tables: list[tuple[str, str]], relations: dict[str, RelationDecl]) -> list[tuple[str, str]]:
    return [(a, c.name) for a, r in tables for c in relations[r].columns]


def _outputs(item: exp.Subquery, body: exp.Select, tables: list[tuple[str, str]],
             relations: dict[str, RelationDecl], ctx: Positions) -> dict[str, exp.Expression]:
    """The derived table's columns: name (lower case) → its expression, every column in it qualified."""
    cols = _columns_of(tables, relations)
    _qualify(body, cols, ctx)
    named: list[tuple[str, exp.Expression]] = []
    for e in body.expressions:
        if type(e) is exp.Star or type(e) is exp.Column and isinstance(e.this, exp.Star):
            _refuse_unread(e, ctx)
            qual = e.table.lower() if type(e) is exp.Column else ""
            picked = [(c, exp.column(c, table=a)) for a, c in cols if not qual or a.lower() == qual]
            if not picked:
                raise ctx.error(f"unknown relation {e.table} in {sql_of(e)}", e)
            named += picked
        elif type(e) is exp.Alias:
            named.append((e.alias, e.this))
        else:
            named.append((e.alias_or_name, e))
    alias = item.args.get("alias")
    renamed = alias.args.get("columns") if alias is not None else None
    if renamed:
        if len(renamed) != len(named):
            raise ctx.error(f"derived table {item.alias} names {len(renamed)} columns, its SELECT has {len(named)}", item)
        named = [(n.name, e) for n, (_, e) in zip(renamed, named)]
    out: dict[str, exp.Expression] = {}
    for name, e in named:
        out[name.lower()] = None if name.lower() in out else e  # None: ambiguous if read
    return out


def _refuse_unread(e: exp.Expression, ctx: Positions) -> None:
    """What flattening would drop (a ``*`` is written out, a derived column's name replaced) is checked here."""
    for node, arg in unread_args(e):
        raise ctx.error(f"unsupported {describe(node, arg)} ({sql_of(node)})", node)


def _expand_stars(scope: exp.Select, item: exp.Subquery, d_alias: str, outputs: dict[str, exp.Expression],
                  ctx: Positions) -> None:
    """``*`` and ``d.*`` in ``scope``'s SELECT list name the derived table's columns, not its relations' columns:
    written out (``*`` as ``alias.*`` per FROM item, in FROM order) before the derived table is spliced in."""
    from_ = scope.args.get("from_") or scope.args.get("from")
    items = ([from_.this] if isinstance(from_, exp.From) else []) + \
        [j.this for j in scope.args.get("joins") or [] if isinstance(j, exp.Join)]
    out: list[exp.Expression] = []
    for e in scope.expressions:
        if type(e) is exp.Star or type(e) is exp.Column and isinstance(e.this, exp.Star):
            _refuse_unread(e, ctx)
        if type(e) is exp.Star:
            for i in items:
                if i is item:
                    out += [exp.column(n, table=d_alias) for n in outputs]
                elif isinstance(i, (exp.Table, exp.Subquery)):
                    out.append(exp.Column(this=exp.Star(), table=exp.to_identifier(i.alias_or_name)))
        elif type(e) is exp.Column and isinstance(e.this, exp.Star) and e.table.lower() == d_alias and d_alias:
            out += [exp.column(n, table=d_alias) for n in outputs]
        else:
            out.append(e)
    scope.set("expressions", out)


def _qualify(body: exp.Select, cols: list[tuple[str, str]], ctx: Positions) -> None:
    """Qualify the body's unqualified columns with their FROM alias (its nested subqueries keep their own scope)."""
    for c in [c for c in body.walk() if type(c) is exp.Column and not c.table and not isinstance(c.this, exp.Star)
              and not any(present(v) for k, v in c.args.items() if k not in ("this", "table"))]:
        inner = c.find_ancestor(exp.Select)
        if inner is not body:
            continue
        hits = [a for a, name in cols if name.lower() == c.name.lower()]
        if len(hits) > 1:
            raise ctx.error(f"ambiguous column {sql_of(c)} in a derived table (qualify it with a table alias)", c)
        if hits:
            c.set("table", exp.to_identifier(hits[0]))


def _other_columns(scope: exp.Select, item: exp.Subquery, relations: dict[str, RelationDecl]) -> set[str]:
    """The column names (lower case) of ``scope``'s other FROM items, for reads of an unqualified name."""
    from_ = scope.args.get("from_") or scope.args.get("from")
    items = ([from_.this] if isinstance(from_, exp.From) else []) + \
        [j.this for j in scope.args.get("joins") or [] if isinstance(j, exp.Join)]
    names: set[str] = set()
    for i in items:
        if i is item:
            continue
        if type(i) is exp.Table:
            rel = next((r for r in relations if r.lower() == i.name.lower()), None)
            names |= {c.name.lower() for c in relations[rel].columns} if rel else set()
        elif type(i) is exp.Subquery and type(i.this) is exp.Select:
            names |= {e.alias_or_name.lower() for e in i.this.expressions}
    return names


def _substitute(scope: exp.Select, item: exp.Subquery, d_alias: str, outputs: dict[str, exp.Expression],
                others: set[str], relations: dict[str, RelationDecl], ctx: Positions) -> None:
    """Every read of a derived column in ``scope`` (outside the derived tables of its FROM) becomes a copy of its
    expression."""
    for c in [c for c in scope.walk() if type(c) is exp.Column and not isinstance(c.this, exp.Star)]:
        if any(type(a) is exp.Subquery and _is_from_item(a) and a.parent.parent is scope for a in ancestors(c, scope)):
            continue
        name, qual = c.name.lower(), c.table.lower()
        if any(present(v) for k, v in c.args.items() if k not in ("this", "table")):
            continue  # the front end refuses what it does not read
        if qual:
            if qual != d_alias or _declared_inside(c, scope, qual):
                continue
        elif name not in outputs or _shadowed(c, scope, name, relations):
            continue
        elif name in others:
            raise ctx.error(f"ambiguous column {sql_of(c)}: a column of derived table {d_alias or '(unnamed)'} "
                            "and of another FROM item (qualify it)", c)
        if name not in outputs:
            raise ctx.error(f"unknown column {sql_of(c)} (derived table {d_alias} has "
                            f"{', '.join(outputs) or 'no columns'})", c)
        e = outputs[name]
        if e is None:
            raise ctx.error(f"ambiguous column {sql_of(c)}: derived table {d_alias} has two columns {c.name}", c)
        new = e.copy() if type(e) in (exp.Column, exp.Literal) else exp.Paren(this=e.copy())
        if c.parent is scope and c.arg_key == "expressions" and not (type(new) is exp.Column and new.name == c.name):
            new = exp.Alias(this=new, alias=exp.to_identifier(c.name))
        c.replace(new)


def _declared_inside(c: exp.Column, scope: exp.Select, alias: str) -> bool:
    """Whether a subquery of ``scope`` around ``c`` names a FROM item ``alias`` (up to case): ``alias.x`` is its
    (an inner name hides an outer one: ``FROM T`` in an EXISTS hides the derived table ``t``, as in DuckDB)."""
    return any(isinstance(a, exp.Select) and alias in _aliases(a) for a in ancestors(c, scope))


def _shadowed(c: exp.Column, scope: exp.Select, name: str, relations: dict[str, RelationDecl]) -> bool:
    """Whether an unqualified column inside a nested subquery of ``scope`` names a column of that subquery's own
    FROM (its scope comes first); the front end resolves it there."""
    inner = c.find_ancestor(exp.Select)
    while inner is not None and inner is not scope:
        for t in inner.walk():
            if type(t) is exp.Table and _is_from_item(t) and t.find_ancestor(exp.Select) is inner:
                rel = next((r for r in relations if r.lower() == t.name.lower()), None)
                if rel is not None and any(col.name.lower() == name for col in relations[rel].columns):
                    return True
        inner = inner.parent.find_ancestor(exp.Select) if inner.parent is not None else None
    return False
