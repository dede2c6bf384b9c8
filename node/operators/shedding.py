"""Load shedding: ``random_drop`` drops tuples, ``window_drop`` drops whole windows.

Both draw from their own :class:`random.Random`, seeded by the optional
``seed`` parameter, else by the box's name, so a node replaying its input
log after a crash makes the same decisions again.  The generator's state is part of :meth:`state`, so a
moved box makes the same decisions the original would have made.

``random_drop``
    Each tuple is dropped with probability ``drop_rate`` (0 keeps all, 1
    drops all), independently; Borealis's ``max_batch_size`` is accepted
    and ignored, as Borealis ignores it.
``window_drop``
    Dropping random tuples ruins windowed aggregates downstream: every
    window loses some tuples and every result is wrong.  window_drop keeps
    windows intact instead: the stream is cut into windows of
    ``window-size`` and one draw per window decides whether *all* of its
    tuples are dropped (probability ``drop_rate``) or all kept.

    * ``window-size-by`` VALUES (the default when ``order-on-field`` is
      given): windows are ``[k*size, (k+1)*size)`` of the order field --
      aligned to multiples of the size, so they line up with a downstream
      aggregate using ``independent-window-alignment`` and the same size.
      A tuple of a window older than the group's current one (out of
      order) is kept: its window's decision is gone and dropping it could
      only hurt.
    * ``window-size-by`` TUPLES: every ``window-size`` consecutive tuples.

    With the optional ``group-by`` (as in Borealis) windows and decisions
    are per group.

A batch that arrives as Arrow columns is shed as columns (issue 30): one draw per batch makes its mask
(node/operators/shedding_columns.py), the same numbers from the same generator as the row loops below,
so both paths keep the same rows whatever the batch boundaries, and the box emits the kept part of the
batch as :class:`~boreas.wire.columns.Columns` (the whole batch, as it came, when nothing is dropped).
The row loops are the definition of the semantics and take the batches the columns cannot treat exactly.
Neither box reads a changelog (catalog/changelog.py refuses one: a dropped -1 whose +1 was kept would
leave a row in the view for ever).
"""

from __future__ import annotations

import operator
import random
import zlib
from typing import Any

import pyarrow as pa

from boreas.catalog.model import Box, Schema
from boreas.node.compile import STR, kind_of
from boreas.wire.columns import Columns

from . import shedding_columns
from .base import Emitted, Operator, group_key_from, group_key_parts


def _rng_state(rng: random.Random) -> list:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def _set_rng_state(rng: random.Random, state: list) -> None:
    version, internal, gauss = state
    rng.setstate((version, tuple(internal), gauss))


class _Shedder(Operator):
    takes_columns = True  # a batch of columns is shed as columns (node/operators/shedding_columns.py)

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema], *, columnar: bool = True):
        """``columnar=False``: Arrow batches are read as rows (the tests' and bench/columnar_rest.py's peer)."""
        super().__init__(box, inputs, outputs)
        self.columnar = columnar
        self.check_outputs()
        rate = self.number("drop_rate", required=True, low=0)
        if rate > 1:  # type: ignore[operator]
            raise self.param_error("drop_rate", "must be between 0 and 1")
        self.drop_rate = float(rate)  # type: ignore[arg-type]
        # Without a seed parameter, the box's name seeds it: a node replaying its log after a
        # crash must draw the same numbers as before (later draws continue from the state).
        seed = self.seed()
        self._rng = random.Random(zlib.crc32(box.name.encode()) if seed is None else seed)
        self._ports = range(len(outputs))
        self.dropped = 0

    def emitted(self, kept: list[tuple] | Columns) -> Emitted:
        return [(p, kept) for p in self._ports] if kept else []

    def kept_columns(self, columns: Columns, keep) -> Emitted:
        """The rows of ``columns`` where ``keep`` (a numpy bool array) holds, as the batch this box emits."""
        count = int(keep.sum())
        self.dropped += len(columns) - count
        if count == len(columns):
            return self.emitted(columns)  # the whole batch as it came (its IPC bytes kept)
        return self.emitted(columns.filter(pa.array(keep))) if count else []


