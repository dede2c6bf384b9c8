"""Whole-topology checks: producers, references, box parameters, stream schemas, partitions.

These run on the merged catalog (``merge``), so a submission is checked
together with everything it builds on.  Stream schemas are inferred in
dataflow order from the inputs' declared schemas through each box type's
rules (:mod:`boreas.catalog.boxtypes`); a box whose inputs are already
broken is skipped rather than reported again, so one mistake gives one
message.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import arrays, changelog, table_params
from .app_diff import unselected_columns_note
from .boxtypes import BoxTypeRegistry, builtin_registry
from .declared_inputs import publish_reason
from .declared_nulls import null_fields_note
from .diagnostics import Diagnostic, Origin
from .model import (
    PARTITION_SLOTS,
    Box,
    Catalog,
    ConnectionPointView,
    Input,
    Output,
    Partition,
    Producer,
    Publication,
    Query,
    Schema,
    Subscription,
    Table,
)
from .schemas_of import infer, schemas_of


@dataclass
class TopologyReport:
    """What validation learned: every stream's schema, and every problem."""

    stream_schemas: dict[str, Schema] = field(default_factory=dict)
    problems: list[Diagnostic] = field(default_factory=list)

    def fail(self, origin: Origin, reason: str) -> None:
        self.problems.append(Diagnostic.at(origin, reason))


BoxCheck = Callable[[Catalog, Box, list[Schema | None]], list[str]]
"""A check of one box given its in streams' schemas (None: not told); reasons reported at the box."""
StreamCheck = Callable[[Catalog, str, Schema], list[str]]
"""A check of one stream given its schema; reasons reported at what produces it."""


@dataclass(frozen=True)
class Checks:
    """Checks other parts of Boreas plug into validation, passed in like box types (nothing registers itself).

    Each must be a function of what it is given (a box and its in schemas,
    a stream and its schema, and the catalog's other elements only through
    those), so that :mod:`.index` can run it again only where a change
    reaches: a box check for the boxes changed or whose in schemas moved,
    a stream check for the streams whose producers or schema changed.
    """

    boxes: tuple[BoxCheck, ...] = ()
    streams: tuple[StreamCheck, ...] = ()
    #: Checks that read the whole catalog (a property that flows along the dataflow, say): run whole
    #: on every change, both ways, so each must be cheap (dict walks, no expression parsing).
    whole: tuple[Callable[[Catalog, Callable[[Origin, str], None]], None], ...] = ()


def plugged_problems(catalog: Catalog, checks: Checks, schemas: Mapping[str, Schema], boxes: Iterable[str],
                     streams: Iterable[str], producer_origin: Callable[[str], Origin]) -> list[Diagnostic]:
    """What the plugged-in ``checks`` find about these boxes and streams (``schemas``: every stream's)."""
    found = []
    for name in boxes:
        box = catalog.boxes[name]
        ins = [schemas.get(p.stream) for p in box.inputs]
        found += [Diagnostic.at(box.origin, reason) for check in checks.boxes for reason in check(catalog, box, ins)]
    for stream in streams:
        schema = schemas.get(stream)
        if schema is not None:
            found += [Diagnostic.at(producer_origin(stream), reason)
                      for check in checks.streams for reason in check(catalog, stream, schema)]
    return found


def check_topology(catalog: Catalog, registry: BoxTypeRegistry | None = None,
                   checks: Checks | None = None) -> TopologyReport:
    """Check everything (the oracle :mod:`.index`'s incremental check is tested against); ``checks``: more,
    plugged in."""
    registry = registry or builtin_registry()
    report = TopologyReport()
    produced = catalog.producers()
    for stream, producers in produced.items():
        report.problems += producer_problems(catalog, stream, producers)
    for kind, check in REFERENCE_CHECKS:
        for obj in getattr(catalog, kind).values():
            report.problems += check(catalog, obj, produced)
    _infer_schemas(catalog, registry, report)
    for out in catalog.outputs.values():
        report.problems += output_schema_problems(catalog, out, report.stream_schemas)
    for kind in ("publications", "subscriptions"):
        for obj in getattr(catalog, kind).values():
            report.problems += array_stream_problems(catalog, obj, report.stream_schemas)
    for name, part in catalog.partitions.items():
        report.problems += partition_check(catalog, registry, name, part)
    if checks is not None:
        report.problems += plugged_problems(catalog, checks, report.stream_schemas, catalog.boxes, produced,
                                            lambda s: producer_origin(catalog, produced[s]))
    for check in whole_checks(checks):
        check(catalog, report.fail)
    return report


WholeCheck = Callable[[Catalog, Callable[[Origin, str], None]], None]

#: Whole-catalog checks every validation runs, both ways: boxes that cannot read the changelog they are fed
#: (changelog-ness flows downstream, so it is a property of the whole dataflow; catalog/changelog.py), and
#: tables accessed from several nodes (catalog/table_params.py).
BUILTIN_WHOLE: tuple[WholeCheck, ...] = (changelog.check, table_params.check)


