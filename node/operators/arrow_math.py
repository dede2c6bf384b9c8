"""The math functions, ``%`` of doubles and casts of text, on Arrow columns, exact where Python's are.

The row code calls Python's ``math`` module (``sqrt``, ``pow``, ``ln``,
``exp``, ``log10``, ``log(base, x)``, ``fmod``) and ``int()``/``float()`` of
text (:mod:`boreas.node.compile_helpers`).  Where they give a value, the
columns give the same one: ``pc.sqrt``, ``pc.ln``, ``pc.exp``, ``pc.log10``
and ``pc.power`` call the same C library functions on the same doubles, and
numpy's ``fmod`` is C's.  Where Python *raises*, C returns nan or an
infinity instead; CPython's rule (``math_1``, ``math_pow``, ``math_fmod``) is
exactly "a nan from a non-nan argument, or an infinity from finite ones, is
an error".  So where the arguments are finite and the result is not, the
row fails (:meth:`~.arrow_nodes.Eval.fail`: None, or a false predicate, on
columns); a row with an argument that is not finite is flagged (the row
code computes it: CPython answers some of those itself, ``pow(inf, y)``,
``fmod(x, inf)``).

Text becomes a number on columns only where Arrow's parser and Python's
agree by construction: ``-?[0-9]{1,18}`` for ``int()``, a plain decimal or
exponent form for ``float()`` (both correctly rounded).  Every other text
(spaces, ``+``, ``_``, ``inf``, ``1.5`` cast to int, non-ASCII digits) is
flagged and left to Python.

>>> import pyarrow as pa
>>> from boreas.node.operators.arrow_nodes import Eval, Node
>>> d = Node("float", lambda ev: ev.column(0), nullable=True)
>>> ev = Eval(pa.record_batch([pa.array([4.0, -1.0, 0.0])], names=["d"]))
>>> math1(exp.Sqrt, d).run(ev).to_pylist()[0], ev.redo(), ev.failed(None).to_pylist()
(2.0, None, [False, True, False])
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import expressions as exp

from boreas.node.compile import FLOAT, INT, STR

from .arrow_nodes import Eval, Node, Run, Unsupported, Value, strict
from .arrow_ops import double, operand

_ONE_ARG = {exp.Sqrt: pc.sqrt, exp.Ln: pc.ln, exp.Exp: pc.exp, exp.Log: pc.log10}
_INT_TEXT = r"\A-?[0-9]{1,18}\z"
_FLOAT_TEXT = r"\A[+-]?([0-9]{1,30}(\.[0-9]{0,30})?|\.[0-9]{1,30})([eE][+-]?[0-9]{1,3})?\z"


def _number(a: Node) -> None:
    if a.kind not in (INT, FLOAT) or a.truth_only:
        raise Unsupported(f"a math function of a {a.kind}")


def _flag_non_finite(ev: Eval, *values: Value) -> None:
    """Rows where an argument or the result is nan or infinite: Python's errors are among them."""
    for v in values:
        ev.flag(pc.invert(pc.is_finite(v)))


def _checked(ev: Eval, arguments: list[Value], result: Value) -> None:
    """CPython's rule for finite arguments: a result that is not finite raises (fails here); a row with an
    argument that is not finite is flagged (CPython answers some of those itself)."""
    finite = pc.is_finite(arguments[0])
    for v in arguments[1:]:
        finite = pc.and_(finite, pc.is_finite(v))
    ev.flag(pc.invert(finite))
    ev.fail(pc.and_not(finite, pc.is_finite(result)))


def _doubles(a: Node, three: bool = False) -> Run:
    get = operand(a, three)
    return lambda ev: double(get(ev), a.kind)


def math1(t: type, a: Node) -> Node:
    """``sqrt ln exp`` and one-argument ``log`` (log10), as ``math``'s: the function of a NULL fails."""
    _number(a)
    fn, x = _ONE_ARG[t], _doubles(a)

    def run(ev: Eval) -> Value:
        v = x(ev)
        out = fn(v)
        _checked(ev, [v], out)
        return out
    return Node(FLOAT, run)


