"""The first N rows of each partition of a top-N while its view's rows only arrive: a batch ranked in columns.

A top-N over a stream that only inserts (Nexmark's q9, q18, q19: bids and
auctions never leave) needs no more than each partition's first N rows: a
row that sorts after the N-th can never come back into the first N, since
nothing above it leaves.  Flink runs such a query with its append-only
rank for the same reason.  :class:`AppendTops` keeps those N rows per
partition, and a batch is ranked in Arrow columns before any row is made in
Python: the batch is sorted by partition, then by the ORDER BY and the
whole row (the tie order of node/operators/m3topn.py), and only its first N
rows per partition are *candidates*.  A partition new to the top-N takes its
candidates as they are, and they stay columns: kept for a later merge and
emitted as the out stream's columns (q18's (bidder, auction) partitions are
nearly all new, each its one row).  Only the candidates of partitions held
before become Python rows, to be merged with what the partition held.  :class:`~.m3topn.RankedRows` instead keeps every
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
from dataclasses import dataclass
from itertools import compress
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
    project: tuple[int | None, ...]
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


@dataclass
class ExactChanges:
    """A view's changelog as Python rows, where a value is one no Arrow column of its field holds (an int past 64
    bits, on the Python backend): ranked by what it is, not the null the out stream carries for it
    (node/operators/m3topn.py, ``TopNM3Operator._changelog``)."""

    rows: list[tuple]
    weights: list[int]

    def __len__(self) -> int:
        return len(self.rows)


@dataclass
class Merged:
    """What a batch changed in the first N: out rows that left and entered (Python tuples, partitions the batch
    merged into), and ``fresh``: the out rows of partitions new in the batch as columns (``o0``.. in the out
    stream's order, the rank as int64 where it is selected; None when none is new or the batch ranked in Python)."""

    gone: list[tuple]
    came: list[tuple]
    fresh: pa.Table | None = None


#: Tables appended to ``AppendTops._kept`` that are concatenated into one.
COMPACT = 64


class AppendTops:
    """Owns each partition's first N rows while no row has left the view; ``ranked`` lends the top-N's sort and
    partition keys and projection.

    A partition's rows are Python tuples (in ``held``, their sort keys in ``keys`` made once a later batch merges
    rows there, their out rows in ``top``) from the first batch that merges rows into it; before that (a
    partition new in a batch ranked in columns: q18's many (bidder, auction) partitions, most of them one row
    for good) they stay columns: ``held`` maps the partition to an int, its place in ``_kept`` (the rows of new
    partitions, appended batch by batch): ``start * stride + count`` (``stride``: N + 1, at most 2**31 + 1, so a
    huge N does not overflow the int64 place).  A kept row whose partition became tuples stays in ``_kept``
    (dead): ``_kept`` holds up to N rows per partition created in columns (a counted row as many times as it
    counts, up to N), dead ones included, until the first deletion or ``clear``.  Every :data:`COMPACT` tables
    appended are concatenated into one, so neither the tables' count nor their overhead grows per batch."""

    def __init__(self, ranked: Ranking):
        self.ranked = ranked
        self.held: dict[tuple, list[tuple] | int] = {}  # each partition's first N view rows in rank order, or a place
        self.keys: dict[tuple, list[tuple]] = {}  # their sort keys, made when a batch first merges there
        self.top: dict[tuple, list[tuple]] = {}  # the out rows of the partitions held as tuples
        self._kept: list[pa.Table] = []  # new partitions' first rows, columns c0.., batch after batch
        self._bases: list[int] = []  # where each of _kept starts in their rows one after another
        self._base_array: np.ndarray | None = None  # _bases as an array, made when read
        self._compacted = 0  # _kept's tables before this index are compacted ones
        self._size = 0  # rows in _kept
        self._stride = min(ranked.spec.limit, 2**31) + 1  # (a partition's count in a batch: at most N, and its rows)
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
        self._kept.clear()
        self._bases.clear()
        self._base_array = None
        self._compacted = 0
        self._size = 0

    def rows(self) -> list[tuple]:
        """Every partition's first N out rows, now (every partition made Python rows)."""
        self._as_tuples([pk for pk, rows in self.held.items() if type(rows) is int])
        return [r for rows in self.top.values() for r in rows]

    def multiplicities(self, changed: Columns | ExactChanges | list[tuple]) -> tuple[list[tuple], list[int]] | pa.Table | None:
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
        elif isinstance(changed, ExactChanges):
            rows, ws = changed.rows, changed.weights
        else:
            rows, ws = changed, [1] * len(changed)
        deltas: dict[tuple, int] = {}
        view_deltas(spec, rows, ws, deltas)
        if any(d < 0 for d in deltas.values()):
            return None
        return list(deltas), list(deltas.values())

    def apply(self, added: tuple[list[tuple], list[int]] | pa.Table) -> Merged:
        """Merge added rows (:meth:`multiplicities`' answer) into each partition's first N: the out rows that left
        the first N and those that entered; a table's rows of partitions new to the top-N enter as columns."""
        if isinstance(added, pa.Table):
            ranked = self._ranked(added)
            if ranked is None:  # a null or NaN where the columns sort: every row a candidate, ranked in Python
                added = (_rows(added), [1] * added.num_rows)
            else:
                groups, fresh = self._split(*ranked)
                return Merged(*self._merge(groups, True), fresh)
        by_part: dict[tuple, list[tuple]] = {}
        part_of = self.ranked.part_key
        limit = self.ranked.spec.limit
        for row, n in zip(*added):
            for _ in range(min(n, limit)):  # (a copy past the N-th is never among the first N)
                by_part.setdefault(part_of(row), []).append(row)
        return Merged(*self._merge(list(by_part.values()), False))

    def _merge(self, groups: list[list[tuple]], ordered: bool) -> tuple[list[tuple], list[tuple]]:
        """Each group (a partition's candidate rows; in rank order when ``ordered``) merged into its partition's
        first N as Python rows: the out rows that left and those that entered."""
        part_of, limit, out_rows = self.ranked.part_key, self.ranked.spec.limit, self.ranked.out_rows
        key_of = self.ranked.sort_key
        held, keys, top = self.held, self.keys, self.top
        self._as_tuples([pk for pk in map(part_of, (g[0] for g in groups)) if type(held.get(pk)) is int])
        gone: list[tuple] = []
        came: list[tuple] = []
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
                old = keys[pk] = [key_of(r) for r in old_rows]  # type: ignore[union-attr]  (tuples: _as_tuples)
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
            after = top[pk] = out_rows(held[pk])  # type: ignore[arg-type]
            was, now = Counter(before), Counter(after)
            gone.extend((was - now).elements())
            came.extend((now - was).elements())
        return gone, came

    def _ranked(self, table: pa.Table) -> tuple[pa.Table, np.ndarray, np.ndarray, np.ndarray] | None:
        """The table's rows that are among their partition's first N within the table (the *candidates*): the
        table, the candidates' positions in it in rank order partition after partition, where each partition
        starts among them and its count; None where Arrow's order may not be Python's (a null, or a NaN where
        the order reads a float).  The candidates are not taken here: :meth:`_split` takes each row once, to
        where it goes."""
        limit = self.ranked.spec.limit
        ordered = {name for name, _ in self._sort}
        if any(table[name].null_count or (pa.types.is_floating(table[name].type)
                                          and pc.any(pc.is_nan(table[name])).as_py())
               for name in ordered):
            return None
        order = pc.sort_indices(table, sort_keys=self._sort).to_numpy()
        first = np.zeros(len(order), dtype=bool)  # where a partition starts in the sorted order
        first[:1] = True
        for i in self.ranked.partition:
            col = table[f"c{i}"].take(order)
            first[1:] |= pc.not_equal(col[1:], col[:-1]).to_numpy(zero_copy_only=False)
        starts = np.flatnonzero(first)
        rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.append(starts, len(order))))
        keep = rank < limit
        kept_first = np.flatnonzero(first[keep])
        counts = np.diff(np.append(kept_first, int(keep.sum())))
        return table, order[keep], kept_first, counts

    def _split(self, table: pa.Table, picked: np.ndarray, starts: np.ndarray,
               counts: np.ndarray) -> tuple[list[list[tuple]], pa.Table | None]:
        """Ranked candidates (rows ``picked`` of ``table``) split: those of partitions already held, as Python rows
        grouped by partition (to be merged), and those of partitions new to the top-N, which are their partition's
        first N as they are: kept as columns in ``_kept`` (``held`` says where) and returned as the out columns
        they make."""
        if not len(starts):
            return [], None
        held = self.held
        if self.ranked.partition:
            at = pa.array(picked[starts])
            pks = list(zip(*(_values(table[f"c{i}"].take(at)) for i in self.ranked.partition)))
        else:
            pks = [()]
        new = ~np.fromiter(map(held.__contains__, pks), dtype=bool, count=len(pks))
        row_new = np.repeat(new, counts)
        groups: list[list[tuple]] = []
        if not new.all():
            rows = _rows(table.take(pa.array(picked[~row_new])))
            bounds = np.append(0, np.cumsum(counts[~new])).tolist()
            groups = [rows[a:b] for a, b in zip(bounds, bounds[1:])]
        if not new.any():
            return groups, None
        fresh = table.take(pa.array(picked if new.all() else picked[row_new]))
        sizes = counts[new]
        places = (np.cumsum(sizes) - sizes + self._size) * self._stride + sizes
        held.update(zip(compress(pks, new), places.tolist()))
        self._keep(fresh)
        ranks = np.arange(len(fresh)) - np.repeat(np.cumsum(sizes) - sizes, sizes) + 1
        return groups, self._out_columns(fresh, ranks)

    def _keep(self, fresh: pa.Table) -> None:
        """Append ``fresh`` to ``_kept``; every :data:`COMPACT` tables since the last compaction become one (places
        are offsets into all of _kept's rows, so they stay valid)."""
        self._kept.append(fresh)
        self._bases.append(self._size)
        self._size += fresh.num_rows
        self._base_array = None
        if len(self._kept) - self._compacted >= COMPACT:
            try:
                merged = pa.concat_tables(self._kept[self._compacted:]).combine_chunks()
            except pa.ArrowInvalid:  # (schemas that differ: left as they are)
                return
            self._kept[self._compacted:] = [merged]
            del self._bases[self._compacted + 1:]
            self._compacted = len(self._kept)

    def _out_columns(self, rows: pa.Table, ranks: np.ndarray) -> pa.Table:
        """The out stream's columns of view rows in rank order (``ranks`` their rank in their partition)."""
        columns = [pa.array(ranks, pa.int64()) if i is None else rows.column(i) for i in self.ranked.project]
        return pa.table(columns, names=[f"o{j}" for j in range(len(columns))])

    def _as_tuples(self, pks: list[tuple]) -> None:
        """Partitions ``pks`` (each held as a place in ``_kept``) made Python rows, all of them at once."""
        if not pks:
            return
        held = self.held
        starts, sizes = np.divmod(np.array([held[pk] for pk in pks], dtype=np.int64), self._stride)
        at = np.repeat(starts - (np.cumsum(sizes) - sizes), sizes) + np.arange(int(sizes.sum()))
        rows = self._kept_rows(at)
        bounds = np.append(0, np.cumsum(sizes)).tolist()
        out_rows, top = self.ranked.out_rows, self.top
        for pk, a, b in zip(pks, bounds, bounds[1:]):
            first = held[pk] = rows[a:b]
            top[pk] = out_rows(first)

    def _kept_rows(self, at: np.ndarray) -> list[tuple]:
        """The rows at places ``at`` of ``_kept``, as Python rows in that order: a take from each table they are
        in (one take over ``_kept`` concatenated would cost all of it, batch after batch)."""
        order = np.argsort(at, kind="stable")
        ordered = at[order]
        if self._base_array is None:
            self._base_array = np.array(self._bases, dtype=np.int64)
        which = np.searchsorted(self._base_array, ordered, side="right") - 1
        cuts = np.flatnonzero(np.diff(which)) + 1
        found: list[tuple] = []
        for part, places in zip(np.split(which, cuts), np.split(ordered, cuts)):
            table = self._kept[int(part[0])]
            found.extend(_rows(table.take(pa.array(places - self._bases[int(part[0])]))))
        rows: list[tuple] = [()] * len(at)
        for i, row in zip(order.tolist(), found):
            rows[i] = row
        return rows


def _rows(table: pa.Table) -> list[tuple]:
    return list(zip(*(c.to_pylist() for c in table.columns)))


def _values(column: pa.ChunkedArray | pa.Array) -> list:
    """A null-free column's values as Python's (``to_pylist``'s), an integer one through numpy (several times
    cheaper per value: q18's partition keys are a batch's every candidate).

    >>> _values(pa.array([3, -1], pa.int32())), _values(pa.array(["a"]))
    ([3, -1], ['a'])
    """
    if pa.types.is_integer(column.type) and not column.null_count:
        return column.to_numpy().tolist()
    return column.to_pylist()