def whole_checks(checks: Checks | None) -> tuple[WholeCheck, ...]:
    """The built-in whole-catalog checks, then those plugged in."""
    return BUILTIN_WHOLE + (checks.whole if checks is not None else ())


def producer_origin(catalog: Catalog, producers: list[Producer]) -> Origin:
    """Where a stream's (first) producer was declared: its box, or its ``<input>``."""
    first = producers[0]
    return catalog.boxes[first.box].origin if first.box else catalog.inputs[first.stream].origin


def stream_schemas(catalog: Catalog, registry: BoxTypeRegistry | None = None) -> dict[str, Schema]:
    """The schema of every stream whose schema can be told (for update XML to nodes): :func:`.schemas_of.
    schemas_of`, the inference alone, not the whole validation."""
    return schemas_of(catalog, registry or builtin_registry())


# -- per-element checks: the full check runs each on every element, :mod:`.index` on what a change touches --


def producer_problems(catalog: Catalog, stream: str, producers: list[Producer]) -> list[Diagnostic]:
    """A stream has one producer."""
    if len(producers) <= 1:
        return []
    later = producers[1]
    origin = catalog.boxes[later.box].origin if later.box else catalog.inputs[stream].origin
    return [Diagnostic.at(origin, f"stream {stream!r} has {len(producers)} producers: "
                                  f"{' and '.join(p.describe() for p in producers)}")]


def _schema_refs(catalog: Catalog, schema: Schema, produced: Container[str]) -> list[Diagnostic]:
    found = []
    for f in schema.fields:
        reason = arrays.unknown_alias(f, catalog.types)
        if reason:
            found.append(Diagnostic.at(f.origin if f.origin.line is not None else schema.origin,
                                       f"schema {schema.name!r}: {reason}"))
    return found


def _input_refs(catalog: Catalog, inp: Input, produced: Container[str]) -> list[Diagnostic]:
    if inp.schema not in catalog.schemas:
        return [Diagnostic.at(inp.origin, f"input stream {inp.stream!r} names unknown schema {inp.schema!r}")]
    return []


def _output_refs(catalog: Catalog, out: Output, produced: Container[str]) -> list[Diagnostic]:
    found = []
    if out.schema is not None and out.schema not in catalog.schemas:
        found.append(Diagnostic.at(out.origin, f"output stream {out.stream!r} names unknown schema {out.schema!r}"))
    if out.stream not in produced:
        found.append(Diagnostic.at(out.origin, f"output stream {out.stream!r} has no producer "
                                               f"(no <input> and no box <out> writes it)"))
    return found


def _box_refs(catalog: Catalog, box: Box, produced: Container[str]) -> list[Diagnostic]:
    found = []
    for port, inport in enumerate(box.inputs):
        if inport.stream not in produced:
            found.append(Diagnostic.at(box.origin, f"box {box.name!r} in port {port} reads stream "
                                                   f"{inport.stream!r}, which nothing produces"))
        if inport.view is not None and inport.view not in catalog.views:
            found.append(Diagnostic.at(box.origin, f"box {box.name!r} in port {port} names unknown "
                                                   f"connection point view {inport.view!r}"))
    for table in box.access:
        if table not in catalog.tables:
            found.append(Diagnostic.at(box.origin, f"box {box.name!r} accesses unknown table {table!r}"))
    if box.node is not None and box.node not in catalog.nodes:
        found.append(Diagnostic.at(box.origin, f"box {box.name!r} is placed on unknown node {box.node!r}"))
    return found


def _table_refs(catalog: Catalog, table: Table, produced: Container[str]) -> list[Diagnostic]:
    found = []
    if table.schema not in catalog.schemas:
        found.append(Diagnostic.at(table.origin, f"table {table.name!r} names unknown schema {table.schema!r}"))
    if table.stream is not None and table.stream not in produced:
        found.append(Diagnostic.at(table.origin, f"table {table.name!r} reads stream {table.stream!r}, "
                                                 f"which nothing produces"))
    return found


def _view_refs(catalog: Catalog, view: ConnectionPointView, produced: Container[str]) -> list[Diagnostic]:
    if view.stream not in produced:
        return [Diagnostic.at(view.origin, f"connection point view {view.name!r} is on stream "
                                           f"{view.stream!r}, which nothing produces")]
    return []


def _query_refs(catalog: Catalog, query: Query, produced: Container[str]) -> list[Diagnostic]:
    return [Diagnostic.at(query.origin, f"query {query.name!r} lists unknown box {name!r}")
            for name in query.boxes if name not in catalog.boxes]


