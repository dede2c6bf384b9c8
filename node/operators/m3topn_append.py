"""The first N rows of each partition of a top-N while its view's rows only arrive: a batch ranked in columns.

A top-N over a stream that only inserts (Nexmark's q9, q18, q19: bids and
auctions never leave) needs no more than each partition's first N rows: a
row that sorts after the N-th can never come back into the first N, since
nothing above it leaves.  Flink runs such a query with its append-only
rank for the same reason.  :class:`AppendTops` keeps those N rows per
partition, and a batch is ranked in Arrow columns before any row is made in
Python: the batch is sorted by partition, then by the ORDER BY and the
whole row (the tie order of node/operators/m3topn.py), and only its first N
rows per partition (the *candidates*) become Python rows, to be merged with
what the partition held.  :class:`~.m3topn.RankedRows` instead keeps every
row of every partition in rank order (a ``bisect.insort`` and a sort key per
row), which a deletion needs.

The first row that leaves the view (a negative change of a row's
multiplicity, netted over its batch) ends the append-only ranking: the
operator ranks the whole view with :class:`~.m3topn.RankedRows` (as a
restored box does) and emits the difference from the first N kept here
(node/operators/m3topn.py, ``TopNM3Operator``).  Nothing is lost by
starting over: the view holds every row.

The columnar sort is used where Arrow's order is Python's: no null in the
partition, ORDER BY or tie columns, no NaN in a float one; otherwise every
row of the batch is a candidate (the merge in Python decides, as before).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from boreas.m3.compiler.rownumber import TopN
from boreas.wire.columns import Columns


class Ranking(Protocol):
    """What :class:`AppendTops` reads of node/operators/m3topn.py's ``RankedRows``: the top-N, the view's row
    columns, the positions of PARTITION BY and ORDER BY, the keys and the out rows it makes."""

    spec: TopN
    columns: tuple[str, ...]
    partition: tuple[int, ...]
    order: tuple[tuple[int, bool], ...]
    part_key: Callable[[tuple], tuple]
    sort_key: Callable[[tuple], tuple]

    def out_rows(self, rows: list[tuple]) -> list[tuple]: ...


def view_deltas(spec: TopN, rows: list[tuple], weights: list[int], deltas: dict[tuple, int]) -> None:
    """A view changelog's ``rows`` (each with its weight) into ``deltas`` (row -> change of its multiplicity)."""
    if spec.distinct:  # a group is one row while its count is positive: -old/+new of a count cancel
        for row, w in zip(rows, weights):
            key = row[:-1]
            deltas[key] = deltas.get(key, 0) + w * ((row[-1] > 0) - (row[-1] < 0))
    elif spec.counted:
        for row, w in zip(rows, weights):
            key = row[:-1]
            deltas[key] = deltas.get(key, 0) + w * row[-1]
    else:
        for row, w in zip(rows, weights):
            deltas[row] = deltas.get(row, 0) + w


