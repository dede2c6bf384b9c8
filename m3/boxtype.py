"""The ``m3`` box type for the catalog: an incrementally maintained SQL view as a Borealis box.

This module is the bridge between ``boreas.m3`` and the catalog.  The
catalog depends on no other Boreas package, so it cannot know the ``m3``
type itself; :func:`box_types` is the one place the full registry is built
(the built-in Borealis types and ``m3``), and the Head, every node and the
CLI each make one and pass it to validation, slicing and schema inference.

The box (docs/m3.md, "The m3 box"):

* parameter ``sql`` (SELECT ...; optionally CREATE STREAM/TABLE ... first)
  or ``m3`` (a hand-written M3 program);
* relations are the box's in streams, by name: ``SELECT R.B, SUM(R.A * S.C)
  FROM R, S WHERE R.B = S.B GROUP BY R.B`` in a box reading streams ``R``
  and ``S`` compiles with the streams' schemas as the relations' columns
  (byte/short/int/long → INT, single/double → FLOAT, string → STRING,
  timestamp → DATE), so the schema is written once, in the catalog.  A
  port's name is the stream it was declared reading (``Box.in_name``: a
  filter a connect inserts before the port does not rename the relation);
* an SQL text that declares relations itself (``CREATE STREAM r(...)``, or
  an ``m3`` program) renames them instead: in port *i* feeds the *i*-th
  declared relation, and the in stream's fields must be the relation's
  columns, same names (case ignored) and types, in order;
* optional ``sign-field``: an in stream field of that name (an integer type)
  says +1 insert / -1 delete and is not a relation column;
* out port *i* carries the changes of the *i*-th view: its key columns, then
  its value column(s) -- the selected columns: a GROUP BY column the SELECT
  does not name is an internal key of the view (``boreas query`` reads it by
  name), not a field of the stream.

Types: INT ↔ int (short and byte accepted in), FLOAT/DECIMAL ↔ double
(single accepted in), STRING/VARCHAR ↔ string, DATE ↔ timestamp
(microseconds since the epoch at midnight UTC).  Out values: an INT-valued
column (COUNT, a SUM of integers) is a long, every other one a double.
The ports are checked, and the out fields written, by :mod:`.box_ports`.
"""

from __future__ import annotations

import functools
import re
import uuid
from dataclasses import dataclass, replace

from boreas.catalog.boxtypes import BoxError, BoxType, BoxTypeRegistry, builtin_registry
from boreas.catalog.model import (
    Box,
    Field,
    FieldType,
    Partition,
    Schema,
    SegmentPlacement,
)

from .ast import Column, Program, RelationDecl
from .box_ports import ACCEPTS, COLUMN_OF, STREAM_ACCEPTS, PortPlan, port_plan, view_fields
from .nullable import indicator, nullable_positions
from .compiler.declarations import declares_relations
from .compiler.rownumber import TopN, split_topn
from .compiler.sessionfn import Session
from .compiler.windowfn import WINDOW_COLUMNS, Watermark, Window, rewrite, windowed_relations
from .compiler.winjoin import split
from .cumulus import EVERYWHERE, LayoutError, PlacementError, PlanError, plan_partition, windowed_leaves
from .errors import M3Error
from .runtime.ports import ViewInfo
from .runtime.program import Runtime
from .runtime.text import program_from_text
from .sessionheld import held_plan, refuse_split_sessions, refuse_unkeyed_sessions, session_key
from .syntax import KEYWORDS
from .winstages import StagePlan, plan_stages

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class BoxPlan:
    """What an ``m3`` box is, worked out once from its parameters and in schemas."""

    text: str
    program: Program
    ports: tuple[PortPlan, ...]
    views: tuple[ViewInfo, ...]
    outputs: tuple[Schema, ...]
    windows: tuple[Window, ...] = ()  # event-time windows of its in streams (docs/m3.md, "Event time")
    watermarks: tuple[Watermark, ...] = ()  # their CREATE STREAM's WATERMARK FOR items
    topn: TopN | None = None  # a ROW_NUMBER() top-N over its view (docs/m3.md, "Top-N")
    emitted: tuple[Schema, ...] = ()  # what the out ports carry: ``outputs``, or the top-N's rows
    stages: StagePlan | None = None  # a window join's stages above its views (docs/m3.md, "Window joins")

    def __post_init__(self):
        if not self.emitted:
            object.__setattr__(self, "emitted", self.outputs)


