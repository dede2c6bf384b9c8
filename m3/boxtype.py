"""The ``m3`` box type for the catalog: an incrementally maintained SQL view as a Borealis box.

This module is the bridge between ``boreas.m3`` and the catalog.  The
catalog depends on no other Boreas package, so it cannot know the ``m3``
type itself; importing this module registers it with
:func:`boreas.catalog.boxtypes.register_default`, after which every registry
``builtin_registry()`` makes validates ``m3`` boxes and infers their out
schemas.  ``boreas.cli.main`` (the Head, ``boreas validate``/``deploy``) and
``boreas.node.operators`` (every node) import it.

The box (docs/m3.md, "The m3 box"):

* parameter ``sql`` (CREATE STREAM/TABLE ...; SELECT ...) or ``m3`` (a
  hand-written M3 program);
* in port *i* feeds the *i*-th relation declared in the program; the in
  stream's fields must be the relation's columns, same names (case ignored)
  and types, in order;
* optional ``sign-field``: an in stream field of that name (an integer type)
  says +1 insert / -1 delete and is not a relation column;
* out port *i* carries the changes of the *i*-th view: its key columns, then
  its value column(s).

Types: INT ↔ int (short and byte accepted in), FLOAT/DECIMAL ↔ double
(single accepted in), STRING/VARCHAR ↔ string, DATE ↔ timestamp
(microseconds since the epoch at midnight UTC).  Out values: an INT-valued
column (COUNT, a SUM of integers) is a long, every other one a double.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from boreas.catalog.boxtypes import BoxError, BoxType, register_default
from boreas.catalog.model import Box, Field, FieldType, Schema

from .ast import Program
from .errors import M3Error
from .runtime.program import Runtime, ViewInfo, _program_from_text

#: Borealis field types each M3 column type accepts on an in port.
ACCEPTS: dict[str, tuple[FieldType, ...]] = {
    "INT": (FieldType.INT, FieldType.SHORT, FieldType.BYTE),
    "FLOAT": (FieldType.DOUBLE, FieldType.SINGLE),
    "STRING": (FieldType.STRING,),
    "DATE": (FieldType.TIMESTAMP,),
}
#: The Borealis type an M3 key column of each type is written as.
WRITES: dict[str, FieldType] = {"INT": FieldType.INT, "FLOAT": FieldType.DOUBLE,
                                "STRING": FieldType.STRING, "DATE": FieldType.TIMESTAMP}
_SIGN_TYPES = (FieldType.INT, FieldType.SHORT, FieldType.BYTE, FieldType.LONG)


@dataclass(frozen=True)
class PortPlan:
    """One in port: the relation it feeds and where the sign field is (if any)."""

    relation: str
    columns: tuple[tuple[str, str], ...]
    sign_index: int | None


@dataclass(frozen=True)
class BoxPlan:
    """What an ``m3`` box is, worked out once from its parameters and in schemas."""

    text: str
    program: Program
    ports: tuple[PortPlan, ...]
    views: tuple[ViewInfo, ...]
    outputs: tuple[Schema, ...]


@functools.lru_cache(maxsize=64)
def _compiled(text: str) -> tuple[Program, dict, dict]:
    """Compile (or parse and check) once per distinct text: the Head and nodes rebuild boxes often."""
    runtime = Runtime(_program_from_text(text))
    return runtime.program, runtime.relations, runtime.views


def program_text(box: Box) -> str:
    """The box's ``sql`` or ``m3`` parameter; exactly one is needed."""
    sql, m3 = box.param("sql"), box.param("m3")
    if (sql is None) == (m3 is None):
        raise BoxError(f"m3 box {box.name!r} needs exactly one of the parameters 'sql' and 'm3'")
    return sql if sql is not None else m3  # type: ignore[return-value]


def compile_box(box: Box) -> tuple[Program, dict, dict]:
    """The box's program, relations and views; a :class:`BoxError` with the SQL's line:col when it is wrong."""
    which = "sql" if box.param("sql") is not None else "m3"
    try:
        return _compiled(program_text(box))
    except M3Error as exc:
        raise BoxError(f"m3 box {box.name!r}: parameter {which!r}: {exc}") from None


def plan_box(box: Box, inputs: list[Schema]) -> BoxPlan:
    """Check the box against its in schemas; what each port feeds and what each out port carries."""
    program, relations, views = compile_box(box)
    names = list(relations)
    if len(inputs) != len(names):
        raise BoxError(f"m3 box {box.name!r} has {len(inputs)} in streams but its program declares "
                       f"{len(names)} relations ({', '.join(names)}); in port i feeds the i-th relation")
    sign = box.param("sign-field")
    ports = tuple(_port(box, port, name, relations[name], schema, sign)
                  for port, (name, schema) in enumerate(zip(names, inputs)))
    ordered = tuple(views[v.name] for v in program.views)
    if len(box.outputs) != len(ordered):
        raise BoxError(f"m3 box {box.name!r} has {len(box.outputs)} out streams but its program has "
                       f"{len(ordered)} views ({', '.join(v.name for v in ordered)}); "
                       f"out port i carries the i-th view")
    outputs = tuple(Schema(f"{box.name}.out{i}", _view_fields(program, view)) for i, view in enumerate(ordered))
    return BoxPlan(program_text(box), program, ports, ordered, outputs)


def _port(box: Box, port: int, relation: str, columns: tuple, schema: Schema, sign: str | None) -> PortPlan:
    fields = list(schema.fields)
    sign_index = None
    if sign:
        for i, f in enumerate(fields):
            if f.name == sign:
                if f.type not in _SIGN_TYPES:
                    raise BoxError(f"m3 box {box.name!r} in port {port}: sign-field {sign!r} is "
                                   f"{f.type.value}, it must be an integer type")
                sign_index = i
        if sign_index is not None:
            del fields[sign_index]
    want = ", ".join(f"{c} {t}" for c, t in columns)
    have = ", ".join(f"{f.name} {f.type.value}" for f in fields)
    head = (f"m3 box {box.name!r} in port {port} (stream {box.inputs[port].stream!r}) feeds relation "
            f"{relation}({want}) but carries ({have})")
    if len(fields) != len(columns):
        raise BoxError(f"{head}: {len(fields)} fields for {len(columns)} columns")
    for i, (f, (column, kind)) in enumerate(zip(fields, columns)):
        if f.name.lower() != column.lower():
            raise BoxError(f"{head}: field {i} is named {f.name!r}, the column {column!r}")
        if f.type not in ACCEPTS[kind]:
            allowed = " or ".join(t.value for t in ACCEPTS[kind])
            raise BoxError(f"{head}: field {f.name!r} is {f.type.value}, column {column} {kind} needs {allowed}")
    return PortPlan(relation, columns, sign_index)


def _view_fields(program: Program, view: ViewInfo) -> tuple[Field, ...]:
    keys = [Field(name, WRITES[kind]) for name, kind in view.keys]
    decl = program.view(view.name)
    values = []
    for column in decl.columns:
        whole = column.denominator is None and program.map(column.numerator).value_type == "INT"
        values.append(Field(column.name, FieldType.LONG if whole else FieldType.DOUBLE))
    return tuple(keys + values)


def infer_m3(box: Box, inputs: list[Schema]) -> list[Schema]:
    """Out port i: the i-th view's key columns, then its value columns (long for INT maps, else double)."""
    return list(plan_box(box, inputs).outputs)


M3_BOX_TYPE = BoxType("m3", infer_m3, min_inputs=1, max_inputs=None,
                      summary="incrementally maintained SQL view (M3)")

register_default(M3_BOX_TYPE)
