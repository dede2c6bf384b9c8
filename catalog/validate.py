"""Whole-topology checks: producers, references, box parameters, stream schemas, partitions.

These run on the merged catalog (``merge``), so a submission is checked
together with everything it builds on.  Stream schemas are inferred in
dataflow order from the inputs' declared schemas through each box type's
rules (:mod:`boreas.catalog.boxtypes`); a box whose inputs are already
broken is skipped rather than reported again, so one mistake gives one
message.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import arrays, changelog
from .boxtypes import BoxError, BoxTypeRegistry, builtin_registry
from .diagnostics import Diagnostic, Origin
from .model import PARTITION_SLOTS, Box, Catalog, Partition, Schema
from .schemas_of import SCALARS_ONLY as _SCALARS_ONLY
from .schemas_of import array_field, infer, schemas_of


@dataclass
class TopologyReport:
    """What validation learned: every stream's schema, and every problem."""

    stream_schemas: dict[str, Schema] = field(default_factory=dict)
    problems: list[Diagnostic] = field(default_factory=list)

    def fail(self, origin: Origin, reason: str) -> None:
        self.problems.append(Diagnostic.at(origin, reason))


def check_topology(catalog: Catalog, registry: BoxTypeRegistry | None = None) -> TopologyReport:
    registry = registry or builtin_registry()
    report = TopologyReport()
    _check_producers(catalog, report)
    _check_references(catalog, report)
    _infer_schemas(catalog, registry, report)
    _check_outputs(catalog, report)
    _check_array_streams(catalog, report)
    _check_partitions(catalog, registry, report)
    changelog.check(catalog, report.fail)  # boxes that cannot read the changelog they are fed
    return report


def stream_schemas(catalog: Catalog, registry: BoxTypeRegistry | None = None) -> dict[str, Schema]:
    """The schema of every stream whose schema can be told (for update XML to nodes): :func:`.schemas_of.
    schemas_of`, the inference alone, not the whole validation."""
    return schemas_of(catalog, registry or builtin_registry())


def _check_producers(catalog: Catalog, report: TopologyReport) -> None:
    for stream, producers in catalog.producers().items():
        if len(producers) > 1:
            later = producers[1]
            origin = catalog.boxes[later.box].origin if later.box else catalog.inputs[stream].origin
            report.fail(origin, f"stream {stream!r} has {len(producers)} producers: "
                                f"{' and '.join(p.describe() for p in producers)}")


def _check_references(catalog: Catalog, report: TopologyReport) -> None:
    produced = catalog.producers()
    for schema in catalog.schemas.values():
        for f in schema.fields:
            reason = arrays.unknown_alias(f, catalog.types)
            if reason:
                report.fail(f.origin if f.origin.line is not None else schema.origin,
                            f"schema {schema.name!r}: {reason}")
    for inp in catalog.inputs.values():
        if inp.schema not in catalog.schemas:
            report.fail(inp.origin, f"input stream {inp.stream!r} names unknown schema {inp.schema!r}")
    for out in catalog.outputs.values():
        if out.schema is not None and out.schema not in catalog.schemas:
            report.fail(out.origin, f"output stream {out.stream!r} names unknown schema {out.schema!r}")
        if out.stream not in produced:
            report.fail(out.origin, f"output stream {out.stream!r} has no producer "
                                    f"(no <input> and no box <out> writes it)")
    for box in catalog.boxes.values():
        for port, inport in enumerate(box.inputs):
            if inport.stream not in produced:
                report.fail(box.origin, f"box {box.name!r} in port {port} reads stream "
                                        f"{inport.stream!r}, which nothing produces")
            if inport.view is not None and inport.view not in catalog.views:
                report.fail(box.origin, f"box {box.name!r} in port {port} names unknown "
                                        f"connection point view {inport.view!r}")
        for table in box.access:
            if table not in catalog.tables:
                report.fail(box.origin, f"box {box.name!r} accesses unknown table {table!r}")
        if box.node is not None and box.node not in catalog.nodes:
            report.fail(box.origin, f"box {box.name!r} is placed on unknown node {box.node!r}")
    for table in catalog.tables.values():
        if table.schema not in catalog.schemas:
            report.fail(table.origin, f"table {table.name!r} names unknown schema {table.schema!r}")
        if table.stream is not None and table.stream not in produced:
            report.fail(table.origin, f"table {table.name!r} reads stream {table.stream!r}, "
                                      f"which nothing produces")
    for view in catalog.views.values():
        if view.stream not in produced:
            report.fail(view.origin, f"connection point view {view.name!r} is on stream "
                                     f"{view.stream!r}, which nothing produces")
    for query in catalog.queries.values():
        for name in query.boxes:
            if name not in catalog.boxes:
                report.fail(query.origin, f"query {query.name!r} lists unknown box {name!r}")
    for pub in catalog.publications.values():
        if pub.stream not in catalog.inputs:
            report.fail(pub.origin, f"publish to stream {pub.stream!r}, which is not an <input> stream")
    for sub in catalog.subscriptions.values():
        if sub.stream not in produced:
            report.fail(sub.origin, f"subscribe to stream {sub.stream!r}, which nothing produces")


def _infer_schemas(catalog: Catalog, registry: BoxTypeRegistry, report: TopologyReport) -> None:
    """Propagate schemas from inputs through boxes in dataflow order (:func:`.schemas_of.infer`), reporting
    what cannot be told."""
    report.stream_schemas.update(infer(catalog, registry, report.fail))


