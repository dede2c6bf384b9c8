"""A batch of Arrow columns routed to the members that write or serve its rows, a column at a time (§3.5).

A coordinator that takes a batch as :class:`~boreas.wire.columns.Columns`
(a publisher sent Arrow, or an upstream box emitted a changelog) does not
make a row of it: the slots of the key columns are hashed by numpy
(:mod:`~boreas.node.cumulus.slot_columns`, the same slots the per-row hash
gives), each slot's owner taken from the layout as an array, and each member
gets the rows it needs as one filtered batch, which travels as Arrow IPC in
its ``Work`` (the weights column and all).  Where a row goes is
:meth:`Roles.placement <boreas.m3.cumulus.roles.Roles.placement>`: to a few
fixed members, and to the owner of its value at some columns.

A row's *sign* picks the insert or the delete trigger's placement: the box's
sign field times the batch's weight; a row whose sign field is neither 1 nor
-1 stays with the coordinator's own member, whose splitter counts it
refused, as on the row path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from boreas.m3.boxtype import PortPlan
from boreas.m3.cumulus import Layout
from boreas.m3.cumulus.roles import Roles
from .slot_columns import column_slots
from boreas.wire.columns import Columns

Placement = tuple[tuple[int, ...], tuple[int, ...]]  # (members every row goes to, relation columns placing it)

_FILL = {"STRING": pa.scalar("", pa.string())}  # (a null key is hashed as a default: the member refuses the row)


@dataclass
class ColumnRoute:
    """Where the rows of one in port go under one layout, for batches of columns."""

    port: PortPlan
    inserts: Placement
    deletes: Placement
    owners: np.ndarray  # slot -> its owner
    me: int  # the coordinator's own member (rows with a sign other than +-1)

    @classmethod
    def of(cls, roles: Roles, port: PortPlan, layout: Layout, me: int) -> ColumnRoute:
        return cls(port, roles.placement(port.relation, 1), roles.placement(port.relation, -1),
                   np.asarray(layout.owners, dtype=np.int64), me)

    def shares(self, columns: Columns) -> dict[int, Columns]:
        """Each member's rows of ``columns`` (in their order; a row may go to several), by member."""
        n = len(columns)
        if not n:
            return {}
        owners: dict[int, np.ndarray] = {}

        def owner(i: int) -> np.ndarray:
            got = owners.get(i)
            if got is None:
                got = owners[i] = self.owners[self._slots(columns.batch, i)]
            return got

        signs = self._signs(columns)
        if signs is None:
            masks = self._masks(self.inserts, owner, n)
        else:
            up, down = signs > 0, signs < 0
            ins = self._masks(self.inserts, owner, n) if up.any() else {}
            dels = self._masks(self.deletes, owner, n) if down.any() else {}
            masks = {}
            for m in ins.keys() | dels.keys():
                mask = np.zeros(n, dtype=bool)
                if m in ins:
                    mask |= up & ins[m]
                if m in dels:
                    mask |= down & dels[m]
                masks[m] = mask
            other = ~(up | down)
            if other.any():
                masks[self.me] = masks.get(self.me, np.zeros(n, dtype=bool)) | other
        members = sorted(masks)
        hits = [int(masks[m].sum()) for m in members]
        if len(members) > 1 and sum(hits) == n:  # each row to one member: one take, then slices (no copy)
            dest = np.full(n, -1, dtype=np.int64)
            for m in members:
                dest[masks[m]] = m
            if (dest >= 0).all():
                return _split(columns, dest, members, hits)
        out: dict[int, Columns] = {}
        for m, count in zip(members, hits):
            if count == n:
                out[m] = columns
            elif count:
                out[m] = columns.filter(pa.array(masks[m]))
        return out

    def _slots(self, batch: pa.RecordBatch, i: int) -> np.ndarray:
        """The slots of relation column ``i`` (the in stream's column, the sign field skipped)."""
        s = self.port.sign_index
        at = i if s is None or i < s else i + 1
        kind = self.port.columns[i][1]
        column = batch.column(at)
        if column.null_count:
            column = pc.fill_null(column, _FILL.get(kind, pa.scalar(0, column.type)))
        return column_slots(column, kind)

    def _signs(self, columns: Columns) -> np.ndarray | None:
        """Each row's sign (+1 insert, -1 delete, 0 refused), or None when every row inserts."""
        signs = None
        s = self.port.sign_index
        if s is not None:  # (numpy, not pyarrow.compute: a compute call costs a millisecond of Python here)
            column = columns.batch.column(s)
            if column.null_count:
                column = pc.fill_null(column, pa.scalar(0, column.type))
            raw = column.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
            signs = np.where((raw == 1) | (raw == -1), raw, 0)
        if columns.weights is not None:
            weights = np.sign(columns.weights.to_numpy(zero_copy_only=False))
            signs = weights if signs is None else signs * weights
        return signs

    @staticmethod
    def _masks(placement: Placement, owner, n: int) -> dict[int, np.ndarray]:
        fixed, reads = placement
        masks = {m: np.ones(n, dtype=bool) for m in fixed}
        for i in reads:
            at = owner(i)
            for m in np.unique(at).tolist():
                if m not in fixed:
                    hit = at == m
                    masks[m] = masks[m] | hit if m in masks else hit
        return masks


def _split(columns: Columns, dest: np.ndarray, members: list[int], counts: list[int]) -> dict[int, Columns]:
    """``columns`` cut by ``dest`` (each row's one member; ``members`` sorted, ``counts`` rows each), rows in
    their order within each member."""
    order = pa.array(np.argsort(dest, kind="stable"))
    batch = columns.batch.take(order)
    weights = None if columns.weights is None else columns.weights.take(order)
    out: dict[int, Columns] = {}
    at = 0
    for m, count in zip(members, counts):
        if count:
            out[m] = Columns(batch.slice(at, count), weights=None if weights is None else weights.slice(at, count))
        at += count
    return out


def concat(pieces: list[Columns]) -> Columns:
    """Batches of one in stream as one (held rows stamped as one version), weights kept (1 where a piece had none)."""
    if len(pieces) == 1:
        return pieces[0]
    schema = pieces[0].batch.schema
    batches = [p.batch if p.batch.schema.equals(schema) else pa.RecordBatch.from_arrays(p.batch.columns, schema=schema)
               for p in pieces]
    batch = pa.Table.from_batches(batches, schema).combine_chunks().to_batches()
    whole = batch[0] if batch else pa.RecordBatch.from_pylist([], schema)
    if all(p.weights is None for p in pieces):
        return Columns(whole)
    weights = pa.concat_arrays([p.weights if p.weights is not None else pa.array(np.ones(len(p), dtype=np.int64))
                                for p in pieces])
    return Columns(whole, weights=weights)
