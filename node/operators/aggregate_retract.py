"""A changelog batch summed per (group, window) on columns, for the retracting aggregate.

:class:`~.aggregate_changes.Retracting` adds a changelog's rows one by one,
each times its weight.  For ``count``, ``sum`` and ``avg`` that is a sum per (group, window start), so
:class:`ColumnRetract` computes it with numpy: the rows with a weight and an
order value are repeated once per aligned window that holds them, sorted by
(group code, window number, row), and one ``reduceat`` per function gives
each (group, window)'s partial; the entries are then handed to
:meth:`~.aggregate_changes.Retracting.add_partials` in the order the row
path first touches them (by first row, then window), so the emitted
-old/+new rows, their order and the state are the row path's.  Float sums
are added pairwise per entry (the last bits may differ from one by one).

``min``, ``max`` and ``count_distinct`` keep a multiset per value: their
delta per entry is each value's net weight (:mod:`.aggregate_multisets`).
Expression arguments are columns appended to the batch
(:mod:`.aggregate_args`); a float group-by field is grouped as Python groups
it (:func:`~.aggregate_groups.group_codes`).  A ``nullable`` field's NULLs
are skipped as on rows, and its sum's delta is ``(sum, count)`` (the entry
keeps its count of values, for SQL's NULL of none: since branch colAggF).
A batch with a NaN, an order value or product beyond exact range, an expression
failing in some row or a float group key that is a NaN or a zero, read rows
(:meth:`ColumnRetract.sums` says None).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from boreas.catalog.expressions import Scope, infer_field, parse_expression
from boreas.catalog.model import Schema

from .accumulators import parse_call
from .aggregate_args import ArgumentColumns
from .aggregate_groups import group_codes, numbers
from .aggregate_multisets import MULTISETS, multiset_deltas


class ColumnRetract:
    """Partials of a changelog batch per (group, window start), as :meth:`Retracting.add_partials` takes them."""

    def __init__(self, fields: list[tuple[str, int | None, bool]], groups: list[int], order: int | None,
                 size: float, advance: float, args: ArgumentColumns):
        self._fields, self._groups, self._order = fields, groups, order
        self._args = args  # expression arguments: columns appended to each batch (.aggregate_args)
        self._size, self._advance = size, advance

    @classmethod
    def make(cls, functions: list[str], schema: Schema, groups: list[int], order: int | None, size: float,
             advance: float) -> "ColumnRetract | None":
        names = {f.name: i for i, f in enumerate(schema.fields)}
        args = ArgumentColumns(schema)
        fields: list[tuple[str, int | None, bool]] = []
        for text in functions:
            call = parse_call(text)
            if call is None or call[0] not in ("count", "sum", "avg", *MULTISETS):
                return None
            func, arg = call
            if arg in ("", "*"):
                if func != "count":
                    return None
                fields.append((func, None, False))
            elif arg in names:  # a nullable field's sum: (sum, count) deltas, as its entry keeps both
                fields.append((func, names[arg], func == "sum" and schema.fields[names[arg]].nullable))
            elif arg not in names and (column := args.add(arg)) is not None:  # an expression: a column of its own
                # (nullable as the row path's Retracting sees it: the catalog's inference, a coalesce with a
                # non-nullable argument is not, whatever fields it reads)
                fields.append((func, column, func == "sum" and infer_field("_", parse_expression(arg),
                                                                          Scope.single(schema)).nullable))
            else:
                return None
        return cls(fields, groups, order, size, advance, args)

    def sums(self, batch: pa.RecordBatch, weights: pa.Array,
             window_of) -> tuple[list[tuple[tuple, int, list]], int] | None:
        """``(touched, ignored)`` for :meth:`Retracting.add_partials`, or None: read the rows."""
        extended = self._args.extend(batch)
        if extended is None:
            return None
        batch = extended
        w = numbers(weights).astype(np.int64)
        n = batch.num_rows
        keep = w != 0
        ignored = 0
        if self._order is not None:
            column = batch.column(self._order)
            v = numbers(column)
            valid = ~np.asarray(column.is_null(), dtype=bool) if column.null_count else np.ones(n, bool)
            if v.dtype.kind == "f":
                if np.isnan(v[valid]).any() or np.isinf(v[valid]).any():
                    return None
            elif len(v) and np.abs(v[valid]).max(initial=0) >= 2 ** 52:
                return None
            ignored = int((keep & ~valid).sum())
            keep &= valid
        idx = np.flatnonzero(keep)
        if self._order is None:
            rows, ks = idx, np.zeros(len(idx), np.int64)
        else:
            vv = v[idx].astype(np.float64)
            last = np.floor(vv / self._advance).astype(np.int64)
            first = np.floor((vv - self._size) / self._advance).astype(np.int64) + 1
            count = np.maximum(last - first + 1, 0)
            rows = np.repeat(idx, count)
            offsets = np.arange(len(rows)) - np.repeat(np.cumsum(count) - count, count)
            ks = np.repeat(first, count) + offsets
        codes, keys_of, _ = group_codes(batch, self._groups)
        if codes is None:
            return None
        if not len(rows):
            return [], ignored
        gc = codes[rows]
        by = np.lexsort((rows, ks, gc))
        rows, ks, gc = rows[by], ks[by], gc[by]
        cut = np.ones(len(rows), bool)
        cut[1:] = (gc[1:] != gc[:-1]) | (ks[1:] != ks[:-1])
        starts = np.flatnonzero(cut)
        ws = w[rows]
        partials: list[list[Any]] = []
        for func, field, counted in self._fields:
            partial = self._partial(batch, func, field, rows, ws, starts, counted)
            if partial is None:
                return None
            partials.append(partial)
        ns = np.add.reduceat(ws, starts).tolist()
        first_rows, seg_ks, seg_gc = rows[starts], ks[starts], gc[starts]
        touch = np.lexsort((seg_ks, first_rows)).tolist()
        seg_ks_list, seg_gc_list = seg_ks.tolist(), seg_gc.tolist()
        touched = []
        for i in touch:
            start = window_of(seg_ks_list[i]) if self._order is not None else None
            touched.append(((keys_of(seg_gc_list[i]), start), ns[i], [p[i] for p in partials]))
        return touched, ignored

    @staticmethod
    def _partial(batch: pa.RecordBatch, func: str, field: int | None, rows: np.ndarray, ws: np.ndarray,
                 starts: np.ndarray, counted: bool = False) -> list | None:
        """One function's delta per entry (None where no row had a value to add); ``counted``: a sum that
        keeps its count of values (a nullable field's), so ``(sum, count)`` as for avg."""
        if field is None:
            return np.add.reduceat(ws, starts).tolist()
        if func in MULTISETS:
            return multiset_deltas(batch.column(field), rows, ws, starts)
        column = batch.column(field)
        ok = (~np.asarray(column.is_null(), dtype=bool) if column.null_count else np.ones(len(column), bool))[rows]
        wok = np.where(ok, ws, 0)
        counts = np.add.reduceat(wok, starts)
        if func == "count":
            return counts.tolist()
        x = numbers(column)[rows]
        has = np.add.reduceat(ok.astype(np.int64), starts).tolist()
        if x.dtype.kind == "f":
            if np.isnan(x[ok]).any():
                return None
            products = np.where(ok, x.astype(np.float64) * ws, 0.0)
        else:
            x = x.astype(np.int64)
            big = int(np.abs(x[ok]).max(initial=0)) * int(np.abs(ws).max(initial=0))
            if big * len(x) >= 2 ** 62:
                return None  # Python's ints never overflow; int64 sums might
            products = np.where(ok, x * ws, 0)
        sums = np.add.reduceat(products, starts).tolist()
        if func == "sum" and not counted:
            return [s if h else None for s, h in zip(sums, has)]
        return [(s, c) if h else None for s, c, h in zip(sums, counts.tolist(), has)]
