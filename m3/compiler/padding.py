"""Padded columns: a side of an outer join read as NULL, and the tree folded with SQL's three-valued logic.

Why on the tree: an outer join's padded part (:mod:`.outer`) is an ordinary query in which every column of
the padded side is NULL.  The runtime has no NULLs, so they are folded away before the front end reads the
part: arithmetic and comparisons with NULL are NULL, ``NOT NULL`` is NULL, ``AND``/``OR`` as SQL (``NULL AND
FALSE`` is FALSE, ``NULL OR TRUE`` TRUE), ``x IS NULL`` TRUE, ``COALESCE`` skips NULL arguments, ``NULLIF(NULL,
y)`` is NULL and ``NULLIF(x, NULL)`` is ``x``, ``GREATEST``/``LEAST`` skip NULLs (as DuckDB), a CASE branch
whose condition is NULL is never taken, ``x IN (...)`` and ``BETWEEN`` of NULL are NULL.  A WHERE that folds
to FALSE or NULL empties its part; an aggregate whose argument folds to NULL contributes nothing.

In the other parts the same side is present, and its columns not declared NULL are not NULL, so ``s.c IS
NULL`` there is FALSE and ``COALESCE(s.c, k)`` is ``s.c`` (:func:`fold` with ``present``; a nullable column,
``maybe``, stays unknown: :mod:`.outernulls` reads it).

>>> import sqlglot
>>> def f(sql, padded=("s",), present=()):
...     return fold(pad(sqlglot.parse_one(sql), set(padded)), set(present)).sql()
>>> f("SELECT 1 FROM R WHERE s.c + 1 > 2 OR r.a = 1"), f("SELECT 1 FROM R WHERE NOT s.c = 1 AND r.a = 1")
('SELECT 1 FROM R WHERE NULL OR r.a = 1', 'SELECT 1 FROM R WHERE NULL AND r.a = 1')
>>> [decide(fold(pad(sqlglot.parse_one(w), {"s"}))).sql() for w in ("s.c > 2 OR r.a = 1", "NOT (s.c = 1 OR r.a = 1)")]
['r.a = 1', 'NOT (NULL OR r.a = 1)']
>>> f("SELECT SUM(COALESCE(s.c, r.a * 2)), SUM(CASE WHEN s.c > 1 THEN 1 ELSE 0 END) FROM R WHERE s.c IS NULL")
'SELECT SUM(r.a * 2), SUM(0) FROM R WHERE TRUE'
>>> f("SELECT COUNT(NULLIF(r.a, s.c)), SUM(GREATEST(s.c, r.a, 3)) FROM R WHERE NOT s.c IS NULL")
'SELECT COUNT(r.a), SUM(GREATEST(r.a, 3)) FROM R WHERE FALSE'
>>> f("SELECT SUM(COALESCE(s.c, 0)) FROM R WHERE s.c IS NOT NULL", padded=(), present=("s",))
'SELECT SUM(s.c) FROM R WHERE TRUE'
"""

from __future__ import annotations

from sqlglot import exp

from .nodes import READS
from .nodes import present as holds
from .resolve import unparen

_NULL_IN = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.Neg, exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT,
            exp.GTE, exp.Like, exp.ILike, exp.Between, exp.In, exp.Cast, exp.Extract, exp.Substring, exp.Paren)


def is_null(e) -> bool:
    """Whether ``e`` is the NULL literal."""
    return type(e) is exp.Null


def is_false(e) -> bool:
    """Whether a condition holds for no row: FALSE or NULL (a WHERE keeps the rows where it is TRUE)."""
    return type(e) is exp.Null or (type(e) is exp.Boolean and not e.this)


def _bool(v: bool) -> exp.Boolean:
    return exp.Boolean(this=v)


def conjuncts(e) -> list[exp.Expression]:
    """The AND-ed parts of a condition (none for None)."""
    e = unparen(e) if e is not None else None
    if e is None:
        return []
    return conjuncts(e.this) + conjuncts(e.expression) if type(e) is exp.And else [e]