def _check_outputs(catalog: Catalog, report: TopologyReport) -> None:
    for out in catalog.outputs.values():
        declared = catalog.schemas.get(out.schema) if out.schema else None
        inferred = report.stream_schemas.get(out.stream)
        if declared is None or inferred is None:
            continue
        if inferred.name == declared.name:
            continue
        if not declared.same_shape(inferred):
            report.fail(out.origin, f"output stream {out.stream!r} declares schema {declared.name!r} "
                                    f"{declared.describe()}, but its producer yields {inferred.describe()}")
        else:  # same layout: the declared names are the ones users see
            report.stream_schemas[out.stream] = declared


def _check_array_streams(catalog: Catalog, report: TopologyReport) -> None:
    """Publishing into, or subscribing to, a stream with array fields would carry array values."""
    for pub in catalog.publications.values():
        schema = report.stream_schemas.get(pub.stream)
        found = array_field(catalog, schema) if schema is not None else None
        if found:
            report.fail(pub.origin, f"publish to stream {pub.stream!r}: its {found}; {_SCALARS_ONLY}")
    for sub in catalog.subscriptions.values():
        schema = report.stream_schemas.get(sub.stream)
        found = array_field(catalog, schema) if schema is not None else None
        if found:
            report.fail(sub.origin, f"subscribe to stream {sub.stream!r}: its {found}; {_SCALARS_ONLY}")


#: ``epoch-ms`` of a partition: the shortest and longest epoch (docs/cumulus.md §10, question 5).
EPOCH_MS = (10, 60_000)


def _check_partitions(catalog: Catalog, registry: BoxTypeRegistry, report: TopologyReport) -> None:
    """Each ``<partition>``: an existing box of a type that plans partitions, members, segments, epoch."""
    for name, part in catalog.partitions.items():
        for reason in partition_problems(part):
            report.fail(part.origin, reason)
        box = catalog.boxes.get(name)
        if box is None:
            report.fail(part.origin, f"partition names unknown box {name!r}")
            continue
        box_type = registry.get(box.type)
        if box_type is not None and box_type.plan_partition is None:
            types = " or ".join(registry.partitionable()) or "m3"
            report.fail(part.origin, f"box {name!r} is {_a(box.type)} {box.type} box; only {types} boxes can be "
                                     f"partitioned")


def _a(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def partition_problems(part: Partition) -> list[str]:
    """What is wrong with a partition on its own (no box or catalog needed): members, counts, segments."""
    where = f"partition of box {part.box!r}"
    problems = []
    if not part.nodes:
        problems.append(f"{where} lists no <node>")
    if not part.planned:  # as the user wrote it: one member per node (a repeat comes only from a failover)
        seen: set[str] = set()
        for endpoint in part.nodes:
            if endpoint in seen:
                problems.append(f"{where} lists node {endpoint!r} twice")
            seen.add(endpoint)
    if part.count is not None and part.count > PARTITION_SLOTS:
        problems.append(f"{where}: segments={part.count}, at most {PARTITION_SLOTS} (one per hash slot)")
    elif part.count is not None and part.count < 1:
        problems.append(f"{where}: segments={part.count}, at least 1")
    low, high = EPOCH_MS
    if not low <= part.epoch_ms <= high:
        problems.append(f"{where}: epoch-ms={part.epoch_ms}: between {low} and {high}")
    if part.layout < 0:
        problems.append(f"{where}: layout={part.layout}, a layout version is 0 or more")
    if part.members is not None and not 1 <= part.members <= len(part.nodes):
        problems.append(f"{where}: members={part.members}: between 1 and its {len(part.nodes)} <node>s")
    if part.coordinators is not None and not 1 <= part.coordinators <= len(part.layout_nodes):
        problems.append(f"{where}: coordinators={part.coordinators}: between 1 and its {len(part.layout_nodes)} "
                        f"members")
    if part.segments:
        problems += segment_problems(part)
    return problems


def segment_problems(part: Partition) -> list[str]:
    """Explicit segments (catalog form) must tile slots 0..4095 exactly once, each on a member."""
    box, problems = part.box, []
    ids: set[int] = set()
    for seg in part.segments:
        if seg.id in ids:
            problems.append(f"segments of box {box!r} have id {seg.id} twice")
        ids.add(seg.id)
        if seg.id < 0:
            problems.append(f"segment {seg.id} of box {box!r}: a segment id is 0 or more")
        if not 0 <= seg.lo < seg.hi <= PARTITION_SLOTS:
            problems.append(f"segment {seg.id} of box {box!r} has slots {seg.lo}-{seg.hi - 1}; a segment is a "
                            f"non-empty range within 0-{PARTITION_SLOTS - 1}")
        if not 0 <= seg.member < len(part.layout_nodes):
            problems.append(f"segment {seg.id} of box {box!r} is on member {seg.member}; the partition has "
                            f"{len(part.layout_nodes)}")
    if problems:
        return problems
    end = 0  # sorted by first slot: a gap or an overlap shows at the first slot concerned
    for seg in sorted(part.segments, key=lambda s: (s.lo, s.id)):
        if seg.lo > end:
            return [f"segments of box {box!r} leave slots {end}-{seg.lo - 1} unowned"]
        if seg.lo < end:
            return [f"segments of box {box!r} overlap at slot {seg.lo}"]
        end = seg.hi
    if end < PARTITION_SLOTS:
        return [f"segments of box {box!r} leave slots {end}-{PARTITION_SLOTS - 1} unowned"]
    return []
