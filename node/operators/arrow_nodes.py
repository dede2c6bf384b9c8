"""What a columnar translation is made of: the :class:`Node`, the :class:`Eval` of one batch, the two refusals.

The tree walk (:mod:`.arrow_exprs`) and the per-operation translations
(:mod:`.arrow_ops`, :mod:`.arrow_math`, :mod:`.arrow_logic`) all build
:class:`Node` values and refuse with :class:`Unsupported` when the box is
built.  Those words live here, below all of them.

Rows the columns cannot give exactly
    A node's ``run`` takes an :class:`Eval`: the batch, and the rows on which
    the columnar value may differ from the row path's (a zero divisor, a
    None where Python raises, an int64 overflow, a domain error of ``sqrt``
    ...).  An operation *flags* those rows (:meth:`Eval.flag`) and goes on
    with harmless values in them, so one bad row no longer stops the batch;
    a row on which Python certainly raises (a zero divisor, a None in ``x >
    1``, ``sqrt(-1.0)``, where no short-circuit can skip the operation)
    *fails* instead (:meth:`Eval.fail`), and the entry points apply the row
    path's rule to it on columns: a predicate false, a map field None.
    Flags are conservative: a row may be flagged that the row path computes
    without failing (a divisor behind a short-circuiting ``and``); what is
    exact is every row *not* flagged.  The entry points then give the
    flagged rows the row code's own values (:mod:`.arrow_exprs`), or raise
    :class:`Fallback` for the whole batch where no row code is at hand.

The checks more than one operation makes are here: :func:`strict` (an
operand on which the row path raises for None) and :func:`as_int64` (a
double Python would refuse to make an int, or would make one beyond int64).

>>> import pyarrow as pa
>>> field = Node("int", lambda ev: ev.column(0), nullable=True)
>>> ev = Eval(pa.record_batch([pa.array([1, None, 3])], names=["n"]))
>>> strict(field, ev).to_pylist(), ev.redo(), ev.failed(None).to_pylist()
([1, None, 3], None, [False, True, False])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Union

import pyarrow as pa
import pyarrow.compute as pc

Value = Union[pa.Array, pa.Scalar]

#: What pyarrow raises when a kernel refuses (an unsafe implicit cast, ...): the batch goes the row path.
ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError)

#: The kind of a value that is a Python int on some rows and a float on others (:mod:`.arrow_mixed`).
NUM = "num"

_INT64_LOW, _INT64_END = pa.scalar(-(2.0**63)), pa.scalar(2.0**63)


class Unsupported(Exception):
    """The expression has no exact columnar translation here: the box evaluates it on rows."""


class Fallback(Exception):
    """This batch holds values the columnar evaluation cannot treat exactly as the row path does."""


class Eval:
    """One evaluation of translated expressions on one batch: the batch, and the rows flagged as not exact.

    ``batch`` None: a subtree that reads no field, evaluated when the box is
    built (its flags are scalars; a flagged constant is not folded).
    """

    __slots__ = ("batch", "_flags", "_fails", "_guarded")

    def __init__(self, batch: pa.RecordBatch | None):
        self.batch = batch
        self._flags: list[Value] = []
        self._fails: list[Value] = []
        self._guarded = 0

    def column(self, i: int) -> pa.Array:
        assert self.batch is not None
        return self.batch.column(i)

    def flag(self, mask: Value) -> None:
        """Rows (``mask`` true) on which the columnar value may differ from the row path's; null is not flagged."""
        self._flags.append(mask)

    def fail(self, mask: Value) -> None:
        """Rows on which Python certainly raises here (a zero divisor, None in ``x > 1``, ``sqrt(-1.0)``): the
        whole expression is None there, the row path's rule, applied on columns.  Under an operand Python
        may skip (the right of a non-SQL ``and``/``or``, the upper bound of ``between``: :meth:`guarded`)
        the rows are only flagged."""
        (self._flags if self._guarded else self._fails).append(mask)

    def guarded(self, run: Callable[["Eval"], Value]) -> Value:
        """``run(self)`` for an operand that Python's short-circuit may not evaluate (its failures only flagged)."""
        self._guarded += 1
        try:
            return run(self)
        finally:
            self._guarded -= 1

    @property
    def marked(self) -> bool:
        """Whether any operation flagged or failed rows in this evaluation (most batches: none)."""
        return bool(self._flags or self._fails)

    @property
    def flagged(self) -> bool:
        """Whether anything was flagged or failed at all (a constant's check, before any batch)."""
        return any(holds(m) for m in self._flags + self._fails)

    def redo(self) -> pa.BooleanArray | None:
        """The flagged rows as a non-null mask of the batch, or None when none is flagged."""
        return self._union(self._flags)

    def failed(self, redo: pa.BooleanArray | None) -> pa.BooleanArray | None:
        """The rows that certainly fail and are not flagged (a flagged row's values may be stand-ins)."""
        out = self._union(self._fails)
        if out is None or redo is None:
            return out
        out = pc.and_not(out, redo)
        return out if out.true_count else None

    def _union(self, masks: list[Value]) -> pa.BooleanArray | None:
        out: Value | None = None
        for mask in masks:
            if isinstance(mask, pa.Scalar):
                if not mask.is_valid or not mask.as_py():
                    continue
                assert self.batch is not None
                return pa.repeat(pa.scalar(True), self.batch.num_rows)
            out = mask if out is None else pc.or_kleene(out, mask)
        if out is None:
            return None
        out = pc.fill_null(out, False)
        return out if out.true_count else None


