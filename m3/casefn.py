"""A CASE over one column's value, outside an aggregate, as a function of that column: ``CASE_STRING(T, spec)``.

Why: Nexmark q14 labels each bid by the hour of its event time (``CASE
WHEN HOUR(dateTime) >= 8 AND HOUR(dateTime) <= 18 THEN 'dayTime' WHEN ...
ELSE 'otherTime' END``) and selects the label.  Every condition and value
of that CASE reads one column, so the CASE is a function of the column's
value, exactly as ``YEAR(d)`` is: the compiler lifts it into a variable
(``{K = CASE_STRING(DATETIME, spec)}``), maps are keyed by the label where
the query needs it, and a trigger computes it from the event's row
(first-order).  A CASE reading several columns is not a function of one
(it would be the union of its branches, each with its own condition:
not built) and is refused by the front end.

``spec`` is a string constant (JSON), so the call is an ordinary call of a
variable and constants (:mod:`.functions`) that M3 text prints and reads
back: ``[[[condition, value], ...], default]``.  A condition is ``["and", p,
q]``, ``["or", p, q]``, ``["true"]``, ``["false"]`` or ``[op, a, b]`` (``op``
one of ``= <> < <= > >= LIKE NOT LIKE``, the front end's predicates with
NOT pushed into the comparisons); an operand or a value is the column
(``["x"]``), a function of it (``["fn", "HOUR"]``, ``["fn", "SUBSTRING", 1,
2]``) or a constant (a number or a string).  The name says the value's
type: ``CASE_STRING``, ``CASE_INT``, ``CASE_FLOAT``.

>>> from .functions import apply
>>> spec = '[[[["and", [">=", ["fn", "HOUR"], 8], ["<=", ["fn", "HOUR"], 18]], "dayTime"]], "otherTime"]'
>>> [case_value(h * 3_600_000.0, spec, apply) for h in (7, 8, 18, 19)]
['otherTime', 'dayTime', 'dayTime', 'otherTime']
>>> case_value("Apple", '[[[["LIKE", ["x"], "A%"], ["fn", "LOWER"]]], ["x"]]', apply)
'apple'
>>> check_spec('[[[["~", ["x"], 1], 1]], 0]', apply)
"CASE spec: unknown condition ['~', ['x'], 1]"
"""

from __future__ import annotations

import functools
import json
import operator
from collections.abc import Callable

from .like import like

_OPS: dict[str, Callable[[object, object], bool]] = {
    "=": operator.eq, "<>": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
    "LIKE": like, "NOT LIKE": lambda s, p: not like(s, p)}

Fn = Callable[[object], object]


class BadSpec(ValueError):
    """A spec that is not one the front end writes."""


def _operand(x, functions: Callable[[str, tuple], object]) -> Fn:
    if isinstance(x, list) and x == ["x"]:
        return lambda v: v
    if isinstance(x, list) and len(x) >= 2 and x[0] == "fn" and isinstance(x[1], str):
        name, consts = x[1], tuple(x[2:])
        return lambda v: functions(name, (v, *consts))
    if isinstance(x, (str, int, float)) and not isinstance(x, bool):
        return lambda v: x
    raise BadSpec(f"unknown operand {x!r}")


def _condition(p, functions: Callable[[str, tuple], object]) -> Callable[[object], bool]:
    if p == ["true"] or p == ["false"]:
        truth = p == ["true"]
        return lambda v: truth
    if isinstance(p, list) and len(p) == 3 and p[0] in ("and", "or"):
        a, b = _condition(p[1], functions), _condition(p[2], functions)
        return (lambda v: a(v) and b(v)) if p[0] == "and" else (lambda v: a(v) or b(v))
    if isinstance(p, list) and len(p) == 3 and p[0] in _OPS:
        op, a, b = _OPS[p[0]], _operand(p[1], functions), _operand(p[2], functions)
        return lambda v: op(a(v), b(v))
    raise BadSpec(f"unknown condition {p!r}")


@functools.lru_cache(maxsize=256)
def compiled(spec: str, apply: Callable[[str, tuple], object]) -> Fn:
    """The CASE as a Python function of the column's value (once per spec); ``apply`` computes the functions its
    operands call (:func:`.functions.apply`, passed in: that module registers this one)."""
    try:
        branches, default = json.loads(spec)
    except (ValueError, TypeError) as bad:
        raise BadSpec(f"not [[[condition, value], ...], default]: {bad}") from None
    arms = [(_condition(p, apply), _operand(v, apply)) for p, v in branches]
    otherwise = _operand(default, apply)

    def case(v):
        for holds, value in arms:
            if holds(v):
                return value(v)
        return otherwise(v)

    return case


def case_value(x, spec: str, apply: Callable[[str, tuple], object]):
    """The CASE's value at the column's value ``x``."""
    return compiled(spec, apply)(x)


def check_spec(spec: str, apply: Callable[[str, tuple], object]) -> str | None:
    """What is wrong with a spec, or None."""
    try:
        compiled(spec, apply)
    except BadSpec as bad:
        return f"CASE spec: {bad}"
    return None
