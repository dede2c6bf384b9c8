"""What a columnar translation is made of: the :class:`Node`, the two refusals, and the null rule.

The tree walk (:mod:`.arrow_exprs`) and the per-operation translations
(:mod:`.arrow_ops`) both build :class:`Node` values and both refuse -- with
:class:`Unsupported` when the box is built, with :class:`Fallback` when a
batch cannot be computed exactly.  Those words live here, below both, so the
walk can call the operations without the operations importing the walk back.

The checks that more than one side makes on a batch's values are here too:
:func:`strict` (an operand on which the row path would raise for None) and
:func:`finite` (a double that Python would refuse to make an int).  Checks
that belong to one operation (a zero divisor, an int beyond 2**53 in a
division) stay with it in :mod:`.arrow_ops`.

>>> import pyarrow as pa
>>> field = Node("int", lambda batch: batch.column(0), nullable=True)
>>> strict(field, pa.record_batch([pa.array([1, None])], names=["n"]))
Traceback (most recent call last):
...
boreas.node.operators.arrow_nodes.Fallback: a null where the row path would fail on None
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Union

import pyarrow as pa
import pyarrow.compute as pc

Value = Union[pa.Array, pa.Scalar]
Run = Callable[[pa.RecordBatch], Value]

#: What pyarrow raises when a kernel refuses (a checked overflow, an unsafe implicit cast); the batch goes the row path.
ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError)


class Unsupported(Exception):
    """The expression has no exact columnar translation here: the box evaluates it on rows."""


class Fallback(Exception):
    """This batch holds values the columnar evaluation cannot treat exactly as the row path does."""


@dataclass(frozen=True, slots=True)
class Node:
    """A translated (sub)expression: its Python kind, and the batch -> array (or scalar) function.

    ``nullable``: its values may be null (a field read; upstream maps write
    None into failing fields).  Every operation on which the row path raises
    for None checks its nullable operands and falls back when one has a null.
    """

    kind: str
    run: Run
    nullable: bool = False
    constant: bool = False  # reads no field: evaluated once, when the box is built


def constant(kind: str, value: Value) -> Node:
    """A node that is ``value`` for every batch (a literal, or a subtree folded when the box is built)."""
    return Node(kind, lambda batch: value, constant=True)


def strict(node: Node, batch: pa.RecordBatch) -> Value:
    """``node`` on ``batch``, refusing a null where it may have one: the row path raises on None there."""
    value = node.run(batch)
    if not node.nullable:
        return value
    if value.null_count if isinstance(value, pa.Array) else not value.is_valid:
        raise Fallback("a null where the row path would fail on None")
    return value


def strict1(a: Node, fn: Callable[[Value], Value]) -> Run:
    """``batch -> fn(a)`` for a one-operand operation that fails on None (``-x``, ``abs``, ``like``, a cast)."""
    return lambda batch: fn(strict(a, batch))


def holds(value: Value) -> bool:
    """Whether a boolean array (or scalar) is true anywhere."""
    if isinstance(value, pa.Scalar):
        return bool(value.as_py())
    return bool(pc.any(value).as_py())


def finite(value: Value) -> Value:
    """A double that is about to become an int: Python raises on inf and nan, so such a batch goes the row path."""
    if holds(pc.invert(pc.is_finite(value))):
        raise Fallback("inf or nan where Python makes an int")
    return value
