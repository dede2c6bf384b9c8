"""SQL spellings rewritten, on the tree, into the forms the front end translates (before any other pass).

Why a pass of its own: these are syntax, not new semantics; each has a form the
compiler already maintains, and rewriting the tree keeps the later passes
unaware of them (the SQL front end translates, it does not special-case):

* ``JOIN s USING (b, ...)`` and ``NATURAL JOIN s`` (the columns both sides name) → ``JOIN s ON l.b = s.b AND ...``
  (an inner equi-join), where ``l`` is the one relation to the left holding ``b``; an unqualified ``b`` in
  the SELECT reads ``l.b`` (equal to ``s.b`` in every joined row), and ``*`` lists ``b`` once, as DuckDB
  does: the left side's columns, then the right side's but the joined ones.  Refused: a left side
  where two relations hold ``b`` or that is a derived table, a comma join before it (``R, S NATURAL JOIN T``
  joins ``S`` and ``T`` only: write ``JOIN ... ON``), and a FULL ``USING``/``NATURAL`` join.  A LEFT one
  reads the left side's column (present in every row), a RIGHT one the right side's (:mod:`.outer`).
  ``NATURAL JOIN`` with no column in common is a cross join (SQL's rule, and DBToaster's; DuckDB refuses it).
* ``NULLIF(x, y)`` → ``CASE WHEN x = y THEN NULL ELSE x END`` (a NULL in a CASE under an aggregate is what
  COUNT, SUM and AVG skip); ``IS [NOT] NULL`` and ``COALESCE`` of constants folded (:func:`.padding.fold`:
  ``NULL IS NULL``, ``COALESCE(NULL, 3)``); of a padded column: :mod:`.outer`.
* ``(SELECT 3)``, ``IN (SELECT 1)``, ``EXISTS (SELECT 3)`` → the constant (:mod:`.constsub`).
* ``x = (SELECT c FROM ...)`` (``c`` no aggregate: the subquery's rows are its values) in a WHERE conjunct →
  ``x IN (SELECT c FROM ...)`` (:mod:`.scalarin`).
* ``x op ANY|SOME|ALL (SELECT ...)`` → ``EXISTS``/``NOT EXISTS`` (:mod:`.quantified`).
* ``DATE_PART('year', d)`` → ``EXTRACT(YEAR FROM d)``.
* ``SUBSTRING(s, 0, n)`` → ``SUBSTRING(s, 1, n - 1)``, ``SUBSTRING(s, 0)`` → ``SUBSTRING(s, 1)``: SQL's positions
  start at 1, and the range ``[0, n)`` holds the ``n - 1`` positions from 1 (DuckDB and PostgreSQL read it so).
* ``GREATEST(x, y, ...)`` (DBToaster's ``LISTMAX``) and ``LEAST`` (``LISTMIN``) inside an aggregate →
  ``CASE WHEN x >= y AND ... THEN x WHEN ... ELSE z END`` (a CASE of comparisons, which the calculus sums);
  elsewhere ``LISTMAX``/``LISTMIN`` are read as ``GREATEST``/``LEAST`` (refused there by name).

>>> import sqlglot
>>> from .examples import PlainErrors, stream
>>> rels = {"R": stream("R", a="INT", b="INT"),
...         "S": stream("S", b="INT", c="INT")}
>>> desugar(sqlglot.parse_one("SELECT * FROM R NATURAL JOIN S WHERE b > 1"), rels, PlainErrors()).sql()
'SELECT R.a, R.b, S.c FROM R JOIN S ON R.b = S.b WHERE R.b > 1'
>>> desugar(sqlglot.parse_one("SELECT DATE_PART('month', d) AS m FROM R"), rels, PlainErrors()).sql()
'SELECT EXTRACT(MONTH FROM d) AS m FROM R'
>>> desugar(sqlglot.parse_one("SELECT SUBSTRING(c, 0, 2) AS p FROM R"), rels, PlainErrors()).sql()
'SELECT SUBSTRING(c, 1, 1) AS p FROM R'
>>> desugar(sqlglot.parse_one("SELECT SUM(LISTMAX(a, b, 0)) FROM R"), rels, PlainErrors()).sql()
'SELECT SUM(CASE WHEN a >= b AND a >= 0 THEN a WHEN b >= 0 THEN b ELSE 0 END) FROM R'
>>> desugar(sqlglot.parse_one("SELECT * FROM R JOIN S USING (c)"), rels, PlainErrors())
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: JOIN ... USING (c): no relation to the left of S has a column c
"""

from __future__ import annotations

from sqlglot import exp

from ..ast import RelationDecl
from .nodes import sql_of
from .padding import fold
from .constsub import has_constant_subquery, inline_constants
from .quantified import is_quantified, quantify
from .scalarin import equal_to_in, has_equal_to_rows
from .resolve import Positions