Run = Callable[[Eval], Value]


@dataclass(frozen=True, slots=True)
class Node:
    """A translated (sub)expression: its Python kind, and the ``Eval -> array (or scalar)`` function.

    ``nullable``: its values may be null (a field read; upstream maps write
    None into failing fields; SQL's NULL of a nullable field).  Every
    operation on which the row path raises for None flags the nulls of its
    nullable operands (:func:`strict`).  ``truth_only``: only the Python
    truth of its values is exact (``i and d`` of an int and a double, whose
    row value is one or the other): a predicate, ``and``, ``or`` and ``not``
    take it, nothing else.  Kind :data:`NUM` (``min(i, d)``, ``coalesce(i,
    d)``): the row value is an int on some rows and a double on others; ``run``
    gives it as a double and ``ints`` says which rows hold an int
    (:mod:`.arrow_mixed`).
    """

    kind: str
    run: Run
    nullable: bool = False
    constant: bool = False  # reads no field: evaluated once, when the box is built
    truth_only: bool = False
    ints: Run | None = None  # kind NUM: ``ev ->`` the rows whose Python value is an int (:mod:`.arrow_mixed`)


def constant(kind: str, value: Value) -> Node:
    """A node that is ``value`` for every batch (a literal, or a subtree folded when the box is built)."""
    return Node(kind, lambda ev: value, nullable=not value.is_valid, constant=True)


def strict(node: Node, ev: Eval) -> Value:
    """``node`` on ``ev``, its nulls flagged: the row path raises on None there."""
    value = node.run(ev)
    if node.nullable:
        if isinstance(value, pa.Array):
            if value.null_count:
                ev.fail(pc.is_null(value))
        elif not value.is_valid:
            ev.fail(pa.scalar(True))
    return value


def strict1(a: Node, fn: Callable[[Value], Value]) -> Run:
    """``ev -> fn(a)`` for a one-operand operation that fails on None (``-x``, ``abs``, ``like``, a cast)."""
    return lambda ev: fn(strict(a, ev))


def holds(value: Value) -> bool:
    """Whether a boolean array (or scalar) is true anywhere."""
    if isinstance(value, pa.Scalar):
        return bool(value.as_py())
    return bool(pc.any(value).as_py())


def as_int64(value: Value, ev: Eval) -> Value:
    """A whole double made an int64: inf and nan fail (Python raises), values beyond int64 are flagged
    (Python's int is larger); both are made 0 here."""
    fits = pc.and_(pc.greater_equal(value, _INT64_LOW), pc.less(value, _INT64_END))  # false for nan
    finite = pc.is_finite(value)
    ev.fail(pc.invert(finite))
    ev.flag(pc.and_not(finite, fits))
    return pc.if_else(fits, value, 0.0).cast(pa.int64())
