"""The typed catalog model: what a Borealis topology and its deployment are.

These are plain values.  They know nothing of XML (``xmlcodec`` turns them
into elements and back) or of storage (``elements`` maps a :class:`Catalog`
onto store keys).  Every element remembers its :class:`Origin` for error
messages, but the origin is not part of its value: the same box read from two
files is the same box.

Streams are not declared on their own in Borealis XML; a stream exists
because an ``<input>`` or a box ``<out>`` produces it.  :meth:`Catalog.producers`
and :meth:`Catalog.consumers` derive them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum

from .diagnostics import CATALOG, Origin


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


Attrs = tuple[tuple[str, str], ...]
"""Pass-through attributes (``update_queue``, ``queue_type``, ``key``) kept for round trips."""


def _origin() -> Origin:
    return field(default=CATALOG, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a schema.

    ``type`` is the field's scalar type.  A Borealis array field (see
    :mod:`boreas.catalog.arrays`) has ``type`` None and keeps its declared
    type in ``array``: inline array syntax (``byte(0...319, 0...239)``) or
    the name of a ``<type>`` alias.  The catalog carries array fields; the
    data plane never sees one (validation refuses what would make one flow).
    ``origin`` (the ``<field>`` element) only locates messages.
    """

    name: str
    type: FieldType | None
    size: int | None = None
    array: str | None = None
    origin: Origin = _origin()

    @property
    def declared_type(self) -> str:
        """The type as written in XML: the scalar's name or the array type."""
        return self.array if self.array is not None else self.type.value  # type: ignore[union-attr]

    def same_shape(self, other: Field) -> bool:
        """Tuples are positional: a field matches another of the same type (and size)."""
        if self.type != other.type or self.array != other.array:
            return False
        return self.size is None or other.size is None or self.size == other.size


@dataclass(frozen=True, slots=True)
class Schema:
    """An immutable tuple layout; once in the catalog it is never redefined."""

    name: str
    fields: tuple[Field, ...]
    origin: Origin = _origin()

    def field(self, name: str) -> Field | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None

    def same_shape(self, other: Schema) -> bool:
        return len(self.fields) == len(other.fields) and all(
            a.same_shape(b) for a, b in zip(self.fields, other.fields)
        )

    def describe(self) -> str:
        return "(" + ", ".join(
            f"{f.name} {f.declared_type}" + (f"({f.size})" if f.size else "") for f in self.fields
        ) + ")"


@dataclass(frozen=True, slots=True)
class TypeAlias:
    name: str
    array: str
    size: int | None = None
    origin: Origin = _origin()


@dataclass(frozen=True, slots=True)
class Input:
    """An input stream: data enters the network from a publisher."""

    stream: str
    schema: str
    node: str | None = None
    origin: Origin = _origin()


@dataclass(frozen=True, slots=True)
class Output:
    """An output stream: data leaves the network to subscribers."""

    stream: str
    schema: str | None = None
    node: str | None = None
    origin: Origin = _origin()


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
    origin: Origin = _origin()

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
    origin: Origin = _origin()


@dataclass(frozen=True, slots=True)
class Query:
    """A named group of boxes and tables that is placed and deleted together."""

    name: str
    boxes: tuple[str, ...] = ()
    tables: tuple[str, ...] = ()
    attrs: Attrs = ()
    origin: Origin = _origin()


@dataclass(frozen=True, slots=True)
class ConnectionPointView:
    name: str
    stream: str
    size: int | None = None
    range: tuple[str, str] | None = None
    order_field: str | None = None
    params: tuple[tuple[str, str], ...] = ()
    radius: int | None = None  # Borealis's <radius value=...>, kept for round trips
    origin: Origin = _origin()


@dataclass(frozen=True, slots=True)
class Node:
    """A Borealis node, known by its (normalised) listening endpoint."""

    endpoint: str
    origin: Origin = _origin()


@dataclass(frozen=True, slots=True)
class Region:
    """Membership of one node in one region, or where a region's component listens.

    ``region`` names the region: its name, or its regional component's
    endpoint, or ``"default"`` when the XML gives neither (real Borealis
    deployments write ``<region node=":15000"/>`` for the one regional
    component of a test).  A region named without an endpoint learns it
    from a *registration*: ``<region name=... endpoint=...>`` with no node
    (``node == ""``), which a regional component sends the Head when it
    starts.
    """

    region: str
    node: str
    endpoint: str | None = None
    name: str | None = None
    origin: Origin = _origin()

    @property
    def key(self) -> str:
        return f"{self.region}|{self.node}"

    @property
    def is_registration(self) -> bool:
        return not self.node


@dataclass(frozen=True, slots=True)
class ReplicaSet:
    name: str
    queries: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()
    origin: Origin = _origin()


