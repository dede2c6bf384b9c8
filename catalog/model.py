"""The typed catalog model: what a Borealis topology and its deployment are.

These are plain values.  They know nothing of XML (``xmlcodec`` turns them
into elements and back) or of storage (``elements`` maps a :class:`Catalog`
onto store keys).  Every element remembers its :class:`Origin` for error
messages, but the origin is not part of its value: the same box read from two
files is the same box.

Streams are not declared on their own in Borealis XML; a stream exists
because an ``<input>`` or a box ``<out>`` produces it.  :meth:`Catalog.producers`
and :meth:`Catalog.consumers` derive them.

This module holds the topology (schemas, streams, boxes, tables, queries,
views) and the :class:`Catalog` that gathers everything; where things run and
who talks to the network is in :mod:`.deployment_model`, and how a partitioned
box is spread over nodes in :mod:`.partition_model`.  Every name of the three is
importable from here.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from .deployment_model import (  # re-exported: the model is imported from here
    Client,
    GlobalComponent,
    Node,
    Publication,
    Region,
    ReplicaSet,
    Subscription,
)
from .diagnostics import Origin, origin_field
from .layered import Layered
from .partition_model import PARTITION_SLOTS, Partition, SegmentPlacement  # re-exported, as above

__all__ = [
    "NAMED_BY_APP", "PARTITION_SLOTS", "Attrs", "Box", "Catalog", "Client", "ConnectionPointView", "Consumer", "Field", "FieldType",
    "GlobalComponent", "InPort", "Input", "Node", "Output", "Partition", "Producer", "Publication", "Query",
    "Region", "ReplicaSet", "Schema", "SegmentPlacement", "Subscription", "Table", "TypeAlias",
]


class FieldType(StrEnum):
    """The Borealis field types."""

    BYTE = "byte"
    SHORT = "short"
    INT = "int"
    LONG = "long"
    SINGLE = "single"
    DOUBLE = "double"
    STRING = "string"
    TIMESTAMP = "timestamp"

    @classmethod
    def is_name(cls, text: str) -> bool:
        """Whether ``text`` names a Borealis type (and not a ``<type>`` alias).

        ``text in FieldType`` only answers this from Python 3.12 on, and the enum's
        value table is its own private; readers ask here instead.

        >>> FieldType.is_name("int"), FieldType.is_name("image")
        (True, False)
        """
        return text in _FIELD_TYPE_NAMES


_FIELD_TYPE_NAMES = frozenset(t.value for t in FieldType)

Attrs = tuple[tuple[str, str], ...]
"""Pass-through attributes (``update_queue``, ``queue_type``, ``key``) kept for round trips."""


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a schema.

    ``type`` is the field's scalar type.  A Borealis array field (see
    :mod:`boreas.catalog.arrays`) has ``type`` None and keeps its declared
    type in ``array``: inline array syntax (``byte(0...319, 0...239)``) or
    the name of a ``<type>`` alias.  The data plane carries array values as
    nested lists and list columns (docs/operators.md, "Array fields").
    ``origin`` (the ``<field>`` element) only locates messages.

    ``nullable`` (``nullable="true"`` in XML): its value may be NULL (None in
    a row, msgpack nil, an Arrow null).  Borealis fields are not: a NULL in a
    field that does not say so is refused with its row, as before
    (docs/xml.md, "Nullable fields").
    """

    name: str
    type: FieldType | None
    size: int | None = None
    array: str | None = None
    origin: Origin = origin_field()
    nullable: bool = False

    @property
    def declared_type(self) -> str:
        """The type as written in XML: the scalar's name or the array type."""
        return self.array if self.array is not None else self.type.value  # type: ignore[union-attr]

    def same_shape(self, other: Field) -> bool:
        """Tuples are positional: a field matches another of the same type (and size); whether either
        may be NULL is not its shape (a union's out field is nullable where one of its ins is)."""
        if self.type != other.type or self.array != other.array:
            return False
        return self.size is None or other.size is None or self.size == other.size


@dataclass(frozen=True, slots=True)
class Schema:
    """An immutable tuple layout; once in the catalog it is never redefined."""

    name: str
    fields: tuple[Field, ...]
    origin: Origin = origin_field()

    def field(self, name: str) -> Field | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None

    def same_shape(self, other: Schema) -> bool:
        return len(self.fields) == len(other.fields) and all(
            a.same_shape(b) for a, b in zip(self.fields, other.fields)
        )

    def stands_for(self, inferred: Schema) -> bool:
        """Whether this (declared) schema may name streams of the ``inferred`` layout: the same shape, and
        nullable wherever the inferred one is (a declared field that is not would refuse the NULLs coming).

        >>> a, b = Schema("A", (Field("x", FieldType.INT),)), Schema("B", (Field("x", FieldType.INT, nullable=True),))
        >>> b.stands_for(a), a.stands_for(b)
        (True, False)
        """
        return self.same_shape(inferred) and all(d.nullable or not i.nullable
                                                 for d, i in zip(self.fields, inferred.fields))

    def describe(self) -> str:
        return "(" + ", ".join(
            f"{f.name} {f.declared_type}" + (f"({f.size})" if f.size else "") + (" null" if f.nullable else "")
            for f in self.fields
        ) + ")"


