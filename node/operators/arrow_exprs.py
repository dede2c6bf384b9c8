"""Box expressions evaluated on Arrow columns with ``pyarrow.compute``, translated once per box.

:mod:`boreas.node.compile` turns an expression into Python source that runs
per row.  A batch that arrived as Arrow columns (a
:class:`~boreas.wire.columns.Columns`) would have to be turned into rows
first, which costs more than the expression itself; this module translates
the same sqlglot tree into a function of the whole ``RecordBatch`` instead,
so a filter or map box touches no row in the interpreter.

Exact or not at all
    The row path is the definition of the semantics (Python's ``int`` never
    overflows, ``x / 0`` makes the whole expression None, ``-7 % 3`` is
    ``-1``).  The translation does not try to reproduce a failure per row.
    It either gives, for the whole batch, exactly the values the row path
    would, or it refuses:

    * :class:`Unsupported` at build time -- an expression this module does
      not translate (``sqrt``, a float ``%``, a cast of text, concat of a
      double, ...): the box keeps its row path for every batch.
    * :class:`Fallback` at run time -- the batch holds a value on which the
      row path would fail, or might compute differently (a zero divisor
      anywhere, a null where the row path would raise on None, an int64
      overflow, an int too large to compare with a double exactly, a value
      out of its out field's range): that batch goes the row path.

    Both are conservative: a zero divisor in a row that a short-circuiting
    ``and`` would never reach still sends the batch to the rows, which is
    slower but exact, since expressions are pure.

Kinds
    Every translated node has a static kind ('int', 'float', 'str', 'bool':
    what a row value of it is in Python).  Ints are widened to int64 and
    floats to float64 before arithmetic, as Python computes in int and
    double; an expression whose row value could be of either kind
    (``min(int_field, double_field)``) is :class:`Unsupported`.

>>> import pyarrow as pa
>>> from boreas.catalog.model import Field, FieldType, Schema
>>> s = Schema("T", (Field("c", FieldType.DOUBLE), Field("n", FieldType.INT)))
>>> batch = pa.record_batch([pa.array([-100.0, 20.0]), pa.array([3, 0], pa.int32())], names=["c", "n"])
>>> t = Translator(s)
>>> t.predicate("c > -90.0 and c < 60.0")(batch).to_pylist()
[False, True]
>>> t.value("c * 9.0 / 5.0 + 32.0", FieldType.DOUBLE)(batch).to_pylist()
[-148.0, 68.0]
>>> t.value("c / n", FieldType.DOUBLE)(batch)
Traceback (most recent call last):
...
boreas.node.operators.arrow_exprs.Fallback: a zero divisor
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Union

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import expressions as exp

from boreas.catalog.expressions import Scope, infer_type, parse_expression
from boreas.catalog.model import FieldType, Schema
from boreas.node.compile import BOOL, FLOAT, INT, STR, kind_of
from boreas.wire.columns import ARROW_TYPES

Value = Union[pa.Array, pa.Scalar]
Run = Callable[[pa.RecordBatch], Value]

#: What pyarrow raises when a kernel refuses (a checked overflow, an unsafe implicit cast); the batch goes the row path.
ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError)

_EXACT_IN_DOUBLE = 2**53


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


_ORDER = {exp.GT: pc.greater, exp.GTE: pc.greater_equal, exp.LT: pc.less, exp.LTE: pc.less_equal}
_INT_CASTS = {exp.DataType.Type.TINYINT, exp.DataType.Type.SMALLINT, exp.DataType.Type.INT,
              exp.DataType.Type.BIGINT, exp.DataType.Type.TIMESTAMP}
_STR_CASTS = {exp.DataType.Type.VARCHAR, exp.DataType.Type.TEXT}
_REGEX_SPECIAL = frozenset("\\.^$|?*+()[]{}")


class Translator:
    """Translates the expressions of one box over one in stream's schema (a filter's or a map's)."""

    def __init__(self, schema: Schema):
        self.schema = schema
        self.scope = Scope.single(schema)
        self._index = {f.name: (i, f.type) for i, f in enumerate(schema.fields)}

    def predicate(self, text: str) -> Callable[[pa.RecordBatch], pa.BooleanArray]:
        """``batch -> mask``: true where the predicate holds (Python truth of the row value; None is false)."""
        tree = parse_expression(text)
        infer_type(tree, self.scope)  # the catalog's checks, as the row path makes them
        node = self._node(tree)
        truth = _truth(node)
        return lambda batch: _evaluated(truth, batch)

    def value(self, text: str, ftype: FieldType) -> Callable[[pa.RecordBatch], pa.Array]:
        """``batch -> column`` of a map field of type ``ftype``, converted as the row path's ``coerce``
        converts, in the field's Arrow type."""
        tree = parse_expression(text)
        infer_type(tree, self.scope)
        node = _coerced(self._node(tree), kind_of(ftype))
        arrow_type = ARROW_TYPES[ftype]

        def run(batch: pa.RecordBatch) -> pa.Array:
            return _as_arrow_type(_evaluated(node.run, batch), arrow_type)
        return run

    # -- the tree walk (once per box) ---------------------------------------------------

    def _node(self, tree: exp.Expression) -> Node:
        """The translation of ``tree``; one that reads no field is folded into its value now (a pyarrow call
        on scalars costs far more than one on a column, so ``-90.0`` must not be negated per batch)."""
        node = self._build(tree)
        if node.constant or tree.find(exp.Column) is not None:
            return node
        try:
            value = node.run(None)  # type: ignore[arg-type] - reads no field, so no batch
        except (Fallback, *ARROW_ERRORS):
            return node  # fails on every row: left to fail per batch, which then goes the row path
        return _constant(node.kind, value)

    def _build(self, tree: exp.Expression) -> Node:
        t = type(tree)
        if t is exp.Paren:
            return self._node(tree.this)
        if t is exp.Column:
            return self._column(tree)
        if t is exp.Literal or t is exp.Boolean:
            return _literal(tree)
        if t is exp.Neg:
            a = self._numeric(tree.this)
            return Node(a.kind, _strict1(a, pc.negate_checked if a.kind == INT else pc.negate))
        if t is exp.EQ or t is exp.NEQ:
            return _equality(self._node(tree.this), self._node(tree.expression), t is exp.NEQ)
        if t in _ORDER:
            return _order(self._node(tree.this), self._node(tree.expression), _ORDER[t])
        if t is exp.And or t is exp.Or:
            a, b = self._boolean(tree.this), self._boolean(tree.expression)
            fn = pc.and_ if t is exp.And else pc.or_
            return Node(BOOL, lambda batch: fn(a.run(batch), b.run(batch)))
        if t is exp.Not:
            a = self._boolean(tree.this)
            return Node(BOOL, lambda batch: pc.invert(a.run(batch)))
        if t in (exp.Add, exp.Sub, exp.Mul):
            return _arithmetic(t, self._node(tree.this), self._node(tree.expression))
        if t is exp.Div:
            return _divide(self._numeric(tree.this), self._numeric(tree.expression))
        if t is exp.Mod:
            return _modulo(self._numeric(tree.this), self._numeric(tree.expression))
        return self._function(tree)

    def _function(self, tree: exp.Expression) -> Node:
        t = type(tree)
        if t in (exp.Min, exp.Max, exp.Greatest, exp.Least):
            args = [self._numeric(a) for a in [tree.this, *tree.expressions] if a is not None]
            return _extreme(args, pc.less if t in (exp.Min, exp.Least) else pc.greater)
        if t is exp.Abs:
            a = self._numeric(tree.this)
            return Node(a.kind, _strict1(a, pc.abs_checked if a.kind == INT else pc.abs))
        if t in (exp.Floor, exp.Ceil, exp.Round):
            if any(v is not None for k, v in tree.args.items() if k != "this"):
                raise Unsupported(f"{tree.sql()!r}")
            return _to_whole(self._numeric(tree.this), t)
        if t is exp.Cast:
            return _cast(self._node(tree.this), tree.to.this)
        if t is exp.Concat:
            return _concat([self._node(a) for a in tree.expressions])
        if t is exp.Is and isinstance(tree.expression, exp.Null):
            a = self._node(tree.this)
            if not a.nullable:
                return Node(BOOL, lambda batch: pa.scalar(False))
            return Node(BOOL, lambda batch: pc.is_null(a.run(batch)))
        if t is exp.In and not any(tree.args.get(k) for k in ("query", "unnest", "field")) and tree.expressions:
            a = self._node(tree.this)
            tests = [_equality(a, self._node(e), False) for e in tree.expressions]
            return Node(BOOL, lambda batch: _any_of([test.run(batch) for test in tests]))
        if t is exp.Between:
            a = self._node(tree.this)
            low = _order(self._node(tree.args["low"]), a, pc.less_equal)
            high = _order(a, self._node(tree.args["high"]), pc.less_equal)
            return Node(BOOL, lambda batch: pc.and_(low.run(batch), high.run(batch)))
        if t is exp.Like:
            return _like(self._node(tree.this), tree.expression)
        raise Unsupported(f"{tree.sql()!r} ({t.__name__}) has no columnar translation")

    def _column(self, tree: exp.Column) -> Node:
        if tree.table or tree.name not in self._index:
            raise Unsupported(f"field reference {tree.sql()!r}")
        i, ftype = self._index[tree.name]
        return Node(kind_of(ftype), lambda batch: batch.column(i), nullable=True)

    def _numeric(self, tree: exp.Expression) -> Node:
        node = self._node(tree)
        if node.kind not in (INT, FLOAT):
            raise Unsupported(f"{tree.sql()!r} is not a number here")
        return node

    def _boolean(self, tree: exp.Expression) -> Node:
        """An operand of and/or/not: only comparisons and logic (Python's and/or return an operand's value)."""
        node = self._node(tree)
        if node.kind != BOOL:
            raise Unsupported(f"{tree.sql()!r} is not a comparison")
        return node


