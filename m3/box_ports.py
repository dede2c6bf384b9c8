"""How an ``m3`` box's streams meet its program: Borealis field types against M3 column types.

An in port feeds one relation: :func:`port_plan` checks the stream's fields
against the relation's columns (names, types, NULLs, the ``sign-field``)
and says where the sign is.  An out port carries one view:
:func:`view_fields` gives the Borealis fields it is written as.  The type
tables (:data:`ACCEPTS`, :data:`WRITES`, :data:`COLUMN_OF`) are the one
statement of that correspondence (docs/m3.md, "The m3 box": Types); the
box's plan (:mod:`.boxtype`) composes them.
"""

from __future__ import annotations

from dataclasses import dataclass

from boreas.catalog.boxtypes import BoxError
from boreas.catalog.model import Box, Field, FieldType, Schema

from .ast import Program
from .compiler.windowfn import WINDOW_COLUMNS
from .nullable import null_keys, null_values, shown_columns
from .runtime.ports import ViewInfo
from .runtime.valuetypes import value_type

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
#: The field types a ``sign-field`` may have (+1 insert, -1 delete).
SIGN_TYPES = (FieldType.INT, FieldType.SHORT, FieldType.BYTE, FieldType.LONG)
#: The M3 column type of an in stream's field when the SQL reads the stream by name.
COLUMN_OF: dict[FieldType, str] = {
    FieldType.BYTE: "INT", FieldType.SHORT: "INT", FieldType.INT: "INT", FieldType.LONG: "INT",
    FieldType.SINGLE: "FLOAT", FieldType.DOUBLE: "FLOAT", FieldType.STRING: "STRING",
    FieldType.TIMESTAMP: "DATE",
}
#: What each column type accepts when the relation is the stream itself (a long is an INT).
STREAM_ACCEPTS = {kind: (*types, FieldType.LONG) if kind == "INT" else types for kind, types in ACCEPTS.items()}


@dataclass(frozen=True)
class PortPlan:
    """One in port: the relation it feeds and where the sign field is (if any)."""

    relation: str
    columns: tuple[tuple[str, str], ...]
    sign_index: int | None



def port_plan(box: Box, port: int, relation: str, columns: tuple, schema: Schema, sign: str | None,
          accepts: dict[str, tuple[FieldType, ...]] = ACCEPTS, added: int = 0,
          nullable: set[str] = frozenset()) -> PortPlan:
    """``added``: columns the box adds to what the port carries (a window's, last); ``nullable``: the relation's
    columns that may hold NULL (lower case)."""
    fields = list(schema.fields)
    full, columns = columns, columns[:len(columns) - added]
    sign_index = None
    if sign:
        for i, f in enumerate(fields):
            if f.name == sign:
                if f.type not in SIGN_TYPES:
                    raise BoxError(f"m3 box {box.name!r} in port {port}: sign-field {sign!r} is "
                                   f"{f.declared_type}, it must be an integer type")
                sign_index = i
        if sign_index is not None:
            del fields[sign_index]
    want = ", ".join(f"{c} {t}" for c, t in columns)
    have = ", ".join(f"{f.name} {f.declared_type}" for f in fields)
    head = (f"m3 box {box.name!r} in port {port} (stream {box.inputs[port].stream!r}) feeds relation "
            f"{relation}({want}) but carries ({have})")
    if len(fields) != len(columns):
        raise BoxError(f"{head}: {len(fields)} fields for {len(columns)} columns")
    for i, (f, (column, kind)) in enumerate(zip(fields, columns)):
        if f.name.lower() != column.lower():
            raise BoxError(f"{head}: field {i} is named {f.name!r}, the column {column!r}")
        if f.type not in accepts[kind]:
            allowed = " or ".join(t.value for t in accepts[kind])
            raise BoxError(f"{head}: field {f.name!r} is {f.declared_type}, column {column} {kind} needs {allowed}")
        if f.nullable and column.lower() not in nullable:  # refused, not read as 0
            raise BoxError(f"{head}: field {f.name!r} is nullable and column {column} is not; declare it "
                           f"{column} {kind} NULL (docs/m3.md, \"NULLs\"), or compute a value for NULL upstream")
    return PortPlan(relation, full, sign_index)


#: The size of a string key column no in stream field of the same name tells (Borealis strings have one).
STRING_SIZE = 256


def view_fields(box: Box, program: Program, view: ViewInfo, sizes: dict[str, int | None]) -> tuple[Field, ...]:
    """Key columns (internal ones left out), then value columns; a string key takes the size of the in stream
    field it comes from.

    Value columns are numbers (long for INT, double for FLOAT; the box emits 0 for a row that left the view)
    or, for a MIN or MAX of strings, strings ('' for a row that left it); a MIN or MAX of a DATE is refused.
    A key or value that may be NULL is a nullable field, whatever its type (docs/m3.md, "NULLs"): a MIN or MAX
    of a nullable VARCHAR over a group of only NULLs is None, not '' (issue 33); one that cannot be NULL (of a
    column not declared NULL, without FILTER) stays not nullable, so a reader needs no NULL test there.
    """
    widest = max((s for s in sizes.values() if s), default=STRING_SIZE)
    nullable = {i for i, _ in null_keys([name for name, _ in view.keys], view.internal)}  # docs/m3.md "NULLs"
    keys = [Field(name, FieldType.LONG if name.lower() in WINDOW_COLUMNS else WRITES[kind],
                  (sizes.get(name.lower()) or widest) if kind == "STRING" else None, nullable=i in nullable)
            for i, (name, kind) in ((i, view.keys[i]) for i in view.output_keys)]  # a window's bounds: long
    decl = program.view(view.name)
    values = []
    names = [c.name for c in decl.columns]
    may_be_null = {i for i, _ in null_values(names)}  # NULL where it reads no value (docs/m3.md "NULLs")
    for i in shown_columns(names):
        column = decl.columns[i]
        kind = value_type(program, decl, i)
        if kind == "STRING":  # MIN/MAX of strings: '' for a row that left the view, None for NULL (docs/m3.md)
            values.append(Field(column.name, FieldType.STRING, widest, nullable=i in may_be_null))
            continue
        if kind not in ("INT", "FLOAT"):
            raise BoxError(f"m3 box {box.name!r}: view {decl.name} column {column.name} is a {kind} (MIN/MAX of a "
                           f"{kind} column); an m3 box emits value columns as numbers (0: the row left the view), "
                           "so it cannot carry this one yet")
        values.append(Field(column.name, FieldType.LONG if kind == "INT" else FieldType.DOUBLE,
                            nullable=i in may_be_null))
    return tuple(keys + values)