def desugar(tree: exp.Expression, relations: dict[str, RelationDecl], ctx: Positions) -> exp.Expression:
    """``tree`` (a copy when changed) with every SELECT's USING and NATURAL joins and every DATE_PART rewritten
    (module doc)."""
    if not any(_sugared(n) for n in tree.walk()) and not has_constant_subquery(tree) and not has_equal_to_rows(tree):
        return tree
    tree = quantify(equal_to_in(inline_constants(tree.copy())), relations, ctx)  # ANY/SOME/ALL: EXISTS, NOT EXISTS (:mod:`.quantified`)
    for node in list(tree.walk()):
        if type(node) is exp.Anonymous and str(node.this).upper() == "DATE_PART":
            node.replace(_extract(node, ctx))
    for node in list(tree.walk()):
        if _from_zero(node):
            length = node.args.get("length")
            node.set("start", exp.Literal.number(1))
            if length is not None:
                node.set("length", exp.Literal.number(int(length.this) - 1))
    for node in list(tree.walk()):
        if type(node) is exp.Nullif:
            node.replace(exp.Case(ifs=[exp.If(this=exp.EQ(this=node.this.copy(), expression=node.expression.copy()),
                                              true=exp.Null())], default=node.this.copy()))
    if any(type(n) in (exp.Is, exp.Coalesce) for n in tree.walk()):  # of constants (and NULLIF's NULL): folded
        tree = fold(tree)
    for node in reversed(list(tree.walk())):  # innermost first: GREATEST(GREATEST(a, b), c)
        if _extremum(node) is not None:
            node.replace(_extremum_case(node) if node.find_ancestor(exp.AggFunc) is not None else
                         _extremum(node)(this=node.this.copy() if not _listed(node) else node.expressions[0].copy(),
                                         expressions=[e.copy() for e in _args(node)[1:]]))
    for sel in reversed([s for s in tree.walk() if isinstance(s, exp.Select)]):  # innermost first
        if any(_joined_by_name(j) for j in sel.args.get("joins") or []):
            _to_on(sel, relations, ctx)
    return tree


def _from_zero(node: exp.Expression) -> bool:
    """A ``SUBSTRING(s, 0[, n])`` with ``n`` an integer constant >= 1 (0 or less is refused as written)."""
    if type(node) is not exp.Substring:
        return False
    start, length = node.args.get("start"), node.args.get("length")
    return type(start) is exp.Literal and not start.is_string and start.this == "0" and \
        (length is None or type(length) is exp.Literal and not length.is_string and str(length.this).isdigit()
         and int(length.this) >= 1)


def _sugared(node: exp.Expression) -> bool:
    return _from_zero(node) or (type(node) is exp.Anonymous and str(node.this).upper() == "DATE_PART") or \
        (type(node) is exp.Join and _joined_by_name(node)) or type(node) in (exp.Nullif, exp.Is, exp.Coalesce) or _extremum(node) is not None or is_quantified(node)


_LISTED = {"LISTMAX": exp.Greatest, "LISTMIN": exp.Least}


def _listed(node: exp.Expression) -> bool:
    return type(node) is exp.Anonymous and str(node.this).upper() in _LISTED


def _extremum(node: exp.Expression) -> type | None:
    """``exp.Greatest`` or ``exp.Least`` for a GREATEST/LISTMAX or LEAST/LISTMIN call, else None."""
    if type(node) in (exp.Greatest, exp.Least):
        return type(node)
    return _LISTED[str(node.this).upper()] if _listed(node) else None


def _args(node: exp.Expression) -> list[exp.Expression]:
    return list(node.expressions) if _listed(node) else [node.this, *node.expressions]


def _extremum_case(node: exp.Expression) -> exp.Expression:
    """GREATEST/LEAST as a CASE: the first argument at least (at most) every later one, else the next."""
    args, op = _args(node), exp.GTE if _extremum(node) is exp.Greatest else exp.LTE
    if len(args) == 1:
        return args[0].copy()
    ifs = [exp.If(this=exp.and_(*[op(this=x.copy(), expression=y.copy()) for y in args[i + 1:]]), true=x.copy())
           for i, x in enumerate(args[:-1])]
    return exp.Case(ifs=ifs, default=args[-1].copy())


def _joined_by_name(j: exp.Join) -> bool:
    return bool(j.args.get("using")) or str(j.args.get("method") or "").upper() == "NATURAL"


def _extract(node: exp.Anonymous, ctx: Positions) -> exp.Extract:
    """``DATE_PART('part', x)`` as ``EXTRACT(PART FROM x)`` (which parts are allowed is the resolver's to say)."""
    args = node.expressions
    if len(args) != 2 or type(args[0]) is not exp.Literal or not args[0].is_string:
        raise ctx.error(f"unsupported {sql_of(node)}: write DATE_PART('part', column), the part a string", node)
    return exp.Extract(this=exp.var(args[0].name.upper()), expression=args[1].copy())


