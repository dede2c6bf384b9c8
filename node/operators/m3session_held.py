"""A ``SESSION`` port's rows held as slices of their batch, and the closed sessions' rows gathered as columns.

Why: holding a batch's rows as Python tuples (``Columns.rows``: one tuple per
row, every column made a Python value) and appending each closed session's
bounds to each of its tuples was most of a session box's CPU (Nexmark q11,
docs/benchmarks.md).  A batch of columns cut into runs
(node/operators/m3session_batch.py) is put in run order by one Arrow
``take``, so a run is a slice of it: a session holds :class:`HeldRun` s
(the batch and a row range), not rows, and a close gathers the closed runs'
rows of every batch by one ``take`` and appends the bounds as two columns
(:func:`gathered`), so the rows reach the maps as columns (the box's batch
path), never as Python values.  Rows added one at a time (a batch with a
late row or a null time, a restored snapshot, a partitioned member's held
rows) stay tuples beside them; :func:`held_rows` reads both.

A held run keeps its whole batch alive.  :class:`Pins` (one per port) counts
each pinned batch's rows still held, lets a batch go when none is, and says
when the pinned batches hold more than twice the live rows (a long session
pinning batches whose other rows closed long ago): the port then copies its
held runs into one batch of their rows alone (:meth:`~.m3sessions.SessionPort.repack`).

>>> import pyarrow as pa
>>> block = pa.record_batch([pa.array([7, 8, 9]), pa.array(["a", "b", "c"])], names=["k", "s"])
>>> held_rows([HeldRun(block, 1, 3), (5, "z")])
[(8, 'b'), (9, 'c'), (5, 'z')]
>>> gathered([(HeldRun(block, 2, 3), (0, 10)), (HeldRun(block, 0, 1), (5, 15))]).rows()
[(9, 'c', 0, 10), (7, 'a', 5, 15)]
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from boreas.wire.columns import Columns

#: pinned batches of fewer rows than this are never repacked, whatever their live share
FLOOR = 65_536


@dataclass(slots=True, eq=False)
class HeldRun:
    """Rows ``start``..``stop`` of ``block`` (a batch in run order), held in one session."""

    block: pa.RecordBatch
    start: int
    stop: int

    def __len__(self) -> int:
        return self.stop - self.start

    def rows(self) -> list[tuple]:
        return Columns(self.block.slice(self.start, self.stop - self.start)).rows()


def held_rows(items: Iterable) -> list[tuple]:
    """A session's held items (tuples and :class:`HeldRun` s) as rows, in order."""
    out: list[tuple] = []
    for item in items:
        if isinstance(item, HeldRun):
            out.extend(item.rows())
        else:
            out.append(item)
    return out


def held_count(items: Iterable) -> int:
    """The rows a session's held items stand for."""
    return sum(len(item) if isinstance(item, HeldRun) else 1 for item in items)


def gathered(spans: list[tuple[HeldRun, tuple[int, int] | None]]) -> Columns:
    """The rows of ``spans`` in order as one batch, each with its span's ``(window_start, window_end)`` appended
    as two int64 columns (``None``: nothing appended; every span alike).  ValueError: the blocks' schemas differ
    or a bound is beyond int64 (the caller goes by rows)."""
    offsets: dict[int, int] = {}
    blocks: list[pa.RecordBatch] = []
    starts, lengths, lows, highs = [], [], [], []
    size = 0
    for run, bounds in spans:
        at = offsets.get(id(run.block))
        if at is None:
            at = offsets[id(run.block)] = size
            size += run.block.num_rows
            blocks.append(run.block)
        starts.append(at + run.start)
        lengths.append(run.stop - run.start)
        if bounds is not None:
            lows.append(bounds[0])
            highs.append(bounds[1])
    length = np.array(lengths, np.int64)
    shift = np.array(starts, np.int64) - (np.cumsum(length) - length)
    index = pa.array(np.repeat(shift, length) + np.arange(int(length.sum()), dtype=np.int64))
    try:
        if len(blocks) == 1:
            batch = blocks[0].take(index)
        else:
            batch = pa.Table.from_batches(blocks).take(index).combine_chunks().to_batches()[0]
        if not lows:
            return Columns(batch)
        arrays = batch.columns + [pa.array(np.repeat(np.array(b, np.int64), length)) for b in (lows, highs)]
    except (pa.ArrowException, OverflowError) as exc:
        raise ValueError(f"held runs not gathered as columns: {exc}") from None
    names = batch.schema.names + ["__session_start", "__session_end"]
    return Columns(pa.RecordBatch.from_arrays(arrays, names=names))


@dataclass
class Pins:
    """Owns the count of held rows per batch a port's :class:`HeldRun` s keep alive (module docstring)."""

    live: dict[int, list] = field(default_factory=dict)  # id(block) -> [block, rows of it still held]
    pinned_rows: int = 0  # rows of every pinned block
    held: int = 0  # rows held in runs

    def hold(self, block: pa.RecordBatch, rows: int) -> None:
        entry = self.live.get(id(block))
        if entry is None:
            self.live[id(block)] = [block, rows]
            self.pinned_rows += block.num_rows
        else:
            entry[1] += rows
        self.held += rows

    def release(self, run: HeldRun) -> None:
        entry = self.live[id(run.block)]
        entry[1] -= run.stop - run.start
        self.held -= run.stop - run.start
        if entry[1] <= 0:
            del self.live[id(run.block)]
            self.pinned_rows -= run.block.num_rows

    def wasteful(self) -> bool:
        """Whether the pinned batches hold more than twice the held rows (and more than :data:`FLOOR`)."""
        return self.pinned_rows > max(2 * self.held, FLOOR)

    def clear(self) -> None:
        self.live.clear()
        self.pinned_rows = self.held = 0
