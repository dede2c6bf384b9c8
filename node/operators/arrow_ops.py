"""One translation per operation: what each operator or function of an expression is on Arrow columns.

The tree walk (:mod:`.arrow_exprs`) decides which node of the sqlglot tree
is which operation; this module knows, for each one, how Python computes it
on a row and which ``pyarrow.compute`` calls give the same values for a
whole batch.  Each function takes translated operands (:class:`~.arrow_nodes.Node`)
and returns the operation's node, or refuses with
:class:`~.arrow_nodes.Unsupported` when no exact translation exists for
these kinds.  Inside a node's ``run``, a row on which Python would fail or
compute otherwise is flagged (:meth:`~.arrow_nodes.Eval.flag`) and given a
harmless value, so the kernels after it do not refuse the batch.  The
exactness arguments are per operation, so they are written next to it:

* arithmetic: ints are widened to int64 and computed unchecked; a row whose
  result is beyond 2**62 in doubles is flagged (Python's ints never
  overflow, and no true overflow escapes that bound); doubles are IEEE as
  Python's; ``/`` is true division (int by int exact only up to 2**53), ``%``
  of ints C's sign rule; a zero divisor is flagged;
* comparisons: ``=``/``<>`` never fail and None equals only None, orderings
  fail on None; an int beyond 2**53 beside a double is flagged (Python
  compares exactly);
* ``three``: the operation reads a ``nullable`` field, and the row code
  gives it SQL's three-valued logic (:mod:`boreas.node.null_logic`): NULL
  in, NULL out, without failing -- pyarrow's null propagation;
* min/max keep Python's first-wins order (of ints and doubles mixed:
  :mod:`.arrow_mixed`); floor/ceil/round and casts to int flag inf, nan and
  values beyond int64; text of a value as Python's ``str()`` writes it, and
  LIKE: :mod:`.arrow_text`.

>>> import pyarrow as pa
>>> from boreas.node.operators.arrow_nodes import Eval, Node
>>> n = Node("int", lambda ev: ev.column(0), nullable=True)
>>> ev = Eval(pa.record_batch([pa.array([-7, 7, 1])], names=["n"]))
>>> modulo(n, literal(exp.Literal.number(3))).run(ev).to_pylist()
[-1, 1, 1]
>>> ev = Eval(pa.record_batch([pa.array([-7, 7, 1])], names=["n"]))
>>> divide(literal(exp.Literal.number(1)), n).run(ev).to_pylist(), ev.redo()
([-0.14285714285714285, 0.14285714285714285, 1.0], None)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import expressions as exp

from boreas.node.compile import BOOL, FLOAT, INT, STR

from . import arrow_mixed, arrow_text
from .arrow_nodes import NUM, Eval, Node, Run, Unsupported, Value, as_int64, constant, strict, strict1

#: The orderings, by sqlglot node type (``=`` and ``<>`` are :func:`equality`).
ORDER = {exp.GT: pc.greater, exp.GTE: pc.greater_equal, exp.LT: pc.less, exp.LTE: pc.less_equal}

INT_CASTS = {exp.DataType.Type.TINYINT, exp.DataType.Type.SMALLINT, exp.DataType.Type.INT,
             exp.DataType.Type.BIGINT, exp.DataType.Type.TIMESTAMP}
STR_CASTS = {exp.DataType.Type.VARCHAR, exp.DataType.Type.TEXT}
_INT64_MIN = pa.scalar(-(2**63), pa.int64())
_OVERFLOW = pa.scalar(2.0**62)
_ZERO = (pa.scalar(0, pa.int64()), pa.scalar(0.0, pa.float64()))
_ONE = (pa.scalar(1, pa.int64()), pa.scalar(1.0, pa.float64()))


def operand(node: Node, three: bool) -> Run:
    """``ev -> value`` of an operand: its nulls flagged (Python raises on None), or, under SQL's
    three-valued logic, passed on (NULL in, NULL out)."""
    return node.run if three else (lambda ev: strict(node, ev))


# -- literals and comparisons ------------------------------------------------------------


def literal(tree: exp.Expression) -> Node:
    """A number, string, boolean or null literal as a constant of its Python kind (an int must fit int64)."""
    if isinstance(tree, exp.Null):
        return constant("null", pa.scalar(None))
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
    numeric = (INT, FLOAT, NUM)  # (a mixed value compares as its double: arrow_mixed)
    if a.truth_only or b.truth_only:
        raise Unsupported("a comparison of a value whose kind depends on the row")
    if not (a.kind == b.kind == STR or (a.kind in numeric and b.kind in numeric) or a.kind == b.kind == BOOL):
        raise Unsupported(f"a comparison of {a.kind} with {b.kind}")


def _pair(a: Node, b: Node, x: Run, y: Run) -> Callable[[Eval], tuple[Value, Value]]:
    """Both operands of a comparison; an int beside a double made a double (its inexact rows flagged)."""
    mixed = INT in (a.kind, b.kind) and bool({a.kind, b.kind} & {FLOAT, NUM})
    if not mixed:
        return lambda ev: (x(ev), y(ev))

    def run(ev: Eval) -> tuple[Value, Value]:
        u, v = x(ev), y(ev)
        exact = arrow_mixed.exact_double
        return (exact(u, ev) if a.kind == INT else u), (exact(v, ev) if b.kind == INT else v)
    return run


def equality(a: Node, b: Node, negate: bool, three: bool = False) -> Node:
    """``=``/``<>`` as Python's ``==``/``!=``: None equals None only, and compares without failing; under
    three-valued logic NULL beside anything is NULL."""
    if a.truth_only or b.truth_only:  # (its None would be lost: the truth it keeps is no value to compare)
        raise Unsupported("a comparison of a value whose kind depends on the row")
    if "null" in (a.kind, b.kind):
        other = b if a.kind == "null" else a  # x = null: x is None
        if three:  # _cmp3 of a NULL is NULL -- with x computed all the same: a row where x fails fails it
            unknown = pa.scalar(None, pa.bool_())
            return Node(BOOL, lambda ev: (other.run(ev), unknown)[1], nullable=True)
        return Node(BOOL, lambda ev: (pc.is_valid if negate else pc.is_null)(_array(other.run(ev), ev)))
    _comparable(a, b)
    fn = pc.not_equal if negate else pc.equal
    pair = _pair(a, b, a.run, b.run)
    if three:
        return Node(BOOL, lambda ev: fn(*pair(ev)), nullable=True)

    def run(ev: Eval) -> Value:
        x, y = pair(ev)
        out = fn(x, y)
        if not (a.nullable or b.nullable) or not out.null_count:
            return out
        both = pc.and_(pc.is_null(x), pc.is_null(y))  # None == None; None == 1 is false
        return pc.if_else(pc.is_null(out), pc.invert(both) if negate else both, out)
    return Node(BOOL, run)


def _array(value: Value, ev: Eval) -> pa.Array:
    if isinstance(value, pa.Scalar) and ev.batch is not None:
        return pa.repeat(value, ev.batch.num_rows)
    return value


def order(a: Node, b: Node, fn: Callable[[Value, Value], Value], three: bool = False) -> Node:
    """``<``, ``<=``, ``>``, ``>=`` (``fn`` one of :data:`ORDER`) between numbers or between strings."""
    _comparable(a, b)
    if a.kind == BOOL:
        raise Unsupported("an ordering of booleans")
    pair = _pair(a, b, operand(a, three), operand(b, three))
    return Node(BOOL, lambda ev: fn(*pair(ev)), nullable=three)


# -- arithmetic ----------------------------------------------------------------------------


def wide(value: Value, kind: str) -> Value:
    """An int operand as int64, a float one as float64: Python computes in int and double."""
    want = pa.int64() if kind == INT else pa.float64()
    return value if value.type == want else value.cast(want)


def double(value: Value, kind: str) -> Value:
    """An operand of double arithmetic as float64; an int rounds to the nearest double, as Python's
    ``int * float`` converts it (an unchecked cast rounds the same way)."""
    if kind == INT:
        return pc.cast(value, pa.float64(), safe=False)
    return wide(value, FLOAT)


def _converted(node: Node, convert: Callable[[Value], Value], three: bool) -> Run:
    """``ev -> convert(value)`` of an operand; a constant's conversion done once, now."""
    if node.constant and node.run(Eval(None)).is_valid:
        value = convert(node.run(Eval(None)))
        return lambda ev: value
    get = operand(node, three)
    return lambda ev: convert(get(ev))


