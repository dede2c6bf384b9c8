"""``x op ANY|SOME|ALL (SELECT b FROM ... WHERE w)`` rewritten, on the tree, into EXISTS and NOT EXISTS.

Why a rewrite and not a construct of its own: a quantified comparison is an existence test, which the
compiler already maintains (:mod:`.subqueries`, :mod:`.nested`), correlated by equality or by a range of
the compared column; rewriting keeps the later passes unaware of it (the SQL front end translates):

* ``x op ANY (SELECT b FROM S WHERE w)`` → ``EXISTS (SELECT 1 FROM S WHERE w AND x op b)`` (``SOME`` is ``ANY``);
* ``x op ANY|ALL (SELECT AGG(b) FROM S WHERE w)`` (no GROUP BY: exactly one row, NULL or not) → ``x op (SELECT
  AGG(b) ...)``, a scalar subquery;
* ``x op ALL (SELECT b FROM S WHERE w)`` → ``NOT EXISTS (SELECT 1 FROM S WHERE w AND x op' b)``, ``op'`` the
  complement of ``op`` (``>`` → ``<=``, ``=`` → ``<>``).  Exact because Boreas has no NULLs: with NULLs,
  ``NOT (x op b)`` is not ``x op' b`` and an ALL over a NULL ``b`` is unknown, not true.

An unqualified column of ``x`` that names a column of the subquery's relations is qualified with the outer
relation holding it first (in the rewritten subquery it would read the inner one).  Refused by name: a
quantified comparison over anything but one SELECT of one column that is not an aggregate (an aggregate
subquery has one row: compare with it as a scalar subquery), over a grouped subquery, and one comparing an
aggregate (in HAVING).  Where the EXISTS lands in a place a subquery may not be (OR, SELECT list), the
general rules refuse it.

>>> import sqlglot
>>> from .examples import PlainErrors, stream
>>> rels = {"R": stream("R", a="INT", b="INT"),
...         "S": stream("S", b="INT", c="INT")}
>>> def q(sql): return quantify(sqlglot.parse_one(sql), rels, PlainErrors()).sql()
>>> q("SELECT a FROM R WHERE a > ALL (SELECT c FROM S WHERE S.b = R.b)")
'SELECT a FROM R WHERE NOT EXISTS(SELECT 1 FROM S WHERE S.b = R.b AND a <= c)'
>>> q("SELECT a FROM R WHERE b = SOME (SELECT b FROM S)")
'SELECT a FROM R WHERE EXISTS(SELECT 1 FROM S WHERE R.b = b)'
>>> q("SELECT a FROM R WHERE NOT a < ALL (SELECT c FROM S WHERE c > 1 OR b = 2)")
'SELECT a FROM R WHERE EXISTS(SELECT 1 FROM S WHERE (c > 1 OR b = 2) AND a >= c)'
>>> q("SELECT a FROM R WHERE a > ALL (SELECT SUM(c) FROM S WHERE S.b = R.b)")
'SELECT a FROM R WHERE a > (SELECT SUM(c) FROM S WHERE S.b = R.b)'
>>> q("SELECT a FROM R WHERE a > ANY (SELECT SUM(c) FROM S GROUP BY b)")
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: unsupported ANY over a grouped subquery (SELECT SUM(c) FROM S GROUP BY b)
"""

from __future__ import annotations

from sqlglot import exp

from ..ast import RelationDecl
from .nodes import sql_of
from .resolve import Positions, unparen

_FLIP = {exp.EQ: exp.EQ, exp.NEQ: exp.NEQ, exp.LT: exp.GT, exp.LTE: exp.GTE, exp.GT: exp.LT, exp.GTE: exp.LTE}
_COMPLEMENT = {exp.EQ: exp.NEQ, exp.NEQ: exp.EQ, exp.LT: exp.GTE, exp.LTE: exp.GT, exp.GT: exp.LTE, exp.GTE: exp.LT}


def is_quantified(node: exp.Expression) -> bool:
    """Whether ``node`` is an ``ANY``/``SOME``/``ALL`` (the right side of a quantified comparison)."""
    return type(node) in (exp.Any, exp.All)


def quantify(tree: exp.Expression, relations: dict[str, RelationDecl], ctx: Positions) -> exp.Expression:
    """``tree`` with every quantified comparison an EXISTS or NOT EXISTS (module doc), in place, innermost first."""
    for node in reversed(list(tree.walk())):
        if not is_quantified(node):
            continue
        cmp = node.parent
        if type(cmp) not in _FLIP:
            raise ctx.error(f"unsupported {_word(node)} ({sql_of(cmp or node)}): only in a comparison "
                            "(x = ANY (SELECT ...), x > ALL (SELECT ...))", node)
        one = _one_row(node, ctx)
        if one is not None:  # an aggregate without GROUP BY: exactly one row, so ANY and ALL are that row
            node.replace(exp.Subquery(this=one))
            continue
        op = type(cmp) if cmp.expression is node else _FLIP[type(cmp)]
        x = cmp.this if cmp.expression is node else cmp.expression
        _replace(cmp, _exists(op, x, node, relations, ctx))
    return tree