@functools.lru_cache(maxsize=64)
def _compiled(text: str, streams: tuple[RelationDecl, ...] = ()) -> tuple[Program, dict, dict]:
    """Compile (or parse and check) once per distinct text and in streams: the Head and nodes rebuild boxes often."""
    if streams:
        from .compiler.pipeline import compile_sql

        runtime = Runtime(compile_sql(text, streams))
    else:
        runtime = Runtime(program_from_text(text))
    return runtime.program, runtime.relations, runtime.views


def program_text(box: Box) -> str:
    """The box's ``sql`` or ``m3`` parameter; exactly one is needed."""
    sql, m3 = box.param("sql"), box.param("m3")
    if (sql is None) == (m3 is None):
        raise BoxError(f"m3 box {box.name!r} needs exactly one of the parameters 'sql' and 'm3'")
    return sql if sql is not None else m3  # type: ignore[return-value]


def reads_streams_by_name(box: Box) -> bool:
    """Whether the box's relations are its in streams (SQL that declares no relation of its own)."""
    sql = box.param("sql")
    if sql is None or box.param("m3") is not None:
        return False
    try:
        return not declares_relations(sql)
    except M3Error:  # SQL that does not even tokenize: compiling it says where
        return False


def stream_relations(box: Box, inputs: list[Schema]) -> tuple[RelationDecl, ...]:
    """The box's in streams as relations named after them, their fields (minus the sign field) as columns."""
    sign = box.param("sign-field")
    seen: dict[str, int] = {}
    relations = []
    for port, schema in enumerate(inputs):
        name = box.in_name(port)  # the declared stream, also once a connect put a filter before it
        head = f"m3 box {box.name!r} in port {port} reads stream {name!r}"
        if not _IDENTIFIER.match(name) or name.upper() in KEYWORDS:
            raise BoxError(f"{head}, whose name is not an SQL name; declare the relation with "
                           f"CREATE STREAM name(column type, ...) to rename it (in port i feeds the "
                           f"i-th declared relation)")
        if name.lower() in seen:
            raise BoxError(f"{head}, as in port {seen[name.lower()]} does; declare the relations with "
                           f"CREATE STREAM to give each port its own name")
        seen[name.lower()] = port
        columns = []
        for f in schema.fields:
            if sign and f.name == sign:
                continue
            if f.type is None or not _IDENTIFIER.match(f.name):
                what = f"type {f.declared_type}" if f.type is None else "a name that is not an SQL name"
                raise BoxError(f"{head}, whose field {f.name!r} has {what}; an m3 box reads scalar "
                               f"fields named like SQL columns")
            columns.append(Column(f.name, COLUMN_OF[f.type]))
            if f.nullable:  # its value and indicator (docs/m3.md "NULLs")
                columns.append(Column(indicator(f.name), "INT"))
        relations.append(RelationDecl(name, "STREAM", tuple(columns)))
    return tuple(relations)


def compile_box(box: Box, inputs: list[Schema] | None = None) -> tuple[Program, dict, dict]:
    """The box's program, relations and views; a :class:`BoxError` with the SQL's line:col when it is wrong.

    ``inputs`` (the in streams' schemas) are needed when the SQL reads the
    in streams by name (:func:`reads_streams_by_name`).
    """
    which = "sql" if box.param("sql") is not None else "m3"
    text = program_text(box)
    if which == "sql":
        try:
            text, _ = split_topn(text)  # a top-N's view is its inner query (its ranking: :func:`plan_box`)
        except M3Error as exc:
            raise BoxError(f"m3 box {box.name!r}: parameter 'sql': {exc}") from None
    streams = stream_relations(box, inputs) if inputs is not None and reads_streams_by_name(box) else ()
    try:
        staged = _staged(text, streams) if which == "sql" else None
        return _compiled(text, streams) if staged is None else _compiled(*staged[:2])
    except M3Error as exc:
        raise BoxError(f"m3 box {box.name!r}: parameter {which!r}: {exc}") from None


@functools.lru_cache(maxsize=64)
def _staged(text: str, streams: tuple[RelationDecl, ...]) -> tuple[str, tuple[RelationDecl, ...], StagePlan] | None:
    """A window join's leaves (their script and in streams) and its stages above (m3/compiler/winjoin.py)."""
    _, windows, _ = rewrite(text)
    streams = windowed_relations(streams, windows)
    staged = split(text, {r.name.lower(): tuple(c.name for c in r.columns) for r in streams})
    if staged is None:
        return None
    program, _, views = _compiled(staged.leaves_text, streams)
    return staged.leaves_text, streams, plan_stages(staged, program, views)


