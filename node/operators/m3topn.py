"""Top-N and deduplication in an ``m3`` box: the view's rows ranked per partition, the changes of the first N
emitted as a changelog.

A box whose SQL ranks by ``ROW_NUMBER() OVER (PARTITION BY p ORDER BY o)``
filtered by ``rank <= N`` (m3/compiler/rownumber.py) maintains the ranked
query's inner view as any ``m3`` box does; its changelog (``-old``/``+new``
rows, deletions included: the in streams may carry them) goes through
:class:`RankedRows`, which keeps *every* row of each partition in rank
order, so a deletion in the top N is answered by the next row at once,
without reading the maps again.  What a batch changed in a partition's top
N is emitted as ``-row``/``+row`` (the rank, when it is selected, is part of
the row: a row entering at rank 1 moves the others down, each one a
``-old``/``+new``).

Ranks: by the ORDER BY columns, ties by the whole view row ascending (its
columns in order), so the result is deterministic and the same on every
node and after a move; Flink breaks ties by arrival instead (docs/m3.md,
"Top-N").  A row present n times (a view of rows counts duplicates) takes
n consecutive ranks.

Nothing here is box state of its own: the ranked rows are a function of the
view, so a restored (moved, recovered) box ranks the view it restored again
(:meth:`TopNM3Operator.restore`), and the snapshot is the maps alone.

>>> r = RankedRows(TopN(("a",), (("p", True),), 2, None, "rn"), ("a", "b", "p"), ("a", "b", "p", "rn"), {"p"})
>>> r.apply({(1, 1, 10): 1, (1, 2, 30): 1, (2, 3, 5): 1})
([(1, 2, 30, 1), (1, 1, 10, 2), (2, 3, 5, 1)], [1, 1, 1])
>>> r.apply({(1, 4, 20): 1})      # enters at rank 2: the row it displaces leaves
([(1, 1, 10, 2), (1, 4, 20, 2)], [-1, 1])
>>> r.apply({(1, 2, 30): -1})     # the first leaves: the others move up, the displaced row returns
([(1, 2, 30, 1), (1, 4, 20, 2), (1, 4, 20, 1), (1, 1, 10, 2)], [-1, -1, 1, 1])
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa

from boreas.catalog.model import Box, FieldType, Schema
from boreas.m3.compiler.rownumber import TopN
from boreas.wire.columns import Columns, arrow_schema, weighted

from .base import Emitted
from .m3box import M3Operator
from .m3memo import present_rows
from .m3topn_append import AppendTops, ExactChanges, view_deltas
from .m3topn_entries import EntryChanges
from .m3topn_inputs import InputRows
from .m3topn_keys import part_key_of, sort_key_of


@dataclass
class Partition:
    """One partition's rows: each row's multiplicity, the rows' sort keys in rank order, and its first N out rows
    as last computed (``top``) with the sort key of the row that filled the N-th rank (``cut``; None while fewer
    than N ranks are filled).  A change whose sort key sorts after ``cut`` cannot change the first N."""

    counts: dict[tuple, int] = field(default_factory=dict)
    keys: list[tuple] = field(default_factory=list)  # (ORDER BY values..., row), ascending
    top: list[tuple] = field(default_factory=list)
    cut: tuple | None = None


class RankedRows:
    """Owns the ranked rows of a top-N: every row of every partition in rank order, and the first N's out rows.

    ``columns`` are the view's row columns (its count left out), ``out`` the out stream's fields, ``numbers``
    the columns that hold numbers (a DESC one is negated to sort; other DESC values are wrapped), ``nullable``
    those that may hold NULL (ranked last, or first where the ORDER BY says NULLS FIRST; a NULL partition key
    is a partition of its own, as SQL's PARTITION BY makes it).
    """

    def __init__(self, spec: TopN, columns: tuple[str, ...], out: tuple[str, ...],
                 numbers: frozenset[str] = frozenset(), nullable: frozenset[str] = frozenset()):
        at = {c.lower(): i for i, c in enumerate(columns)}

        def index(name: str) -> int:
            if name.lower() not in at:
                raise ValueError(f"ROW_NUMBER reads {name}, which is no column of its query ({', '.join(columns)})")
            return at[name.lower()]

        self.spec = spec
        self.columns = columns
        self.partition = tuple(index(c) for c in spec.partition)
        self.order = tuple((index(c), desc) for c, desc in spec.order)
        if spec.project is None:
            self.project: tuple[int | None, ...] = tuple(range(len(columns))) + ((None,) if spec.rank else ())
        else:
            self.project = tuple(None if col is None else index(col) for _, col in spec.project)
        if len(self.project) != len(out):
            raise ValueError(f"the top-N makes {len(self.project)} columns, its out stream has {len(out)}")
        self.parts: dict[tuple, Partition] = {}
        #: ``row -> (ORDER BY values..., row)`` and ``row -> (PARTITION BY values...)``
        self.sort_key = sort_key_of(tuple((i, desc, spec.nulls_first_at(k)) for k, (i, desc) in enumerate(self.order)),
                                    frozenset(i for i, c in enumerate(columns) if c in numbers),
                                    frozenset(i for i, c in enumerate(columns) if c in nullable), len(columns))
        self.part_key = part_key_of(self.partition)
        self._whole = self.project == tuple(range(len(columns)))  # the out row is the view's row as it is

    def out_rows(self, rows: list[tuple]) -> list[tuple]:
        """The out rows of a partition's first rows in rank order (a row n times listed n times)."""
        if self._whole:
            return rows
        project = self.project
        return [tuple([rank if i is None else row[i] for i in project]) for rank, row in enumerate(rows, 1)]

    def top(self, part: Partition) -> list[tuple]:
        """The partition's first N out rows, computed again from its keys (a row n times takes n ranks); sets
        its ``top`` and ``cut``."""
        out: list[tuple] = []
        limit, project, counts, whole = self.spec.limit, self.project, part.counts, self._whole
        part.cut = None
        for key in part.keys:
            row = key[-1]
            for _ in range(counts[row]):
                out.append(row if whole else tuple([len(out) + 1 if i is None else row[i] for i in project]))
                if len(out) == limit:
                    part.top, part.cut = out, key
                    return out
        part.top = out
        return out

    def apply(self, deltas: dict[tuple, int]) -> tuple[list[tuple], list[int]]:
        """Add (a positive delta) or remove (negative) rows; the out rows that left the top N (weight -1),
        then those that entered (+1), partition by partition.  A partition whose changes all sort after its
        N-th ranked row keeps its first N as they were (not computed again)."""
        by_part: dict[tuple, list[tuple[tuple, int]]] = {}
        part_of = self.part_key
        for row, d in deltas.items():
            if d:
                pk = part_of(row)
                changes = by_part.get(pk)
                if changes is None:
                    by_part[pk] = [(row, d)]
                else:
                    changes.append((row, d))
        gone: list[tuple] = []
        came: list[tuple] = []
        parts, change = self.parts, self._change
        for pkey, changes in by_part.items():
            part = parts.get(pkey)
            if part is None:
                part = parts[pkey] = Partition()
            cut = part.cut
            touched = cut is None
            for row, d in changes:
                key = change(part, row, d)
                if not touched and not cut < key:
                    touched = True
            if not part.counts:
                del parts[pkey]
            if not touched:
                continue
            before = part.top
            after = self.top(part)
            if not before:  # a new partition, or one whose rows had all left: the common cases, no counting
                came.extend(after)
            elif not after:
                gone.extend(before)
            elif before != after:
                old, new = Counter(before), Counter(after)
                gone.extend((old - new).elements())
                came.extend((new - old).elements())
        return gone + came, [-1] * len(gone) + [1] * len(came)

    def _change(self, part: Partition, row: tuple, d: int) -> tuple:
        """The row's multiplicity moved by ``d``, as the view's did: a deletion that arrives before its insertion
        leaves it below zero here as there (so a box rebuilt from the view ranks what this one does); only a row
        there (a positive count) is ranked.  Returns the row's sort key."""
        had = part.counts.get(row, 0)
        now = had + d
        if now:
            part.counts[row] = now
        else:
            del part.counts[row]
        key = self.sort_key(row)
        if had > 0 >= now:
            del part.keys[bisect.bisect_left(part.keys, key)]
        elif now > 0 >= had:
            bisect.insort(part.keys, key)
        return key

    def rows(self) -> list[tuple]:
        """Every partition's top N out rows, now (a row n times, n times)."""
        return [r for part in self.parts.values() for r in part.top]

    def clear(self) -> None:
        self.parts.clear()


def ranked_for(spec: TopN, view: Schema, out: Schema) -> RankedRows:
    """The :class:`RankedRows` of top-N ``spec`` over ``view`` (its count column left out when it counts rows),
    making ``out`` (the box's out stream; a partitioned box's members each rank their own partitions:
    node/cumulus/ranking.py); ValueError when they do not fit."""
    fields = [f.name for f in view.fields]
    columns = tuple(fields[:-1] if spec.counted else fields)
    numbers = frozenset(f.name for f in view.fields if f.type != FieldType.STRING)
    nullable = frozenset(f.name for f in view.fields if f.nullable)
    return RankedRows(spec, columns, tuple(f.name for f in out.fields), numbers, nullable)


class TopNM3Operator(M3Operator):
    """An ``m3`` box whose view is ranked: while no row has left its view, each partition's first N alone, a
    batch ranked in columns (:class:`~.m3topn_append.AppendTops`); from the first row that leaves, every row
    ranked (:class:`RankedRows`).  What changes in the first N is what it emits."""

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema]):
        super().__init__(box, inputs, outputs)
        spec = self.plan.topn
        assert spec is not None
        try:
            self.ranked = ranked_for(spec, self.plan.outputs[0], self.outputs[0])
        except ValueError as exc:
            raise self.error(str(exc)) from None
        self.tops: AppendTops | None = AppendTops(self.ranked)  # None once a row has left the view
        # a view of one map's rows on the native backend: its changes read as that map's columns (.m3topn_entries)
        self.entries = EntryChanges.of(self.plan) if self.runtime.native_maps() is not None else None
        if self.entries is not None:
            self.emits_changes = False  # (the runtime's changes are not read: :meth:`_changes` reads the journal)
        # a view that counts its port's rows: an inserting batch's changes are its rows (.m3topn_inputs)
        self.inputs = InputRows.of(self.plan, self.entries)

    def process(self, port: int, rows, now: float) -> Emitted:
        changes = self._changes(port, rows, now)
        if changes is None:  # (no changelog to read: every row ranked again, what changed in the first N emitted)
            return self._emitted(*self._rank_all())
        if self.tops is None:
            deltas: dict[tuple, int] = {}
            for changed in changes:
                self._deltas(changed, deltas)
            return self._emit_ranked(deltas)
        gone: list[tuple] = []
        came: list[tuple] = []
        fresh: list[pa.Table] = []  # partitions new to the top-N: their out rows as columns
        for changed in changes:
            added = self.tops.multiplicities(changed)
            if added is None:
                self._as_rows(fresh, came)
                left, entered = self._rank_all()
                gone.extend(left)
                came.extend(entered)
                break
            merged = self.tops.apply(added)
            gone.extend(merged.gone)
            came.extend(merged.came)
            if merged.fresh is not None:
                fresh.append(merged.fresh)
        return self._emitted(gone, came, fresh)

    def _changes(self, port: int, rows, now: float) -> list | None:
        """The batch applied, the view's changelogs it made (none when it was not applied: rolled back, or no
        row of it counted)."""
        native = self.runtime.native_maps() if self.entries is not None else None
        if native is None:
            self.emits_changes = True  # (the runtime left the native backend: its changes as any box's)
            return [changed for _, changed in super().process(port, rows, now)]
        failed, ignored = self.failed_batches, self.ignored
        super().process(port, rows, now)
        if not len(rows) or self.failed_batches != failed or self.ignored - ignored == len(rows):
            return []
        if self.runtime.native_maps() is not native:  # the batch left the native backend (a value beyond 64 bits)
            self.entries, self.emits_changes = None, True
            return None
        changed = self.inputs.changes(rows) if self.inputs is not None and isinstance(rows, Columns) else None
        if changed is None:
            changed = self.entries.read(native)
        return [] if changed is None else [changed]

    def _rank_all(self) -> tuple[list[tuple], list[tuple]]:
        """A row left the view: every row of it ranked by :class:`RankedRows` from now on; the out rows that
        differ from the first N kept while rows only arrived (those that left, those that entered)."""
        was = Counter(self.top_rows())
        self.tops = None
        self._rank_view()
        now = Counter(self.ranked.rows())
        return list((was - now).elements()), list((now - was).elements())

    @staticmethod
    def _as_rows(fresh: list[pa.Table], came: list[tuple]) -> None:
        """``fresh``'s out rows moved to ``came`` as Python rows (emitted before what a ranking of the whole view
        changes, which reads them as entered)."""
        for table in fresh:
            came.extend(zip(*(c.to_pylist() for c in table.columns)))
        fresh.clear()

    def _emitted(self, gone: list[tuple], came: list[tuple], fresh: list[pa.Table] | None = None) -> Emitted:
        """One changelog batch: ``gone`` (-1), ``came`` and ``fresh``'s rows (+1); ``fresh``'s columns cast to the
        out stream's types as they are, or as rows where a value does not fit (then null, as ``weighted`` makes)."""
        if fresh:
            target = arrow_schema(self.outputs[0])
            try:
                tables = [pa.table([c.cast(f.type) for c, f in zip(t.columns, target)], schema=target)
                          for t in fresh]
            except (OverflowError, pa.ArrowInvalid, pa.ArrowNotImplementedError):
                self._as_rows(fresh, came)
            else:
                if gone or came:
                    tables.insert(0, pa.Table.from_batches([weighted(gone + came, [-1] * len(gone) + [1] * len(came),
                                                                     self.outputs[0]).batch]))
                    weights = [-1] * len(gone) + [1] * (sum(len(t) for t in tables) - len(gone))
                else:
                    weights = [1] * sum(len(t) for t in tables)
                batch = pa.concat_tables(tables).combine_chunks().to_batches()[0]
                return [(0, Columns(batch, weights=pa.array(weights, pa.int64())))]
        out = gone + came
        return [(0, weighted(out, [-1] * len(gone) + [1] * len(came), self.outputs[0]))] if out else []

    def _changelog(self, out: int, rows: list[tuple], weights: list[int]) -> Columns | ExactChanges:
        """The view's changelog as columns, or as the rows themselves where a value does not fit its column (an
        int past 64 bits: the Python backend holds it; the columns would hold null, which ranks nowhere and
        matches no later change of its row).  The box's out rows still carry null for it (:meth:`_emitted`)."""
        changed = super()._changelog(out, rows, weights)
        nulls = [i for i, c in enumerate(changed.batch.columns) if c.null_count]
        if any(changed.batch.column(i).null_count != sum(r[i] is None for r in rows) for i in nulls):
            return ExactChanges(rows, weights)
        return changed

    def _deltas(self, changed, deltas: dict[tuple, int]) -> None:
        """A view changelog's rows into ``deltas`` (row -> change of its multiplicity)."""
        if isinstance(changed, Columns):
            rows, weights = changed.rows(), changed.weight_list()
        elif isinstance(changed, ExactChanges):
            rows, weights = changed.rows, changed.weights
        else:
            rows, weights = changed, [1] * len(changed)
        view_deltas(self.plan.topn, rows, weights, deltas)

    def _emit_ranked(self, deltas: dict[tuple, int]) -> Emitted:
        if not deltas:
            return []
        out, weights = self.ranked.apply(deltas)
        return [(0, weighted(out, weights, self.outputs[0]))] if out else []

    def top_rows(self) -> list[tuple]:
        """The box's result now: each partition's first N rows."""
        return self.ranked.rows() if self.tops is None else self.tops.rows()

    def restore(self, state: dict, now: float | None = None) -> None:
        """The maps restored, the rows ranked again from the view they hold (nothing is emitted): each
        partition's first N alone while the view holds no row below zero (none has left before arriving)."""
        super().restore(state, now)
        self.tops = AppendTops(self.ranked)
        added = self.tops.multiplicities(self._emit[0](self._present()))
        if added is None:
            self.tops = None
            self._rank_view()
        else:
            self.tops.apply(added)

    def _present(self) -> list[tuple]:
        view = self.plan.views[0]
        return present_rows(self.runtime.view(view.name), view.name in self.marked)

    def _rank_view(self) -> None:
        """Every row of the view ranked by :class:`RankedRows`, from nothing."""
        self.ranked.clear()
        deltas: dict[tuple, int] = {}
        self._deltas(self._emit[0](self._present()), deltas)
        self.ranked.apply(deltas)