def refs(e: exp.Expression) -> set[str]:
    """The (lower-case) aliases whose columns ``e`` reads, outside its own subqueries' FROM (correlated ones too)."""
    return {c.table.lower() for c in e.find_all(exp.Column) if c.table and not _bound_inside(c, c.table, e)}


def _bound_inside(col: exp.Column, alias: str, top: exp.Expression) -> bool:
    """Whether ``alias`` names a FROM item of a SELECT between ``col`` and ``top`` (a subquery's own relation)."""
    if col is top:
        return False
    node = col.parent
    while node is not None and node is not top:
        if isinstance(node, exp.Select):
            from_ = node.args.get("from") or node.args.get("from_")
            names = ([from_.this] if from_ is not None else []) + [j.this for j in node.args.get("joins") or []]
            if any(t.alias_or_name.lower() == alias.lower() for t in names):
                return True
        node = node.parent
    return False


def qualify(sel: exp.Select, relations: dict) -> exp.Select:
    """``sel`` with ``*`` and ``t.*`` listed, and each unqualified column of its own (not of its subqueries) read
    from the one FROM item whose relation has it (left as it is where none or several do: the resolver says why)."""
    from_ = sel.args.get("from") or sel.args.get("from_")
    items = [from_.this] + [j.this for j in sel.args.get("joins") or []]
    cols, listed = {}, []
    for t in items:
        rel = next((r for n, r in relations.items() if type(t) is exp.Table and n.lower() == t.name.lower()), None)
        for c in rel.columns if rel is not None else ():
            cols.setdefault(c.name.lower(), []).append(t.alias_or_name)
            listed.append((t.alias_or_name, c.name))
    star = []  # ``*`` and ``t.*``: the columns they list, in order
    for e in sel.expressions:
        if isinstance(e, exp.Star) or (type(e) is exp.Column and isinstance(e.this, exp.Star)):
            star += [exp.column(c, a) for a, c in listed if isinstance(e, exp.Star) or a.lower() == e.table.lower()]
        else:
            star.append(e)
    sel.set("expressions", star)
    aliases = {e.alias_or_name.lower() for e in sel.expressions if type(e) is exp.Alias}
    for col in list(sel.find_all(exp.Column)):
        if col.table or isinstance(col.this, exp.Star) or col.find_ancestor(exp.Select) is not sel:
            continue
        holders = cols.get(col.name.lower(), [])
        in_group = col.find_ancestor(exp.Group) is not None
        if len(holders) == 1 and not (in_group and col.name.lower() in aliases):
            col.set("table", exp.to_identifier(holders[0]))
    return sel


def pad(e: exp.Expression, padded: set[str]) -> exp.Expression:
    """``e`` (changed in place, and returned) with the columns of the aliases in ``padded`` NULL."""
    if not padded:
        return e
    for col in list(e.find_all(exp.Column)):
        if col.table and col.table.lower() in padded and not _bound_inside(col, col.table, e):
            if col is e:
                return exp.Null()
            col.replace(exp.Null())
    return e


def decide(e: exp.Expression) -> exp.Expression:
    """A WHERE condition ``e`` (folded) with NULL read as FALSE where that keeps the same rows: at the top and
    under AND and OR, not under NOT (``NOT (NULL OR x)`` is not ``NOT x``)."""
    if type(e) in (exp.And, exp.Or):
        a, b = decide(e.this), decide(e.expression)
        a, b = (_bool(False) if is_null(x) else x for x in (a, b))
        return _fold(type(e)(this=a, expression=b), set(), frozenset())
    return _bool(False) if is_null(e) else e