# -- evaluation helpers (per batch) -----------------------------------------------------


def _evaluated(run: Run, batch: pa.RecordBatch) -> pa.Array:
    """``run`` on ``batch`` as an array of the batch's length; pyarrow's refusals become :class:`Fallback`."""
    try:
        value = run(batch)
    except ARROW_ERRORS as exc:
        raise Fallback(str(exc)) from None
    if isinstance(value, pa.Scalar):
        return pa.repeat(value, batch.num_rows)
    return value


def _no_nulls(value: Value) -> Value:
    if value.null_count if isinstance(value, pa.Array) else not value.is_valid:
        raise Fallback("a null where the row path would fail on None")
    return value


def _strict(node: Node, batch: pa.RecordBatch) -> Value:
    value = node.run(batch)
    return _no_nulls(value) if node.nullable else value


def _strict1(a: Node, fn: Callable[[Value], Value]) -> Run:
    return lambda batch: fn(_strict(a, batch))


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


def _holds(value: Value) -> bool:
    """Whether a boolean array (or scalar) is true anywhere."""
    if isinstance(value, pa.Scalar):
        return bool(value.as_py())
    return bool(pc.any(value).as_py())


def _exact_in_double(value: Value) -> Value:
    """An int operand that becomes a double exactly (the row path's int/int division is correctly rounded)."""
    if isinstance(value, pa.Scalar):
        if abs(value.as_py()) > _EXACT_IN_DOUBLE:
            raise Fallback("an int beyond 2**53 in a division")
        return pa.scalar(float(value.as_py()), pa.float64())
    if _holds(pc.greater(pc.abs_checked(value), _EXACT_IN_DOUBLE_SCALAR)):
        raise Fallback("an int beyond 2**53 in a division")
    return value.cast(pa.float64())


