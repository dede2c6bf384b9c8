"""Print the M3 AST as program text that :func:`m3.syntax.parse_program` reads back equal.

>>> from .syntax import parse_program
>>> text = "CREATE STREAM R(A INT, B FLOAT);\\nON +R(A, B) DO { m[A] += B * IF A <> 1 THEN 2 ELSE 0 }"
>>> print(format_program(parse_program(text)))
CREATE STREAM R(A INT, B FLOAT);
<BLANKLINE>
ON +R(A, B) DO {
  m[A] += B * IF A <> 1 THEN 2 ELSE 0;
}
"""

from __future__ import annotations

import datetime

from .ast import (
    Cmp,
    Call,
    Const,
    Expr,
    IfThen,
    MapDecl,
    MapRef,
    Prod,
    Program,
    RelationDecl,
    RelAtom,
    Statement,
    Sum,
    Trigger,
    Var,
    ViewDecl,
)
from .viewnodes import EXTREMES, Arith, BoolOp, Fold, Total
from .over import Over


def format_const(value) -> str:
    """A constant as M3 text.

    >>> format_const(-2), format_const(0.5), format_const("it's"), format_const(datetime.date(1995, 3, 15))
    ('-2', '0.5', "'it''s'", "DATE '1995-03-15'")
    """
    if isinstance(value, datetime.date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def format_expr(e: Expr) -> str:
    """An expression as text (parentheses only where the grammar needs them)."""
    if isinstance(e, Const):
        return format_const(e.value)
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Call):
        return f"{e.fn}({', '.join(format_expr(a) for a in e.args)})"
    if isinstance(e, MapRef):
        return f"{e.name}[{', '.join(format_expr(a) for a in e.args)}]"
    if isinstance(e, RelAtom):
        return f"{e.name}({', '.join(format_expr(a) for a in e.args)})"
    if isinstance(e, Cmp):
        return "{" + _cmp(e) + "}"
    if isinstance(e, IfThen):
        return f"IF {_cmp(e.cond)} THEN {format_expr(e.then)} ELSE 0"
    if isinstance(e, Prod):
        return " * ".join(_factor(f) for f in e.factors)
    if isinstance(e, Sum):
        return " + ".join(f"({format_expr(t)})" if isinstance(t, Sum) else format_expr(t) for t in e.terms)
    if isinstance(e, (Arith, Fold, BoolOp, Total, Over)):
        return format_view_expr(e)
    raise TypeError(f"not an M3 expression: {e!r}")


def _cmp(c: Cmp) -> str:
    return f"{_operand(c.left)} {c.op} {_operand(c.right)}"


def _operand(e: Expr) -> str:
    # comparison sides are products; anything looser (a sum, an IF) needs parentheses
    return f"({format_expr(e)})" if isinstance(e, (Sum, IfThen)) else format_expr(e)


def _factor(e: Expr) -> str:
    return f"({format_expr(e)})" if isinstance(e, (Sum, Prod)) else format_expr(e)


def format_relation(r: RelationDecl) -> str:
    cols = ", ".join(f"{c.name} {c.type}" for c in r.columns)
    return f"CREATE {r.kind} {r.name}({cols});"


def format_map(m: MapDecl) -> str:
    keys = ", ".join(f"{k.name}: {k.type}" for k in m.keys)
    text = f"DECLARE MAP {m.name}[{keys}] : {m.value_type}"
    if m.definition is not None:
        text += f"\n  := {format_expr(m.definition)}"
    return text + ";"


def format_view(v: ViewDecl) -> str:
    """A view declaration; a general view names its key variables and writes its columns as view expressions.

    >>> from .syntax import parse_program
    >>> p = parse_program("DECLARE VIEW v[k := K](a := (m[K] - 1) / n[K], lo := MIN(X : t[K, X])) "
    ...                   "WHERE NOT (n[K] > 2 OR K = 'x') AND m[K] <> 0;")
    >>> print(format_view(p.views[0]))
    DECLARE VIEW v[k := K](a := (m[K] - 1) / n[K], lo := MIN(X : t[K, X])) WHERE NOT (2 < n[K] OR K = 'x') AND m[K] <> 0;
    """
    cols = ", ".join(
        f"{c.name} := " + (format_view_expr(c.expr) if c.expr is not None
                           else c.numerator + (f" / {c.denominator}" if c.denominator else "")) for c in v.columns
    )
    keys = [f"{k} := {x}" for k, x in zip(v.keys, v.key_vars)] if v.key_vars else list(v.keys)
    keys = [f"{text} INTERNAL" if k in v.internal else text for k, text in zip(v.keys, keys)]
    at = " AT " + ", ".join("[" + ", ".join(map(repr, k)) + "]" for k in v.fixed) if v.fixed else ""
    where = (" ALWAYS" + at if v.always else "") + ("" if v.where is None else f" WHERE {format_view_expr(v.where)}")
    return f"DECLARE VIEW {v.name}[{', '.join(keys)}]({cols}){where};"


_LEVEL = {"+": 1, "-": 1, "*": 2, "/": 2}


def format_view_expr(e: Expr, level: int = 0) -> str:
    """A view expression or condition; parentheses where precedence (or left association) needs them."""
    if isinstance(e, Arith) and e.op in EXTREMES:
        return f"{e.op}({format_view_expr(e.left)}, {format_view_expr(e.right)})"
    if isinstance(e, Arith):
        mine = _LEVEL[e.op]
        text = f"{format_view_expr(e.left, mine)} {e.op} {format_view_expr(e.right, mine + 1)}"
        return f"({text})" if mine < level else text
    if isinstance(e, Over):
        cond = "" if e.cond is None else f" WHERE {format_view_expr(e.cond)}"
        return f"{e.kind}({format_view_expr(e.expr)} FOR {', '.join(e.vars)} : {format_expr(e.ref)}{cond})"
    if isinstance(e, (Fold, Total)):
        cond = "" if e.cond is None else f" WHERE {format_view_expr(e.cond)}"
        track = "".join(f" TRACK {format_expr(t)}" for t in e.track)
        what = f"{e.kind}({e.var}" if isinstance(e, Fold) else f"TOTAL({', '.join(e.vars)}"
        return f"{what} : {format_expr(e.ref)}{cond}{track})"
    if isinstance(e, BoolOp):
        if e.op == "NOT":
            return "NOT " + format_view_expr(e.args[0], 3)
        mine = 1 if e.op == "OR" else 2
        text = f" {e.op} ".join(format_view_expr(a, mine + 1) for a in e.args)
        return f"({text})" if mine < level else text
    if isinstance(e, Cmp):
        return f"{format_view_expr(e.left)} {e.op} {format_view_expr(e.right)}"  # NOT a < b is NOT (a < b)
    return format_expr(e)


def format_statement(s: Statement) -> str:
    return f"{format_expr(s.target)} += {format_expr(s.expr)}"


def format_trigger(t: Trigger) -> str:
    head = f"ON {'+' if t.sign > 0 else '-'}{t.relation}({', '.join(t.vars)}) DO {{"
    body = "".join(f"  {format_statement(s)};\n" for s in t.statements)
    return f"{head}\n{body}}}"


def format_program(p: Program) -> str:
    """The whole program: relations, maps, views, then triggers, blank-line separated."""
    parts = [format_relation(r) for r in p.relations]
    parts += [format_map(m) for m in p.maps]
    parts += [format_view(v) for v in p.views]
    parts += [format_trigger(t) for t in p.triggers]
    return "\n\n".join(parts)
