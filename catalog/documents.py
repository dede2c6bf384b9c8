"""Whole documents: application, deployment and update XML, read into the model.

Reading a document is three gates, each of which reports every problem it
finds with file, line and element path: hardened parsing (``xmlsafe``), the
language's XSD (``boreas.schemas``), then decoding into model objects
(``xmlcodec``), which also normalises endpoints.  The language is told by
the root element, so a caller can hand over files in any order.

Reading costs time roughly linear in the document's size (element paths are
numbered once per parent, attributes are capped by ``xmlsafe``, at most
``limits.max_problems`` diagnostics are spelled out), and a caller with a
time budget passes ``deadline`` (a ``time.monotonic()`` value): a document
still being read then is refused rather than read on.

>>> doc = read_document(b'<deploy><node endpoint=":15000" query="box1"/></deploy>', "d.xml")
>>> doc.nodes[0].endpoint, doc.nodes[0].names
('localhost:15000', ('box1',))
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from boreas.schemas import LANGUAGES, xsd_errors
from lxml import etree

from .diagnostics import Diagnostic, Origin, ValidationFailed
from .endpoints import DEFAULT_MONITOR_PORT, normalize_endpoint, parse_position
from .model import (
    Box,
    Client,
    GlobalComponent,
    Node,
    Partition,
    Publication,
    Query,
    Region,
    ReplicaSet,
    Subscription,
)
from .xmlcodec import DecodeError, decode
from .xmlsafe import (
    DEFAULT_LIMITS,
    TOO_SLOW,
    DeadlineExceeded,
    ElementPaths,
    XmlLimits,
    capped,
    parse_xml,
    streaming_schema_problems,
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


#: Attributes that name things; names appear in space-separated lists
#: (``<node query="a b">``), so they must be non-empty and space-free.
_NAME_ATTRS = ("name", "stream", "schema", "type", "box", "table")
_NAME = re.compile(r"^\S+$")


class _Reader:
    """Decodes one parsed document, collecting a diagnostic per bad element."""

    def __init__(self, source: str, max_problems: int = DEFAULT_LIMITS.max_problems,
                 deadline: float | None = None):
        self.source = source
        self.problems: list[Diagnostic] = []
        self.more_problems = 0  # found beyond max_problems, counted only
        self.max_problems = max_problems
        self.deadline = deadline
        self.paths = ElementPaths()
        self._ticks = 0
        self.positions = False  # node positions (#0) are allowed: application and deployment XML

    def origin(self, el: etree._Element) -> Origin:
        self._ticks += 1
        if self.deadline is not None and self._ticks % 256 == 0:
            _check_deadline(self.deadline, self.source, el.sourceline)
        return Origin(self.source, el.sourceline, self.paths(el))

    def fail(self, el: etree._Element, reason: str) -> None:
        if len(self.problems) >= self.max_problems:
            self.more_problems += 1
        else:
            self.problems.append(Diagnostic.at(self.origin(el), reason))

    def endpoint(self, el: etree._Element, text: str | None, default_port: int = 15000) -> str | None:
        if text is None:
            return None
        try:
            return normalize_endpoint(text, default_port=default_port)
        except ValueError as exc:
            self.fail(el, str(exc))
            return None

    def node(self, el: etree._Element, text: str | None) -> str | None:
        """A node's endpoint, or in application and deployment XML a position (``#1``), kept as written
        until the submission is planned (:mod:`.positions`)."""
        position = parse_position(text)
        if position is not None:
            if self.positions:
                return f"#{position}"
            self.fail(el, f"node position {text.strip()!r}: update XML names nodes by endpoint")
            return None
        try:
            return normalize_endpoint(text) if text is not None else None
        except ValueError as exc:
            self.fail(el, str(exc))
            return None

    def decode(self, el: etree._Element) -> Any:
        for attr in _NAME_ATTRS:
            value = el.get(attr)
            if value is not None and not _NAME.match(value):
                self.fail(el, f"<{el.tag}> {attr}={value!r} is not a name "
                              f"(names are non-empty and contain no spaces)")
                return None
        try:
            return decode(el, self.origin(el))
        except DecodeError as exc:
            if exc.origin is not None and len(self.problems) < self.max_problems:
                self.problems.append(Diagnostic.at(exc.origin, str(exc)))
            else:
                self.fail(el, str(exc))
            return None

    # -- application ------------------------------------------------------

    def application(self, root: etree._Element) -> Application:
        app = Application(self.source)
        for el in root:
            if not isinstance(el.tag, str):
                continue  # comments and processing instructions
            if el.tag == "delete":
                app.deletes.append(self.delete(el))
            elif el.tag == "modify":
                app.modifies.append(self.modify(el))
            elif el.tag == "query":
                app.declarations += self.query(el)
            else:
                app.declarations.append(self.declaration(el))
        app.declarations = [d for d in app.declarations if d is not None]
        return app

    def declaration(self, el: etree._Element) -> Any:
        obj = self.decode(el)
        node = getattr(obj, "node", None)
        if node is not None:
            obj = replace(obj, node=self.node(el, node))
        return obj

    def query(self, el: etree._Element) -> list[Any]:
        children = [c for c in el if isinstance(c.tag, str)]
        members = [self.declaration(c) for c in children]
        boxes = tuple(m.name for m, c in zip(members, children) if c.tag == "box" and m)
        tables = tuple(m.name for m, c in zip(members, children) if c.tag == "table" and m)
        query = self.decode(el)  # in catalog form, members are listed in boxes=/tables=
        if query is None:
            return members
        return [Query(query.name, query.boxes + boxes, query.tables + tables, query.attrs,
                      query.origin), *members]

    def delete(self, el: etree._Element) -> Delete:
        names = {k: el.get(k) for k in DELETE_NAMES}
        node = self.endpoint(el, el.get("node"))
        global_ = self.endpoint(el, el.get("global"))
        if not any(names.values()) and node is None and global_ is None:
            self.fail(el, "<delete> names nothing to delete (give query=, box=, ...)")
        return Delete(global_=global_, node=node, origin=self.origin(el), **names)

    def modify(self, el: etree._Element) -> Modify:
        if (el.get("box") is None) == (el.get("table") is None):
            self.fail(el, "<modify> needs exactly one of box= or table=")
        params = tuple((p.get("name"), p.get("value")) for p in el if p.tag == "parameter")
        return Modify(params, el.get("box"), el.get("table"), self.origin(el))

    # -- deployment -------------------------------------------------------

    def deployment(self, root: etree._Element) -> Deployment:
        dep = Deployment(self.source)
        for el in root:
            if isinstance(el.tag, str):
                self.deployment_item(el, dep)
        return dep

    def deployment_item(self, el: etree._Element, dep: Deployment, client: str | None = None) -> None:
        tag = el.tag
        if tag == "node":
            endpoint = self.node(el, el.get("endpoint"))
            if endpoint:
                dep.nodes.append(NodeAssignment(endpoint, tuple((el.get("query") or "").split()),
                                                self.origin(el)))
        elif tag == "region":
            region = self.decode(el)
            if region:
                node = self.node(el, region.node) if region.node else ""
                endpoint = self.endpoint(el, region.endpoint)
                if node:
                    dep.regions.append(Region(region.name or endpoint or "default", node, endpoint,
                                              region.name, region.origin))
                elif endpoint:
                    dep.regions.append(Region(region.name or "default", "", endpoint, region.name,
                                              region.origin))
        elif tag == "replica_set":
            rs = self.decode(el)
            if rs is None:
                return
            nodes = tuple(self.node(n, n.get("endpoint")) for n in el if n.tag == "node")
            dep.replica_sets.append(ReplicaSet(rs.name, rs.queries, tuple(n for n in nodes if n),
                                               rs.origin))
        elif tag == "publish":
            node = el.get("node") or el.get("endpoint")
            client = client or self.endpoint(el, el.get("client"), DEFAULT_MONITOR_PORT)
            dep.publications.append(Publication(el.get("stream"), self.node(el, node), client,
                                                self.origin(el)))
        elif tag == "subscribe":
            endpoint = self.endpoint(el, el.get("endpoint"), DEFAULT_MONITOR_PORT)
            endpoint = endpoint or client or f"localhost:{DEFAULT_MONITOR_PORT}"
            dep.subscriptions.append(Subscription(el.get("stream"), endpoint, el.get("gap"),
                                                  self.origin(el), el.get("on-slow")))
        elif tag == "unsubscribe":
            dep.unsubscriptions.append(Unsubscribe(
                el.get("stream"), self.endpoint(el, el.get("endpoint"), DEFAULT_MONITOR_PORT),
                self.origin(el)))
        elif tag == "client":
            endpoint = self.endpoint(el, el.get("endpoint") or str(DEFAULT_MONITOR_PORT),
                                     DEFAULT_MONITOR_PORT)
            if endpoint:
                dep.clients.append(Client(endpoint, el.get("prefix"), self.origin(el)))
            for child in el:
                if isinstance(child.tag, str):
                    self.deployment_item(child, dep, client=endpoint)
        elif tag == "move":
            node = self.node(el, el.get("node"))
            if (el.get("box") is None) == (el.get("table") is None):
                self.fail(el, "<move> needs exactly one of box= or table=")
            elif node:
                dep.moves.append(Move(node, el.get("box"), el.get("table"), self.origin(el)))
        elif tag == "partition":
            part = self.partition(el)
            if part is not None:
                dep.partitions.append(part)

    def partition(self, el: etree._Element) -> Partition | None:
        """A ``<partition>``, its members' endpoints normalised (positions kept in deployment XML)."""
        part = self.decode(el)
        if part is None:
            return None
        spelled: dict[str, str | None] = {}
        for child in el:
            if child.tag == "node" and child.get("endpoint") not in spelled:
                spelled[child.get("endpoint")] = self.node(child, child.get("endpoint"))
        if any(endpoint is None for endpoint in spelled.values()):
            return None
        return replace(part, nodes=tuple(spelled[n] for n in part.nodes))

    # -- update -------------------------------------------------------------

    def update(self, root: etree._Element) -> Update:
        version = root.get("version")
        part, parts = root.get("part"), root.get("parts")
        update = Update(self.source, int(version) if version is not None else None,
                        root.get("origin"), root.get("id"), copy=root.get("copy"),
                        part=int(part) if part else None, parts=int(parts) if parts else None)
        scratch = Deployment(self.source)
        for el in root:
            if not isinstance(el.tag, str):
                continue
            tag = el.tag
            if tag == "delete":
                update.items.append(self.delete(el))
            elif tag == "modify":
                update.items.append(self.modify(el))
            elif tag == "query":
                update.items += self.query(el)
            elif tag == "connect":
                inner = next((c for c in el if c.tag == "box"), None)
                box = self.decode(inner) if inner is not None else None
                if box is not None:
                    update.items.append(Connect(box, el.get("box"), int(el.get("port") or 0),
                                                el.get("upstream") == "1",
                                                self.endpoint(el, el.get("node")), self.origin(el)))
            elif tag == "disconnect":
                update.items.append(Disconnect(el.get("stream"), el.get("box"), self.origin(el)))
            elif tag == "global":
                endpoint = self.endpoint(el, el.get("endpoint"))
                if endpoint:
                    update.items.append(GlobalComponent(endpoint, self.origin(el)))
            elif tag == "node" and el.get("query") is None:  # a node declaration, not a placement
                endpoint = self.endpoint(el, el.get("endpoint"))
                if endpoint:
                    update.items.append(Node(endpoint, self.origin(el)))
            elif tag in ("node", "region", "replica_set", "publish", "subscribe", "unsubscribe",
                         "client", "move", "partition"):
                before = _count(scratch)
                self.deployment_item(el, scratch)
                update.items += _new_items(scratch, before)
            else:
                update.items.append(self.declaration(el))
        update.items = [i for i in update.items if i is not None]
        return update