class RandomDropOperator(_Shedder):
    def process(self, port: int, rows: list[tuple] | Columns, now: float) -> Emitted:
        if isinstance(rows, Columns):
            if self.columnar:
                return self.kept_columns(rows, shedding_columns.random_drop_mask(self._rng, self.drop_rate,
                                                                                 len(rows)))
            rows = rows.rows()
        rate, draw = self.drop_rate, self._rng.random
        kept = [row for row in rows if draw() >= rate]
        self.dropped += len(rows) - len(kept)
        return self.emitted(kept)

    def state(self) -> dict:
        return {"rng": _rng_state(self._rng), "dropped": self.dropped}

    def restore(self, state: dict, now: float | None = None) -> None:
        _set_rng_state(self._rng, state["rng"])
        self.dropped = int(state.get("dropped", 0))


class WindowDropOperator(_Shedder):
    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema], *, columnar: bool = True):
        super().__init__(box, inputs, outputs, columnar=columnar)
        schema = inputs[0]
        on = box.param("order-on-field")
        by = self.choice("window-size-by", ("VALUES", "TUPLES"), "VALUES" if on else "TUPLES")
        self.by_values = by == "VALUES"
        self.size = self.number("window-size", whole=not self.by_values, positive=True, required=True)
        self.order: int | None = None
        if self.by_values:
            if not on:
                raise self.error("needs parameter 'order-on-field' (window-size-by VALUES)")
            self.order = self.field_index(schema, on, "order-on-field")
            if kind_of(schema.fields[self.order].type) == STR:
                raise self.param_error("order-on-field", "windows by VALUES need a numeric field")
        groups = self.group_indexes(schema)
        self._group_fields = groups
        self._width = len(groups)
        self._key = operator.itemgetter(*groups) if groups else None
        # key -> [current window (its start for VALUES, its index for TUPLES), drop?, tuples seen]
        self._groups: dict[Any, list] = {}

    def process(self, port: int, rows: list[tuple] | Columns, now: float) -> Emitted:
        if isinstance(rows, Columns):
            if self.columnar and rows:
                try:  # (RowPath comes before the generator or a group changes)
                    keep, _ = shedding_columns.window_drop_mask(rows.batch, self._groups, self._rng,
                                                               self.drop_rate, self.size, self.order,
                                                               self._group_fields)
                except shedding_columns.RowPath:
                    pass
                else:
                    return self.kept_columns(rows, keep)
            rows = rows.rows()
        groups, keyf, size, draw, rate = self._groups, self._key, self.size, self._rng.random, self.drop_rate
        kept: list[tuple] = []
        keep = kept.append
        oi = self.order
        for row in rows:
            key = keyf(row) if keyf is not None else None
            g = groups.get(key)
            if oi is not None:
                v = row[oi]
                if v is None:
                    keep(row)
                    continue
                window = v - v % size
            else:
                window = g[2] // size if g is not None else 0
            if g is None:
                g = groups[key] = [window, draw() < rate, 0]
            elif window > g[0]:
                g[0], g[1] = window, draw() < rate
            g[2] += 1
            if g[1] and window == g[0]:
                self.dropped += 1
            else:
                keep(row)
        return self.emitted(kept)

    def state_entries(self) -> int:
        """Groups with an open window."""
        return len(self._groups)

    def state(self) -> dict:
        return {"rng": _rng_state(self._rng), "dropped": self.dropped,
                "groups": [[group_key_parts(k, self._width), *g] for k, g in self._groups.items()]}

    def restore(self, state: dict, now: float | None = None) -> None:
        _set_rng_state(self._rng, state["rng"])
        self.dropped = int(state.get("dropped", 0))
        self._groups = {group_key_from(list(parts), self._width): [window, bool(drop), int(seen)]
                        for parts, window, drop, seen in state.get("groups", [])}