_EXACT_IN_DOUBLE_SCALAR = pa.scalar(_EXACT_IN_DOUBLE, pa.int64())


def _operand(node: Node, convert: Callable[[Value], Value]) -> Run:
    """``batch -> convert(value)`` of a strict operand; a constant's conversion done once, now."""
    if node.constant:
        value = convert(node.run(None))  # type: ignore[arg-type]
        return lambda batch: value
    return lambda batch: convert(_strict(node, batch))


def _truth(node: Node) -> Run:
    """Python's truth of each row value as a non-null mask (None is false, nan is true)."""
    if node.kind == BOOL:
        return node.run
    if node.kind == STR:
        test: Callable[[Value], Value] = lambda v: pc.greater(pc.utf8_length(v), 0)  # noqa: E731
    else:
        test = lambda v: pc.not_equal(v, 0)  # noqa: E731
    if not node.nullable:
        return lambda batch: test(node.run(batch))
    return lambda batch: pc.fill_null(test(node.run(batch)), False)


def _any_of(masks: list[Value]) -> Value:
    out = masks[0]
    for m in masks[1:]:
        out = pc.or_(out, m)
    return out


# -- translations ----------------------------------------------------------------------


def _constant(kind: str, value: Value) -> Node:
    return Node(kind, lambda batch: value, constant=True)