_DEPLOY_LISTS = ("nodes", "regions", "replica_sets", "publications", "subscriptions",
                 "unsubscriptions", "clients", "moves", "partitions")


def _count(dep: Deployment) -> dict[str, int]:
    return {name: len(getattr(dep, name)) for name in _DEPLOY_LISTS}


def _new_items(dep: Deployment, before: dict[str, int]) -> list[Any]:
    return [item for name in _DEPLOY_LISTS for item in getattr(dep, name)[before[name]:]]


#: Documents with at most this many elements plus attributes are explained by
#: ``boreas.schemas.xsd_errors`` (the clearest messages; it costs time in the
#: square of the document's size, which is small here); larger ones by
#: libxml2 while it parses them again (linear).
SMALL_DOCUMENT = 2_000


def _check_deadline(deadline: float, source: str, line: int | None) -> None:
    if time.monotonic() > deadline:
        raise DeadlineExceeded([Diagnostic(source, line, "", TOO_SLOW)])


def _is_small(root: etree._Element) -> bool:
    size = 0
    for element in root.iter(etree.Element):
        size += 1 + len(element.attrib)
        if size > SMALL_DOCUMENT:
            return False
    return True


def _schema_problems(data: bytes | str, tree: etree._ElementTree, source: str,
                     limits: XmlLimits, deadline: float | None) -> list[Diagnostic]:
    """The XSD's verdict, at most ``limits.max_problems`` of them spelled out."""
    root = tree.getroot()
    if root.tag not in LANGUAGES or _is_small(root):
        problems = [Diagnostic(source, p.line, p.path, p.reason) for p in xsd_errors(root)]
        return capped(problems, source, limits.max_problems)
    from boreas.schemas import _fast_schema  # libxml2's compiled XSD, cached

    return streaming_schema_problems(data, tree, _fast_schema(LANGUAGES[root.tag]), source,
                                     limits, deadline)