def members_plan(plan: BoxPlan) -> BoxPlan:
    """A partitioned box's plan: its views without ``ALWAYS`` (docs/m3.md, "Rows").

    A map without keys is kept whole on its home segment, so every other
    member's runtime would show an ``ALWAYS`` view's one row too (zeros and
    NULLs), which its changelog would emit and the query API would merge; the
    members' keyless view has its row while it reads rows instead, as before sqlO.
    """
    if not any(v.always for v in plan.program.views):
        return plan
    views = tuple(replace(v, always=False, fixed=()) for v in plan.program.views)
    return replace(plan, program=replace(plan.program, views=views))


def plan_box(box: Box, inputs: list[Schema]) -> BoxPlan:
    """Check the box against its in schemas; what each port feeds and what each out port carries."""
    program, relations, views = compile_box(box, inputs)
    names = list(relations)
    by_name = reads_streams_by_name(box)
    if len(inputs) != len(names):
        raise BoxError(f"m3 box {box.name!r} has {len(inputs)} in streams but its program declares "
                       f"{len(names)} relations ({', '.join(names)}); in port i feeds the i-th relation")
    sign = box.param("sign-field")
    accepts = STREAM_ACCEPTS if by_name else ACCEPTS
    windows, marks = box_windows(box)
    windowed = {w.relation.lower() for w in windows}
    nullable = {r.name: {r.columns[i].name.lower() for i in nullable_positions([c.name for c in r.columns])}
                for r in program.relations}
    ports = tuple(port_plan(box, port, name, relations[name], schema, sign,  # event times in ms: a long is an INT
                        STREAM_ACCEPTS if name.lower() in windowed else accepts,
                        len(WINDOW_COLUMNS) if name.lower() in windowed else 0, nullable.get(name, set()))
                  for port, (name, schema) in enumerate(zip(names, inputs)))
    ordered = tuple(views[v.name] for v in program.views)
    staged = _staged(program_text(box), stream_relations(box, inputs) if by_name else ()) \
        if box.param("sql") is not None else None
    stages = None if staged is None else staged[2]
    shown, shown_program = (ordered, program) if stages is None else ((stages.top,), stages.program)
    if len(box.outputs) != len(shown):
        raise BoxError(f"m3 box {box.name!r} has {len(box.outputs)} out streams but its program has "
                       f"{len(shown)} views ({', '.join(v.name for v in shown)}); "
                       f"out port i carries the i-th view")
    sizes = {f.name.lower(): f.size for schema in inputs for f in schema.fields if f.type == FieldType.STRING}
    outputs = tuple(Schema(f"{box.name}.out{i}", view_fields(box, shown_program, view, sizes))
                    for i, view in enumerate(shown))
    topn = box_topn(box)
    if topn is not None and windows:
        raise BoxError(f"m3 box {box.name!r}: a ROW_NUMBER() top-N over a window is not supported yet "
                       "(rank the windows' results in a second box)")
    emitted = (topn_schema(box, topn, outputs[0]),) if topn is not None else outputs
    return BoxPlan(program_text(box), program, ports, ordered, outputs, windows, marks, topn, emitted, stages)


def box_topn(box: Box) -> TopN | None:
    """The ``ROW_NUMBER()`` top-N the box's SQL ranks its view by (m3/compiler/rownumber.py), if any."""
    sql = box.param("sql")
    if sql is None or box.param("m3") is not None:
        return None
    try:
        return split_topn(sql)[1]
    except M3Error as exc:
        raise BoxError(f"m3 box {box.name!r}: parameter 'sql': {exc}") from None


def topn_schema(box: Box, topn: TopN, view: Schema) -> Schema:
    """The top-N's out rows: the columns selected around the derived table (its rank a long), named as
    selected; every view column (its count left out) and the rank for ``SELECT *``."""
    fields = list(view.fields[:-1] if topn.counted else view.fields)
    by_name = {f.name.lower(): f for f in fields}
    if topn.project is None:
        out = fields + ([Field(topn.rank, FieldType.LONG)] if topn.rank else [])
    else:
        out = []
        for name, column in topn.project:
            if column is None:
                out.append(Field(name, FieldType.LONG))
            elif column.lower() in by_name:
                out.append(replace(by_name[column.lower()], name=name))
            else:
                raise BoxError(f"m3 box {box.name!r}: the query around ROW_NUMBER selects {column}, which its "
                               f"derived table does not ({', '.join(f.name for f in fields)})")
    return Schema(view.name, tuple(out))