def log_base(base: Node, a: Node) -> Node:
    """``log(base, x)`` as ``math.log(x, base)``: ``ln(x) / ln(base)``; a base of 1 divides by zero (flagged)."""
    _number(base)
    _number(a)
    b, x = _doubles(base), _doubles(a)

    def run(ev: Eval) -> Value:
        u, v = x(ev), b(ev)
        num, den = pc.ln(u), pc.ln(v)
        _flag_non_finite(ev, u, v, num, den)
        zero = pc.equal(den, 0.0)
        ev.flag(zero)
        return pc.divide(num, pc.if_else(zero, 1.0, den))
    return Node(FLOAT, run)


def power(a: Node, b: Node) -> Node:
    """``pow(x, y)`` as ``math.pow``: C's ``pow`` of finite doubles; anything not finite is flagged."""
    _number(a)
    _number(b)
    x, y = _doubles(a), _doubles(b)

    def run(ev: Eval) -> Value:
        u, v = x(ev), y(ev)
        out = pc.power(u, v)
        _checked(ev, [u, v], out)
        return out
    return Node(FLOAT, run)


def fmod(a: Node, b: Node, three: bool = False) -> Node:
    """``%`` with a double: ``math.fmod`` (the dividend's sign), numpy's C ``fmod``; a zero or non-finite
    operand flagged (Python raises, or answers itself)."""
    x, y = _doubles(a, three), _doubles(b, three)

    def run(ev: Eval) -> Value:
        u, v = x(ev), y(ev)
        if isinstance(u, pa.Scalar) and isinstance(v, pa.Scalar):  # folded when the box is built
            return _scalar_fmod(u, v, ev)
        u, v = _array(u, ev), _array(v, ev)
        _flag_non_finite(ev, u, v)
        zero = pc.equal(v, 0.0)
        ev.flag(zero) if three else ev.fail(zero)  # math.fmod(x, 0.0) raises (of a NULL, _bin3 does not call it)
        nulls = pc.or_(pc.is_null(u), pc.is_null(v))
        with np.errstate(all="ignore"):
            out = np.fmod(pc.fill_null(u, 1.0).to_numpy(), pc.fill_null(v, 1.0).to_numpy())
        return pa.array(out, pa.float64(), mask=nulls.to_numpy(zero_copy_only=False) if nulls.true_count else None)
    return Node(FLOAT, run, nullable=three)


def _array(value: Value, ev: Eval) -> pa.Array:
    if isinstance(value, pa.Scalar):
        assert ev.batch is not None
        return pa.repeat(value, ev.batch.num_rows)
    return value


def _scalar_fmod(u: pa.Scalar, v: pa.Scalar, ev: Eval) -> pa.Scalar:
    if not (u.is_valid and v.is_valid):
        return pa.scalar(None, pa.float64())
    x, y = u.as_py(), v.as_py()
    if not (np.isfinite(x) and np.isfinite(y)) or y == 0.0:
        ev.flag(pa.scalar(True))
        return pa.scalar(0.0)
    return pa.scalar(float(np.fmod(x, y)))


def _parsed(a: Node, pattern: str, target: pa.DataType, ev: Eval) -> Value:
    """The text of ``a`` cast to ``target`` where it matches ``pattern``; other rows flagged and parsed as 0."""
    text = strict(a, ev)
    plain = pc.match_substring_regex(text, pattern)
    ev.flag(pc.invert(plain))
    return pc.if_else(plain, text, "0").cast(target)


def text_to_int(a: Node) -> Node:
    """``cast(text as int)``: Python's ``int(text.strip())``, else ``int(float(...))``; plain digits here."""
    if a.kind != STR:
        raise Unsupported("not text")
    return Node(INT, lambda ev: _parsed(a, _INT_TEXT, pa.int64(), ev))


def text_to_float(a: Node) -> Node:
    """``cast(text as double)``: Python's ``float(text)``; a plain decimal number here (both correctly rounded)."""
    if a.kind != STR:
        raise Unsupported("not text")
    return Node(FLOAT, lambda ev: _parsed(a, _FLOAT_TEXT, pa.float64(), ev))

