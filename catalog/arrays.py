"""Borealis array field types: ``byte(0...319, 0...239, 0...2)`` and ``<type>`` aliases.

Real Borealis applications (video frames, sensor grids) declare array
fields, either inline (``<field name="frame" type="byte(0...319, 0...239,
0...2)"/>``, the DTD's ``type '(' [min '...'] max, .. ')'``) or through an
alias (``<type name="image" array="byte(0...319, 0...239, 0...2)"/>`` and
``<field name="frame" type="image"/>``).  The catalog accepts both, keeps
them as declared (a :class:`~boreas.catalog.model.Field` whose ``array`` is
the declared type and whose ``type`` is None), stores, exports and
replicates them, so a real file is read whole.

Boreas's data plane carries scalar values only, so validation refuses
whatever would make an array value flow, naming the box, publication or
subscription and the field (:func:`first_array_field`, :func:`describe`).
None is kept for ``type`` on purpose: code that only knows scalars fails
loudly on an array field rather than taking it for a byte.

>>> a = parse_array("byte(0...319, 0...239,0...2)")
>>> str(a), a.element.value, [(d.low, d.high) for d in a.dims]
('byte(0...319, 0...239, 0...2)', 'byte', [(0, 319), (0, 239), (0, 2)])
>>> parse_array("int(3...1)")
Traceback (most recent call last):
...
ValueError: array type 'int(3...1)': dimension 1 runs from 3 down to 1 (write min...max)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from .model import Field, FieldType, Schema, TypeAlias

#: ``element(dim, dim, ...)``; each dim is ``max`` or ``min...max``.
_ARRAY = re.compile(r"^\s*(\w+)\s*(?:\((.*)\))?\s*$", re.DOTALL)
_DIM = re.compile(r"^\s*(?:(\d+)\s*\.\.\.\s*)?(\d+)\s*$")

SCALARS = ", ".join(t.value for t in FieldType)


@dataclass(frozen=True, slots=True)
class Dimension:
    """One array dimension: indexes ``low..high`` (``low`` None when only the max is written)."""

    high: int
    low: int | None = None

    def __str__(self) -> str:
        return str(self.high) if self.low is None else f"{self.low}...{self.high}"


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
        raise ValueError(f"array type {text!r}: element type {element!r} is not one of {SCALARS}") from None
    if inside is None:
        if dims_required:
            raise ValueError(f"array type {text!r} has no dimensions, e.g. {element}(0...9)")
        return ArrayType(kind)
    dims = []
    for i, part in enumerate(inside.split(","), start=1):
        d = _DIM.match(part)
        if not d:
            raise ValueError(f"array type {text!r}: dimension {i} {part.strip()!r} is not max or min...max")
        low, high = (int(d.group(1)) if d.group(1) is not None else None), int(d.group(2))
        if low is not None and low > high:
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
    "describe",
    "field_type",
    "first_array_field",
    "is_array_syntax",
    "parse_array",
    "resolve",
    "unknown_alias",
]
