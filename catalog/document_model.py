"""What a document says: application, deployment and update XML as typed values.

These are the results of reading a document (:func:`boreas.catalog.documents.read_document`)
and the items an update carries besides catalog elements (deletes, modifies, moves,
connects, ...).  They are separate from the reader so that code that builds, merges or
applies documents (``merge``, ``replicate``, ``updates``, the Head and the nodes) needs
the values only, not the XML parsing, schema checking and decoding that produce them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .diagnostics import Origin
from .model import (
    Box,
    Client,
    Partition,
    Publication,
    Region,
    ReplicaSet,
    Subscription,
)


@dataclass(frozen=True, slots=True)
class Delete:
    """Remove a query or box (application XML), or other elements (update XML)."""

    query: str | None = None
    box: str | None = None
    table: str | None = None
    global_: str | None = None
    stream: str | None = None
    node: str | None = None
    view: str | None = None
    # Update XML only: any other element, by its catalog key (see update.xsd).
    schema: str | None = None
    type: str | None = None
    input: str | None = None
    output: str | None = None
    region: str | None = None
    publish: str | None = None
    client: str | None = None
    replica_set: str | None = None
    partition: str | None = None  # by box name
    origin: Origin = field(default=Origin("<update>"), compare=False)


#: Delete fields that name an element by its plain catalog key.
DELETE_NAMES = ("query", "box", "table", "stream", "view", "schema", "type", "input", "output",
                "region", "publish", "client", "replica_set", "partition")


@dataclass(frozen=True, slots=True)
class Modify:
    """Change parameters of an existing box or table."""

    params: tuple[tuple[str, str], ...]
    box: str | None = None
    table: str | None = None
    origin: Origin = field(default=Origin("<update>"), compare=False)


def merge_params(
    old: tuple[tuple[str, str], ...], new: tuple[tuple[str, str], ...]
) -> tuple[tuple[str, str], ...]:
    """``<modify>`` semantics: named parameters change, new ones are appended, none vanish.

    Here, beside :class:`Modify`, so that applying an update (catalog/replicate.py) does not import the
    submission's merge (catalog/merge.py and what it builds on): a ``boreas move`` reads the Head's
    catalog with it (issue 37)."""
    merged = dict(old)
    merged.update(new)
    return tuple(merged.items())


@dataclass(frozen=True, slots=True)
class NodeAssignment:
    """``<node endpoint=... query=...>``: put these queries (or boxes) on that node."""

    endpoint: str
    names: tuple[str, ...]
    origin: Origin = field(default=Origin("<update>"), compare=False)


@dataclass(frozen=True, slots=True)
class Move:
    node: str
    box: str | None = None
    table: str | None = None
    origin: Origin = field(default=Origin("<update>"), compare=False)


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    stream: str
    endpoint: str | None = None
    origin: Origin = field(default=Origin("<update>"), compare=False)


@dataclass(frozen=True, slots=True)
class Connect:
    """Insert ``box`` (a one-in, one-out filter) on an arc into ``sink`` port ``port``."""

    box: Box
    sink: str | None = None
    port: int = 0
    upstream: bool = False
    node: str | None = None
    origin: Origin = field(default=Origin("<update>"), compare=False)


@dataclass(frozen=True, slots=True)
class Disconnect:
    stream: str | None = None
    box: str | None = None
    origin: Origin = field(default=Origin("<update>"), compare=False)


@dataclass
class Application:
    source: str
    declarations: list[Any] = field(default_factory=list)
    deletes: list[Delete] = field(default_factory=list)
    modifies: list[Modify] = field(default_factory=list)
    name: str = ""  # ``boreas submit --app NAME``; else the file's base name (:attr:`app_name`)

    @property
    def app_name(self) -> str:
        """The application this document declares (docs/xml.md "The edit loop"): what a replacing
        submission of the same application prunes by.  ``<borealis>`` has no name attribute, so the
        file's base name without ``.xml`` stands for it unless the submitter names it.

        >>> Application("apps/sensors.xml").app_name, Application("a.xml", name="prod").app_name
        ('sensors', 'prod')
        """
        if self.name:
            return self.name
        base = self.source.replace("\\", "/").rsplit("/", 1)[-1]
        return base[:-4] if base.lower().endswith(".xml") else base


@dataclass
class Deployment:
    source: str
    nodes: list[NodeAssignment] = field(default_factory=list)
    regions: list[Region] = field(default_factory=list)
    replica_sets: list[ReplicaSet] = field(default_factory=list)
    publications: list[Publication] = field(default_factory=list)
    subscriptions: list[Subscription] = field(default_factory=list)
    unsubscriptions: list[Unsubscribe] = field(default_factory=list)
    clients: list[Client] = field(default_factory=list)
    moves: list[Move] = field(default_factory=list)
    partitions: list[Partition] = field(default_factory=list)


@dataclass
class Update:
    """An update-XML batch: items in document order, with the version it produces."""

    source: str
    version: int | None = None
    origin: str | None = None
    id: str | None = None
    items: list[Any] = field(default_factory=list)
    copy: str | None = None  # part ``part`` of ``parts`` of a full copy, or None
    part: int | None = None
    parts: int | None = None


Document = Application | Deployment | Update