def read_document(
    data: bytes | str, source: str = "<input>", limits: XmlLimits = DEFAULT_LIMITS,
    deadline: float | None = None,
) -> Document:
    """Parse, schema-check and decode one document; raises ``ValidationFailed``.

    ``deadline`` (a ``time.monotonic()`` value) bounds the time spent: past
    it, :class:`~boreas.catalog.xmlsafe.DeadlineExceeded` (a ``ValidationFailed``)
    is raised.
    """
    tree = parse_xml(data, source, limits)
    if deadline is not None:
        _check_deadline(deadline, source, None)
    root = tree.getroot()
    problems = _schema_problems(data, tree, source, limits, deadline)
    if problems:
        raise ValidationFailed(problems)
    reader = _Reader(source, limits.max_problems, deadline)
    reader.positions = root.tag in ("borealis", "deploy")
    if root.tag == "borealis":
        doc: Document = reader.application(root)
    elif root.tag == "deploy":
        doc = reader.deployment(root)
    else:
        doc = reader.update(root)
    if reader.problems:
        raise ValidationFailed(capped(reader.problems, source, limits.max_problems,
                                      reader.more_problems))
    return doc


def read_file(path: str | Path, limits: XmlLimits = DEFAULT_LIMITS) -> Document:
    """Read one XML file (at most ``limits.max_bytes`` are read from disk)."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            data = fh.read(limits.max_bytes + 1)
    except OSError as exc:
        raise ValidationFailed([Diagnostic(str(path), None, "", f"cannot read file: {exc.strerror}")]) from None
    return read_document(data, str(path), limits)
