"""``filter``: route each tuple to the out port of its first true predicate.

Borealis semantics (FilterQBox): predicates ``expression.0``,
``expression.1``, ... are tried in order and a tuple goes to out port N of
the *first* one that holds, and to no other.  With ``pass-on-false-port``
set, tuples that match none go to one extra, last out port; otherwise they
are dropped.  A predicate that fails on a tuple (division by zero, ...) is
false for it.

The whole batch loop is generated and compiled once per expression shape,
with every predicate inlined, so a batch costs one Python loop and no
per-tuple calls; boxes whose predicates differ only in their numbers share
that code, each with its own numbers (:mod:`boreas.node.compile_shapes`: a
node building 10,000 such filters compiles one).  The
common box -- one predicate, no false port -- runs as one list
comprehension (~25% less per tuple than the loop's ``append``); a predicate
that fails anywhere in the batch sends the whole batch through the loop
instead, which gives the same result because predicates have no side
effects (expressions are pure: no clock, no randomness).

A batch that arrives as Arrow columns is filtered as columns: each predicate
is translated once (:mod:`.arrow_exprs`) into a mask of the batch, and each
port gets ``batch.filter(mask)``, a :class:`~boreas.wire.columns.Columns`
of its out stream (a batch that passes whole is passed on as it came, with
its IPC bytes).  Rows on which the columns might differ from the row code
above, which is the definition of the semantics (a zero divisor, a None
where Python raises, an int64 overflow, ``sqrt(-1)``), are computed by that
row code alone and put in the mask (:mod:`.arrow_exprs`, "Exact, row by
row"); nullable fields take its three-valued logic.  When a predicate has no
columnar translation the box reads every batch as rows, and a batch the
translation refuses whole (:class:`~.arrow_exprs.Fallback`) goes the row code.

A small Arrow batch costs the columns more than the row code: each pyarrow
call has a fixed cost of several µs, so at 10-100 rows the row code over
``Columns.rows()`` is cheaper, rows out as a row batch's; a batch below the
box's cut-over (:mod:`.size_choice`, from its expressions) goes that way.

A changelog batch (one with weights) is filtered the same way and each row
keeps its weight: the mask filters the weights too, and on the row path
the weight rides along as one more element of the tuple, which no predicate
reads (they read their fields by index).
"""

from __future__ import annotations

from functools import cached_property

import pyarrow as pa
import pyarrow.compute as pc

from boreas.catalog.expressions import ExpressionError, Scope
from boreas.catalog.model import Box, Schema
from boreas.node.compile import CodeBuilder
from boreas.node.compile_shapes import SHARED, Constants, Lifted, SharedCode, factory, lift, schema_key
from boreas.wire.columns import Columns, arrow_schema, weighted

from . import arrow_exprs
from .base import Emitted, Operator, OperatorError
from .size_choice import SizeChoice


class FilterOperator(Operator):
    takes_columns = True  # Columns are filtered as columns (or read as rows when that is not exact)

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema], *, columnar: bool = True,
                 shared: SharedCode = SHARED, sizes: SizeChoice | None = None):
        """``columnar=False``: Arrow batches are read as rows (bench/columnar_operators.py compares the two);
        ``shared``: where the code of each expression shape is kept (``SharedCode(0)``: compiled per box, as
        before shapes were shared: bench/deploy_node.py's peer); ``sizes``: which path takes an Arrow batch
        of each size (:mod:`.size_choice`; by default the box's cut-over)."""
        super().__init__(box, inputs, outputs)
        predicates = self.indexed("expression")
        if not predicates:
            raise self.error("needs parameter 'expression.0'")
        # Same reading as the catalog's (boxtypes.infer_filter), so the port count agrees.
        self.false_port = (box.param("pass-on-false-port") or "0").strip() not in ("0", "false", "")
        self.check_outputs()
        lifted = lift(predicates)
        key = ("filter", lifted.key, schema_key(inputs[0]), self.false_port)
        make = shared.get(key, lambda: _compiled(box.name, predicates, lifted, inputs[0], self.false_port))
        self._batch, self._row_loop = make(*lifted.values)
        self._predicates = predicates
        self._wants_columns = columnar
        self._targets = [arrow_schema(s) for s in outputs]
        if sizes is not None:
            self.sizes = sizes

    @cached_property
    def _masks(self) -> list | None:
        """Each predicate as ``batch -> mask``, made when the first Arrow batch comes (a deployment's boxes
        mostly never see one before they move or go; 0.4 ms a box), None: the row path for every batch."""
        return _column_masks(self.inputs[0], self._predicates) if self._wants_columns else None

    @cached_property
    def sizes(self) -> SizeChoice:
        """The box's cut-over (:mod:`.size_choice`), made when the first Arrow batch comes, as :attr:`_masks`."""
        return SizeChoice.of(self._predicates)

    @property
    def columnar(self) -> bool:
        """Whether Arrow batches are filtered as columns (every predicate translates)."""
        return self._masks is not None

    def process(self, port: int, rows: list[tuple] | Columns, now: float) -> Emitted:
        if isinstance(rows, Columns):
            if self._masks is not None:
                try:
                    return self._on_rows(rows) if self.sizes.on_rows(len(rows)) else self._columns(rows)
                except arrow_exprs.Fallback:
                    pass
            return self._on_rows(rows)
        return [(i, out) for i, out in enumerate(self._batch(rows)) if out]

    def _on_rows(self, columns: Columns) -> Emitted:
        """An Arrow batch by the row code (a small one, or one the columns cannot take): rows out, as a row
        batch's (a changelog's: columns with their weights)."""
        if columns.weights is not None:
            return self._weighted(columns)
        return [(i, out) for i, out in enumerate(self._batch(columns.rows())) if out]

    def _weighted(self, columns: Columns) -> Emitted:
        """A changelog batch on the row path: each row with its weight as a last element, split off again."""
        rows = [(*row, w) for row, w in zip(columns.rows(), columns.weight_list())]
        return [(i, weighted([r[:-1] for r in out], [r[-1] for r in out], self.outputs[i]))
                for i, out in enumerate(self._row_loop(rows)) if out]

    def _columns(self, columns: Columns) -> Emitted:
        """Each port's part of the batch: the rows of its first true predicate (and the false port's rest)."""
        batch = columns.batch
        if not batch.num_rows:
            return []
        taken = None
        masks = []
        for mask_of in self._masks:
            mask = mask_of(batch)
            masks.append(mask if taken is None else pc.and_not(mask, taken))
            taken = mask if taken is None else pc.or_(taken, mask)
        if self.false_port:
            masks.append(pc.invert(taken))
        out = []
        for port, mask in enumerate(masks):
            count = mask.true_count
            same = batch.schema.equals(self._targets[port])
            if count == batch.num_rows and same:
                out.append((port, columns))  # the whole batch, as it came (its IPC bytes kept)
            elif count:  # (with their weights; relabelled only where the out stream names its fields otherwise)
                out.append((port, columns.filter(mask, None if same else self._targets[port])))
        return out