def _columns(item: exp.Expression, relations: dict[str, RelationDecl], ctx: Positions,
             what: str) -> tuple[str, list[str]]:
    """A FROM item's name (alias or relation) and its columns; a relation by name only."""
    if type(item) is not exp.Table:
        raise ctx.error(f"unsupported {what} with a derived table ({sql_of(item)}): write JOIN ... ON", item)
    rel = next((r for n, r in relations.items() if n.lower() == item.name.lower()), None)
    if rel is None:
        raise ctx.error(f"unknown relation {item.name} (relations: {', '.join(relations) or 'none declared'})", item)
    return item.alias or rel.name, [c.name for c in rel.columns]


def _to_on(sel: exp.Select, relations: dict[str, RelationDecl], ctx: Positions) -> None:
    """Rewrite ``sel``'s USING and NATURAL joins in place (module doc)."""
    from_ = sel.args.get("from") or sel.args.get("from_")
    left = [_columns(from_.this, relations, ctx, "NATURAL JOIN or JOIN ... USING")]
    merged: dict[str, str] = {}  # a joined column (lower case) -> the left relation read for it unqualified
    hidden: set[tuple[str, str]] = set()  # right-side joined columns, which * lists once (as the left's)
    for j in sel.args.get("joins") or []:
        natural = str(j.args.get("method") or "").upper() == "NATURAL"
        what = "NATURAL JOIN" if natural else f"JOIN ... USING ({', '.join(i.name for i in j.args.get('using') or [])})"
        right = _columns(j.this, relations, ctx, what)
        if not _joined_by_name(j):
            left.append(right)
            continue
        side = str(j.args.get("side") or "").upper()
        if side == "FULL" or str(j.args.get("kind") or "").upper() not in ("", "INNER", "OUTER"):
            raise ctx.error(f"unsupported {side} {what} (inner, LEFT and RIGHT joins: a FULL join's joined column "
                            "is either side's, write FULL JOIN ... ON)", j)
        if any(not x.args.get("on") and not x.args.get("kind") and not _joined_by_name(x)
               for x in (sel.args.get("joins") or [])[:sel.args["joins"].index(j)]):
            raise ctx.error(f"unsupported {what} after a comma join (it joins only the item before it): write "
                            "JOIN ... ON", j)
        names = [i.name for i in j.args.get("using") or []] if not natural else \
            [c for c in right[1] if any(c.lower() == x.lower() for _, cols in left for x in cols)]
        conds = []
        for name in names:
            rcol = next((c for c in right[1] if c.lower() == name.lower()), None)
            if rcol is None:
                raise ctx.error(f"{what}: {right[0]} has no column {name}", j)
            holders = [(a, c) for a, cols in left for c in cols if c.lower() == name.lower()]
            if not holders:
                raise ctx.error(f"{what}: no relation to the left of {right[0]} has a column {name}", j)
            if len(holders) > 1:
                raise ctx.error(f"{what}: {name} is a column of both {holders[0][0]} and {holders[1][0]} to the "
                                f"left of {right[0]}: write JOIN ... ON", j)
            conds.append(exp.EQ(this=exp.column(holders[0][1], holders[0][0]), expression=exp.column(rcol, right[0])))
            if side == "RIGHT":  # the joined column is the right side's, present in every row
                merged.setdefault(name.lower(), right[0])
                hidden.add((holders[0][0], holders[0][1].lower()))
            else:
                merged.setdefault(name.lower(), holders[0][0])
                hidden.add((right[0], rcol.lower()))
        j.set("using", None)
        j.set("method", None)
        j.set("on", (exp.and_(*conds) if len(conds) > 1 else conds[0]) if conds else None)  # none: a cross join
        left.append(right)
    _qualify(sel, merged)
    _expand_star(sel, left, hidden)


def _qualify(sel: exp.Select, merged: dict[str, str]) -> None:
    """An unqualified read of a joined column in ``sel`` itself (not in its subqueries) reads the left relation's."""
    for col in list(sel.find_all(exp.Column)):
        if not col.table and col.name.lower() in merged and col.find_ancestor(exp.Select) is sel \
                and not isinstance(col.this, exp.Star):
            col.set("table", exp.to_identifier(merged[col.name.lower()]))


def _expand_star(sel: exp.Select, items: list[tuple[str, list[str]]], hidden: set[tuple[str, str]]) -> None:
    """``*`` → the FROM items' columns, each joined column once (DuckDB's order: left to right)."""
    out = []
    for e in sel.expressions:
        if isinstance(e, exp.Star):
            out += [exp.column(c, a) for a, cols in items for c in cols if (a, c.lower()) not in hidden]
        else:
            out.append(e)
    sel.set("expressions", out)
