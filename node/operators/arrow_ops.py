"""One translation per operation: what each operator or function of an expression is on Arrow columns.

The tree walk (:mod:`.arrow_exprs`) decides which node of the sqlglot tree
is which operation; this module knows, for each one, how Python computes it
on a row and which ``pyarrow.compute`` calls give the same values for a
whole batch.  Each function takes translated operands (:class:`~.arrow_nodes.Node`)
and returns the operation's node, or refuses: :class:`~.arrow_nodes.Unsupported`
when no exact translation exists for these kinds, and, inside the node's
``run``, :class:`~.arrow_nodes.Fallback` when a batch holds a value on which
Python would fail or compute otherwise.  The exactness arguments are per
operation, so they are written next to it:

* arithmetic: ints are widened to int64 and checked for overflow (Python's
  ints never overflow), doubles are IEEE as Python's; ``/`` is true division
  (int by int exactly only up to 2**53), ``%`` of ints C's sign rule;
* comparisons: ``=``/``<>`` never fail and None equals only None, orderings
  fail on None; an int64 a double cannot hold makes pyarrow refuse;
* min/max keep Python's first-wins order; floor/ceil/round and casts to int
  refuse inf and nan; strings print alike only for text and ints;
  LIKE is the row path's anchored regex.

>>> import pyarrow as pa
>>> from boreas.node.operators.arrow_nodes import Node
>>> n = Node("int", lambda batch: batch.column(0), nullable=True)
>>> modulo(n, literal(exp.Literal.number(3))).run(pa.record_batch([pa.array([-7, 7])], names=["n"])).to_pylist()
[-1, 1]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import expressions as exp

from boreas.node.compile import BOOL, FLOAT, INT, STR

from .arrow_nodes import Fallback, Node, Run, Unsupported, Value, constant, finite, holds, strict, strict1

#: The orderings, by sqlglot node type (``=`` and ``<>`` are :func:`equality`).
ORDER = {exp.GT: pc.greater, exp.GTE: pc.greater_equal, exp.LT: pc.less, exp.LTE: pc.less_equal}

_INT_CASTS = {exp.DataType.Type.TINYINT, exp.DataType.Type.SMALLINT, exp.DataType.Type.INT,
              exp.DataType.Type.BIGINT, exp.DataType.Type.TIMESTAMP}
_STR_CASTS = {exp.DataType.Type.VARCHAR, exp.DataType.Type.TEXT}
_REGEX_SPECIAL = frozenset("\\.^$|?*+()[]{}")
_EXACT_IN_DOUBLE = 2**53
_EXACT_IN_DOUBLE_SCALAR = pa.scalar(_EXACT_IN_DOUBLE, pa.int64())
_ZERO = (pa.scalar(0, pa.int64()), pa.scalar(0.0, pa.float64()))


# -- literals and comparisons ------------------------------------------------------------


def literal(tree: exp.Expression) -> Node:
    """A number, string or boolean literal as a constant of its Python kind (an int must fit int64)."""
    if isinstance(tree, exp.Boolean):
        return constant(BOOL, pa.scalar(bool(tree.this)))
    if tree.is_string:
        return constant(STR, pa.scalar(tree.this, pa.string()))
    if tree.this.lstrip("-").isdigit():
        if not -(2**63) <= int(tree.this) < 2**63:
            raise Unsupported(f"integer literal {tree.this} beyond int64")
        return constant(INT, pa.scalar(int(tree.this), pa.int64()))
    return constant(FLOAT, pa.scalar(float(tree.this), pa.float64()))


def _comparable(a: Node, b: Node) -> None:
    numeric = (INT, FLOAT)
    if not (a.kind == b.kind == STR or (a.kind in numeric and b.kind in numeric) or a.kind == b.kind == BOOL):
        raise Unsupported(f"a comparison of {a.kind} with {b.kind}")


def equality(a: Node, b: Node, negate: bool) -> Node:
    """``=``/``<>`` as Python's ``==``/``!=``: None equals None only, and compares without failing.

    An int64 too large to be a double exactly makes pyarrow refuse the
    implicit cast (a :class:`Fallback`); Python compares those exactly.
    """
    _comparable(a, b)
    fn = pc.not_equal if negate else pc.equal

    def run(batch: pa.RecordBatch) -> Value:
        x, y = a.run(batch), b.run(batch)
        out = fn(x, y)
        if not (a.nullable or b.nullable) or not out.null_count:
            return out
        both = pc.and_(pc.is_null(x), pc.is_null(y))  # None == None; None == 1 is false
        return pc.if_else(pc.is_null(out), pc.invert(both) if negate else both, out)
    return Node(BOOL, run)


def order(a: Node, b: Node, fn: Callable[[Value, Value], Value]) -> Node:
    """``<``, ``<=``, ``>``, ``>=`` (``fn`` one of :data:`ORDER`) between numbers or between strings."""
    _comparable(a, b)
    if a.kind == BOOL:
        raise Unsupported("an ordering of booleans")
    return Node(BOOL, lambda batch: fn(strict(a, batch), strict(b, batch)))


# -- arithmetic ----------------------------------------------------------------------------


def _wide(value: Value, kind: str) -> Value:
    """An int operand as int64, a float one as float64: Python computes in int and double."""
    want = pa.int64() if kind == INT else pa.float64()
    return value if value.type == want else value.cast(want)


def _double(value: Value, kind: str) -> Value:
    """An operand of double arithmetic as float64; an int rounds to the nearest double, as Python's
    ``int * float`` converts it (an unchecked cast rounds the same way)."""
    if kind == INT:
        return pc.cast(value, pa.float64(), safe=False)
    return _wide(value, FLOAT)


def _operand(node: Node, convert: Callable[[Value], Value]) -> Run:
    """``batch -> convert(value)`` of a strict operand; a constant's conversion done once, now."""
    if node.constant:
        value = convert(node.run(None))  # type: ignore[arg-type]
        return lambda batch: value
    return lambda batch: convert(strict(node, batch))


