"""The type of a view's value column, from its expression: what an ``m3`` box's out schema declares for it.

A value column is INT or FLOAT by its maps' value types and the arithmetic
over them (a quotient is FLOAT), or a folded key's type: MIN/MAX of a DATE
column is a DATE.  The box's ports (:mod:`boreas.m3.box_ports`) and a
window join's stages (:mod:`boreas.m3.winstages`) ask it once per column.
"""

from __future__ import annotations

from ..ast import Const, Expr, MapRef, Program, Var, ViewDecl
from ..over import Over
from ..viewnodes import Arith, Fold, Total
from .views import view_form


def value_type(program: Program, v: ViewDecl, column: int) -> str:
    """The type of a view's value column: INT, FLOAT, or a folded key's type (MIN/MAX of a DATE is a DATE).

    >>> from ..syntax import parse_program
    >>> p = parse_program('''DECLARE MAP n[A: INT] : INT; DECLARE MAP d[A: INT, D: DATE] : INT;
    ... DECLARE VIEW v[a := A](x := n[A] * 2, y := n[A] / 2, z := MIN(D : d[A, D]), w := COUNT(D : d[A, D]));''')
    >>> [value_type(p, p.views[0], i) for i in range(4)]
    ['INT', 'FLOAT', 'DATE', 'INT']
    """
    c = v.columns[column]
    if c.expr is None:
        return "FLOAT" if c.denominator is not None else program.map(c.numerator or "").value_type
    form = view_form(program, v)
    return _type(c.expr, program, dict(zip(form.vars, form.types)))


def _type(e: Expr, program: Program, var_types: dict[str, str]) -> str:
    if isinstance(e, Const):
        return "FLOAT" if isinstance(e.value, float) else "INT" if isinstance(e.value, int) else e.type
    if isinstance(e, Var):
        return var_types.get(e.name, "INT")
    if isinstance(e, MapRef):
        return program.map(e.name).value_type
    if isinstance(e, Total):
        return program.map(e.ref.name).value_type
    if isinstance(e, Over):
        if e.kind == "COUNT":
            return "INT"
        inner = {a.name: k.type for a, k in zip(e.ref.args, program.map(e.ref.name).keys) if isinstance(a, Var)}
        return _type(e.expr, program, {**var_types, **inner})
    if isinstance(e, Fold):
        if e.kind == "COUNT":
            return "INT"
        at = next(i for i, a in enumerate(e.ref.args) if isinstance(a, Var) and a.name == e.var)
        return program.map(e.ref.name).keys[at].type
    if isinstance(e, Arith):
        if e.op == "/":
            return "FLOAT"
        sides = {_type(e.left, program, var_types), _type(e.right, program, var_types)}
        return "INT" if sides == {"INT"} else "FLOAT"
    return "INT"