def _one_row(node: exp.Expression, ctx: Positions) -> exp.Select | None:
    """The subquery of ``node`` (a copy) when it is an aggregate without GROUP BY (one row), else None."""
    sel = unparen(node.this)
    if type(sel) is exp.Subquery and not any(v for k, v in sel.args.items() if k != "this"):
        sel = unparen(sel.this)
    if type(sel) is not exp.Select or len(sel.expressions) != 1 or sel.args.get("group") is not None \
            or sel.args.get("having") is not None or sel.expressions[0].find(exp.AggFunc) is None:
        return None
    return sel.copy()


def _word(node: exp.Expression) -> str:
    return "ALL" if type(node) is exp.All else "ANY"


def _exists(op: type, x: exp.Expression, node: exp.Expression, relations: dict[str, RelationDecl],
            ctx: Positions) -> exp.Expression:
    """The EXISTS (ANY) or NOT EXISTS (ALL) form of ``x op ANY|ALL (node's subquery)``."""
    word = _word(node)
    sel = unparen(node.this)
    if type(sel) is exp.Subquery and not any(v for k, v in sel.args.items() if k != "this"):
        sel = unparen(sel.this)
    if type(sel) is not exp.Select:
        raise ctx.error(f"unsupported {word} over {sql_of(node.this)} (only over one SELECT)", node)
    items = sel.expressions
    item = unparen(items[0].this if type(items[0]) is exp.Alias else items[0]) if len(items) == 1 else None
    if item is None or isinstance(item, exp.Star) or (type(item) is exp.Column and isinstance(item.this, exp.Star)):
        raise ctx.error(f"{word} (SELECT ...) must select one column ({sql_of(sel)})", sel)
    if sel.args.get("group") is not None or sel.args.get("having") is not None:
        raise ctx.error(f"unsupported {word} over a grouped subquery ({sql_of(sel)})", sel)
    if item.find(exp.AggFunc) is not None:
        raise ctx.error(f"unsupported {word} over an aggregate without GROUP BY beside others ({sql_of(sel)})", sel)
    if x.find(exp.AggFunc) is not None:
        raise ctx.error(f"unsupported {word} comparing an aggregate ({sql_of(x.parent)}): only a row's columns", x)
    outer = _qualified(x.copy(), node, sel, relations, ctx)
    test = (op if word == "ANY" else _COMPLEMENT[op])(this=outer, expression=item.copy())
    body = sel.copy()
    body.set("expressions", [exp.Literal.number(1)])
    body.set("distinct", None)
    where = body.args.get("where")
    if where is not None:
        old = where.this if type(where.this) is not exp.Or else exp.Paren(this=where.this)
        test = exp.And(this=old, expression=test)
    body.set("where", exp.Where(this=test))
    found = exp.Exists(this=body)
    return found if word == "ANY" else exp.Not(this=found)


def _tables(sel: exp.Select) -> list[exp.Expression]:
    from_ = sel.args.get("from_") or sel.args.get("from")
    return ([from_.this] if isinstance(from_, exp.From) else []) + \
        [j.this for j in sel.args.get("joins") or [] if isinstance(j, exp.Join)]


def _columns(item: exp.Expression, relations: dict[str, RelationDecl]) -> set[str] | None:
    """The lower-case column names of a FROM item that is a declared relation, else None (unknown)."""
    if type(item) is not exp.Table:
        return None
    rel = next((r for n, r in relations.items() if n.lower() == item.name.lower()), None)
    return None if rel is None else {c.name.lower() for c in rel.columns}


def _qualified(x: exp.Expression, node: exp.Expression, sel: exp.Select, relations: dict[str, RelationDecl],
               ctx: Positions) -> exp.Expression:
    """``x`` with each unqualified column that an inner relation could also hold qualified with its outer holder."""
    inner = [_columns(t, relations) for t in _tables(sel)]
    around = node.find_ancestor(exp.Select)
    outer = [(t, _columns(t, relations)) for t in (_tables(around) if around is not None else [])]
    for col in [c for c in x.find_all(exp.Column) if not c.table and not isinstance(c.this, exp.Star)]:
        name = col.name.lower()
        if all(cols is not None and name not in cols for cols in inner):
            continue  # no inner relation holds it: it reads the outer one as written
        holders = [t for t, cols in outer if cols is not None and name in cols]
        if len(holders) != 1 or any(cols is None for _, cols in outer):
            raise ctx.error(f"ambiguous column {col.name} beside {_word(node)} (SELECT ...): qualify it "
                            "(alias.column)", col)
        col.set("table", exp.to_identifier(holders[0].alias_or_name))
    return x


def _replace(cmp: exp.Expression, found: exp.Expression) -> None:
    """Put ``found`` in ``cmp``'s place; NOT (NOT EXISTS ...) becomes EXISTS (a NOT around parentheses too)."""
    top = cmp
    while type(top.parent) is exp.Paren:
        top = top.parent
    if type(top.parent) is exp.Not:
        top.parent.replace(found.this if type(found) is exp.Not else exp.Not(this=found))
    else:
        cmp.replace(found)
