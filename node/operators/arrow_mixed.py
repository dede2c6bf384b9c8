"""Values that are a Python int on some rows and a float on others: ``min``/``max`` and ``coalesce`` of both.

The row code computes ``min(i, d)`` with Python's ``min``: the result is
the argument object itself, so its type depends on the row (``min(3, 2.5)``
is the float 2.5, ``min(3, 3.5)`` the int 3), and so does everything that
looks at the type: ``str()`` of it (``'3'`` or ``'2.5'``), a concat, a cast
to varchar.  Its *value* does not: every int that a double holds exactly
(up to 2**53) compares, converts, truncates and tests true exactly as that
double does.  So a mixed value (kind :data:`~.arrow_nodes.NUM`) is carried
as two columns:

* its value as a double (``run``): an int argument beyond 2**53 is flagged
  (:func:`exact_double`), since Python compares and keeps it exactly;
* which rows hold an int (``ints``): a boolean column, chosen with the value.

Consumers that only need the value (comparisons, truth, ``is null``, casts to
int or double, a double out field) read the double; those that print it
(:mod:`.arrow_text`) read ``ints`` too.  Arithmetic and the math functions do
not take a mixed value (their result's type would depend on the row again):
:class:`~.arrow_nodes.Unsupported`, so the box keeps its row path.

Python's choice is reproduced exactly: ``min``/``max`` keep the first
argument unless a later one is strictly less (greater), so ``min(0, -0.0)``
is the int 0 and ``min(nan, 1)`` nan, ``min(1, nan)`` 1 (every comparison with
nan is false, in Arrow as in Python); ``coalesce`` takes the first argument
that is not None.

A mixed value is never folded into a constant when the box is built (its
``ints`` would be lost): arguments that are all constants are computed in
Python now (:func:`_folded`), and otherwise a run without a batch flags
every row, which keeps :class:`~.arrow_exprs.Translator`'s folding away.

>>> import pyarrow as pa
>>> from boreas.node.operators.arrow_nodes import Eval, Node
>>> i = Node("int", lambda ev: ev.column(0), nullable=True)
>>> d = Node("float", lambda ev: ev.column(1), nullable=True)
>>> ev = Eval(pa.record_batch([pa.array([3, 3, 0]), pa.array([2.5, 3.5, -0.0])], names=["i", "d"]))
>>> m = extreme([i, d], pa.compute.less)
>>> m.run(ev).to_pylist(), m.ints(ev).to_pylist()
([2.5, 3.0, 0.0], [False, True, True])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from boreas.node.compile import FLOAT, INT

from .arrow_nodes import NUM, Eval, Node, Unsupported, Value, as_int64, constant, strict

_EXACT = pa.scalar(2**53, pa.int64())
_MINUS_EXACT = pa.scalar(-(2**53), pa.int64())
_NUMBERS = (INT, FLOAT, NUM)


def exact_double(value: Value, ev: Eval) -> Value:
    """An int as a double; an int beyond 2**53 (which Python compares and keeps exactly) flagged."""
    wide = value if value.type == pa.int64() else value.cast(pa.int64())
    ev.flag(pc.or_(pc.greater(wide, _EXACT), pc.less(wide, _MINUS_EXACT)))
    return pc.cast(wide, pa.float64(), safe=False)


def as_double(node: Node, value: Value, ev: Eval) -> Value:
    """``value`` (of ``node``) as the double a mixed value carries."""
    if node.kind == INT:
        return exact_double(value, ev)
    return value if value.type == pa.float64() else value.cast(pa.float64())


def int_rows(node: Node, ev: Eval) -> Value:
    """Which rows of ``node``'s value are Python ints: all (an int), none (a double), or its ``ints``."""
    if node.kind == NUM:
        assert node.ints is not None
        return node.ints(ev)
    return pa.scalar(node.kind == INT)


def _checked(args: list[Node], what: str) -> None:
    if any(a.kind not in _NUMBERS or a.truth_only for a in args):
        raise Unsupported(f"{what} of {sorted({a.kind for a in args})} (only ints and doubles mix here)")


def _folded(args: list[Node], pick: Callable[[list[Any]], Any]) -> Node | None:
    """Arguments that are all constants: the row code's value, computed once now (an int or a double)."""
    if not all(a.constant for a in args):
        return None
    values = [a.run(Eval(None)).as_py() for a in args]
    value = pick(values)
    if value is None:
        raise Unsupported("a min/max or coalesce of constants that is NULL")
    return constant(INT, pa.scalar(value, pa.int64())) if type(value) is int else (
        constant(FLOAT, pa.scalar(value, pa.float64())))


def _mixed(pair: Callable[[Eval], tuple[Value, Value]], nullable: bool) -> Node:
    """A NUM node from ``ev -> (double value, int rows)``, computed once per evaluation."""
    last: list[Any] = [None, None]

    def both(ev: Eval) -> tuple[Value, Value]:
        if ev.batch is None:  # (no batch: the translator's folding; refused by flagging, see the docstring)
            ev.flag(pa.scalar(True))
        if last[0] is not ev:
            last[0], last[1] = ev, pair(ev)
        return last[1]
    return Node(NUM, lambda ev: both(ev)[0], nullable=nullable, ints=lambda ev: both(ev)[1])


def extreme(args: list[Node], better: Callable[[Value, Value], Value]) -> Node:
    """``min``/``max`` of ints and doubles as Python's: the first argument unless a later one is strictly
    less (greater); the rows' types follow the argument chosen.  Every argument is compared, so a None in
    any fails the row (Python raises comparing it)."""
    _checked(args, "min/max")
    folded = _folded(args, lambda vs: None if None in vs else (min if better is pc.less else max)(vs))
    if folded is not None:
        return folded

    def pair(ev: Eval) -> tuple[Value, Value]:
        best, ints = as_double(args[0], strict(args[0], ev), ev), int_rows(args[0], ev)
        for arg in args[1:]:
            value = as_double(arg, strict(arg, ev), ev)
            take = pc.fill_null(better(value, best), False)
            best, ints = pc.if_else(take, value, best), pc.if_else(take, int_rows(arg, ev), ints)
        return best, ints
    return _mixed(pair, nullable=False)


def coalesce(args: list[Node]) -> Node:
    """``coalesce`` of ints and doubles: the first value that is not None, its type with it."""
    _checked(args, "coalesce")
    folded = _folded(args, lambda vs: next((v for v in vs if v is not None), None))
    if folded is not None:
        return folded
    unknown = pa.scalar(None, pa.bool_())

    def pair(ev: Eval) -> tuple[Value, Value]:
        values = [as_double(a, a.run(ev), ev) for a in args]
        kinds = [pc.if_else(pc.is_valid(v), int_rows(a, ev), unknown) for a, v in zip(args, values)]
        return pc.coalesce(*values), pc.coalesce(*kinds)
    return _mixed(pair, nullable=all(a.nullable for a in args))


def coerced(node: Node, target: str) -> Node:
    """A mixed value in an out field of ``target`` kind: the row path's ``float(x)`` is the double (exact,
    beyond 2**53 flagged), ``int(x)`` truncates it (an int's double is whole); text: :mod:`.arrow_text`."""
    if target == FLOAT:
        return Node(FLOAT, node.run, node.nullable)
    if target == INT:
        return Node(INT, lambda ev: as_int64(pc.trunc(node.run(ev)), ev), node.nullable)
    raise Unsupported(f"a mixed int/double value in a {target} field")

