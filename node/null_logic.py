"""SQL's three-valued logic for generated expression code over nullable fields.

A field declared ``nullable`` (docs/xml.md, "Nullable fields") may hold
None, SQL's NULL.  :mod:`boreas.node.compile` translates an expression that
reads such a field with these helpers instead of Python's operators, so that
NULL behaves as in SQL rather than as Python's None: a comparison with NULL
is NULL (``x <> 3`` of a NULL ``x`` is not true), ``NULL AND FALSE`` is
FALSE, ``NULL OR TRUE`` TRUE, ``NOT NULL`` NULL, arithmetic on NULL NULL.
A filter drops a row whose predicate is NULL, as SQL's WHERE does.
Expressions over fields that cannot be NULL are translated as before, with
Python's operators (the hot path is unchanged).

>>> _and3(None, False), _and3(None, True), _or3(None, True), _or3(None, False), _not3(None)
(False, None, True, None, None)
>>> _cmp3(_OPS["!="], None, 3), _cmp3(_OPS["!="], 2, 3), _bin3(_OPS["+"], None, 1)
(None, True, None)
>>> _in3(2, (1, None)), _in3(1, (1, None)), _in3(None, (1,))
(None, True, None)
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "==": operator.eq, "!=": operator.ne, ">": operator.gt, ">=": operator.ge, "<": operator.lt,
    "<=": operator.le, "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
}


def _cmp3(op: Callable[[Any, Any], Any], a: Any, b: Any) -> bool | None:
    """A comparison: NULL when either side is."""
    return None if a is None or b is None else op(a, b)


def _bin3(op: Callable[[Any, Any], Any], a: Any, b: Any) -> Any:
    """Arithmetic (or any two-argument function): NULL when either argument is."""
    return None if a is None or b is None else op(a, b)


def _un3(op: Callable[[Any], Any], a: Any) -> Any:
    """A one-argument function: NULL of NULL."""
    return None if a is None else op(a)


def _and3(a: Any, b: Any) -> bool | None:
    """Kleene's AND: FALSE if either is false, else NULL if either is NULL."""
    if (a is not None and not a) or (b is not None and not b):
        return False
    return None if a is None or b is None else True


def _or3(a: Any, b: Any) -> bool | None:
    """Kleene's OR: TRUE if either is true, else NULL if either is NULL."""
    if (a is not None and a) or (b is not None and b):
        return True
    return None if a is None or b is None else False


def _not3(a: Any) -> bool | None:
    return None if a is None else not a


def _in3(value: Any, items: tuple) -> bool | None:
    """``value IN (items)``: TRUE on a match, else NULL if ``value`` or an item is NULL, else FALSE."""
    if value is None:
        return None
    if any(item is not None and item == value for item in items):
        return True
    return None if any(item is None for item in items) else False


#: The helpers under the names the generated code calls (merged into :data:`~.compile_helpers.HELPERS`).
NULL_HELPERS: dict[str, Any] = {
    "_cmp3": _cmp3, "_bin3": _bin3, "_un3": _un3, "_and3": _and3, "_or3": _or3, "_not3": _not3,
    "_in3": _in3, "_neg": operator.neg, **{f"_op{i}": op for i, op in enumerate(_OPS.values())},
}

#: The name of each operator's function in generated code (``"=="`` -> ``"_op0"``).
OP_NAMES: dict[str, str] = {symbol: f"_op{i}" for i, symbol in enumerate(_OPS)}
