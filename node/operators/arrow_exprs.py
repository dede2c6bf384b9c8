"""Box expressions evaluated on Arrow columns with ``pyarrow.compute``, translated once per box.

:mod:`boreas.node.compile` turns an expression into Python source that runs
per row.  A batch that arrived as Arrow columns (a
:class:`~boreas.wire.columns.Columns`) would have to be turned into rows
first, which costs more than the expression itself; this module translates
the same sqlglot tree into a function of the whole ``RecordBatch`` instead,
so a filter or map box touches no row in the interpreter.

Exact, row by row
    The row path is the definition of the semantics (Python's ``int`` never
    overflows, ``x / 0`` makes the whole expression None, ``-7 % 3`` is
    ``-1``).  The columns give, for every row, exactly the value the row
    path would, in one of three ways:

    * on columns -- every row an operation does not flag;
    * by the row code, for the flagged rows only: an operation flags the rows
      on which Python would fail or might compute otherwise (a zero divisor,
      a None where Python raises, an int64 overflow, an int beyond 2**53
      beside a double, ``sqrt(-1)``, text that is not a plain number: see
      :mod:`.arrow_nodes`), and the entry points compute those rows with
      the box's own compiled row code and put the values in place
      (``per_row=True``: every box's translator since branch colJT; over pairs
      the row code reads the pair's two rows, :meth:`Translator.row_builder`);
    * :class:`Fallback` at run time -- flagged rows with no row code at hand
      (``per_row=False``), or a value the out field's Arrow type cannot hold
      as the row path's tuple does (an int beyond the field's range, a double
      a ``single`` would round): that batch goes the row path;
    * :class:`Unsupported` at build time -- an expression this module does
      not translate: the box keeps its row path for every batch.

    Flags are conservative (a divisor behind a short-circuiting ``and`` is
    flagged although Python never divides by it); the row code then gives
    the row its value, so that costs time, not exactness.

Nullable fields
    With ``nullable=True`` a field declared ``nullable`` is read too, and a
    subtree that reads one is translated with SQL's three-valued logic
    exactly where the row code uses :mod:`boreas.node.null_logic` (the same
    test, :meth:`Translator._three`): NULL in, NULL out for comparisons,
    arithmetic, ``between``, ``in``, ``like``; Kleene's ``and``/``or``/``not``.

Kinds
    Every translated node has a static kind ('int', 'float', 'str', 'bool':
    what a row value of it is in Python).  Ints are widened to int64 and
    floats to float64 before arithmetic, as Python computes in int and
    double; an expression whose row value could be of either kind
    (``min(int_field, double_field)``) is kind 'num' (:mod:`.arrow_mixed`).

Where things are
    This module is the entry: :class:`Translator` walks a box's tree once,
    folds what reads no field into a constant, and turns the result into a
    predicate's mask or a map field's column of its Arrow type.  Each
    operation on columns, and why it is exact, is :mod:`.arrow_ops` (the math
    functions and casts of text :mod:`.arrow_math`, truth and
    ``and``/``or``/``not``/``coalesce`` :mod:`.arrow_logic`); the nodes, the
    :class:`~.arrow_nodes.Eval` and the two refusals are :mod:`.arrow_nodes`
    (re-exported: callers catch ``arrow_exprs.Unsupported``/``Fallback``).

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
boreas.node.operators.arrow_nodes.Fallback: 1 row(s) the columns cannot give exactly, and no row code here
>>> Translator(s, per_row=True).value("c / n", FieldType.DOUBLE)(batch).to_pylist()
[-33.333333333333336, None]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import expressions as exp

from boreas.catalog.expressions import Scope, infer_type, parse_expression
from boreas.catalog.model import FieldType, Schema
from boreas.node.compile import BOOL, FLOAT, INT, STR, CodeBuilder, kind_of
from boreas.wire.columns import ARROW_TYPES, Columns

from . import arrow_logic, arrow_math, arrow_mixed, arrow_ops, arrow_text
from .arrow_nodes import ARROW_ERRORS, NUM, Eval, Fallback, Node, Run, Unsupported, as_int64, constant

__all__ = ["Fallback", "Translator", "Unsupported"]

_MATH = (exp.Sqrt, exp.Ln, exp.Exp)


class Translator:
    """Translates the expressions of one box over one in stream's schema (a filter's, a map's, an aggregate's
    arguments, a table insert's values; :class:`~.join_columns.PairTranslator`: over pairs of two schemas' rows).

    ``per_row``: flagged rows get the row code's values (else the batch raises :class:`Fallback`), and the
    operations added with it translate (math functions, ``%`` of doubles, casts of text, ``coalesce``, ``null``,
    ``is true``, ``and``/``or``/``not`` of non-comparisons: else :class:`Unsupported`, as before colJT);
    ``nullable``: fields declared nullable are read, with the row code's three-valued logic (else
    :class:`Unsupported`).
    """

    def __init__(self, schema: Schema, *, per_row: bool = False, nullable: bool = False):
        self.schema = schema
        self.scope = Scope.single(schema)
        self.per_row = per_row
        self.nullable = nullable
        self._index = {f.name: (i, f.type) for i, f in enumerate(schema.fields)}
        self._nullable = {f.name for f in schema.fields if f.nullable} if not nullable else set()

    def predicate(self, text: str) -> Callable[[pa.RecordBatch], pa.BooleanArray]:
        """``batch -> mask``: true where the predicate holds (Python truth of the row value; None is false)."""
        tree = parse_expression(text)
        infer_type(tree, self.scope)  # the catalog's checks, as the row path makes them
        truth = arrow_logic.truth(self._node(tree))
        row = _when_needed(lambda: self._row_code(tree, truth=True)) if self.per_row else None

        def run(batch: pa.RecordBatch) -> pa.Array:
            ev = Eval(batch)
            return _patched(_evaluated(truth, ev), ev, row)
        return run

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
        row = _when_needed(lambda: self._row_code(tree, truth=False)) if self.per_row else None

        def run(batch: pa.RecordBatch) -> pa.Array:
            ev = Eval(batch)
            return _as_arrow_type(_patched(_evaluated(node.run, ev), ev, row), arrow_type)
        return run

    def _row_code(self, tree: exp.Expression, truth: bool) -> Callable[[tuple], Any]:
        """The row code of ``tree`` on one batch row, as the box's row path compiles it: the value (None where
        it fails, ``compile_expression``/a table box's ``compiled``) or, with ``truth``, its truth (false where
        it fails: filter.py's loop, a table's ``where``)."""
        builder, bind = self.row_builder()
        value = f"bool({builder.translate(tree).source})" if truth else builder.value(tree).source
        return builder.define(f"def _row(row):\n{bind}    try:\n        return {value}\n"
                              f"    except _ERRORS:\n        return {'False' if truth else 'None'}\n", "_row")

    def row_builder(self) -> tuple[CodeBuilder, str]:
        """The row code's builder over this translator's scope, and the line binding its row variables from
        ``row``, a row of the batches it reads (one in stream's: ``row`` itself)."""
        return CodeBuilder(self.scope, ["row"]), ""

    # -- the tree walk (once per box) ---------------------------------------------------

    def _node(self, tree: exp.Expression) -> Node:
        """The translation of ``tree``; one that reads no field is folded into its value now (a pyarrow call
        on scalars costs far more than one on a column, so ``-90.0`` must not be negated per batch)."""
        node = self._build(tree)
        if node.constant or node.truth_only or tree.find(exp.Column) is not None:
            return node  # (a truth-only value folded would be a bool, its value's kind lost: ``1 and 2.5``)
        ev = Eval(None)
        try:
            value = node.run(ev)
        except ARROW_ERRORS:
            return node  # fails on every row: left to fail per batch, which then goes the row path
        if ev.flagged:
            return node  # flagged on every row: the row code computes each
        return constant(node.kind, value)

    def _extended(self, tree: exp.Expression) -> None:
        """Refuse an operation added with ``per_row`` to a translator without it (the class docstring)."""
        if not self.per_row:
            raise Unsupported(f"{tree.sql()!r}: no columnar translation for this box type")

    def _three(self, tree: exp.Expression) -> bool:
        """Whether the row code translates ``tree`` with three-valued logic: it reads a nullable field
        (:meth:`boreas.node.compile.CodeBuilder._may_be_null`, over this translator's scope)."""
        nullable = {(q, f.name) for q, schema in self.scope.schemas for f in schema.fields if f.nullable}
        if not nullable or isinstance(tree, exp.Column):
            return False
        return any(name == col.name and (not col.table or q == col.table)
                   for col in tree.find_all(exp.Column) for q, name in nullable)

    def _build(self, tree: exp.Expression) -> Node:
        t = type(tree)
        if t is exp.Paren:
            return self._node(tree.this)
        if t is exp.Column:
            return self._column(tree)
        if t is exp.Literal or t is exp.Boolean or t is exp.Null:
            if t is exp.Null:
                self._extended(tree)
            return arrow_ops.literal(tree)
        three = self._three(tree)
        if t is exp.Neg:
            return arrow_ops.negate(self._numeric(tree.this), three)
        if t is exp.EQ or t is exp.NEQ:
            return arrow_ops.equality(self._node(tree.this), self._node(tree.expression), t is exp.NEQ, three)
        if t in arrow_ops.ORDER:
            return arrow_ops.order(self._node(tree.this), self._node(tree.expression), arrow_ops.ORDER[t], three)
        if t is exp.And:
            return arrow_logic.both(*self._operands(tree, tree.this, tree.expression), three)
        if t is exp.Or:
            return arrow_logic.either(*self._operands(tree, tree.this, tree.expression), three)
        if t is exp.Not:
            return arrow_logic.negation(*self._operands(tree, tree.this), three)
        if t in (exp.Add, exp.Sub, exp.Mul):
            return arrow_ops.arithmetic(t, self._node(tree.this), self._node(tree.expression), three)
        if t is exp.Div:
            return arrow_ops.divide(self._numeric(tree.this), self._numeric(tree.expression), three)
        if t is exp.Mod:
            a, b = self._numeric(tree.this), self._numeric(tree.expression)
            if a.kind == b.kind == INT:
                return arrow_ops.modulo(a, b, three)
            self._extended(tree)
            return arrow_math.fmod(a, b, three)
        return self._function(tree, three)

    def _function(self, tree: exp.Expression, three: bool) -> Node:
        t = type(tree)
        if t in (exp.Min, exp.Max, exp.Greatest, exp.Least):
            args = [self._numeric(a) for a in [tree.this, *tree.expressions] if a is not None]
            return arrow_ops.extreme(args, pc.less if t in (exp.Min, exp.Least) else pc.greater)
        if t is exp.Abs:
            return arrow_ops.absolute(self._numeric(tree.this))
        if t in _MATH or t is exp.Log or t is exp.Pow or t is exp.Coalesce or (
                t is exp.Is and isinstance(tree.expression, exp.Boolean)):
            self._extended(tree)
        if t in _MATH or (t is exp.Log and tree.expression is None):
            return arrow_math.math1(t, self._numeric(tree.this))
        if t is exp.Log:  # log(base, x), as the row code's _logb(this, expression)
            return arrow_math.log_base(self._numeric(tree.this), self._numeric(tree.expression))
        if t is exp.Pow:
            return arrow_math.power(self._numeric(tree.this), self._numeric(tree.expression))
        if t in (exp.Floor, exp.Ceil, exp.Round):
            if any(v is not None for k, v in tree.args.items() if k != "this"):
                raise Unsupported(f"{tree.sql()!r}")
            return arrow_ops.to_whole(self._numeric(tree.this), t)
        if t is exp.Cast:
            a, target = self._node(tree.this), tree.to.this
            if a.kind == STR and not a.truth_only and target not in arrow_ops.STR_CASTS:
                self._extended(tree)
                return (arrow_math.text_to_int if target in arrow_ops.INT_CASTS else arrow_math.text_to_float)(a)
            return arrow_ops.cast(a, target)
        if t is exp.Concat:
            return arrow_ops.concat([self._node(a) for a in tree.expressions])
        if t is exp.Coalesce:
            return arrow_logic.coalesce([self._node(a) for a in [tree.this, *tree.expressions]])
        if t is exp.Is and isinstance(tree.expression, exp.Null):
            return arrow_logic.is_null(self._node(tree.this))
        if t is exp.Is and isinstance(tree.expression, exp.Boolean):
            return arrow_logic.is_boolean(self._node(tree.this), bool(tree.expression.this))
        if t is exp.In and not any(tree.args.get(k) for k in ("query", "unnest", "field")) and tree.expressions:
            a = self._node(tree.this)
            tests = [arrow_ops.equality(a, self._node(e), False, three) for e in tree.expressions]
            any_of = pc.or_kleene if three else pc.or_
            if a.kind in (FLOAT, NUM) and not three:  # Python's ``in`` tests identity first: a NaN is in a tuple
                return arrow_ops.nan_flagged(a, Node(BOOL, lambda ev: _any_of([t.run(ev) for t in tests], any_of)))
            return Node(BOOL, lambda ev: _any_of([test.run(ev) for test in tests], any_of), nullable=three)
        if t is exp.Between:
            a = self._node(tree.this)
            low = arrow_ops.order(self._node(tree.args["low"]), a, pc.less_equal, three)
            high = arrow_ops.order(a, self._node(tree.args["high"]), pc.less_equal, three)
            if three:  # _and3 of both comparisons
                return Node(BOOL, lambda ev: pc.and_kleene(low.run(ev), high.run(ev)), nullable=True)
            # Python's chained low <= a <= high skips the second comparison where the first is false
            return Node(BOOL, lambda ev: pc.and_(low.run(ev), ev.guarded(high.run)))
        if t is exp.Like:
            return arrow_text.like(self._node(tree.this), self._node(tree.expression), three)
        raise Unsupported(f"{tree.sql()!r} ({t.__name__}) has no columnar translation")

    def position(self, tree: exp.Expression) -> int:
        """The batch's column index of a field reference (Unsupported: not one)."""
        if not isinstance(tree, exp.Column) or tree.table or tree.name not in self._index:
            raise Unsupported(f"{tree.sql()!r} is not a field of the in stream")
        return self._index[tree.name][0]

    def _column(self, tree: exp.Column) -> Node:
        if tree.table or tree.name not in self._index:
            raise Unsupported(f"field reference {tree.sql()!r}")
        if tree.name in self._nullable:  # this translator's caller does not take three-valued logic
            raise Unsupported(f"field {tree.name!r} is nullable")
        i, ftype = self._index[tree.name]
        return Node(kind_of(ftype), lambda ev: ev.column(i), nullable=True)

    def _operands(self, tree: exp.Expression, *operands: exp.Expression) -> list[Node]:
        """The operands of ``and``/``or``/``not``; other than comparisons and logic only with ``per_row``."""
        nodes = [self._node(o) for o in operands]
        if any(n.kind != BOOL or n.truth_only for n in nodes):
            self._extended(tree)
        return nodes

    def _numeric(self, tree: exp.Expression) -> Node:
        node = self._node(tree)
        if node.kind not in (INT, FLOAT) or node.truth_only:
            raise Unsupported(f"{tree.sql()!r} is not a number here")
        return node


# -- from a node to a mask or a column (per batch) -------------------------------------------


def _evaluated(run: Run, ev: Eval) -> pa.Array:
    """``run`` on ``ev`` as an array of the batch's length; pyarrow's refusals become :class:`Fallback`."""
    try:
        value = run(ev)
    except ARROW_ERRORS as exc:
        raise Fallback(str(exc)) from None
    assert ev.batch is not None
    if isinstance(value, pa.Scalar):
        return pa.repeat(value, ev.batch.num_rows)
    return value


def _patched(column: pa.Array, ev: Eval, row: Callable[[tuple], Any] | None) -> pa.Array:
    """``column`` with its failed rows false (a mask) or None (a field), the row path's rule, and its flagged
    rows computed by the row code ``row`` (:class:`Fallback`: none at hand)."""
    if not ev.marked:
        return column
    try:
        redo = ev.redo()
        failed = ev.failed(redo)
    except ARROW_ERRORS as exc:
        raise Fallback(str(exc)) from None
    if (redo is not None or failed is not None) and row is None:
        count = sum(m.true_count for m in (redo, failed) if m is not None)
        raise Fallback(f"{count} row(s) the columns cannot give exactly, and no row code here")
    if failed is not None:
        column = pc.if_else(failed, pa.scalar(False if column.type == pa.bool_() else None, column.type), column)
    if redo is None:
        return column
    assert ev.batch is not None
    rows = Columns(ev.batch.filter(redo)).rows()
    try:
        values = pa.array([row(r) for r in rows], type=column.type)
    except (OverflowError, TypeError, *ARROW_ERRORS):
        raise Fallback("a row value the column's type cannot hold (a Python int beyond int64)") from None
    return pc.replace_with_mask(column, redo, values)


def _when_needed(make: Callable[[], Callable[[tuple], Any]]) -> Callable[[tuple], Any]:
    """The row code ``make()`` compiles, compiled the first time a row needs it (most boxes never meet a
    flagged row, and a node deploying thousands of boxes should not compile each one twice)."""
    made: list[Callable[[tuple], Any]] = []

    def row(values: tuple) -> Any:
        if not made:
            made.append(make())
        return made[0](values)
    return row


def _any_of(masks: list[Any], fn: Callable[[Any, Any], Any]) -> Any:
    out = masks[0]
    for m in masks[1:]:
        out = fn(out, m)
    return out


def _coerced(node: Node, target: str) -> Node:
    """The row path's ``coerce``: a value converted to its field's kind (``1=1`` is int 1); None stays None."""
    if node.truth_only or node.kind == "null":
        raise Unsupported(f"a value whose kind depends on the row, in a {target} field")
    if node.kind == target:
        return node
    if node.kind == NUM:  # an int on some rows, a double on others (min(i, d), coalesce(i, d))
        return arrow_mixed.coerced(node, target)
    if target == INT and node.kind == BOOL:
        return Node(INT, lambda ev: node.run(ev).cast(pa.int64()), node.nullable)
    if target == INT and node.kind == FLOAT:  # int(x) truncates; int(inf) raises
        return Node(INT, lambda ev: as_int64(pc.trunc(node.run(ev)), ev), node.nullable)
    if target == FLOAT and node.kind in (INT, BOOL):
        return Node(FLOAT, lambda ev: pc.cast(node.run(ev), pa.float64(), safe=False), node.nullable)
    if target == STR and node.kind == INT:
        return Node(STR, lambda ev: node.run(ev).cast(pa.string()), node.nullable)
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