def _publication_refs(catalog: Catalog, pub: Publication, produced: Container[str]) -> list[Diagnostic]:
    if pub.stream not in catalog.inputs:
        return [Diagnostic.at(pub.origin, publish_reason(catalog, pub.stream))]
    return []


def _subscription_refs(catalog: Catalog, sub: Subscription, produced: Container[str]) -> list[Diagnostic]:
    if sub.stream not in produced:
        return [Diagnostic.at(sub.origin, f"subscribe to stream {sub.stream!r}, which nothing produces")]
    return []


ReferenceCheck = Callable[[Catalog, Any, Container[str]], list[Diagnostic]]

#: Each element's references (to schemas, streams, boxes, nodes, ...), by the Catalog dict it lives in,
#: in the order they are reported; ``produced`` holds every stream something produces.
REFERENCE_CHECKS: tuple[tuple[str, ReferenceCheck], ...] = (
    ("schemas", _schema_refs),
    ("inputs", _input_refs),
    ("outputs", _output_refs),
    ("boxes", _box_refs),
    ("tables", _table_refs),
    ("views", _view_refs),
    ("queries", _query_refs),
    ("publications", _publication_refs),
    ("subscriptions", _subscription_refs),
)


def _infer_schemas(catalog: Catalog, registry: BoxTypeRegistry, report: TopologyReport) -> None:
    """Propagate schemas from inputs through boxes in dataflow order (:func:`.schemas_of.infer`), reporting
    what cannot be told."""
    report.stream_schemas.update(infer(catalog, registry, report.fail))
    for out in catalog.outputs.values():
        renamed = declared_output_schema(catalog, out, report.stream_schemas)
        if renamed is not None:
            report.stream_schemas[out.stream] = renamed


def declared_output_schema(catalog: Catalog, out: Output, schemas: Mapping[str, Schema]) -> Schema | None:
    """The output's declared schema when its stream carries that layout under another name (the declared
    names are the ones users see), else None."""
    declared = catalog.schemas.get(out.schema) if out.schema else None
    declared = arrays.resolved(declared, catalog.types) if declared is not None else None
    inferred = schemas.get(out.stream)
    if declared is None or inferred is None or inferred.name == declared.name:
        return None
    return declared if declared.stands_for(inferred) else None


def output_schema_problems(catalog: Catalog, out: Output, schemas: Mapping[str, Schema]) -> list[Diagnostic]:
    """An output's declared schema is the layout its producer yields (``schemas``: every stream's)."""
    declared = catalog.schemas.get(out.schema) if out.schema else None
    declared = arrays.resolved(declared, catalog.types) if declared is not None else None
    inferred = schemas.get(out.stream)
    if declared is None or inferred is None or declared.stands_for(inferred):
        return []
    what = f"output stream {out.stream!r}"
    if out.origin.path.rsplit("/", 1)[-1].startswith("input"):  # an <input> of a box's stream (declared_inputs.py)
        what = f"input stream {out.stream!r} (a box writes it: its <input> declares its schema)"
    return [Diagnostic.at(out.origin, f"{what} declares schema {declared.name!r} "
                                      f"{declared.describe()}, but its producer yields {inferred.describe()}"
                                      f"{unselected_columns_note(catalog, out.stream, declared, inferred)}"
                                      f"{null_fields_note(catalog, out.stream, declared, inferred)}")]


def array_stream_problems(catalog: Catalog, obj: Publication | Subscription,
                          schemas: Mapping[str, Schema]) -> list[Diagnostic]:
    """Publishing into, or subscribing to, a stream with array fields the data plane does not carry
    (:func:`.arrays.flow_problem`: an alias's, an array of strings)."""
    schema = schemas.get(obj.stream)
    found = arrays.flow_problem(schema, catalog.types) if schema is not None else None
    if not found:
        return []
    verb = "publish to" if isinstance(obj, Publication) else "subscribe to"
    return [Diagnostic.at(obj.origin, f"{verb} stream {obj.stream!r}: its {found}")]


#: ``epoch-ms`` of a partition: the shortest and longest epoch (docs/cumulus.md §10, question 5).
EPOCH_MS = (10, 60_000)


def partition_check(catalog: Catalog, registry: BoxTypeRegistry, name: str, part: Partition) -> list[Diagnostic]:
    """A ``<partition>``: an existing box of a type that plans partitions, members, segments, epoch."""
    found = [Diagnostic.at(part.origin, reason) for reason in partition_problems(part)]
    box = catalog.boxes.get(name)
    if box is None:
        return [*found, Diagnostic.at(part.origin, f"partition names unknown box {name!r}")]
    box_type = registry.get(box.type)
    if box_type is not None and box_type.plan_partition is None:
        types = " or ".join(registry.partitionable()) or "m3"
        found.append(Diagnostic.at(part.origin, f"box {name!r} is {_a(box.type)} {box.type} box; only {types} "
                                                f"boxes can be partitioned"))
    return found


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
