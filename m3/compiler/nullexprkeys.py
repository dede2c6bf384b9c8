"""Arithmetic over nullable columns as a view's key (``GROUP BY b + a``, ``SELECT c * 2 AS x FROM R``): SQL's NULL group.

Why its own module (called by :mod:`.threevalued` before it reads a SELECT's keys): a nullable column as a key
is grouped with its indicator (:mod:`.nullshown`), but an expression over one is NULL where any of its nullable
columns is, and SQL puts every such row in one group: ``(NULL, 2)`` and ``(NULL, 3)`` have the same key ``b + a``.
So the key is the expression times the product ``Z`` of ``1 - x__null`` over its nullable columns (0 wherever
it is NULL, the value itself elsewhere), with one more key beside it, ``x__null`` for one nullable column and
``1 - Z`` for several (1 where it is NULL): both arithmetic over columns, which the compiler groups by as any
arithmetic key (:mod:`.arithkey`).  Selected, the indicator is an item named ``<name>__null``, an internal key
of the view (:func:`.outputs.view_names`), and reads show the key as None where it is 1 (``ViewNulls``).

Only ``+``, ``-``, ``*`` and unary minus over columns and numbers: ``/`` and ``%`` would divide by the 0 a NULL
is read as, and a function's NULL is its own; and not in a derived table, whose indicators the enclosing query
reads only for its nullable columns (:mod:`.nullderived`): all stay refused by name (:mod:`.threevalued`).

>>> import sqlglot
>>> from .examples import PlainErrors
>>> from .threevalued import rewrite
>>> from ..ast import Column, RelationDecl
>>> cols = lambda *names: tuple(Column(n, "INT") for n in names)
>>> rels = {"R": RelationDecl("R", "STREAM", cols("a", "b", "b__null", "c", "c__null"))}
>>> def show(sql): return rewrite(sqlglot.parse_one(sql), rels, PlainErrors()).sql()
>>> show("SELECT b + a AS x, COUNT(*) FROM R GROUP BY b + a")
'SELECT (b + a) * (1 - b__null) AS x, COUNT(*), 1 - (1 - b__null) AS __nullkey_0 FROM R GROUP BY (b + a) * (1 - b__null), 1 - (1 - b__null)'
>>> show("SELECT COUNT(*) FROM R GROUP BY b * c")
'SELECT COUNT(*) FROM R GROUP BY (b * c) * ((1 - b__null) * (1 - c__null)), 1 - ((1 - b__null) * (1 - c__null))'
>>> show("SELECT a - c FROM R")
'SELECT (a - c) * (1 - c__null) AS expr_1, 1 - (1 - c__null) AS __nullkey_0 FROM R'
"""

from __future__ import annotations

from sqlglot import exp

from ..nullable import indicator

#: What a key expression over nullable columns may be built of.
_ARITH = (exp.Add, exp.Sub, exp.Mul, exp.Neg, exp.Paren, exp.Column, exp.Literal)
#: Marks a nullable column read as its value in such a key (the reading :mod:`.threevalued` would refuse).
VALUED = "null_key_value"
#: The alias of a selected key's indicator (``+ its item's position``), named ``<item>__null`` by
#: :func:`.outputs.view_names` once the items have their final names (``CREATE VIEW v(names)`` renames them).
KEY_PREFIX = "__nullkey_"


def expression_keys(rw, sel: exp.Select) -> None:
    """``sel``'s keys that are arithmetic over nullable columns (module doc) rewritten in place; ``rw``: the
    SELECT's rewriter (:class:`.threevalued._Rewriter`: which columns are nullable)."""
    if type(sel.parent) is exp.Subquery:  # a derived table's: its enclosing query would not read the indicator
        return  # (:mod:`.nullderived` passes out a nullable column's only): refused by name, as before
    group = sel.args.get("group")
    aggregated = any(isinstance(n, exp.AggFunc) for e in sel.expressions for n in e.walk())
    if group is None and aggregated:
        return
    groups = list(group.expressions) if group is not None else []
    done: set[str] = set()
    for i, item in enumerate(list(sel.expressions)):
        e = item.this if type(item) is exp.Alias else item
        if not _candidate(rw, e):
            continue
        name = item.alias if type(item) is exp.Alias else f"expr_{i + 1}"
        same = [g for g in groups if g == e]
        by_name = any(type(g) is exp.Column and not g.table and g.name.lower() == name.lower() or
                      type(g) is exp.Literal and g.is_int and int(g.name) == i + 1 for g in groups)
        if group is not None and not same and not by_name:
            continue  # not a key: left for :mod:`.threevalued` to refuse by name
        key, flag = _zeroed(rw, e)
        item.replace(exp.alias_(key, name))
        for g in same:
            g.replace(key.copy())
        if group is not None:
            group.append("expressions", flag.copy())
        sel.append("expressions", exp.alias_(flag, f"{KEY_PREFIX}{i}"))
        done.add(e.sql())
    for g in groups:  # grouped by, not selected: internal keys both
        if g.parent is group and _candidate(rw, g) and g.sql() not in done:
            key, flag = _zeroed(rw, g)
            g.replace(key)
            group.append("expressions", flag)


def _candidate(rw, e: exp.Expression) -> bool:
    return type(e) is not exp.Column and all(isinstance(n, _ARITH) or type(n) is exp.Identifier for n in e.walk()) \
        and any(type(n) is exp.Column and rw.nullable(n) for n in e.walk())


def _zeroed(rw, e: exp.Expression) -> tuple[exp.Expression, exp.Expression]:
    """``e`` times ``Z`` (0 where it is NULL), and its indicator (1 where it is NULL)."""
    nullable = list({n.sql(): n for n in e.walk() if type(n) is exp.Column and rw.nullable(n)}.values())
    flags = [exp.column(indicator(c.name), c.table or None) for c in nullable]
    one = exp.Literal.number(1)
    factors = [exp.Paren(this=exp.Sub(this=one.copy(), expression=f)) for f in flags]
    z = factors[0]
    for f in factors[1:]:
        z = exp.Mul(this=z, expression=f)
    if len(factors) > 1:
        z = exp.Paren(this=z)
    key = exp.Mul(this=exp.Paren(this=e.copy()), expression=z)
    for n in key.walk():
        if type(n) is exp.Column and rw.nullable(n):
            n.meta[VALUED] = True
    # (always computed, never the bare indicator: a plain key of the same column adds that indicator too, and
    # the two would be one key, the expression's NULL shown as 0)
    flag = exp.Sub(this=one.copy(), expression=z.copy())
    return key, flag
