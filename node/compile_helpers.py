"""The functions generated expression code calls, and the globals it runs with.

:mod:`boreas.node.compile` translates an expression into Python source once
per box; that source calls these helpers (``_mod``, ``_round``, the casts,
``_like``, ...) by name, from :data:`HELPERS`, the only globals a generated
function sees.  They are the expressions' semantics at run time (C's ``%``,
SQL ROUND, casts of text, LIKE), kept apart from the translation that emits
calls to them.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Any

#: What a failing expression raises; caught around every generated evaluation.
ERRORS = (ArithmeticError, TypeError, ValueError)


def _mod(a: Any, b: Any) -> Any:
    """C's ``%``: the remainder has the sign of the dividend (Python's has the divisor's)."""
    if type(a) is int and type(b) is int:
        r = abs(a) % abs(b)
        return -r if a < 0 else r
    return math.fmod(a, b)


def _round(x: Any) -> int:
    """SQL ROUND: halves away from zero (Python's round() rounds halves to even)."""
    if type(x) is int:
        return x
    if x < 0:
        return -_round(-x)
    whole = math.floor(x)  # not floor(x + 0.5): that rounds 0.49999999999999994 up
    return whole + 1 if x - whole >= 0.5 else whole


def _cast_int(x: Any) -> int:
    if isinstance(x, str):
        text = x.strip()
        try:
            return int(text)
        except ValueError:
            return int(float(text))
    return int(x)


def _cast_float(x: Any) -> float:
    return float(x)


def _text(x: Any) -> str:
    """A value as text for concat and casts; None stays NULL (raises, so the expression is None)."""
    if x is None:
        raise TypeError("NULL")
    return x if type(x) is str else str(x)


def _as_int(x: Any) -> int | None:
    return None if x is None else int(x)


def _as_float(x: Any) -> float | None:
    return None if x is None else float(x)


def _as_str(x: Any) -> str | None:
    return None if x is None else _text(x)


@lru_cache(maxsize=256)
def like_pattern(pattern: str) -> re.Pattern[str]:
    """SQL LIKE (``%`` any run, ``_`` one character) as an anchored regex."""
    parts = []
    for ch in pattern:
        parts.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
    return re.compile("".join(parts), re.DOTALL)


def _like(value: Any, pattern: Any) -> bool:
    return like_pattern(pattern).fullmatch(value) is not None


def _coalesce(*values: Any) -> Any:
    """SQL's COALESCE: the first value that is not NULL (None), else NULL."""
    return next((v for v in values if v is not None), None)


#: The globals of every generated function: the helpers above under the names the generated code calls.
HELPERS: dict[str, Any] = {
    "_ERRORS": ERRORS, "_mod": _mod, "_round": _round, "_cast_int": _cast_int,
    "_cast_float": _cast_float, "_cast_str": _text, "_text": _text, "_as_int": _as_int,
    "_as_float": _as_float, "_as_str": _as_str, "_like": _like, "_coalesce": _coalesce, "_sqrt": math.sqrt,
    "_pow": math.pow, "_ln": math.log, "_log10": math.log10, "_exp": math.exp,
    "_floor": math.floor, "_ceil": math.ceil, "_logb": lambda base, x: math.log(x, base),
    # Generated code needs only these; nothing else is reachable from an expression.
    "__builtins__": {"min": min, "max": max, "abs": abs, "int": int, "float": float,
                     "bool": bool, "str": str, "len": len, "True": True, "False": False,
                     "None": None, "isinstance": isinstance},
}