class AppendTops:
    """Owns each partition's first N rows (a row n times listed n times; their sort keys, made only once a later
    batch merges rows there; the out rows they make) while no row has left the view; ``ranked`` lends the
    top-N's sort and partition keys and projection.  A partition new in a batch takes the batch's first N as
    Arrow sorted them, no sort key made (q18's many (bidder, auction) partitions, each its one row)."""

    def __init__(self, ranked: Ranking):
        self.ranked = ranked
        self.held: dict[tuple, list[tuple]] = {}  # each partition's first N view rows, in rank order
        self.keys: dict[tuple, list[tuple]] = {}  # their sort keys, made when a batch first merges there
        self.top: dict[tuple, list[tuple]] = {}  # the out rows they make
        spec = ranked.spec
        width = len(ranked.columns)
        #: the batch's sort: partition, ORDER BY (its direction), then every column ascending (the tie order)
        self._sort = ([(f"c{i}", "ascending") for i in ranked.partition]
                      + [(f"c{i}", "descending" if desc else "ascending") for i, desc in ranked.order]
                      + [(f"c{i}", "ascending") for i in range(width)])
        self._width = width
        self._counted = spec.counted or spec.distinct

    def clear(self) -> None:
        self.held.clear()
        self.keys.clear()
        self.top.clear()

    def rows(self) -> list[tuple]:
        """Every partition's first N out rows, now."""
        return [r for rows in self.top.values() for r in rows]

    def multiplicities(self, changed: Columns | list[tuple]) -> tuple[list[tuple], list[int]] | pa.Table | None:
        """What a view changelog adds, or None when a row leaves (its multiplicity, netted over the batch, falls):
        a table of the added rows (a row n times repeated n times) when the changelog is columns whose weights are
        all positive, else (rows, their added multiplicity) netted in Python as ``view_deltas`` does."""
        spec = self.ranked.spec
        if isinstance(changed, Columns):
            batch = changed.batch
            weights = None if changed.weights is None else changed.weights.to_numpy(zero_copy_only=False)
            if weights is None or (weights > 0).all():
                if self._counted:
                    counts = batch.column(batch.num_columns - 1).to_numpy(zero_copy_only=False)
                    if spec.distinct:
                        counts = np.sign(counts)
                    adds = counts if weights is None else weights * counts
                else:
                    adds = np.ones(batch.num_rows, np.int64) if weights is None else weights
                if (adds < 0).any():
                    return None
                columns = batch.columns[:self._width]
                table = pa.table(columns, names=[f"c{i}" for i in range(self._width)])
                if not (adds == 1).all():  # (a copy past the N-th is never among the first N: at most N each)
                    copies = np.minimum(np.maximum(adds, 0), self.ranked.spec.limit)
                    table = table.take(pa.array(np.repeat(np.arange(len(adds)), copies)))
                return table
            rows, ws = changed.rows(), changed.weight_list()
        else:
            rows, ws = changed, [1] * len(changed)
        deltas: dict[tuple, int] = {}
        view_deltas(spec, rows, ws, deltas)
        if any(d < 0 for d in deltas.values()):
            return None
        return list(deltas), list(deltas.values())

    def apply(self, added: tuple[list[tuple], list[int]] | pa.Table) -> tuple[list[tuple], list[tuple]]:
        """Merge added rows (:meth:`multiplicities`' answer) into each partition's first N: the out rows that left
        the first N and those that entered."""
        key_of = self.ranked.sort_key
        if isinstance(added, pa.Table):
            groups, ordered = self._candidates(added)
        else:
            by_part: dict[tuple, list[tuple]] = {}
            part_of = self.ranked.part_key
            limit = self.ranked.spec.limit
            for row, n in zip(*added):
                for _ in range(min(n, limit)):  # (a copy past the N-th is never among the first N)
                    by_part.setdefault(part_of(row), []).append(row)
            groups, ordered = list(by_part.values()), False
        gone: list[tuple] = []
        came: list[tuple] = []
        part_of, limit, out_rows = self.ranked.part_key, self.ranked.spec.limit, self.ranked.out_rows
        held, keys, top = self.held, self.keys, self.top
        for group in groups:
            pk = part_of(group[0])
            old_rows = held.get(pk)
            if old_rows is None:  # a partition new to the top-N: its candidates are its first N
                first = (group if ordered else sorted(group, key=key_of))[:limit]
                held[pk] = first
                after = top[pk] = out_rows(first)
                came.extend(after)
                continue
            old = keys.get(pk)
            if old is None:
                old = keys[pk] = [key_of(r) for r in old_rows]
            new = [key_of(r) for r in group]
            if not ordered:
                new.sort()
            if len(old) == limit and not new[0] < old[-1]:
                continue  # every added row sorts at or after the N-th: the first N stand
            merged = sorted(old + new)[:limit]
            if merged == old:
                continue
            before = top[pk]
            keys[pk] = merged
            held[pk] = [k[-1] for k in merged]
            after = top[pk] = out_rows(held[pk])
            was, now = Counter(before), Counter(after)
            gone.extend((was - now).elements())
            came.extend((now - was).elements())
        return gone, came

    def _candidates(self, table: pa.Table) -> tuple[list[list[tuple]], bool]:
        """The table's rows that are among their partition's first N within the table, as Python rows grouped
        by partition, and whether each group is in rank order (Arrow's, Python's: every row of the table,
        unordered, where they may differ: a null, or a NaN where the order reads a float)."""
        limit = self.ranked.spec.limit
        ordered = {name for name, _ in self._sort}
        if any(table[name].null_count or (pa.types.is_floating(table[name].type)
                                          and pc.any(pc.is_nan(table[name])).as_py())
               for name in ordered):
            by_part: dict[tuple, list[tuple]] = {}
            for row in _rows(table):
                by_part.setdefault(self.ranked.part_key(row), []).append(row)
            return list(by_part.values()), False
        order = pc.sort_indices(table, sort_keys=self._sort).to_numpy()
        if not len(order):
            return [], True
        first = np.zeros(len(order), dtype=bool)  # where a partition starts in the sorted order
        first[0] = True
        for i in self.ranked.partition:
            col = table[f"c{i}"].take(order)
            first[1:] |= pc.not_equal(col[1:], col[:-1]).to_numpy(zero_copy_only=False)
        starts = np.flatnonzero(first)
        rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.append(starts, len(order))))
        keep = rank < limit
        rows = _rows(table.take(pa.array(order[keep])))
        bounds = np.append(np.flatnonzero(first[keep]), len(rows)).tolist()
        return [rows[a:b] for a, b in zip(bounds, bounds[1:])], True


def _rows(table: pa.Table) -> list[tuple]:
    return list(zip(*(c.to_pylist() for c in table.columns)))