def _numbers(a: Node, b: Node) -> None:
    if a.kind not in (INT, FLOAT) or b.kind not in (INT, FLOAT) or a.truth_only or b.truth_only:
        raise Unsupported(f"arithmetic on {a.kind} and {b.kind}")


def arithmetic(t: type, a: Node, b: Node, three: bool = False) -> Node:
    """``+ - *`` (``t`` the sqlglot node type): ints unchecked with their overflows flagged, doubles as
    IEEE, ``+`` of strings."""
    if t is exp.Add and a.kind == b.kind == STR:
        x, y = operand(a, three), operand(b, three)
        return Node(STR, lambda ev: pc.binary_join_element_wise(x(ev), y(ev), ""), nullable=three)
    _numbers(a, b)
    fn = {exp.Add: pc.add, exp.Sub: pc.subtract, exp.Mul: pc.multiply}[t]
    if a.kind == b.kind == INT:
        x, y = operand(a, three), operand(b, three)
        fixed_a, fixed_b = _constant_int(a), _constant_int(b)
        within = (lambda p, q: p * q < _SMALL) if t is exp.Mul else (lambda p, q: p + q < _SMALL)

        def run(ev: Eval) -> Value:
            raw_u = fixed_a[0] if fixed_a else x(ev)
            raw_v = fixed_b[0] if fixed_b else y(ev)
            u, v = (fixed_a[1] if fixed_a else wide(raw_u, INT)), (fixed_b[1] if fixed_b else wide(raw_v, INT))
            if within(fixed_a[2] if fixed_a else _type_bound(raw_u), fixed_b[2] if fixed_b else _type_bound(raw_v)):
                return fn(u, v)  # (operands so small no result nears int64's end: nothing to flag)
            approx = fn(pc.cast(u, pa.float64(), safe=False), pc.cast(v, pa.float64(), safe=False))
            ev.flag(pc.greater_equal(pc.abs(approx), _OVERFLOW))  # Python's int goes on past int64
            return fn(u, v)
        return Node(INT, run, nullable=three)
    # Python's float arithmetic overflows to inf without raising, as these do
    x, y = _converted(a, lambda v: double(v, a.kind), three), _converted(b, lambda v: double(v, b.kind), three)
    return Node(FLOAT, lambda ev: fn(x(ev), y(ev)), nullable=three)