def _literal(tree: exp.Expression) -> Node:
    if isinstance(tree, exp.Boolean):
        return _constant(BOOL, pa.scalar(bool(tree.this)))
    if tree.is_string:
        return _constant(STR, pa.scalar(tree.this, pa.string()))
    if tree.this.lstrip("-").isdigit():
        if not -(2**63) <= int(tree.this) < 2**63:
            raise Unsupported(f"integer literal {tree.this} beyond int64")
        return _constant(INT, pa.scalar(int(tree.this), pa.int64()))
    return _constant(FLOAT, pa.scalar(float(tree.this), pa.float64()))


def _comparable(a: Node, b: Node) -> None:
    numeric = (INT, FLOAT)
    if not (a.kind == b.kind == STR or (a.kind in numeric and b.kind in numeric) or a.kind == b.kind == BOOL):
        raise Unsupported(f"a comparison of {a.kind} with {b.kind}")


def _equality(a: Node, b: Node, negate: bool) -> Node:
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


def _order(a: Node, b: Node, fn: Callable[[Value, Value], Value]) -> Node:
    _comparable(a, b)
    if a.kind == BOOL:
        raise Unsupported("an ordering of booleans")
    return Node(BOOL, lambda batch: fn(_strict(a, batch), _strict(b, batch)))


def _arithmetic(t: type, a: Node, b: Node) -> Node:
    if t is exp.Add and a.kind == b.kind == STR:
        return Node(STR, lambda batch: pc.binary_join_element_wise(_strict(a, batch), _strict(b, batch), ""))
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


def _nonzero(divisor: Value) -> Value:
    if _holds(pc.equal(divisor, _ZERO[pa.types.is_floating(divisor.type)])):
        raise Fallback("a zero divisor")
    return divisor


_ZERO = (pa.scalar(0, pa.int64()), pa.scalar(0.0, pa.float64()))


def _divisor(b: Node, kind: str, convert: Callable[[Value], Value] = lambda v: v) -> Run:
    """``b`` widened, checked for a zero and converted: per batch, or once for a constant (which cannot change)."""
    if b.constant:
        try:
            value = convert(_nonzero(_wide(b.run(None), kind)))  # type: ignore[arg-type]
            return lambda batch: value
        except Fallback:
            pass  # a zero (or inexact) constant divisor: every batch goes the row path
    return lambda batch: convert(_nonzero(_wide(_strict(b, batch), kind)))


def _divide(a: Node, b: Node) -> Node:
    """``/``: true division, a double; int by int is correctly rounded in Python, so both must be exact doubles."""
    if a.kind == b.kind == INT:
        x = _operand(a, lambda v: _exact_in_double(_wide(v, INT)))
        y = _divisor(b, INT, _exact_in_double)
    else:  # an int beside a double rounds to one first
        x = _operand(a, lambda v: _double(v, a.kind))
        y = _divisor(b, b.kind, lambda v: _double(v, b.kind))
    return Node(FLOAT, lambda batch: pc.divide(x(batch), y(batch)))


def _modulo(a: Node, b: Node) -> Node:
    """``%`` on ints: C's remainder (the dividend's sign), ``a - trunc(a / b) * b``; on doubles (fmod) unsupported."""
    if not a.kind == b.kind == INT:
        raise Unsupported("% of doubles (fmod)")

    divisor = _divisor(b, INT)

    def run(batch: pa.RecordBatch) -> Value:
        x, y = _wide(_strict(a, batch), INT), divisor(batch)
        return pc.subtract_checked(x, pc.multiply_checked(pc.divide_checked(x, y), y))  # int division truncates
    return Node(INT, run)


def _extreme(args: list[Node], better: Callable[[Value, Value], Value]) -> Node:
    """min/max as Python's: the first argument unless a later one is strictly less (greater); nan stays put."""
    if len(args) == 1:
        return args[0]
    if len({a.kind for a in args}) != 1:
        raise Unsupported("min/max of ints and doubles (the row value's type depends on the row)")

    def run(batch: pa.RecordBatch) -> Value:
        best = _strict(args[0], batch)
        for arg in args[1:]:
            value = _strict(arg, batch)
            best = pc.if_else(better(value, best), value, best)
        return best
    return Node(args[0].kind, run)


def _to_whole(a: Node, t: type) -> Node:
    """floor/ceil/round: an int stays; a double must be finite (Python raises otherwise) and fit int64."""
    if a.kind == INT:
        return a
    fn = {exp.Floor: pc.floor, exp.Ceil: pc.ceil,
          exp.Round: lambda v: pc.round(v, 0, "half_towards_infinity")}[t]  # SQL: halves away from zero
    return Node(INT, lambda batch: fn(_finite(_strict(a, batch))).cast(pa.int64()))