def arithmetic(t: type, a: Node, b: Node) -> Node:
    """``+ - *`` (``t`` the sqlglot node type): ints checked for int64 overflow, doubles as IEEE, ``+`` of strings."""
    if t is exp.Add and a.kind == b.kind == STR:
        return Node(STR, lambda batch: pc.binary_join_element_wise(strict(a, batch), strict(b, batch), ""))
    if a.kind not in (INT, FLOAT) or b.kind not in (INT, FLOAT):
        raise Unsupported(f"arithmetic on {a.kind} and {b.kind}")
    if a.kind == b.kind == INT:
        fn = {exp.Add: pc.add_checked, exp.Sub: pc.subtract_checked, exp.Mul: pc.multiply_checked}[t]
        x, y = _operand(a, lambda v: _wide(v, INT)), _operand(b, lambda v: _wide(v, INT))
        return Node(INT, lambda batch: fn(x(batch), y(batch)))
    # Python's float arithmetic overflows to inf without raising, as these do
    fn = {exp.Add: pc.add, exp.Sub: pc.subtract, exp.Mul: pc.multiply}[t]
    x, y = _operand(a, lambda v: _double(v, a.kind)), _operand(b, lambda v: _double(v, b.kind))
    return Node(FLOAT, lambda batch: fn(x(batch), y(batch)))


def _exact_in_double(value: Value) -> Value:
    """An int operand that becomes a double exactly (the row path's int/int division is correctly rounded)."""
    if isinstance(value, pa.Scalar):
        if abs(value.as_py()) > _EXACT_IN_DOUBLE:
            raise Fallback("an int beyond 2**53 in a division")
        return pa.scalar(float(value.as_py()), pa.float64())
    if holds(pc.greater(pc.abs_checked(value), _EXACT_IN_DOUBLE_SCALAR)):
        raise Fallback("an int beyond 2**53 in a division")
    return value.cast(pa.float64())


def _nonzero(divisor: Value) -> Value:
    if holds(pc.equal(divisor, _ZERO[pa.types.is_floating(divisor.type)])):
        raise Fallback("a zero divisor")
    return divisor


def _divisor(b: Node, kind: str, convert: Callable[[Value], Value] = lambda v: v) -> Run:
    """``b`` widened, checked for a zero and converted: per batch, or once for a constant (which cannot change)."""
    if b.constant:
        try:
            value = convert(_nonzero(_wide(b.run(None), kind)))  # type: ignore[arg-type]
            return lambda batch: value
        except Fallback:
            pass  # a zero (or inexact) constant divisor: every batch goes the row path
    return lambda batch: convert(_nonzero(_wide(strict(b, batch), kind)))


def divide(a: Node, b: Node) -> Node:
    """``/``: true division, a double; int by int is correctly rounded in Python, so both must be exact doubles."""
    if a.kind == b.kind == INT:
        x = _operand(a, lambda v: _exact_in_double(_wide(v, INT)))
        y = _divisor(b, INT, _exact_in_double)
    else:  # an int beside a double rounds to one first
        x = _operand(a, lambda v: _double(v, a.kind))
        y = _divisor(b, b.kind, lambda v: _double(v, b.kind))
    return Node(FLOAT, lambda batch: pc.divide(x(batch), y(batch)))


