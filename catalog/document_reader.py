"""Decoding a parsed, schema-valid document into model values: the third gate of reading.

:func:`boreas.catalog.documents.read_document` parses (``xmlsafe``) and checks the
XSD first; what is left is turning elements into values, one diagnostic per bad
element, with endpoints normalised and node positions (``#1``) kept where the
language allows them.  It is the largest part of reading and knows each language's
elements, so it lives apart from the gates that call it.
"""

from __future__ import annotations

import re
import time
from dataclasses import replace
from typing import Any

from lxml import etree

from .diagnostics import Diagnostic, Origin
from .document_model import (
    DELETE_NAMES,
    Application,
    Connect,
    Delete,
    Deployment,
    Disconnect,
    Modify,
    Move,
    NodeAssignment,
    Unsubscribe,
    Update,
)
from .element_paths import ElementPaths
from .endpoints import DEFAULT_MONITOR_PORT, normalize_endpoint, parse_position
from .evolve import evolve
from .model import (
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
from .sql_files import SQL_FILE
from .xmlcodec import DecodeError, decode
from .xmlsafe import DEFAULT_LIMITS, TOO_SLOW, DeadlineExceeded

#: Attributes that name things; names appear in space-separated lists
#: (``<node query="a b">``), so they must be non-empty and space-free.
_NAME_ATTRS = ("name", "stream", "schema", "type", "box", "table")
_NAME = re.compile(r"^\S+$")


class DocumentReader:
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
        self._endpoints: dict[str, str] = {}  # node endpoints as written -> normalised (a copy repeats them)
        self.positions = False  # node positions (#0) are allowed: application and deployment XML

    def origin(self, el: etree._Element) -> Origin:
        self._ticks += 1
        if self.deadline is not None and self._ticks % 256 == 0:
            check_deadline(self.deadline, self.source, el.sourceline)
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
        if text is not None and text in self._endpoints:
            return self._endpoints[text]
        position = parse_position(text)
        if position is not None:
            if self.positions:
                return f"#{position}"
            self.fail(el, f"node position {text.strip()!r}: update XML names nodes by endpoint")
            return None
        if text is None:
            return None
        try:
            spelled = self._endpoints[text] = normalize_endpoint(text)
        except ValueError as exc:
            self.fail(el, str(exc))
            return None
        return spelled

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

    def parameter_texts(self, root: etree._Element) -> None:
        """Give every ``<parameter>`` its value as ``value=``: Boreas also takes it as the element's
        text (an m3 box's SQL, unescaped in ``<![CDATA[...]]>``), stripped of the white space around
        it.  Exactly one of the two; a ``sql-file`` must have been inlined by the client
        (:mod:`.sql_files`): the Head reads no file a document names."""
        for el in root.iter("parameter"):
            text = (el.text or "").strip()
            if el.get("value") is None and not text:
                self.fail(el, f"<parameter name=\"{el.get('name')}\"> has no value: give value= "
                              f"or the value as the element's text")
            elif el.get("value") is not None and text:
                self.fail(el, f"<parameter name=\"{el.get('name')}\"> has both value= and text; "
                              f"give one of them")
            elif text:
                el.set("value", text)
                el.text = None
            if el.get("name") == SQL_FILE:
                self.fail(el, f"<parameter name=\"{SQL_FILE}\"> names a file, which only the "
                              f"client reads (boreas submit, deploy, validate, catalog apply; "
                              f"boreas.client.read_documents): it sends the SQL as "
                              f"<parameter name=\"sql\">; here no file is read")

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
            spelled = self.node(el, node)
            if spelled != node:  # most are already host:port (all of a catalog the Head wrote)
                obj = evolve(obj, node=spelled)
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
                                                  self.origin(el), el.get("on-slow"), el.get("name")))
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


def check_deadline(deadline: float, source: str, line: int | None) -> None:
    if time.monotonic() > deadline:
        raise DeadlineExceeded([Diagnostic(source, line, "", TOO_SLOW)])