def box_windows(box: Box) -> tuple[tuple[Window, ...], tuple[Watermark, ...]]:
    """The event-time windows and watermarks the box's SQL declares (none for an ``m3`` program)."""
    sql = box.param("sql")
    if sql is None or box.param("m3") is not None:
        return (), ()
    try:
        _, windows, marks = rewrite(sql)
    except M3Error as exc:
        raise BoxError(f"m3 box {box.name!r}: parameter 'sql': {exc}") from None
    return windows, marks


def infer_m3(box: Box, inputs: list[Schema]) -> list[Schema]:
    """Out port i: the i-th view's output key columns, then its value columns (long for INT maps, else double)."""
    return list(plan_box(box, inputs).emitted)


def plan_m3_partition(box: Box, inputs: list[Schema], partition: Partition) -> Partition:
    """Plan ``<partition>`` of an ``m3`` box (docs/cumulus.md §2.4): equal segments dealt round robin,
    each map's partition column (``key``, pins, then the chooser), layout 1, a fresh incarnation id.

    Any plan runs: one whose statements read entries of other members runs
    in version order with pushes between them (docs/cumulus.md §3.5).
    """
    planned = plan_box(box, inputs)
    sessions = [w for w in planned.windows if isinstance(w, Session)]
    key, pins = partition.key, dict(partition.pins)
    if sessions:  # (its rows wait in a held map of their own, placed as the view's: m3/sessionheld.py)
        planned = replace(planned, program=held_plan(planned, sessions).program)
        key, held_pins = session_key(key, sessions)
        pins = {**held_pins, **pins}
    program = planned.program
    # a window join's windowed leaves computed when read run partitioned: members gather their closed rows to
    # member 0, exact when each leaf's maps are partitioned by one of its keys (m3/cumulus/computed.py)
    computed = windowed_leaves(program, planned.stages is not None)
    try:
        pp = plan_partition(program, box.name, partition.nodes, segments=partition.count, key=key,
                            pins=pins, replicate=partition.replicate, computed=computed)
    except (PlacementError, LayoutError, PlanError) as exc:
        if sessions and key is not None:  # (``key`` keys no map but the held ones: the view's maps say why)
            refuse_unkeyed_sessions(box.name, program, sessions, partition, pins)
        raise BoxError(str(exc)) from None
    assert pp.layout is not None
    if sessions:
        refuse_split_sessions(box.name, program, sessions, dict(pp.layout.maps))
    if planned.topn is not None:  # one member must hold all of a ranking partition's rows (node/cumulus/ranking.py)
        by = {c.lower() for c in planned.topn.partition}
        placed = dict(pp.layout.maps)
        cols = [None if placed.get(m) in (None, EVERYWHERE) else program.map(m).keys[placed[m]].name.lower()
                for m in program.view(planned.views[0].name).maps]
        if not by or any(c not in by for c in cols):
            raise BoxError(f"m3 box {box.name!r} ranks its view by ROW_NUMBER() PARTITION BY {', '.join(by) or '()'}"
                           f", which does not hold the view's partition column ({', '.join(map(str, cols))}): a "
                           "member would rank part of a partition; partition by a PARTITION BY column (key=)")
    maps = tuple((name, None if pos is None else program.map(name).keys[pos].name, pos) for name, pos in pp.layout.maps
                 if pos != EVERYWHERE)  # (replicated maps are the partition's replicate=)
    segments = tuple(SegmentPlacement(s.id, s.lo, s.hi, s.member) for s in pp.layout.segments)
    return replace(partition, segments=segments, maps=maps, layout=1, id=uuid.uuid4().hex[:12])


M3_BOX_TYPE = BoxType("m3", infer_m3, min_inputs=1, max_inputs=None,
                      summary="incrementally maintained SQL view (M3)", plan_partition=plan_m3_partition)



def box_types() -> BoxTypeRegistry:
    """The box types Boreas runs: the built-in Borealis types and ``m3`` (a fresh registry)."""
    return builtin_registry([M3_BOX_TYPE])
