"""The checker's rule for a function call (:mod:`.check`): a known function of arguments it takes.

Why apart from :mod:`.check`: a call has rules of its own by kind of
function: ``YEAR(D)``, ``SUBSTRING(P, 1, 2)`` take one variable (of their
type) and constants (:func:`.functions.check_call`); DBToaster's vector
functions (:data:`.library.VECTOR`) take numbers, each a variable, a
constant or arithmetic over them, and may read loop variables (a trigger
computes them per entry of the map it loops over).

>>> from .ast import Call, Const, Prod, Sum, Var
>>> out = []
>>> check_call_node(out, Call("YEAR", (Var("D"),)), {"D": "DATE"}, "here")
>>> check_call_node(out, Call("VEC_LENGTH", (Sum((Var("X"), Prod((Const(-1), Var("X_2"))))), Var("Y"), Const(0))), {}, "here")
>>> check_call_node(out, Call("VEC_DOT", (Var("X"),)), {}, "here")
>>> out
[('here: VEC_DOT takes 6 numbers, not 1', None)]
"""

from __future__ import annotations

from .ast import Call, Const, Prod, Sum, Var, walk
from .errors import Pos
from .functions import check_call
from .library import VECTOR


def is_vector(node) -> bool:
    """Whether ``node`` calls a vector function (:data:`.library.VECTOR`): of values over event and loop variables."""
    return isinstance(node, Call) and node.fn in VECTOR


def check_call_node(out: list[tuple[str, Pos | None]], c: Call, types: dict[str, str], where: str) -> None:
    """``YEAR(D)``, ``SUBSTRING(P, 1, 2)``: a known function of a variable of its type and integer constants;
    a vector function of numbers (variables, constants, arithmetic over them)."""
    if is_vector(c):
        bad = next((n for a in c.args for n in walk(a) if not isinstance(n, (Var, Const, Sum, Prod))), None)
        problem = check_call(c.fn, [types.get(a.name) if isinstance(a, Var) else None for a in c.args]) or \
            (f"{c.fn} of {type(bad).__name__}: its arguments are arithmetic over variables" if bad else None)
        if problem is not None:
            out.append((f"{where}: {problem}", c.pos))
        return
    first = c.args[0] if c.args else None
    args = [types.get(first.name) if isinstance(first, Var) else "a constant"] + \
        [a.value if isinstance(a, Const) else None for a in c.args[1:]]
    problem = check_call(c.fn, args) if isinstance(first, Var) or not c.args else \
        f"{c.fn} of something else than a variable"
    if problem is not None:
        out.append((f"{where}: {problem}", c.pos))