@dataclass(frozen=True, slots=True)
class TypeAlias:
    name: str
    array: str
    size: int | None = None
    origin: Origin = origin_field()


@dataclass(frozen=True, slots=True)
class Input:
    """An input stream: data enters the network from a publisher."""

    stream: str
    schema: str
    node: str | None = None
    origin: Origin = origin_field()
    app: str = field(default="", compare=False)  # the application that declared it (docs/xml.md)
    watermark: str | None = None  # "ts - 5000": its event time and delay (catalog/watermarks.py)
    idle_timeout: str | None = None  # seconds after which a silent producer stops holding the watermark


@dataclass(frozen=True, slots=True)
class Output:
    """An output stream: data leaves the network to subscribers."""

    stream: str
    schema: str | None = None
    node: str | None = None
    origin: Origin = origin_field()
    app: str = field(default="", compare=False)  # the application that declared it (docs/xml.md)


@dataclass(frozen=True, slots=True)
class InPort:
    stream: str
    view: str | None = None
    attrs: Attrs = ()


@dataclass(frozen=True, slots=True)
class Box:
    """An operator instance; in and out ports are numbered in declaration order."""

    name: str
    type: str
    inputs: tuple[InPort, ...]
    outputs: tuple[str, ...]
    params: tuple[tuple[str, str], ...] = ()
    access: tuple[str, ...] = ()
    node: str | None = None
    attrs: Attrs = ()
    origin: Origin = origin_field()
    app: str = field(default="", compare=False)  # the application that declared it (docs/xml.md)

    @property
    def parameters(self) -> dict[str, str]:
        return dict(self.params)

    def param(self, name: str, default: str | None = None) -> str | None:
        for key, value in self.params:
            if key == name:
                return value
        return default

    def in_name(self, port: int) -> str:
        """The name the box knows in port ``port`` by: the stream it was declared reading.

        A connect rewires the port to the inserted filter's stream; boxes
        that read their in streams by name (an ``m3`` box's SQL) keep the
        declared name, which :meth:`rewired` keeps in ``in-name.N``.
        """
        return self.param(f"in-name.{port}") or self.inputs[port].stream

    def rewired(self, port: int, stream: str) -> Box:
        """This box with in port ``port`` reading ``stream`` (a filter inserted or removed before it).

        The port's declared name stays in parameter ``in-name.N`` while the
        port reads another stream, and goes when it reads that stream again
        (a connect then a disconnect gives back the same box).
        """
        inputs = list(self.inputs)
        name, key = self.in_name(port), f"in-name.{port}"
        inputs[port] = replace(inputs[port], stream=stream)
        params = tuple(p for p in self.params if p[0] != key)
        if stream != name:
            params += ((key, name),)
        return replace(self, inputs=tuple(inputs), params=params)


@dataclass(frozen=True, slots=True)
class Table:
    name: str
    schema: str
    stream: str | None = None
    keys: tuple[str, ...] = ()
    indexes: tuple[str, ...] = ()
    params: tuple[tuple[str, str], ...] = ()
    node: str | None = None
    origin: Origin = origin_field()
    app: str = field(default="", compare=False)  # the application that declared it (docs/xml.md)


@dataclass(frozen=True, slots=True)
class Query:
    """A named group of boxes and tables that is placed and deleted together."""

    name: str
    boxes: tuple[str, ...] = ()
    tables: tuple[str, ...] = ()
    attrs: Attrs = ()
    origin: Origin = origin_field()
    app: str = field(default="", compare=False)  # the application that declared it (docs/xml.md)


@dataclass(frozen=True, slots=True)
class ConnectionPointView:
    name: str
    stream: str
    size: int | None = None
    range: tuple[str, str] | None = None
    order_field: str | None = None
    params: tuple[tuple[str, str], ...] = ()
    radius: int | None = None  # Borealis's <radius value=...>, kept for round trips
    origin: Origin = origin_field()