@dataclass(frozen=True, slots=True)
class Publication:
    """A client publishes into an input stream at the node where it enters."""

    stream: str
    node: str | None = None
    client: str | None = None  # the <client> it was declared in, if any
    origin: Origin = _origin()

    @property
    def key(self) -> str:
        return f"{self.stream}|{self.node or ''}"


@dataclass(frozen=True, slots=True)
class Subscription:
    """A client listener at ``endpoint`` receives a stream."""

    stream: str
    endpoint: str
    gap: str | None = None
    origin: Origin = _origin()
    on_slow: str | None = None  # block | drop | disconnect (None: the node's default, disconnect)

    @property
    def key(self) -> str:
        return f"{self.stream}|{self.endpoint}"


@dataclass(frozen=True, slots=True)
class Client:
    endpoint: str
    prefix: str | None = None
    origin: Origin = _origin()


@dataclass(frozen=True, slots=True)
class GlobalComponent:
    """A monitoring tool that receives the whole catalog and every change."""

    endpoint: str
    origin: Origin = _origin()


@dataclass(frozen=True, slots=True)
class SegmentPlacement:
    """Segment ``id`` of a partitioned box: hash slots ``lo <= s < hi`` of every partitioned map, on ``member``."""

    id: int
    lo: int
    hi: int
    member: int


#: Hash slots a partitioned box's keys are spread over (``boreas.m3.cumulus.hashing.SLOTS``).
PARTITION_SLOTS = 4096


@dataclass(frozen=True, slots=True)
class Partition:
    """An ``m3`` box's maps spread over several nodes in segments (docs/cumulus.md §2).

    ``nodes[i]`` is member *i*'s endpoint.  ``count``, ``key`` and ``pins``
    (``<map name key>`` without a position: map -> key column) are what the
    user wrote; planning on commit fills in ``segments`` (equal slot ranges
    dealt over the members), every map's partition key column (``maps``:
    ``(map, key column name, key position)``, both None for a map kept whole
    on the box's home segment), a fresh incarnation ``id`` and ``layout`` 1.
    A partitioned box's own ``Box.node`` stays None: the partition places it.

    A partition grows by a resubmission that appends ``<node>`` elements: those are
    *joining* until a layout change (``boreas rebalance``, ``move``) makes
    them members.  ``members`` counts the nodes that are members of layout
    ``layout`` (None: all), ``coordinators`` those that coordinate published
    input (None: all; fixed when the partition first grows, so a producer's
    publisher keeps picking the same member, docs/cumulus.md §6.4).

    >>> p = Partition("v", ("a", "b", "c"), members=2, coordinators=2)
    >>> p.layout_nodes, p.entry_nodes, p.joining
    (('a', 'b'), ('a', 'b'), ('c',))
    """

    box: str
    nodes: tuple[str, ...]
    segments: tuple[SegmentPlacement, ...] = ()
    count: int | None = None
    key: str | None = None
    pins: tuple[tuple[str, str], ...] = ()
    maps: tuple[tuple[str, str | None, int | None], ...] = ()
    layout: int = 0
    epoch_ms: int = 100
    id: str = ""
    origin: Origin = _origin()
    members: int | None = None
    coordinators: int | None = None

    @property
    def layout_nodes(self) -> tuple[str, ...]:
        """The endpoints of the members of layout ``layout``, by member number."""
        return self.nodes if self.members is None else self.nodes[:self.members]

    @property
    def entry_nodes(self) -> tuple[str, ...]:
        """The members a publisher picks from (``crc32(producer) % len``), by member number."""
        return self.nodes if self.coordinators is None else self.nodes[:self.coordinators]

    @property
    def joining(self) -> tuple[str, ...]:
        """Nodes declared in the partition that no layout has made members yet."""
        return self.nodes[len(self.layout_nodes):]

    @property
    def planned(self) -> bool:
        """Whether planning filled in segments and map columns (a committed partition always is)."""
        return bool(self.segments) and self.layout > 0

    def member_of(self, endpoint: str) -> list[int]:
        """The member numbers ``endpoint`` hosts (two only after a failover)."""
        return [i for i, node in enumerate(self.nodes) if node == endpoint]


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
        """A copy whose dicts can change without touching this one (elements are immutable)."""
        return Catalog(self.version, *(dict(getattr(self, name)) for name in _DICTS))

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

    def is_empty(self) -> bool:
        return not any(getattr(self, n) for n in _DICTS)


_DICTS = (
    "schemas",
    "types",
    "inputs",
    "outputs",
    "boxes",
    "tables",
    "queries",
    "views",
    "nodes",
    "regions",
    "replica_sets",
    "publications",
    "subscriptions",
    "clients",
    "globals",
    "partitions",
)