def _compiled(label: str, texts: list[str], lifted: Lifted, schema: Schema, false_port: bool):
    """The factory of a filter's row functions for ``lifted``'s key: ``make(*numbers) -> (batch, loop)``.

    The box's own texts are translated first, so a refusal names the box and its expressions as written
    (the shape's placeholders would not); then the shape's trees, with their numbers as parameters."""
    scope = Scope.single(schema)
    try:
        for text in texts:
            CodeBuilder(scope, ["row"]).translate(text)
        builder = CodeBuilder(scope, ["row"], label=f"{label} (shared by its shape)")
        sources = lifted.translated(builder, lambda tree: builder.translate(tree).source)
    except ExpressionError as exc:
        raise OperatorError(f"filter box {label!r}: {exc}") from None
    names = ("_filter_fast", "_filter") if len(sources) == 1 and not false_port else ("_filter", "_filter")
    plain = [builder.translate(tree).source for tree in lifted.trees]  # (the placeholders as constants)
    made = Constants.of(builder, _row_source(plain, false_port), lifted.placeholders, names)
    return made or factory(builder, _row_source(sources, false_port), lifted.parameters, ", ".join(names))


def _row_source(predicates: list[str], false_port: bool) -> str:
    source = _batch_source(predicates, false_port)
    return source + _comprehension_source(predicates[0]) if len(predicates) == 1 and not false_port else source


def _column_masks(schema: Schema, predicates: list[str]) -> list | None:
    """Each predicate as ``batch -> mask`` (:mod:`.arrow_exprs`); None when one has no columnar translation."""
    translator = arrow_exprs.Translator(schema, per_row=True, nullable=True)
    try:
        return [translator.predicate(p) for p in predicates]
    except arrow_exprs.Unsupported:
        return None


def _batch_source(predicates: list[str], false_port: bool) -> str:
    n = len(predicates)
    ports = n + (1 if false_port else 0)
    lines = ["def _filter(rows):"]
    lines += [f"    o{i} = []; a{i} = o{i}.append" for i in range(ports)]
    lines.append("    for row in rows:")
    for i, src in enumerate(predicates):
        last = i == n - 1 and not false_port
        lines += ["        try:", f"            if {src}:", f"                a{i}(row)"]
        if not last:
            lines.append("                continue")
        lines += ["        except _ERRORS:", "            pass"]
    if false_port:
        lines.append(f"        a{n}(row)")
    lines.append("    return (" + "".join(f"o{i}, " for i in range(ports)) + ")")
    return "\n".join(lines) + "\n"


def _comprehension_source(predicate: str) -> str:
    """One predicate, no false port: a comprehension, the loop (``_filter``) when a predicate fails."""
    return (
        "def _filter_fast(rows):\n"
        "    try:\n"
        f"        return ([row for row in rows if {predicate}],)\n"
        "    except _ERRORS:\n"
        "        return _filter(rows)\n"
    )
