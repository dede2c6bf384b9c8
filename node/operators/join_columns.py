"""The join on Arrow columns: a batch joined with the other side's buffer in a few pyarrow calls, not per tuple.

While a batch arrives on one side, the other side's buffer does not change
(only the arriving side's own buffer grows and is trimmed), so the row
path's output for the batch -- for each new tuple in order, every buffered
tuple of the other side, oldest first, whose pair the predicate holds for --
is the set of pairs (i, j), batch row i and buffer row j, where the
predicate holds, ordered by i then j.  :class:`ColumnJoin` computes it so:

1. **candidates**: with an equality of a left and a right field among the
   predicate's top-level ``and`` terms (both ints, or both strings), only
   pairs with equal keys: both key columns are encoded to one set of codes
   (None is a code of its own: ``None == None`` holds in Python), the
   buffer's codes sorted stably, and each batch row's equal range found by
   binary search -- so the pairs come out ordered by i, then j.  Otherwise
   every pair, i-major (in blocks, so memory stays bounded);
2. the candidate pairs as one batch of the left's then the right's columns
   (``take``), the predicate evaluated on it (:mod:`.arrow_exprs`, over
   ``left.x``/``right.y``), and the pairs where it holds kept;
3. the out fields evaluated on those pairs, or, with none, the pairs' left
   and right columns as they are.

Exact or the row path: the translation refuses at build time an expression
it cannot evaluate exactly (:meth:`ColumnJoin.make` says None and the box
keeps its row path, :mod:`.join_rows`); a pair on which Python would fail
or might compute otherwise (a zero divisor, ``sqrt(-1)``, an int64
overflow, text that is no plain number) gets its predicate's and out
fields' values from the box's row code over that pair's two rows
(:meth:`PairTranslator.row_builder`), and nullable fields take its
three-valued logic, the batch staying columns; a batch whose values a
column cannot hold as the row path's tuple does (a Python int beyond
int64, :class:`~.arrow_exprs.Fallback`) is probed by the row path's
generated code against the buffer's rows instead, before anything changed.  The buffers (:mod:`.join_buffer`)
are the same either way, so the next batch continues exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import expressions as exp

from boreas.catalog.expressions import Scope, parse_expression
from boreas.catalog.model import Schema
from boreas.node.compile import INT, STR, CodeBuilder, kind_of
from boreas.wire.columns import arrow_schema
from boreas.wire.row_errors import SchemaMismatch

from . import arrow_exprs
from .arrow_nodes import Node
from .join_buffer import ColumnBuffer
from .join_rows import JoinSpec, Probe

#: Candidate pairs evaluated at once without an equality to narrow them (bounds the memory of a cross product).
BLOCK = 1 << 20


class PairTranslator(arrow_exprs.Translator):
    """Expressions over ``left.x``/``right.y`` on a batch of pairs: the left's columns, then the right's."""

    def __init__(self, left: Schema, right: Schema, qualifiers: tuple[str, str] = ("left", "right"), *,
                 per_row: bool = False, nullable: bool = False) -> None:
        """``qualifiers``: what names the two sides (a table box's ``input`` and its table: :mod:`.table_columns`);
        ``per_row``, ``nullable``: as :class:`~.arrow_exprs.Translator`'s (a flagged pair's row code is the box's
        expression over the pair's two rows, :meth:`row_builder`)."""
        super().__init__(left, per_row=per_row, nullable=nullable)
        self.scope = Scope(((qualifiers[0], left), (qualifiers[1], right)))
        self.sides = {qualifiers[0]: (0, left), qualifiers[1]: (len(left.fields), right)}
        self.fields = [*left.fields, *right.fields]

    def locate(self, tree: exp.Column) -> tuple[int, str]:
        """The pair batch's column index of a field reference, and its kind; as the row path resolves it
        (unqualified: the left's field if it has one, else the right's)."""
        at = self.position(tree)
        return at, kind_of(self.fields[at].type)

    def position(self, tree: exp.Expression) -> int:
        """The pair batch's column index of a field reference (an array field's too)."""
        sides = [tree.table] if isinstance(tree, exp.Column) and tree.table else list(self.sides)
        for side in sides if isinstance(tree, exp.Column) else ():
            offset, schema = self.sides[side]
            for i, f in enumerate(schema.fields):
                if f.name == tree.name:
                    return offset + i
        raise arrow_exprs.Unsupported(f"field reference {tree.sql()!r}")

    def _column(self, tree: exp.Column) -> Node:
        i, kind = self.locate(tree)
        if self.fields[i].nullable and not self.nullable:  # the caller does not take three-valued logic
            raise arrow_exprs.Unsupported(f"field {tree.sql()!r} is nullable")
        return Node(kind, lambda batch: batch.column(i), nullable=True)

    def row_builder(self) -> tuple[CodeBuilder, str]:
        """The row code over the two sides' rows, each a slice of a pair batch's row (its left's columns, then
        its right's), as the box's row path compiles its expressions over (input, row) or (left, right)."""
        width = len(self.fields) - len(list(self.sides.values())[1][1].fields)
        bind = f"    left_row, right_row = row[:{width}], row[{width}:]\n"
        return CodeBuilder(self.scope, ["left_row", "right_row"]), bind


class ColumnJoin:
    """Both sides' buffers as columns, and the join of a batch against them (the module docstring)."""

    def __init__(self, spec: JoinSpec, inputs: list[Schema], target: pa.Schema, probes: list[Probe],
                 mask: Callable[[pa.RecordBatch], pa.Array], fields: list | None,
                 keys: tuple[int, int] | None) -> None:
        self.spec = spec
        self.schemas = [arrow_schema(s) for s in inputs]
        self.target = target
        self.probes = probes
        self.mask = mask
        self.fields = fields  # out field functions; None: the pairs' columns
        self.keys = keys  # (left field, right field) of an equality among the predicate's terms
        self.buffers = [ColumnBuffer(self.schemas[i], spec.sizes[i], spec.orders[i], spec.timeout is not None)
                        for i in range(2)]

    @classmethod
    def make(cls, spec: JoinSpec, inputs: list[Schema], output: Schema, probes: list[Probe]) -> "ColumnJoin | None":
        """The columnar path for a join of this shape, or None when the box reads rows.

        None when a schema has a field the data plane carries no Arrow type
        for, or the predicate or an out field has no exact columnar
        translation (:mod:`.arrow_exprs`).
        """
        try:
            left, right = arrow_schema(inputs[0]), arrow_schema(inputs[1])
            target = arrow_schema(output)
        except SchemaMismatch:
            return None
        translator = PairTranslator(inputs[0], inputs[1], per_row=True, nullable=True)
        try:
            mask = translator.predicate(spec.predicate)
            fields = [translator.value(e, f.type) for e, f in zip(spec.out_fields, output.fields)] or None
        except arrow_exprs.Unsupported:
            return None
        if fields is None and [f.type for f in target] != [f.type for f in [*left, *right]]:
            return None
        return cls(spec, inputs, target, probes, mask, fields, _equality(translator, spec.predicate))

    # -- one batch ------------------------------------------------------------------------

    def process(self, port: int, batch: pa.RecordBatch, now: float) -> pa.RecordBatch | list[tuple]:
        """The out tuples of ``batch`` arriving on ``port`` (columns, or rows from the row path's probes)."""
        if self.spec.timeout is not None:
            for buffer in self.buffers:
                if len(buffer):
                    buffer.expire(now - self.spec.timeout)
        other = self.buffers[1 - port]
        out: pa.RecordBatch | list[tuple] = []
        if len(other) and batch.num_rows:
            try:
                out = self._pairs(port, batch, other.batch())
            except arrow_exprs.Fallback:
                out = self._probed(port, batch, other)
        self.buffers[port].append(batch, now)
        return out

    def _pairs(self, port: int, batch: pa.RecordBatch, buffered: pa.RecordBatch) -> pa.RecordBatch | list[tuple]:
        outs = []
        for i, j in self._candidates(port, batch, buffered):
            if not len(i):
                continue
            new, old = batch.take(pa.array(i)), buffered.take(pa.array(j))
            left, right = (new, old) if port == 0 else (old, new)
            pairs = pa.RecordBatch.from_arrays([*left.columns, *right.columns],
                                               names=[f"c{k}" for k in range(left.num_columns + right.num_columns)])
            holds = self.mask(pairs)
            if not holds.null_count and pc.all(holds).as_py():
                kept = pairs
            else:
                kept = pairs.filter(pc.fill_null(holds, False))
            if not kept.num_rows:
                continue
            if self.fields is None:
                outs.append(pa.RecordBatch.from_arrays(kept.columns, schema=self.target))
            else:
                outs.append(pa.RecordBatch.from_arrays([f(kept) for f in self.fields], schema=self.target))
        if not outs:
            return []
        if len(outs) == 1:
            return outs[0]
        return pa.Table.from_batches(outs, self.target).combine_chunks().to_batches()[0]

    def _candidates(self, port: int, batch: pa.RecordBatch, buffered: pa.RecordBatch):
        """(batch rows, buffer rows) index arrays of the pairs to test, ordered by batch row, then buffer row."""
        n, m = batch.num_rows, buffered.num_rows
        if self.keys is not None:
            yield equal_pairs(batch.column(self.keys[port]), buffered.column(self.keys[1 - port]))
            return
        rows_per_block = max(1, BLOCK // m)
        for start in range(0, n, rows_per_block):
            stop = min(n, start + rows_per_block)
            yield np.repeat(np.arange(start, stop), m), np.tile(np.arange(m), stop - start)

    def _probed(self, port: int, batch: pa.RecordBatch, other: ColumnBuffer) -> list[tuple]:
        """The row path's probes for a batch the columns cannot treat exactly."""
        out: list[tuple] = []
        append = out.append
        probe, buffered = self.probes[port], other.rows()
        columns = [c.to_pylist() for c in batch.columns]
        for row in zip(*columns):
            probe(row, buffered, append)
        return out

    # -- state ----------------------------------------------------------------------------

    def shift_times(self, delta: float) -> None:
        for buffer in self.buffers:
            buffer.shift_times(delta)

    def entries(self) -> int:
        return sum(map(len, self.buffers))

    def buffered(self, side: int) -> int:
        return len(self.buffers[side])

    def state(self) -> dict:
        """The buffers (and arrival times) as the row path saves them (:meth:`.join_rows.RowJoin.state`)."""
        return {
            "buffers": [[list(r) for r in b.rows()] for b in self.buffers],
            "times": [b.times.tolist() for b in self.buffers] if self.spec.timeout is not None else None,  # type: ignore[union-attr]
        }

    def restore(self, state: dict) -> None:
        """From either path's :meth:`state`; raises :class:`~.join_buffer.Unfit` if its rows do not fit the columns."""
        saved = state.get("times") or [None, None]
        for side, buffer in enumerate(self.buffers):
            rows = [tuple(r) for r in state["buffers"][side]]
            times = [float(t) for t in saved[side]] if saved[side] is not None else None
            buffer.load(rows, times if self.spec.timeout is not None else None)


def _equality(translator: PairTranslator, predicate: str) -> tuple[int, int] | None:
    """(left field, right field) of a ``left.a = right.b`` among the predicate's top-level ``and`` terms, both
    ints or both strings (their equality is Arrow's exactly); None if there is none."""
    terms = [parse_expression(predicate)]
    offset, right = list(translator.sides.values())[1]
    width = len(right.fields)
    while terms:
        term = terms.pop(0)
        while isinstance(term, exp.Paren):
            term = term.this
        if isinstance(term, exp.And):
            terms += [term.this, term.expression]
            continue
        if not (isinstance(term, exp.EQ) and isinstance(term.this, exp.Column)
                and isinstance(term.expression, exp.Column)):
            continue
        (a, ka), (b, kb) = translator.locate(term.this), translator.locate(term.expression)
        if ka != kb or ka not in (INT, STR):
            continue
        if a < offset <= b < offset + width:
            return a, b - offset
        if b < offset <= a < offset + width:
            return b, a - offset
    return None


def equal_pairs(new_key: pa.Array, old_key: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(new rows, old rows) index arrays of the pairs whose keys are equal (ints or strings; None equals None, as
    in Python), ordered by new row, then old row."""
    n, m = len(new_key), len(old_key)
    if pa.types.is_integer(new_key.type):  # as Python compares ints: all of them, in int64
        new_key, old_key = new_key.cast(pa.int64()), old_key.cast(pa.int64())
    codes = pc.dictionary_encode(pa.concat_arrays([old_key, new_key]), null_encoding="encode")
    encoded = codes.indices.to_numpy(zero_copy_only=False)
    old_codes, new_codes = encoded[:m], encoded[m:]
    order = np.argsort(old_codes, kind="stable")
    sorted_codes = old_codes[order]
    lo = np.searchsorted(sorted_codes, new_codes, side="left")
    hi = np.searchsorted(sorted_codes, new_codes, side="right")
    counts = hi - lo
    total = int(counts.sum())
    i = np.repeat(np.arange(n), counts)
    starts = np.repeat(lo - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
    return i, order[starts + np.arange(total)]


def suffix_pairs(cuts: np.ndarray, m: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(arriving rows, buffer rows) of every arriving row i with buffer rows ``cuts[i]..m-1``, in blocks of at
    most about :data:`BLOCK` pairs, ordered by i then buffer row."""
    counts = m - cuts
    ends = np.cumsum(counts)
    start = 0
    while start < len(cuts):
        base = int(ends[start - 1]) if start else 0
        stop = max(start + 1, int(np.searchsorted(ends, base + BLOCK, side="right")))
        span = counts[start:stop]
        i = np.repeat(np.arange(start, stop), span)
        offsets = np.arange(len(i)) - np.repeat(np.cumsum(span) - span, span)
        yield i, np.repeat(cuts[start:stop], span) + offsets
        start = stop


class PairPlan:
    """A predicate and out fields over pairs of two schemas' rows, translated once (for boxes other than ``join``
    that join a batch with rows they keep: :mod:`.aurorajoin_columns`, :mod:`.table_columns`).

    :meth:`held` keeps the candidate pairs the predicate holds for, :meth:`out` makes their out tuples; both
    raise :class:`~.arrow_exprs.Fallback` on a batch the columns cannot treat exactly.
    """

    def __init__(self, mask: Callable[[pa.RecordBatch], pa.Array] | None, fields: list | None,
                 target: pa.Schema | None, keys: tuple[int, int] | None) -> None:
        self.mask = mask  # None: every pair holds (no predicate)
        self.fields = fields  # out field functions; None: the pairs' columns
        self.target = target
        self.keys = keys  # (left field, right field) of an equality among the predicate's top-level terms

    @classmethod
    def make(cls, translator: PairTranslator, predicate: str | None, out_fields: tuple[str, ...],
             output: Schema | None) -> "PairPlan | None":
        """The plan, or None when an expression, or a type of the sides or ``output``, has no exact columnar
        translation (the box reads rows).  ``output`` None: :meth:`out` is not asked for."""
        try:
            target = arrow_schema(output) if output is not None else None
            sides = [arrow_schema(schema) for _, schema in translator.sides.values()]
            mask = translator.predicate(predicate) if predicate else None
            fields = ([translator.value(e, f.type) for e, f in zip(out_fields, output.fields)] or None
                      if output is not None else None)
        except (SchemaMismatch, arrow_exprs.Unsupported):
            return None
        if (target is not None and fields is None
                and [f.type for f in target] != [f.type for s in sides for f in s]):
            return None
        return cls(mask, fields, target, _equality(translator, predicate) if predicate else None)

    def held(self, left: pa.RecordBatch, right: pa.RecordBatch, li: np.ndarray,
             ri: np.ndarray) -> tuple[pa.RecordBatch, np.ndarray]:
        """The pairs (``left`` row ``li[k]``, ``right`` row ``ri[k]``) the predicate holds for, as one batch of the
        left's then the right's columns, and the k of each."""
        lt, rt = left.take(pa.array(li, pa.int64())), right.take(pa.array(ri, pa.int64()))
        pairs = pa.RecordBatch.from_arrays([*lt.columns, *rt.columns],
                                           names=[f"c{k}" for k in range(lt.num_columns + rt.num_columns)])
        if self.mask is None:
            return pairs, np.arange(len(li))
        holds = self.mask(pairs)
        if not holds.null_count and pc.all(holds).as_py():
            return pairs, np.arange(len(li))
        holds = pc.fill_null(holds, False)
        return pairs.filter(holds), np.flatnonzero(holds.to_numpy(zero_copy_only=False))

    def out(self, kept: pa.RecordBatch) -> pa.RecordBatch:
        """The out tuples of pairs :meth:`held` kept, in the target schema."""
        assert self.target is not None
        if self.fields is None:
            return pa.RecordBatch.from_arrays(kept.columns, schema=self.target)
        return pa.RecordBatch.from_arrays([f(kept) for f in self.fields], schema=self.target)
