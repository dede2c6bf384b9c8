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

Where things are
    This module is the entry: :class:`Translator` walks a box's tree once,
    folds what reads no field into a constant, and turns the result into a
    predicate's mask or a map field's column of its Arrow type.  What each
    operation is on columns, and why it is exact, is :mod:`.arrow_ops`; the
    :class:`~.arrow_nodes.Node` and the two refusals both sides use are
    :mod:`.arrow_nodes` (re-exported here: callers catch
    ``arrow_exprs.Unsupported`` and ``arrow_exprs.Fallback``).

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
boreas.node.operators.arrow_nodes.Fallback: a zero divisor
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import expressions as exp

from boreas.catalog.expressions import Scope, infer_type, parse_expression
from boreas.catalog.model import FieldType, Schema
from boreas.node.compile import BOOL, FLOAT, INT, STR, kind_of
from boreas.wire.columns import ARROW_TYPES

from . import arrow_ops
from .arrow_nodes import ARROW_ERRORS, Fallback, Node, Run, Unsupported, Value, constant, finite, strict1

__all__ = ["Fallback", "Translator", "Unsupported"]


class Translator:
    """Translates the expressions of one box over one in stream's schema (a filter's or a map's)."""

    def __init__(self, schema: Schema):
        self.schema = schema
        self.scope = Scope.single(schema)
        self._index = {f.name: (i, f.type) for i, f in enumerate(schema.fields)}
        self._nullable = {f.name for f in schema.fields if f.nullable}

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
        if ftype is None:  # an array out field: the array field itself, passed on whole
            at = self.position(tree.this if isinstance(tree, exp.Paren) else tree)
            return lambda batch: batch.column(at)
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
        return constant(node.kind, value)

    def _build(self, tree: exp.Expression) -> Node:
        t = type(tree)
        if t is exp.Paren:
            return self._node(tree.this)
        if t is exp.Column:
            return self._column(tree)
        if t is exp.Literal or t is exp.Boolean:
            return arrow_ops.literal(tree)
        if t is exp.Neg:
            a = self._numeric(tree.this)
            return Node(a.kind, strict1(a, pc.negate_checked if a.kind == INT else pc.negate))
        if t is exp.EQ or t is exp.NEQ:
            return arrow_ops.equality(self._node(tree.this), self._node(tree.expression), t is exp.NEQ)
        if t in arrow_ops.ORDER:
            return arrow_ops.order(self._node(tree.this), self._node(tree.expression), arrow_ops.ORDER[t])
        if t is exp.And or t is exp.Or:
            a, b = self._boolean(tree.this), self._boolean(tree.expression)
            fn = pc.and_ if t is exp.And else pc.or_
            return Node(BOOL, lambda batch: fn(a.run(batch), b.run(batch)))
        if t is exp.Not:
            a = self._boolean(tree.this)
            return Node(BOOL, lambda batch: pc.invert(a.run(batch)))
        if t in (exp.Add, exp.Sub, exp.Mul):
            return arrow_ops.arithmetic(t, self._node(tree.this), self._node(tree.expression))
        if t is exp.Div:
            return arrow_ops.divide(self._numeric(tree.this), self._numeric(tree.expression))
        if t is exp.Mod:
            return arrow_ops.modulo(self._numeric(tree.this), self._numeric(tree.expression))
        return self._function(tree)

    def _function(self, tree: exp.Expression) -> Node:
        t = type(tree)
        if t in (exp.Min, exp.Max, exp.Greatest, exp.Least):
            args = [self._numeric(a) for a in [tree.this, *tree.expressions] if a is not None]
            return arrow_ops.extreme(args, pc.less if t in (exp.Min, exp.Least) else pc.greater)
        if t is exp.Abs:
            a = self._numeric(tree.this)
            return Node(a.kind, strict1(a, pc.abs_checked if a.kind == INT else pc.abs))
        if t in (exp.Floor, exp.Ceil, exp.Round):
            if any(v is not None for k, v in tree.args.items() if k != "this"):
                raise Unsupported(f"{tree.sql()!r}")
            return arrow_ops.to_whole(self._numeric(tree.this), t)
        if t is exp.Cast:
            return arrow_ops.cast(self._node(tree.this), tree.to.this)
        if t is exp.Concat:
            return arrow_ops.concat([self._node(a) for a in tree.expressions])
        if t is exp.Is and isinstance(tree.expression, exp.Null):
            a = self._node(tree.this)
            if not a.nullable:
                return Node(BOOL, lambda batch: pa.scalar(False))
            return Node(BOOL, lambda batch: pc.is_null(a.run(batch)))
        if t is exp.In and not any(tree.args.get(k) for k in ("query", "unnest", "field")) and tree.expressions:
            a = self._node(tree.this)
            tests = [arrow_ops.equality(a, self._node(e), False) for e in tree.expressions]
            return Node(BOOL, lambda batch: _any_of([test.run(batch) for test in tests]))
        if t is exp.Between:
            a = self._node(tree.this)
            low = arrow_ops.order(self._node(tree.args["low"]), a, pc.less_equal)
            high = arrow_ops.order(a, self._node(tree.args["high"]), pc.less_equal)
            return Node(BOOL, lambda batch: pc.and_(low.run(batch), high.run(batch)))
        if t is exp.Like:
            return arrow_ops.like(self._node(tree.this), tree.expression)
        raise Unsupported(f"{tree.sql()!r} ({t.__name__}) has no columnar translation")

    def position(self, tree: exp.Expression) -> int:
        """The batch's column index of a field reference (Unsupported: not one)."""
        if not isinstance(tree, exp.Column) or tree.table or tree.name not in self._index:
            raise Unsupported(f"{tree.sql()!r} is not a field of the in stream")
        return self._index[tree.name][0]

    def _column(self, tree: exp.Column) -> Node:
        if tree.table or tree.name not in self._index:
            raise Unsupported(f"field reference {tree.sql()!r}")
        if tree.name in self._nullable:  # SQL's three-valued logic is the row path's (node/null_logic.py)
            raise Unsupported(f"field {tree.name!r} is nullable")
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


# -- from a node to a mask or a column (per batch) -------------------------------------------


def _evaluated(run: Run, batch: pa.RecordBatch) -> pa.Array:
    """``run`` on ``batch`` as an array of the batch's length; pyarrow's refusals become :class:`Fallback`."""
    try:
        value = run(batch)
    except ARROW_ERRORS as exc:
        raise Fallback(str(exc)) from None
    if isinstance(value, pa.Scalar):
        return pa.repeat(value, batch.num_rows)
    return value


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


def _coerced(node: Node, target: str) -> Node:
    """The row path's ``coerce``: a value converted to its field's kind (``1=1`` is int 1); None stays None."""
    if node.kind == target:
        return node
    if target == INT and node.kind == BOOL:
        return Node(INT, lambda batch: node.run(batch).cast(pa.int64()))
    if target == INT and node.kind == FLOAT:  # int(x) truncates; int(inf) raises
        return Node(INT, lambda batch: pc.trunc(finite(node.run(batch))).cast(pa.int64()), node.nullable)
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