def fold(e: exp.Expression, present: set[str] = frozenset(), maybe: frozenset = frozenset()) -> exp.Expression:
    """``e`` with NULLs folded (module doc); ``present``: aliases whose columns are known not NULL, but the
    nullable columns ``maybe`` of them ((alias, column), lower case: :mod:`.outernulls`)."""
    for key, value in list(e.args.items()):  # the operands first: a NULL folds upwards
        if isinstance(value, exp.Expression):
            e.set(key, fold(value, present, maybe))
        elif isinstance(value, list):
            e.set(key, [fold(v, present, maybe) if isinstance(v, exp.Expression) else v for v in value])
    return _fold(e, present, maybe)


def _known(e: exp.Expression, present: set[str], maybe: frozenset) -> bool:
    """Whether ``e`` is a column known not NULL: of a present alias, and not nullable."""
    return type(e) is exp.Column and e.table.lower() in present and (e.table.lower(), e.name.lower()) not in maybe


def _fold(n: exp.Expression, present: set[str], maybe: frozenset) -> exp.Expression:  # noqa: C901 - one case per SQL form
    kind = type(n)
    if kind in READS and not {k for k, v in n.args.items() if holds(v)} <= READS[kind]:
        return n  # a field the front end does not read: left for it to refuse (:mod:`.nodes`)
    if kind is exp.Paren and type(n.this) in (exp.Null, exp.Boolean):
        return n.this
    if kind in _NULL_IN and any(is_null(a) for k, a in n.args.items() if k in ("this", "expression", "low", "high")):
        return exp.Null()
    if kind is exp.Is and type(n.expression) is exp.Null:
        if is_null(n.this):
            return _bool(True)
        if type(n.this) in (exp.Literal, exp.Boolean):  # a constant that is not NULL
            return _bool(False)
        if _known(n.this, present, maybe):
            return _bool(False)
    if kind is exp.Not:
        if is_null(n.this):
            return exp.Null()
        if type(n.this) is exp.Boolean:
            return _bool(not n.this.this)
    if kind in (exp.And, exp.Or):
        zero, unit = (False, True) if kind is exp.And else (True, False)
        a, b = n.this, n.expression
        if any(type(x) is exp.Boolean and x.this is zero for x in (a, b)):
            return _bool(zero)
        if type(a) is exp.Boolean:
            return b
        if type(b) is exp.Boolean:
            return a
        if is_null(a) and is_null(b):
            return exp.Null()
        return n
    if kind is exp.Coalesce:
        args = [a for a in [n.this, *n.expressions] if not is_null(a)]
        for i, a in enumerate(args):
            if type(a) is exp.Literal or _known(a, present, maybe):
                args = args[:i + 1]
                break
        if not args:
            return exp.Null()
        return args[0] if len(args) == 1 else exp.Coalesce(this=args[0], expressions=args[1:])
    if kind is exp.Nullif:
        if is_null(n.this):
            return exp.Null()
        if is_null(n.expression):
            return n.this
    if kind in (exp.Greatest, exp.Least) or (kind is exp.Anonymous and str(n.this).upper() in ("LISTMAX", "LISTMIN")):
        listed = kind is exp.Anonymous
        args = [a for a in (n.expressions if listed else [n.this, *n.expressions]) if not is_null(a)]
        if not args:
            return exp.Null()
        if len(args) == 1:
            return args[0]
        return n if listed else kind(this=args[0], expressions=args[1:])
    if kind is exp.Case:
        return _case(n)
    return n


def _case(n: exp.Case) -> exp.Expression:
    """A CASE without the branches that are never taken (condition FALSE or NULL; a simple CASE of NULL)."""
    default = n.args.get("default") or exp.Null()
    if n.this is not None and is_null(n.this):
        return default
    ifs = []
    for branch in n.args.get("ifs") or []:
        cond = branch.this
        if is_false(cond):
            continue
        if type(cond) is exp.Boolean and n.this is None:  # TRUE: taken, the rest never
            if not ifs:
                return branch.args["true"]
            default = branch.args["true"]
            break
        ifs.append(branch)
    if not ifs:
        return default
    n.set("ifs", ifs)
    n.set("default", default if not is_null(default) else None)
    return n