#: Results below this in magnitude (2**61) are far from the overflow flag's 2**62, rounding of the estimate included.
_SMALL = 2**61
#: The largest magnitude of an int column of each narrower-than-int64 Arrow type (what a field of it can hold).
_BOUNDS = {pa.int8(): 2**7, pa.int16(): 2**15, pa.int32(): 2**31, pa.uint8(): 2**8, pa.uint16(): 2**16,
           pa.uint32(): 2**32}


def _type_bound(value: Value) -> int:
    """The largest magnitude ``value``'s Arrow type can hold (int64's: beyond :data:`_SMALL`, checked per row)."""
    return _BOUNDS.get(value.type, 2**64)


def _constant_int(node: Node) -> tuple[Value, Value, int] | None:
    """A non-null int constant as (its value, widened to int64, its magnitude), made once now; None: not one."""
    if not node.constant:
        return None
    raw = node.run(Eval(None))
    if not raw.is_valid:
        return None
    return raw, wide(raw, INT), abs(raw.as_py())


def negate(a: Node, three: bool = False) -> Node:
    """``-x``: an int's ``-(-2**63)`` is beyond int64 (flagged)."""
    get = operand(a, three)
    if a.kind == FLOAT:
        return Node(FLOAT, lambda ev: pc.negate(get(ev)), nullable=three)

    def run(ev: Eval) -> Value:
        v = wide(get(ev), INT)
        ev.flag(pc.equal(v, _INT64_MIN))
        return pc.negate(v)
    return Node(INT, run, nullable=three)


