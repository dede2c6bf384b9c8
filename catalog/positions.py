"""Node positions: ``#0``, ``#1``, ... name the n-th node of a cluster in deployment XML.

Example deployments cannot know the ports of the cluster they will run on
(``boreas cluster up --base-port 16000``), so wherever application and
deployment XML name a *node* -- ``<node endpoint>``, ``<publish node>`` (or
its ``endpoint``), ``<region node>``, a ``<replica_set>``'s or a
``<partition>``'s ``<node endpoint>``, ``<move node>``, a box's or table's
``node`` -- they may write
a position instead of an endpoint.  Endpoints of other things (a regional
component, a client, a subscriber) are never positions, and update XML,
which Boreas components exchange, never holds one.

A position is resolved to an endpoint once, when the submission is
planned, and the catalog only ever stores endpoints:

* by the Head, against its nodes (:class:`boreas.head.submissions.NodeOrder`:
  the nodes ``boreas head --nodes`` declares, which ``boreas cluster up``
  passes in port order, then every other node in the order it registered);
* where there is no Head to ask (``boreas validate``, ``boreas catalog
  apply``, ``boreas deploy`` without ``--nodes``), as the default layout of
  ``boreas cluster up``: ``#n`` is ``localhost:15000+n``.

Real Borealis files name endpoints (``:15000``) and are read as before.

>>> parse_position("#2"), parse_position(" #02 "), parse_position(":15002")
(2, 2, None)
>>> default_layout(1)
'localhost:15001'
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from .diagnostics import Diagnostic, Origin
from .document_model import Application, Deployment, Document
from .endpoints import DEFAULT_NODE_PORT, parse_position

__all__ = ["default_layout", "has_positions", "named_nodes", "parse_position", "resolve_by_default_layout",
           "resolve_positions", "spell"]

#: Where ``#n`` points when there is no Head to ask: ``boreas cluster up``'s defaults.
DEFAULT_LAYOUT_HOST = "localhost"


def spell(position: int) -> str:
    return f"#{position}"


def default_layout(position: int) -> str:
    """``#n`` in the default ``boreas cluster up`` layout: ``localhost:15000+n``."""
    return f"{DEFAULT_LAYOUT_HOST}:{DEFAULT_NODE_PORT + position}"


# -- the node references of a submission ---------------------------------------------


def _node_refs(documents: Sequence[Document]) -> Iterator[tuple[str, Origin]]:
    """Every node a submission names (endpoint or position), with where it names it."""
    for doc in documents:
        if isinstance(doc, Application):
            for obj in doc.declarations:
                node = getattr(obj, "node", None)
                if node:
                    yield node, obj.origin
        elif isinstance(doc, Deployment):
            for assignment in doc.nodes:
                yield assignment.endpoint, assignment.origin
            for region in doc.regions:
                if region.node:
                    yield region.node, region.origin
            for rs in doc.replica_sets:
                for endpoint in rs.nodes:
                    yield endpoint, rs.origin
            for pub in doc.publications:
                if pub.node:
                    yield pub.node, pub.origin
            for move in doc.moves:
                yield move.node, move.origin
            for part in doc.partitions:
                for endpoint in part.nodes:
                    yield endpoint, part.origin


def named_nodes(documents: Sequence[Document]) -> list[tuple[str, Origin]]:
    """The nodes a submission names, first mention of each, in document order."""
    seen: dict[str, Origin] = {}
    for node, origin in _node_refs(documents):
        seen.setdefault(node, origin)
    return list(seen.items())


def has_positions(documents: Sequence[Document]) -> bool:
    return any(parse_position(node) is not None for node, _ in _node_refs(documents))


# -- resolving ------------------------------------------------------------------------


def resolve_positions(
    documents: Sequence[Document],
    resolve: Callable[[int], str | None],
    unresolved: Callable[[int], str] = lambda n: f"no node at position {spell(n)}",
) -> tuple[list[Document], list[Diagnostic]]:
    """The documents with every position replaced by ``resolve(n)``.

    A position ``resolve`` has no endpoint for is reported as
    ``unresolved(n)`` at the element that names it (and left as it was).
    The documents given are not changed.

    >>> from boreas.catalog.documents import read_document
    >>> dep = read_document(b'<deploy><node endpoint="#1" query="q"/></deploy>', "d.xml")
    >>> [d.nodes[0].endpoint for d in resolve_positions([dep], default_layout)[0]]
    ['localhost:15001']
    >>> resolve_positions([dep], lambda n: None)[1][0].reason
    'no node at position #1'
    """
    problems: list[Diagnostic] = []

    def node(text: str | None, origin: Origin) -> str | None:
        position = parse_position(text)
        if position is None:
            return text
        endpoint = resolve(position)
        if endpoint is None:
            problems.append(Diagnostic.at(origin, unresolved(position)))
            return text
        return endpoint

    out: list[Document] = []
    for doc in documents:
        if isinstance(doc, Application):
            declarations = [_with_node(obj, node) for obj in doc.declarations]
            out.append(replace(doc, declarations=declarations))
        elif isinstance(doc, Deployment):
            out.append(replace(
                doc,
                nodes=[replace(a, endpoint=node(a.endpoint, a.origin)) for a in doc.nodes],
                regions=[replace(r, node=node(r.node, r.origin)) if r.node else r for r in doc.regions],
                replica_sets=[replace(rs, nodes=tuple(node(e, rs.origin) for e in rs.nodes))
                              for rs in doc.replica_sets],
                publications=[replace(p, node=node(p.node, p.origin)) if p.node else p
                              for p in doc.publications],
                moves=[replace(m, node=node(m.node, m.origin)) for m in doc.moves],
                partitions=[replace(p, nodes=tuple(node(e, p.origin) for e in p.nodes))
                            for p in doc.partitions],
            ))
        else:
            out.append(doc)
    return out, problems


def _with_node(obj: Any, node: Callable[[str | None, Origin], str | None]) -> Any:
    current = getattr(obj, "node", None)
    if not current or parse_position(current) is None:
        return obj
    return replace(obj, node=node(current, obj.origin))


def resolve_by_default_layout(documents: Sequence[Document]) -> list[Document]:
    """Positions read as the default ``boreas cluster up`` layout (no Head to ask)."""
    if not has_positions(documents):
        return list(documents)
    return resolve_positions(documents, default_layout)[0]
