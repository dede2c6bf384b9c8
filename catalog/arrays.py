"""Borealis array field types: ``byte(0...319, 0...239, 0...2)`` and ``<type>`` aliases.

Real Borealis applications (video frames, sensor grids) declare array
fields, either inline (``<field name="frame" type="byte(0...319, 0...239,
0...2)"/>``, the DTD's ``type '(' [min '...'] max, .. ')'``) or through an
alias (``<type name="image" array="byte(0...319, 0...239, 0...2)"/>`` and
``<field name="frame" type="image"/>``).  The catalog accepts both, keeps
them as declared (a :class:`~boreas.catalog.model.Field` whose ``array`` is
the declared type and whose ``type`` is None), stores, exports and
replicates them, so a real file is read whole.

The data plane carries inline arrays of numbers and timestamps as list
columns (fixed-size per bounded dimension, variable for ``0...*``, nested
for several dimensions; :func:`boreas.wire.columns.arrow_schema`) and as
nested lists in rows; :func:`flow_problem` says which array fields it does
not carry.  None is kept for ``type`` on purpose: code that only knows
scalars fails loudly on an array field rather than taking it for a byte.

>>> a = parse_array("byte(0...319, 0...239,0...2)")
>>> str(a), a.element.value, [(d.low, d.high) for d in a.dims]
('byte(0...319, 0...239, 0...2)', 'byte', [(0, 319), (0, 239), (0, 2)])
>>> str(parse_array("byte(0...*, 2)")), parse_array("byte(0...*, 2)").dims[0].length
('byte(0...*, 2)', None)
>>> parse_array("int(3...1)")
Traceback (most recent call last):
...
ValueError: array type 'int(3...1)': dimension 1 runs from 3 down to 1 (write min...max)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from .model import Field, FieldType, Schema, TypeAlias

#: ``element(dim, dim, ...)``; each dim is ``max`` or ``min...max``.
_ARRAY = re.compile(r"^\s*(\w+)\s*(?:\((.*)\))?\s*$", re.DOTALL)
_DIM = re.compile(r"^\s*(?:(\d+)\s*\.\.\.\s*)?(\d+|\*)\s*$")
#: A sparse dimension (Borealis's ``int`` or ``string:N`` index) in place of a bound.
_SPARSE = re.compile(r"^\s*(?:\d+\s*\.\.\.\s*)?(int|string\s*:\s*\d+)\s*$", re.IGNORECASE)

SCALARS = ", ".join(t.value for t in FieldType)


@dataclass(frozen=True, slots=True)
class Dimension:
    """One array dimension: indexes ``low..high`` (``low`` None when only the max is written, which
    Borealis's ``SchemaArray`` reads as ``0...max``; ``high`` None for ``*``: any length)."""

    high: int | None
    low: int | None = None

    def __str__(self) -> str:
        high = "*" if self.high is None else str(self.high)
        return high if self.low is None else f"{self.low}...{high}"

    @property
    def length(self) -> int | None:
        """How many elements the dimension holds (None: any number, ``*``).

        >>> Dimension(2, 0).length, Dimension(9).length, Dimension(None, 0).length
        (3, 10, None)
        """
        return None if self.high is None else self.high - (self.low or 0) + 1


@dataclass(frozen=True, slots=True)
class ArrayType:
    """An array type: its element type and dimensions (none: an alias for a scalar type)."""

    element: FieldType
    dims: tuple[Dimension, ...] = ()

    def __str__(self) -> str:
        if not self.dims:
            return self.element.value
        return f"{self.element.value}({', '.join(str(d) for d in self.dims)})"


def is_array_syntax(text: str) -> bool:
    """Whether a field's ``type`` is written inline as an array (as opposed to an alias name)."""
    return "(" in text


def parse_array(text: str, *, dims_required: bool = True) -> ArrayType:
    """``byte(0...319, 0...239, 0...2)`` as an :class:`ArrayType`; ValueError says what is wrong.

    ``dims_required=False`` also takes a bare scalar type (``<type array="byte">``,
    which Boreas has always accepted as an alias for a scalar).
    """
    m = _ARRAY.match(text)
    if not m:
        raise ValueError(f"array type {text!r} is not element(dimension, ...), e.g. byte(0...319, 0...239)")
    element, inside = m.group(1), m.group(2)
    try:
        kind = FieldType(element)
    except ValueError:
        raise ValueError(f"array type {text!r}: element type {element!r} is not one of {SCALARS} "
                         f"(Boreas's arrays hold scalars; an array of tuples, whose element type names a "
                         f"<schema>, is not carried)") from None
    if inside is None:
        if dims_required:
            raise ValueError(f"array type {text!r} has no dimensions, e.g. {element}(0...9)")
        return ArrayType(kind)
    dims = []
    for i, part in enumerate(inside.split(","), start=1):
        d = _DIM.match(part)
        if not d and _SPARSE.match(part):
            raise ValueError(f"array type {text!r}: dimension {i} {part.strip()!r} is sparse (indexed by "
                             f"{_SPARSE.match(part).group(1)} values, Borealis's sparse arrays); Boreas carries "
                             f"dense arrays only: write min...max or 0...* for the leftmost dimension")
        if not d:
            raise ValueError(f"array type {text!r}: dimension {i} {part.strip()!r} is not max, min...max "
                             f"or min...*")
        low = int(d.group(1)) if d.group(1) is not None else None
        high = None if d.group(2) == "*" else int(d.group(2))
        if high is None and i > 1:
            raise ValueError(f"array type {text!r}: dimension {i} is unbounded (*); only the leftmost "
                             f"dimension may be (as in Borealis's SchemaArray)")
        if low is not None and high is not None and low > high:
            raise ValueError(f"array type {text!r}: dimension {i} runs from {low} down to {high} "
                             f"(write min...max)")
        dims.append(Dimension(high, low))
    return ArrayType(kind, tuple(dims))


def field_type(text: str) -> tuple[FieldType | None, str | None]:
    """A ``<field type=...>`` as the model keeps it: ``(scalar, None)`` or ``(None, declared array type)``.

    Inline arrays come back in their canonical spelling; any other name is
    taken to be a ``<type>`` alias, checked against the catalog's types by
    validation (the alias may come from another document).  Raises
    ValueError for malformed inline arrays.

    >>> field_type("int"), field_type("short(1...4)"), field_type("image")
    ((<FieldType.INT: 'int'>, None), (None, 'short(1...4)'), (None, 'image'))
    """
    if FieldType.is_name(text):
        return FieldType(text), None
    if is_array_syntax(text):
        return None, str(parse_array(text))
    return None, text


def declared_field(name: str, text: str, size: int | None = None) -> Field:
    """A field from its declared type's text (a stream route's ``[name, type, size]``), scalar or array.

    >>> declared_field("px", "byte(0...1, 0...2)").array, declared_field("n", "int").type.value
    ('byte(0...1, 0...2)', 'int')
    """
    scalar, array = field_type(text)
    return Field(name, scalar, size, array)


def route_fields(schema: dict) -> tuple[Field, ...]:
    """A stream route's schema's fields (``fields``: ``[name, type, size]`` each; ``nullable``: the names of
    those that may be NULL, absent when none may, so a client that does not know it reads the rest).

    >>> [f.nullable for f in route_fields({"fields": [["a", "int", None], ["b", "int", None]], "nullable": ["b"]})]
    [False, True]
    """
    nullable = set(schema.get("nullable", ()))
    return tuple(replace(declared_field(n, t, s), nullable=n in nullable) for n, t, s in schema["fields"])


def flowing(f: Field) -> ArrayType:
    """The array type of a field on the data plane, written inline there (:func:`resolved`); ValueError for
    a ``<type>`` alias, which validation resolves before any value flows.

    >>> flowing(Field("px", None, array="byte(0...1, 0...2)")).element.value
    'byte'
    """
    if f.array is None or not is_array_syntax(f.array):
        raise ValueError(f"field {f.name!r}: its type {f.array!r} is not an array written inline (the data "
                         f"plane reads stream schemas with their <type> aliases resolved)")
    return parse_array(f.array)


def resolve(f: Field, types: Mapping[str, TypeAlias]) -> ArrayType | None:
    """The array type of an array field (None: a scalar field, or an alias the catalog lacks)."""
    if f.array is None:
        return None
    if is_array_syntax(f.array):
        return parse_array(f.array)
    alias = types.get(f.array)
    if alias is None:
        return None
    try:
        return parse_array(alias.array, dims_required=False)
    except ValueError:
        return None


def describe(f: Field, types: Mapping[str, TypeAlias]) -> str:
    """How an array field's type reads in a message: ``byte(0...319)`` or ``image (byte(0...319))``."""
    if f.array is None:
        return f.type.value if f.type is not None else "?"
    if is_array_syntax(f.array):
        return f.array
    resolved = resolve(f, types)
    return f"{f.array} (a <type> alias for {resolved})" if resolved is not None else f.array


def first_array_field(schema: Schema) -> Field | None:
    """The first field of ``schema`` that is not a plain scalar, if any."""
    return next((f for f in schema.fields if f.array is not None), None)


def resolved(schema: Schema, types: Mapping[str, TypeAlias]) -> Schema:
    """``schema`` as the data plane reads it: each field typed by a ``<type>`` alias given the alias's type
    (an array written inline, or the scalar of ``array="byte"``); the schema itself when none is.

    Stream schemas travel to nodes and clients without the catalog's aliases, so the streams' schemas
    (:func:`boreas.catalog.schemas_of.input_schema`) are resolved once, where they enter inference.

    >>> s = Schema("S", (Field("a", None, array="image"), Field("b", None, array="small")))
    >>> types = {"image": TypeAlias("image", "byte(0...9)"), "small": TypeAlias("small", "short")}
    >>> [(f.type, f.array) for f in resolved(s, types).fields]
    [(None, 'byte(0...9)'), (<FieldType.SHORT: 'short'>, None)]
    """
    fields = []
    for f in schema.fields:
        found = resolve(f, types) if f.array is not None and not is_array_syntax(f.array) else None
        if found is None:
            fields.append(f)
        elif found.dims:
            fields.append(Field(f.name, None, f.size, str(found), f.origin, f.nullable))
        else:
            fields.append(Field(f.name, found.element, f.size, None, f.origin, f.nullable))
    if all(a is b for a, b in zip(fields, schema.fields)):
        return schema
    return Schema(schema.name, tuple(fields), schema.origin)


def flow_problem(schema: Schema, types: Mapping[str, TypeAlias]) -> str | None:
    """Why a stream of ``schema`` cannot carry its array fields on the data plane (None: it can).

    The data plane carries dense arrays of numbers and timestamps
    (list columns, :func:`boreas.wire.columns.arrow_schema`), with
    ``<type>`` aliases resolved (:func:`resolved`); not an array of strings
    (whose element size Boreas would not check).

    >>> s = Schema("S", (Field("a", None, array="byte(0...2)"), Field("b", None, array="string(0...2)")))
    >>> flow_problem(s, {}).split(":")[0]
    "field 'b' is an array of strings (string(0...2))"
    """
    for f in schema.fields:
        if f.array is None:
            continue
        if not is_array_syntax(f.array):
            return f"field {f.name!r} has type {describe(f, types)!r}, which names no array type"
        if parse_array(f.array).element == FieldType.STRING:
            return (f"field {f.name!r} is an array of strings ({f.array}): the data plane carries arrays of "
                    f"numbers and timestamps only")
    return None


def check_alias(alias: TypeAlias) -> str | None:
    """Why a ``<type>`` declaration is wrong (None: it is fine)."""
    if FieldType.is_name(alias.name):
        return (f"<type name={alias.name!r}> would hide the Borealis type {alias.name!r}; "
                f"give the alias another name")
    try:
        parse_array(alias.array, dims_required=False)
    except ValueError as exc:
        return f"<type name={alias.name!r}>: {exc}"
    return None


#: Type names of other languages and what to write instead (the XSD takes any name as an alias).
_INSTEAD = {
    "float": "'double' (or 'single', 32 bits)", "real": "'single'", "float32": "'single'", "float64": "'double'",
    "integer": "'int'", "int32": "'int'", "bigint": "'long'", "int64": "'long'", "smallint": "'short'",
    "tinyint": "'byte'", "varchar": "'string' (with size=)", "text": "'string' (with size=)",
    "str": "'string' (with size=)", "date": "'timestamp'", "datetime": "'timestamp'",
}


def unknown_alias(f: Field, types: Mapping[str, TypeAlias]) -> str | None:
    """Why an array field's type cannot be told (None: it can).

    >>> unknown_alias(Field("x", None, array="float"), {}).split("; ")[-1]
    "did you mean 'double' (or 'single', 32 bits)?"
    """
    if f.array is None or is_array_syntax(f.array) or f.array in types:
        return None
    known = ", ".join(sorted(types)) or "none declared"
    instead = _INSTEAD.get(f.array.lower())
    return (f"field {f.name!r} has type {f.array!r}, which is neither a Borealis type ({SCALARS}), "
            f"an array such as byte(0...319, 0...239), nor a declared <type> alias (aliases: {known})"
            + (f"; did you mean {instead}?" if instead else ""))


__all__ = [
    "ArrayType",
    "Dimension",
    "check_alias",
    "declared_field",
    "describe",
    "field_type",
    "first_array_field",
    "flow_problem",
    "flowing",
    "is_array_syntax",
    "parse_array",
    "resolved",
    "resolve",
    "unknown_alias",
]