def absolute(a: Node) -> Node:
    """``abs(x)``: an int's ``abs(-2**63)`` is beyond int64 (flagged)."""
    if a.kind == FLOAT:
        return Node(FLOAT, strict1(a, pc.abs))

    def run(ev: Eval) -> Value:
        v = wide(strict(a, ev), INT)
        ev.flag(pc.equal(v, _INT64_MIN))
        return pc.abs(v)
    return Node(INT, run)


def _divisor(kind: str, ev: Eval, value: Value, three: bool) -> Value:
    """A divisor with its zeros made 1: Python raises there (under three-valued logic only if the
    dividend is not NULL, so there the rows are flagged, not failed)."""
    zero = pc.equal(value, _ZERO[kind == FLOAT])
    ev.flag(zero) if three else ev.fail(zero)
    return pc.if_else(zero, _ONE[kind == FLOAT], value)


def _fixed(b: Node, convert: Callable[[Value], Value], exact: bool = False) -> Run | None:
    """A constant divisor that is not zero (and, ``exact``, an int a double holds exactly), converted once
    now (a pyarrow call on a scalar costs about what one on a column does); None: checked per batch."""
    if not b.constant:
        return None
    raw = b.run(Eval(None))
    if not raw.is_valid or raw.as_py() == 0 or (exact and abs(raw.as_py()) > 2**53):
        return None
    value = convert(raw)
    return lambda ev: value


def divide(a: Node, b: Node, three: bool = False) -> Node:
    """``/``: true division, a double; int by int is correctly rounded in Python, so both must be exact doubles."""
    _numbers(a, b)
    x, y = operand(a, three), operand(b, three)
    if a.kind == b.kind == INT:
        fixed = _fixed(b, lambda v: pc.cast(wide(v, INT), pa.float64(), safe=False), exact=True)

        def run(ev: Eval) -> Value:
            u = arrow_mixed.exact_double(wide(x(ev), INT), ev)  # int/int is correctly rounded in Python
            v = fixed(ev) if fixed else arrow_mixed.exact_double(_divisor(INT, ev, wide(y(ev), INT), three), ev)
            return pc.divide(u, v)
        return Node(FLOAT, run, nullable=three)
    fixed = _fixed(b, lambda v: double(v, b.kind))

    def mixed(ev: Eval) -> Value:  # an int beside a double rounds to one first
        u = double(x(ev), a.kind)
        v = fixed(ev) if fixed else _divisor(FLOAT, ev, double(y(ev), b.kind), three)
        return pc.divide(u, v)
    return Node(FLOAT, mixed, nullable=three)


def modulo(a: Node, b: Node, three: bool = False) -> Node:
    """``%`` on ints: C's remainder (the dividend's sign), ``a - trunc(a / b) * b`` (of doubles:
    :func:`.arrow_math.fmod`)."""
    _numbers(a, b)
    if not a.kind == b.kind == INT:
        raise Unsupported("% of doubles is fmod (arrow_math.fmod)")
    x, y = operand(a, three), operand(b, three)
    fixed = _constant_int(b)
    if fixed is not None and fixed[2] > 1:  # a constant divisor neither 0 nor -1 (nor 1): nothing to check per batch
        divisor = fixed[1]

        def run_fixed(ev: Eval) -> Value:
            u = wide(x(ev), INT)
            return pc.subtract(u, pc.multiply(pc.divide(u, divisor), divisor))
        return Node(INT, run_fixed, nullable=three)

    def run(ev: Eval) -> Value:
        u, v = wide(x(ev), INT), _divisor(INT, ev, wide(y(ev), INT), three)
        v = pc.if_else(pc.equal(v, -1), _ONE[0], v)  # x % -1 is 0 as x % 1 is, and -2**63 / -1 overflows
        return pc.subtract(u, pc.multiply(pc.divide(u, v), v))  # int division truncates
    return Node(INT, run, nullable=three)


