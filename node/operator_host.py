"""The operators a node runs, from its local catalog: which boxes, their schemas, their partitions.

:class:`OperatorHost` follows each new local catalog
(:meth:`OperatorHost.reconfigure`): the schemas of the streams between boxes
are inferred with the same rules the Head validated them with, unchanged
boxes keep their operators and state (:class:`~boreas.node.box_state.BoxStates`
keeps them), new ones are built -- a partitioned box's member as a
:class:`~boreas.node.cumulus.part.PartOperator` -- and then the
:class:`~boreas.node.router.Router` and the
:class:`~boreas.node.outputs.Outputs` are told the new routes.
:meth:`OperatorHost.refusals` tells, before anything changes, why an
update's boxes could not run here.

It owns what the catalog says about the streams here: their schemas, the
row types of those that enter (how their batches decode), the partitions,
the streams between a partitioned box's members, and which member
coordinates each input stream (the intake's admission asks it).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from boreas.catalog.boxtypes import BoxTypeRegistry
from boreas.catalog.model import Box, Catalog, Partition, Schema
from boreas.catalog.index import CatalogIndex
from boreas.catalog.table_params import bind, bound_boxes
from boreas.catalog.validate import stream_schemas
from boreas.wire.tuples import RowType

from .box_state import BoxStates
from .cumulus.part import PartOperator
from .cumulus.windowing import part_operator
from .operators import Operator, build_operator
from .operators.base import InternalStreams, typed_by
from .operators.m3windows import follow_watermarks
from .operators.table import TableOperator
from .operators.table_rows import TableStore
from .outputs import Outputs
from .router import Router
from .slice_change import changed_boxes

log = logging.getLogger("boreas.node.dataflow")  # the dataflow's records keep their logger


class OperatorHost:
    """Owns the local catalog's view of a node's streams and builds its operators (into :class:`BoxStates`)."""

    def __init__(self, endpoint: str, box_types: BoxTypeRegistry, states: BoxStates, router: Router,
                 out: Outputs):
        self.endpoint = endpoint
        self.box_types = box_types  # the box types this node's slices are checked and inferred with
        self.states = states
        self.router = router
        self.out = out
        self.schemas: Mapping[str, Schema] = {}  # the index's (never written), or with internal streams'
        self.row_types: dict[str, RowType] = {}  # streams that enter this node
        self.partitions: dict[str, Partition] = {}  # partitioned boxes, from the local catalog
        self.internal: dict[str, InternalStreams] = {}  # box -> streams between its parts on other nodes
        self.coordinators: dict[str, PartOperator] = {}  # input stream -> the partition member it feeds
        # The local catalog checked, with what the check learned (catalog/index.py): an update is checked and
        # its schemas inferred by what it changes, not by typing the whole slice again, twice (a node of a
        # 100,000-box catalog holds 5,000 boxes, and a deployment in ten parts re-typed them ten times).
        self.index = CatalogIndex.build(Catalog(), box_types)
        self.checked: CatalogIndex | None = None  # the last refusals' candidate, checked (for its reconfigure)
        self.bound: tuple[Catalog, dict[str, Box]] | None = None  # and its boxes, bound (_bound)
        # Operators built by the last refusals' trial, handed to the reconfigure that follows (built once).
        self.trial: dict[str, tuple[Box, list[Schema], list[Schema], Operator]] = {}
        self.tables = TableStore()  # the rows of the <table>s this node's table boxes access
        # The last refusals' candidate and the boxes its update changed (node/slice_change.py), for its reconfigure.
        self.change: tuple[Catalog, list[str]] | None = None
        # The operators the node's walks after each catalog look at (tables, partition members, windows that
        # follow <input> watermarks), by box in the operators' order: not every box, per update (issue 37).
        self.special: dict[str, Operator] = {}

    def reconfigure(self, catalog: Catalog, keep_state: tuple[str, ...] = (),
                    touched: tuple[Catalog, Mapping[str, set[str]]] | None = None) -> None:
        """Follow a new local catalog: keep unchanged boxes (and their state), build new ones.

        Boxes named in ``keep_state`` carry their state over even though their
        declaration changed (a box whose in port was rewired to a filter).
        When ``catalog`` is the candidate the last :meth:`refusals` checked from
        the keys its update wrote, only the boxes it changed are built and
        routed (node/slice_change.py), and the node's other walks go over its
        few special operators (:attr:`special`), not every box; so it is when
        ``touched`` (:attr:`LocalCatalog.touched`: a change the node made
        itself, a box moved or a filter inserted) was written over the
        catalog followed last.
        """
        keys = touched[1] if touched is not None and touched[0] is self.index.catalog else None
        only = self.change[1] if self.change is not None and self.change[0] is catalog else None
        if only is None and keys is not None:
            only = changed_boxes(catalog, keys, self.states.boxes, self.states.broken, self.index.catalog)
        if only is not None and keep_state:
            only = [*only, *(n for n in keep_state if n not in only)]
        self.index = self._checked(catalog, keys)
        boxes = self._bound(catalog) if only is None else _bound_only(catalog, only)
        self.checked = self.bound = self.change = None
        # (a slice with problems, such as one mid-move, is inferred as before: the index is exact for valid ones)
        schemas = self.index.stream_schemas if self.index.ok else stream_schemas(catalog, self.box_types)
        changed = [name for name, part in catalog.partitions.items()
                   if self.partitions.get(name) != part and not self._runs(name, part)]
        self.partitions = dict(catalog.partitions)
        with typed_by(self.index.typings if self.index.ok else {}):
            failed = self.states.follow(boxes, schemas, keep_state, self.build, changed, only=only)
        for name, why in failed.items():
            log.error("node %s cannot run box %r: %s", self.endpoint, name, why)
        self._follow_special(only)
        self._share_tables()
        follow_watermarks(self.special.values(), catalog.inputs)  # a windowed view's <input watermark>
        self.internal = {name: found for name, op in self.special.items()
                         if (found := op.internal_streams()) is not None}
        self.schemas = schemas
        if self.internal:
            self.schemas = dict(schemas)  # (the index's mapping is never written)
            for streams in self.internal.values():
                self.schemas.update(streams.schemas)
        entering = [*catalog.inputs, *(s for streams in self.internal.values() for s in streams.inputs)]
        self.row_types = {s: _same_or_new(self.row_types.get(s), self.schemas[s]) for s in entering if s in self.schemas}
        for streams in self.internal.values():
            self.row_types.update(streams.decoders)
        self.coordinators = {p.stream: op for name, op in self.special.items()
                             if isinstance(op, PartOperator) for p in self.states.boxes[name].inputs}
        self.trial = {}
        self.router.rewire(self.internal, None if only is None else [*only, *changed])
        self.out.follow(catalog, {s: e for streams in self.internal.values() for s, e in streams.outputs})

    def _follow_special(self, only: list[str] | None) -> None:
        """:attr:`special` after the boxes followed: found again among ``only`` (None: among every one)."""
        operators = self.states.operators
        if only is None:
            self.special = {name: op for name, op in operators.items() if _special(op)}
            return
        for name in only:
            self.special.pop(name, None)
            op = operators.get(name)
            if op is not None and _special(op):
                self.special[name] = op
        rank = self.states.rank  # (in the operators' order, as a walk over them finds them)
        self.special = {name: self.special[name] for name in sorted(self.special, key=lambda n: rank.get(n, -1))}

    def _share_tables(self) -> None:
        """Give the boxes that access a table the same rows (node/operators/table_rows.py), made here."""
        used = []
        for op in self.special.values():
            if isinstance(op, TableOperator):
                op.attach(self.tables.table(op.table_name, op.key_indexes))
                used.append(op.table_name)
        self.tables.keep(used)

    def _runs(self, box: str, partition: Partition) -> bool:
        """Whether box's member here already runs ``partition`` (a layout its members switched to themselves)."""
        op = self.states.operators.get(box)
        if not isinstance(op, PartOperator) or not op.follows(partition):
            return False
        op.partition = partition
        return True

    def build(self, box: Box, inputs: list[Schema], outputs: list[Schema]) -> Operator:
        """An operator for ``box``: a member of its partition if it is partitioned, else the usual one."""
        partition = self.partitions.get(box.name)
        if partition is not None:
            return part_operator(box, inputs, outputs, partition, self.endpoint)
        tried = self.trial.pop(box.name, None)
        if tried is not None and tried[:3] == (box, inputs, outputs):
            return tried[3]  # built by refusals' trial and never run: not built twice
        return build_operator(box, inputs, outputs)

    def _try(self, box: Box, inputs: list[Schema], outputs: list[Schema]) -> Operator:
        """A trial build (refusals), kept for the reconfigure that applies the same box."""
        operator = self.build(box, inputs, outputs)
        if box.name not in self.partitions:
            self.trial[box.name] = (box, inputs, outputs, operator)
        return operator

    def refusals(self, candidate: Catalog, source: str, rules: bool = True,
                 touched: tuple[Catalog, Mapping[str, set[str]]] | None = None) -> list[dict[str, object]]:
        """Why the boxes of an update (``source``: its document name) could not run here; [] if they can.

        The same topology checks the Head runs, on this node's slice (unless
        ``rules`` is False: a box moving in, whose slice is briefly both the
        stream's input and its producer until the Head re-syncs), then a
        trial build of every new or changed box: a problem found in the
        update refuses it whole, before anything changes.  ``touched``: a catalog and the keys ``candidate``
        changed from it (:attr:`LocalCatalog.touched`), so that the check, when that catalog is the one this
        node holds, compares only those instead of every element the node holds.
        """
        keys = touched[1] if touched is not None and touched[0] is self.index.catalog else None
        report = self._checked(candidate, keys)  # (the same problems as check_topology's: tests/test_incremental_*)
        self.checked = report
        only = None if keys is None else changed_boxes(candidate, keys, self.states.boxes, self.states.broken,
                                                       self.index.catalog)
        self.change = None if only is None else (candidate, only)
        found: list[dict[str, object]] = [d.as_dict() for d in report.problems if d.file == source] if rules else []
        if not found:  # the rules passed; can each box really be built here?
            partitions, self.partitions = self.partitions, dict(candidate.partitions)
            try:
                self.trial = {}
                with typed_by(report.typings):  # (the boxes' out schemas were checked typing them: not again)
                    bound = self._bound(candidate) if only is None else _bound_only(candidate, only)
                    reasons = self.states.check(bound, report.stream_schemas, self._try, only=only)
            finally:
                self.partitions = partitions
            found = [{"file": source, "line": None, "path": f"box {name}", "reason": f"box {name!r}: {why}"}
                     for name, why in sorted(reasons.items())]
        return found

    def _bound(self, catalog: Catalog) -> dict[str, Box]:
        """``catalog``'s boxes, table boxes bound to their tables: made once for an update's refusals and its
        reconfigure (each a pass over every box the node holds)."""
        if self.bound is None or self.bound[0] is not catalog:
            self.bound = (catalog, bound_boxes(catalog))
        return self.bound[1]

    def _checked(self, catalog: Catalog, touched: Mapping[str, set[str]] | None = None) -> CatalogIndex:
        """The index of ``catalog``: the one held, the last refusals' candidate's, or derived now."""
        for index in (self.index, self.checked):
            if index is not None and index.catalog is catalog:
                return index
        return self.index.derive(catalog, touched)

    def row_type(self, stream: str) -> RowType:
        """How rows of ``stream`` decode here (a stream that enters, or any this node knows the schema of)."""
        return self.row_types.get(stream) or RowType(self.schemas[stream])


def _special(op: Operator) -> bool:
    """Whether a walk after each catalog must visit ``op`` (:attr:`OperatorHost.special`)."""
    return (isinstance(op, (TableOperator, PartOperator)) or getattr(op, "follow_inputs", None) is not None
            or op.internal_streams() is not None)


def _bound_only(catalog: Catalog, names: list[str]) -> dict[str, Box]:
    """The boxes of ``catalog`` among ``names``, bound to their tables (:func:`bound_boxes`' for a few)."""
    boxes = catalog.boxes
    return {name: bind(boxes[name], catalog) for name in names if name in boxes}


def _same_or_new(row_type: RowType | None, schema: Schema) -> RowType:
    return row_type if row_type is not None and row_type.schema == schema else RowType(schema)
