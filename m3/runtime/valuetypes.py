"""The type of a view's value column, from its expression: what an ``m3`` box's out schema declares for it.

A value column is INT or FLOAT by its maps' value types and the arithmetic
over them (a quotient is FLOAT), or a folded key's type: MIN/MAX of a DATE
column is a DATE.  The box's ports (:mod:`boreas.m3.box_ports`) and a
window join's stages (:mod:`boreas.m3.winstages`) ask it once per column.
"""

from __future__ import annotations

from ..ast import Program, ViewDecl
from .exprtypes import expr_type
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
    return expr_type(c.expr, program, dict(zip(form.vars, form.types)))