def _finite(value: Value) -> Value:
    if _holds(pc.invert(pc.is_finite(value))):
        raise Fallback("inf or nan where Python makes an int")
    return value


def _cast(a: Node, target: Any) -> Node:
    if target in _INT_CASTS:  # int(x): a double truncates toward zero
        if a.kind == INT:
            return a
        if a.kind == FLOAT:
            return Node(INT, lambda batch: pc.trunc(_finite(_strict(a, batch))).cast(pa.int64()))
        if a.kind == BOOL:
            return Node(INT, lambda batch: a.run(batch).cast(pa.int64()))
        raise Unsupported("a cast of text to int")
    if target in _STR_CASTS:  # str(x): ints print alike; doubles and booleans do not
        if a.kind == STR:
            return a
        if a.kind == INT:
            return Node(STR, _strict1(a, lambda v: v.cast(pa.string())))
        raise Unsupported(f"a cast of {a.kind} to text")
    if a.kind == FLOAT:
        return a
    if a.kind in (INT, BOOL):  # float(int) rounds to nearest, as an unchecked cast does
        return Node(FLOAT, _strict1(a, lambda v: pc.cast(v, pa.float64(), safe=False)))
    raise Unsupported("a cast of text to double")


def _concat(parts: list[Node]) -> Node:
    if not parts:
        empty = pa.scalar("", pa.string())
        return Node(STR, lambda batch: empty)
    for p in parts:
        if p.kind not in (STR, INT):
            raise Unsupported(f"concat of a {p.kind} (Python and Arrow print it differently)")

    def run(batch: pa.RecordBatch) -> Value:
        texts = [_strict(p, batch) for p in parts]
        texts = [v if p.kind == STR else v.cast(pa.string()) for p, v in zip(parts, texts)]
        return texts[0] if len(texts) == 1 else pc.binary_join_element_wise(*texts, "")
    return Node(STR, run)


def _like(a: Node, pattern: exp.Expression) -> Node:
    """LIKE with a literal pattern, as the row path's anchored regex (``%`` any run, ``_`` one character,
    no escape character)."""
    if a.kind != STR or not (isinstance(pattern, exp.Literal) and pattern.is_string):
        raise Unsupported("LIKE of a non-string or with a computed pattern")
    regex = "(?s)\\A" + "".join(
        ".*" if ch == "%" else "." if ch == "_" else "\\" + ch if ch in _REGEX_SPECIAL else ch
        for ch in pattern.this) + "\\z"
    return Node(BOOL, _strict1(a, lambda v: pc.match_substring_regex(v, regex)))


def _coerced(node: Node, target: str) -> Node:
    """The row path's ``coerce``: a value converted to its field's kind (``1=1`` is int 1); None stays None."""
    if node.kind == target:
        return node
    if target == INT and node.kind == BOOL:
        return Node(INT, lambda batch: node.run(batch).cast(pa.int64()))
    if target == INT and node.kind == FLOAT:  # int(x) truncates; int(inf) raises
        return Node(INT, lambda batch: pc.trunc(_finite(node.run(batch))).cast(pa.int64()), node.nullable)
    if target == FLOAT and node.kind in (INT, BOOL):
        return Node(FLOAT, lambda batch: pc.cast(node.run(batch), pa.float64(), safe=False), node.nullable)
    if target == STR and node.kind == INT:
        return Node(STR, lambda batch: node.run(batch).cast(pa.string()), node.nullable)
    raise Unsupported(f"a {node.kind} value in a {target} field")


def _as_arrow_type(column: pa.Array, want: pa.DataType) -> pa.Array:
    """``column`` in its out field's Arrow type, when that keeps every value as the row path's tuple has it."""
    if column.type == want:
        return column
    try:
        out = column.cast(want)  # a checked cast: an int out of the field's range is refused
    except ARROW_ERRORS:
        raise Fallback(f"a value out of the range of {want}") from None
    if want == pa.float32():  # the row path keeps the double; only a float32 value round-trips
        back = out.cast(pa.float64())
        same = pc.or_kleene(pc.equal(back, column), pc.and_(pc.is_nan(back), pc.is_nan(column)))
        if not pc.all(pc.fill_null(same, True)).as_py():
            raise Fallback("a double that a single field would round")
    return out