def modulo(a: Node, b: Node) -> Node:
    """``%`` on ints: C's remainder (the dividend's sign), ``a - trunc(a / b) * b``; on doubles (fmod) unsupported."""
    if not a.kind == b.kind == INT:
        raise Unsupported("% of doubles (fmod)")

    divisor = _divisor(b, INT)

    def run(batch: pa.RecordBatch) -> Value:
        x, y = _wide(strict(a, batch), INT), divisor(batch)
        return pc.subtract_checked(x, pc.multiply_checked(pc.divide_checked(x, y), y))  # int division truncates
    return Node(INT, run)


# -- functions -------------------------------------------------------------------------------


def extreme(args: list[Node], better: Callable[[Value, Value], Value]) -> Node:
    """min/max as Python's: the first argument unless a later one is strictly less (greater); nan stays put."""
    if len(args) == 1:
        return args[0]
    if len({a.kind for a in args}) != 1:
        raise Unsupported("min/max of ints and doubles (the row value's type depends on the row)")

    def run(batch: pa.RecordBatch) -> Value:
        best = strict(args[0], batch)
        for arg in args[1:]:
            value = strict(arg, batch)
            best = pc.if_else(better(value, best), value, best)
        return best
    return Node(args[0].kind, run)


def to_whole(a: Node, t: type) -> Node:
    """floor/ceil/round: an int stays; a double must be finite (Python raises otherwise) and fit int64."""
    if a.kind == INT:
        return a
    fn = {exp.Floor: pc.floor, exp.Ceil: pc.ceil,
          exp.Round: lambda v: pc.round(v, 0, "half_towards_infinity")}[t]  # SQL: halves away from zero
    return Node(INT, lambda batch: fn(finite(strict(a, batch))).cast(pa.int64()))


def cast(a: Node, target: Any) -> Node:
    """``cast(a as target)`` (a sqlglot ``DataType.Type``) as Python's ``int()``, ``str()`` or ``float()``."""
    if target in _INT_CASTS:  # int(x): a double truncates toward zero
        if a.kind == INT:
            return a
        if a.kind == FLOAT:
            return Node(INT, lambda batch: pc.trunc(finite(strict(a, batch))).cast(pa.int64()))
        if a.kind == BOOL:
            return Node(INT, lambda batch: a.run(batch).cast(pa.int64()))
        raise Unsupported("a cast of text to int")
    if target in _STR_CASTS:  # str(x): ints print alike; doubles and booleans do not
        if a.kind == STR:
            return a
        if a.kind == INT:
            return Node(STR, strict1(a, lambda v: v.cast(pa.string())))
        raise Unsupported(f"a cast of {a.kind} to text")
    if a.kind == FLOAT:
        return a
    if a.kind in (INT, BOOL):  # float(int) rounds to nearest, as an unchecked cast does
        return Node(FLOAT, strict1(a, lambda v: pc.cast(v, pa.float64(), safe=False)))
    raise Unsupported("a cast of text to double")


# -- strings ---------------------------------------------------------------------------------


def concat(parts: list[Node]) -> Node:
    """``concat(...)`` of strings and ints (Python and Arrow print doubles and booleans differently)."""
    if not parts:
        empty = pa.scalar("", pa.string())
        return Node(STR, lambda batch: empty)
    for p in parts:
        if p.kind not in (STR, INT):
            raise Unsupported(f"concat of a {p.kind} (Python and Arrow print it differently)")

    def run(batch: pa.RecordBatch) -> Value:
        texts = [strict(p, batch) for p in parts]
        texts = [v if p.kind == STR else v.cast(pa.string()) for p, v in zip(parts, texts)]
        return texts[0] if len(texts) == 1 else pc.binary_join_element_wise(*texts, "")
    return Node(STR, run)


def like(a: Node, pattern: exp.Expression) -> Node:
    """LIKE with a literal pattern, as the row path's anchored regex (``%`` any run, ``_`` one character,
    no escape character)."""
    if a.kind != STR or not (isinstance(pattern, exp.Literal) and pattern.is_string):
        raise Unsupported("LIKE of a non-string or with a computed pattern")
    regex = "(?s)\\A" + "".join(
        ".*" if ch == "%" else "." if ch == "_" else "\\" + ch if ch in _REGEX_SPECIAL else ch
        for ch in pattern.this) + "\\z"
    return Node(BOOL, strict1(a, lambda v: pc.match_substring_regex(v, regex)))
