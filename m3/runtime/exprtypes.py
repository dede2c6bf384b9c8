"""The type of an expression of a view (:mod:`.views` types a lifted key by it; :mod:`.valuetypes` a value column)."""

from __future__ import annotations

from ..ast import Const, Expr, MapRef, Program, Var
from ..over import Over
from ..viewnodes import Arith, Fold, Total


def expr_type(e: Expr, program: Program, var_types: dict[str, str]) -> str:
    """The type of a view expression ``e``: INT or FLOAT by its maps' value types and arithmetic (a quotient
    is FLOAT), a variable's type from ``var_types``, a folded key's type for MIN/MAX over a key."""
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
        return expr_type(e.expr, program, {**var_types, **inner})
    if isinstance(e, Fold):
        if e.kind == "COUNT":
            return "INT"
        at = next(i for i, a in enumerate(e.ref.args) if isinstance(a, Var) and a.name == e.var)
        return program.map(e.ref.name).keys[at].type
    if isinstance(e, Arith):
        if e.op == "/":
            return "FLOAT"
        sides = {expr_type(e.left, program, var_types), expr_type(e.right, program, var_types)}
        return "INT" if sides == {"INT"} else "FLOAT"
    return "INT"