# -- functions -------------------------------------------------------------------------------


def extreme(args: list[Node], better: Callable[[Value, Value], Value]) -> Node:
    """min/max as Python's: the first argument unless a later one is strictly less (greater); nan stays put."""
    if len(args) == 1:
        return args[0]
    if len({a.kind for a in args}) != 1 or args[0].kind == NUM:
        return arrow_mixed.extreme(args, better)  # ints and doubles: the row value's type depends on the row

    def run(ev: Eval) -> Value:
        best = strict(args[0], ev)
        for arg in args[1:]:
            value = strict(arg, ev)
            best = pc.if_else(better(value, best), value, best)
        return best
    return Node(args[0].kind, run)


def to_whole(a: Node, t: type) -> Node:
    """floor/ceil/round: an int stays; a double must be finite (Python raises otherwise) and fit int64."""
    if a.kind == INT:  # math.floor(None) fails
        return Node(INT, strict1(a, lambda v: v))
    fn = {exp.Floor: pc.floor, exp.Ceil: pc.ceil,
          exp.Round: lambda v: pc.round(v, 0, "half_towards_infinity")}[t]  # SQL: halves away from zero
    return Node(INT, lambda ev: as_int64(fn(strict(a, ev)), ev))


def cast(a: Node, target: Any) -> Node:
    """``cast(a as target)`` (a sqlglot ``DataType.Type``) as Python's ``int()``, ``str()`` or ``float()``."""
    if a.truth_only:
        raise Unsupported("a cast of a value whose kind depends on the row")
    same = Node(a.kind, strict1(a, lambda v: v))  # a cast to its own kind: the row code's still fails on None
    if target in INT_CASTS:  # int(x): a double truncates toward zero
        if a.kind == INT:
            return same
        if a.kind in (FLOAT, NUM):  # (a mixed value's int rows are whole doubles)
            return Node(INT, lambda ev: as_int64(pc.trunc(strict(a, ev)), ev))
        if a.kind == BOOL:
            return Node(INT, strict1(a, lambda v: v.cast(pa.int64())))
        raise Unsupported(f"a cast of {a.kind} to int")
    if target in STR_CASTS:  # str(x), as Python writes it: arrow_text
        return same if a.kind == STR else arrow_text.cast_text(a)
    if a.kind == FLOAT:
        return same
    if a.kind == NUM:  # float(x) of a mixed value: its double (exact: an int beyond 2**53 is flagged)
        return Node(FLOAT, strict1(a, lambda v: v))
    if a.kind in (INT, BOOL):  # float(int) rounds to nearest, as an unchecked cast does
        return Node(FLOAT, strict1(a, lambda v: pc.cast(v, pa.float64(), safe=False)))
    raise Unsupported(f"a cast of {a.kind} to double (of text: arrow_math)")


# -- strings ---------------------------------------------------------------------------------


def concat(parts: list[Node]) -> Node:
    """``concat(...)``: each part as the row code's ``str()`` writes it (:mod:`.arrow_text`)."""
    return arrow_text.concat(parts)


def nan_flagged(a: Node, test: Node) -> Node:
    """``test`` of a double (or mixed) ``a``, its rows where ``a`` is NaN flagged: Python's ``a in (...)``
    tests identity before equality, so a NaN found as the same object (``d in (d, 1.0)``, ``max(d, i) in (d,)``)
    is in the tuple, which no comparison of values says."""
    def run(ev: Eval) -> Value:
        nan = pc.is_nan(a.run(ev))
        if pc.any(nan).as_py() if isinstance(nan, pa.Array) else nan.as_py():
            ev.flag(nan)
        return test.run(ev)
    return Node(BOOL, run)