@dataclass(frozen=True, slots=True)
class Producer:
    """What writes a stream: an ``<input>`` (box is None) or a box's out port."""

    stream: str
    box: str | None = None
    port: int = 0

    def describe(self) -> str:
        return f"box {self.box!r} out port {self.port}" if self.box else "an <input>"


@dataclass(frozen=True, slots=True)
class Consumer:
    box: str
    port: int


@dataclass
class Catalog:
    """A whole topology and its deployment at one catalog version."""

    version: int = 0
    schemas: dict[str, Schema] = field(default_factory=dict)
    types: dict[str, TypeAlias] = field(default_factory=dict)
    inputs: dict[str, Input] = field(default_factory=dict)
    outputs: dict[str, Output] = field(default_factory=dict)
    boxes: dict[str, Box] = field(default_factory=dict)
    tables: dict[str, Table] = field(default_factory=dict)
    queries: dict[str, Query] = field(default_factory=dict)
    views: dict[str, ConnectionPointView] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    regions: dict[str, Region] = field(default_factory=dict)
    replica_sets: dict[str, ReplicaSet] = field(default_factory=dict)
    publications: dict[str, Publication] = field(default_factory=dict)
    subscriptions: dict[str, Subscription] = field(default_factory=dict)
    clients: dict[str, Client] = field(default_factory=dict)
    globals: dict[str, GlobalComponent] = field(default_factory=dict)
    partitions: dict[str, Partition] = field(default_factory=dict)  # by box name

    def copy(self) -> Catalog:
        """A copy whose dicts can change without touching this one (elements are immutable).

        A dict of :data:`LAYER_FROM` entries or more is not copied: both catalogs get a
        :class:`~.layered.Layered` version over it (:meth:`shared`), so a commit's next catalog costs
        what it writes, not the size of the catalog (issue 37)."""
        return Catalog(self.version, *(self._copy_of(name) for name in _DICTS))

    def _copy_of(self, name: str) -> MutableMapping[str, Any]:
        found = getattr(self, name)
        if type(found) is not Layered and len(found) < LAYER_FROM:
            return dict(found)
        return Layered.over(self.shared(name))

    def shared(self, name: str) -> Mapping[str, Any]:
        """Catalog dict ``name`` made safe to share with a copy (``Layered.over`` it): a large plain one
        frozen as the base of a :class:`~.layered.Layered` version that this catalog holds from now on (so
        neither catalog writes what the other reads; a reference to the plain dict taken before must not be
        written after), a layered one as it is (``Layered.over`` copies only its own entries)."""
        found = getattr(self, name)
        if isinstance(found, Layered):
            return found
        base = found if type(found) is dict else dict(found)
        setattr(self, name, Layered(base))
        return base

    def __eq__(self, other: object) -> bool:
        """Equal topologies; the version is bookkeeping, not content."""
        if not isinstance(other, Catalog):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in _DICTS)

    # -- derived structure -------------------------------------------------

    def producers(self) -> dict[str, list[Producer]]:
        """Every stream and what produces it (more than one is an error)."""
        found: dict[str, list[Producer]] = {}
        for stream in self.inputs:
            found.setdefault(stream, []).append(Producer(stream))
        for box in self.boxes.values():
            for port, stream in enumerate(box.outputs):
                found.setdefault(stream, []).append(Producer(stream, box.name, port))
        return found

    def consumers(self) -> dict[str, list[Consumer]]:
        found: dict[str, list[Consumer]] = {}
        for box in self.boxes.values():
            for port, inport in enumerate(box.inputs):
                found.setdefault(inport.stream, []).append(Consumer(box.name, port))
        return found

    def boxes_on(self, endpoint: str) -> list[Box]:
        """The boxes ``endpoint`` runs: placed there, or a member of their partition."""
        return [b for b in self.boxes.values() if endpoint in self.placement(b.name)]

    def placement(self, box: str) -> tuple[str, ...]:
        """The nodes a box runs on: its node, or its partition's members (``()``: not placed)."""
        part = self.partitions.get(box)
        if part is not None:
            return tuple(dict.fromkeys(part.nodes))
        found = self.boxes.get(box)
        return (found.node,) if found is not None and found.node else ()


#: The elements that record the application that declared them (``app``; docs/xml.md "The edit loop").
NAMED_BY_APP = (Input, Output, Box, Table, Query)

#: A Catalog dict this large is shared with its copies as a :class:`~.layered.Layered` base, not copied
#: (a smaller one costs little to copy and stays a plain dict; tests set it to 0 to layer every dict).
LAYER_FROM = 512

_DICTS = ("schemas", "types", "inputs", "outputs", "boxes", "tables", "queries", "views", "nodes", "regions",
          "replica_sets", "publications", "subscriptions", "clients", "globals", "partitions")
