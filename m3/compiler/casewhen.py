"""``CASE`` outside an aggregate, when every condition and value reads one column: a function of that column.

Why: a CASE as a SELECT item of a view without aggregates, a GROUP BY key
or a side of a WHERE comparison (Nexmark q14's ``CASE WHEN HOUR(dateTime)
>= 8 AND ... THEN 'dayTime' ... END``) has no map of its own to live in: it
is a value of the row, which M3 keys by.  When it reads one column it is a
function of that column's value, and the compiler already lifts those
(``YEAR(d)``: :func:`.normalize.lift_computed`): this module turns it into
the call ``CASE_STRING(X, spec)`` (:mod:`..casefn`), so its cost class is
``YEAR``'s (first-order: the trigger computes it from the event's row).
Inside an aggregate a CASE is summed by the calculus (:mod:`.aggregates`)
and does not come here.

Refused by name: a CASE over several columns (the union of its branches,
each with its conditions, would need constant keys: not built), without
ELSE (its NULL: M3 has no NULLs), over a DATE column, with conditions other
than comparisons of the column (or a function of it) with constants.

>>> import sqlglot
>>> from .examples import resolver_over, stream
>>> res = resolver_over(stream("R", a="INT", t="FLOAT"))
>>> res.operand(sqlglot.parse_one("CASE WHEN HOUR(t) < 8 THEN 'night' ELSE 'day' END"))
Computed(fn='CASE_STRING', ref=('R', 't'), args=('[[[["<", ["fn", "HOUR"], 8], "night"]], "day"]',))
>>> res.operand(sqlglot.parse_one("CASE a WHEN 1 THEN a * 1 ELSE 0 END"))
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: unsupported CASE value a * 1 outside an aggregate: the column, a function of it or a constant
>>> res.operand(sqlglot.parse_one("CASE WHEN a < 1 THEN t ELSE 0 END"))
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: unsupported CASE over several columns (a, t) outside an aggregate: a CASE of one column is a function of it; of several, not yet
"""

from __future__ import annotations

import json
from typing import Any

from sqlglot import exp

from .constants import is_constant
from .nodes import sql_of

_COMPARISONS = ("=", "<>", "<", "<=", ">", ">=", "LIKE", "NOT LIKE")


def case_call(res: Any, e: exp.Case) -> tuple[str, tuple[str, str], tuple[str]] | None:
    """``(function, column, (spec,))`` of a CASE of one column (module doc), or None for a constant CASE.
    ``res``: the :class:`.resolve.Resolver` (it calls this module, which so does not import it)."""
    if e.find(exp.AggFunc, exp.Select) is not None:  # over aggregates or a subquery: not a value of the row
        return None
    columns = list(dict.fromkeys(res.column(c) for c in e.find_all(exp.Column, bfs=False)))
    if not columns:
        return None
    if len(columns) > 1:
        raise res.ctx.error(f"unsupported CASE over several columns ({', '.join(c[1] for c in columns)}) outside "
                            "an aggregate: a CASE of one column is a function of it; of several, not yet", e)
    ref = columns[0]
    if res.col_type(ref) == "DATE":
        raise res.ctx.error(f"unsupported CASE over DATE column {ref[1]} outside an aggregate", e)
    subject, default = e.this, e.args.get("default")
    if default is None:
        raise res.ctx.error(f"unsupported CASE without ELSE outside an aggregate ({sql_of(e)}): its NULL "
                            "(the M3 runtime has no NULLs)", e)
    branches, types = [], []
    for branch in e.args.get("ifs") or []:
        cond = branch.this if subject is None else exp.EQ(this=subject.copy(), expression=branch.this.copy())
        value, t = _value(res, ref, branch.args["true"])
        branches.append([_condition(res, ref, res.predicate(cond), e), value])
        types.append(t)
    value, t = _value(res, ref, default)
    types.append(t)
    if len(set(types)) > 1 and set(types) != {"INT", "FLOAT"}:
        raise res.ctx.error(f"CASE values of types {', '.join(dict.fromkeys(types))} ({sql_of(e)})", e)
    kind = "FLOAT" if "FLOAT" in types else types[0]
    return f"CASE_{kind}", ref, (json.dumps([branches, value], ensure_ascii=False),)


def _value(res: Any, ref: tuple[str, str], v: exp.Expression) -> tuple[object, str]:
    """A THEN or ELSE value: a constant, the column or a function of it; and its M3 type."""
    if is_constant(v):
        c = res.constant(v)
        if isinstance(c, bool) or not isinstance(c, (int, float, str)):
            raise res.ctx.error(f"unsupported CASE value {sql_of(v)} outside an aggregate (a number or a string)", v)
        return c, "STRING" if isinstance(c, str) else "FLOAT" if isinstance(c, float) else "INT"
    if type(v) is not exp.Column and res.computed(v) is None:
        raise res.ctx.error(f"unsupported CASE value {sql_of(v)} outside an aggregate: the column, a function of "
                            "it or a constant", v)
    operand = res.operand(v)
    return _operand(res, ref, operand, v), res.col_type(operand)


def _operand(res: Any, ref: tuple[str, str], x: object, node: exp.Expression) -> object:
    if x == ref:
        return ["x"]
    if getattr(x, "ref", None) == ref:  # a function of the column (:class:`.resolve.Computed`)
        return ["fn", x.fn, *x.args]
    if isinstance(x, (int, float, str)) and not isinstance(x, bool):
        return x
    raise res.ctx.error(f"unsupported operand {x} in a CASE outside an aggregate ({sql_of(node)})", node)


def _condition(res: Any, ref: tuple[str, str], p: tuple, node: exp.Expression) -> list:
    """A resolved predicate (:mod:`.predicates`) as the spec's condition."""
    if p in (("true",), ("false",)):
        return list(p)
    if p[0] in ("and", "or"):
        return [p[0], _condition(res, ref, p[1], node), _condition(res, ref, p[2], node)]
    if len(p) == 3 and p[0] in _COMPARISONS:
        return [p[0], _operand(res, ref, p[1], node), _operand(res, ref, p[2], node)]
    raise res.ctx.error(f"unsupported condition in a CASE outside an aggregate ({sql_of(node)}): comparisons of "
                        "the column or a function of it with constants", node)
