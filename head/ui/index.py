"""The UI's index of the catalog: what a page at 10,000 boxes asks for without a copy of the catalog.

A browser showing a large catalog does not hold it (a copy of 10,000 boxes is
megabytes of JSON and seconds of the Head's loop); it asks the Head for an
overview (:meth:`UiIndex.overview`: nodes and queries with their box counts),
for names (:meth:`UiIndex.search`) and for the elements of the one graph it
draws (:meth:`UiIndex.graph`: a query's boxes, a node's, a stream's
producers and consumers, or a box and its neighbours).  This index answers
those by name lookups, and :meth:`UiIndex.changed` keeps it current from
each commit's changes, touching only the boxes, partitions and queries the
commit changed.  Each element's JSON is cached with it (elements are
immutable: a changed one is a new object), so a graph is served from
ready dicts.

The index is built on the first request and kept while browsers ask; it is
dropped after a commit it could not follow (a version gap) and built again
on the next request.

>>> from boreas.catalog.model import Box, InPort, Query
>>> cat = Catalog(boxes={"a": Box("a", "filter", (InPort("S"),), ("T",), node="n:1"),
...                      "b": Box("b", "map", (InPort("T"),), ("U",), node="n:2")},
...               queries={"q": Query("q", boxes=("a", "b"))})
>>> index = UiIndex(cat)
>>> [(n["endpoint"], n["boxes"]) for n in index.overview()["nodes"]]
[('n:1', 1), ('n:2', 1)]
>>> [(m["kind"], m["name"], m["producers"]) for m in index.search("t")["matches"]]
[('stream', 'T', ['a'])]
>>> sorted(i["key"] for i in index.graph(box="b")["items"] if i["kind"] == "box")
['a', 'b']
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping
from typing import Any

from boreas.catalog.model import Catalog

from .feed import jsonable

__all__ = ["MAX_MATCHES", "ScopeError", "UiIndex"]

#: Search results at most (the page shows them as a list; more means "type more").
MAX_MATCHES = 50
#: A query's streams named in the overview at most, each way (its rates are summed over these).
MAX_QUERY_STREAMS = 16
#: Kinds a graph carries whole (few elements, and every graph needs them: move targets, regions).
_WHOLE_KINDS = {"node": "nodes", "region": "regions"}
#: Kinds a graph carries for the streams its boxes touch.
_STREAM_KINDS = {"publish": "publications", "subscribe": "subscriptions", "input": "inputs"}


class ScopeError(LookupError):
    """A graph or search was asked for something the catalog does not have."""


def _diff(old: dict[str, Any], new: dict[str, Any],
          keys: Iterable[str] | None = None) -> tuple[set[str], set[str]]:
    """Keys whose value left ``old`` (removed or changed), keys whose value entered ``new``; among
    ``keys`` (what a commit wrote) when given, else every key of both."""
    if old is new:
        return set(), set()
    if keys is not None:
        differ = {k for k in keys if new.get(k) is not old.get(k) and new.get(k) != old.get(k)}
        return {k for k in differ if k in old}, {k for k in differ if k in new}
    gone = {k for k, v in old.items() if new.get(k) is not v and new.get(k) != v}
    came = {k for k, v in new.items() if old.get(k) is not v and old.get(k) != v}
    return gone, came


class UiIndex:
    """Name lookups over one catalog version; the one owner of the UI's derived maps."""

    def __init__(self, catalog: Catalog):
        self.catalog = catalog
        self.box_nodes: dict[str, tuple[str, ...]] = {}   # box -> the nodes it runs on
        self.node_boxes: dict[str, set[str]] = {}         # node -> the boxes on it
        self.box_queries: dict[str, set[str]] = {}        # box -> the queries naming it
        self.producers: dict[str, set[str]] = {}          # stream -> the boxes writing it
        self.consumers: dict[str, set[str]] = {}          # stream -> the boxes reading it
        self._json: dict[tuple[str, str], tuple[Any, Any]] = {}  # (kind, key) -> (element, its JSON)
        self._query_streams: dict[str, tuple[list[str], list[str]]] = {}  # per version: a query's ins and outs
        for name in catalog.boxes:
            self._add_box(name)
        for query in catalog.queries.values():
            for box in query.boxes:
                self.box_queries.setdefault(box, set()).add(query.name)

    @property
    def version(self) -> int:
        return self.catalog.version

    # -- following commits ---------------------------------------------------------------------

    def changed(self, before: Catalog, after: Catalog, touched: Mapping[str, Iterable[str]] | None = None) -> None:
        """Commit ``after.version``: index what it changed (the caller checked ``before`` is this index's),
        looking only where ``touched`` (Catalog dict -> keys the commit wrote) says, when given."""
        def diff(attr: str) -> tuple[set[str], set[str]]:
            keys = None if touched is None else touched.get(attr, ())
            return _diff(getattr(before, attr), getattr(after, attr), keys)

        gone, came = diff("boxes")
        part_gone, part_came = diff("partitions")
        replaced = gone | came | part_gone | part_came  # a partition moves its box's members
        for name in replaced:
            self._drop_box(name, before)
            self._json.pop(("box", name), None)
            self._json.pop(("partition", name), None)
        self.catalog = after
        for name in replaced:
            if name in after.boxes:
                self._add_box(name)
        q_gone, q_came = diff("queries")
        for name in q_gone:
            self._json.pop(("query", name), None)
            for box in before.queries[name].boxes:
                self.box_queries.get(box, set()).discard(name)
        for name in q_came:
            for box in after.queries[name].boxes:
                self.box_queries.setdefault(box, set()).add(name)
        self._query_streams.clear()

    def _add_box(self, name: str) -> None:
        box = self.catalog.boxes[name]
        nodes = self.catalog.placement(name)
        self.box_nodes[name] = nodes
        for node in nodes:
            self.node_boxes.setdefault(node, set()).add(name)
        for stream in box.outputs:
            self.producers.setdefault(stream, set()).add(name)
        for port in box.inputs:
            self.consumers.setdefault(port.stream, set()).add(name)

    def _drop_box(self, name: str, before: Catalog) -> None:
        for node in self.box_nodes.pop(name, ()):
            self._discard(self.node_boxes, node, name)
        box = before.boxes.get(name)
        if box is None:
            return
        for stream in box.outputs:
            self._discard(self.producers, stream, name)
        for port in box.inputs:
            self._discard(self.consumers, port.stream, name)

    @staticmethod
    def _discard(index: dict[str, set[str]], key: str, name: str) -> None:
        found = index.get(key)
        if found is not None:
            found.discard(name)
            if not found:
                del index[key]

    # -- answers -------------------------------------------------------------------------------

    def overview(self) -> dict[str, Any]:
        """Counts: boxes and streams in all, per node, per query (with the first of the streams it reads and writes)."""
        cat = self.catalog
        endpoints = sorted(set(cat.nodes) | set(self.node_boxes))
        queries = []
        for name in sorted(cat.queries):
            ins, outs = self.query_streams(name)
            boxes = [b for b in cat.queries[name].boxes if b in cat.boxes]
            nodes = sorted({n for b in boxes for n in self.box_nodes.get(b, ())})
            queries.append({"name": name, "boxes": len(boxes), "nodes": nodes, "inputs": ins[:MAX_QUERY_STREAMS],
                            "outputs": outs[:MAX_QUERY_STREAMS], "streams_in": len(ins), "streams_out": len(outs)})
        in_queries = sum(1 for b in cat.boxes if self.box_queries.get(b))
        return {"version": cat.version, "boxes": len(cat.boxes), "streams": len(self.producers.keys() | cat.inputs.keys()),
                "nodes": [{"endpoint": e, "boxes": len(self.node_boxes.get(e, ())), "registered": e in cat.nodes}
                          for e in endpoints],
                "queries": queries, "unplaced": sum(1 for n in self.box_nodes.values() if not n),
                "outside_queries": len(cat.boxes) - in_queries}

    def query_streams(self, name: str) -> tuple[list[str], list[str]]:
        """The streams query ``name`` reads from outside it, and those it writes that nothing in it reads."""
        if name not in self._query_streams:
            boxes = [self.catalog.boxes[b] for b in self.catalog.queries[name].boxes if b in self.catalog.boxes]
            written = {s for b in boxes for s in b.outputs}
            read = {p.stream for b in boxes for p in b.inputs}
            self._query_streams[name] = (sorted(read - written), sorted(written - read))
        return self._query_streams[name]

    def search(self, text: str, limit: int = MAX_MATCHES) -> dict[str, Any]:
        """Boxes, streams, queries and nodes whose name holds ``text`` (any case): exact first, then prefixes."""
        needle = text.strip().lower()
        if not needle:
            return {"version": self.version, "matches": [], "more": False}
        cat = self.catalog
        streams = self.producers.keys() | self.consumers.keys() | cat.inputs.keys()
        found: list[tuple[int, str, str]] = []
        for kind, names in (("box", cat.boxes), ("stream", streams), ("query", cat.queries),
                            ("node", self.node_boxes.keys() | cat.nodes.keys())):
            for name in names:
                low = name.lower()
                at = low.find(needle)
                if at >= 0:
                    found.append((0 if low == needle else 1 if at == 0 else 2, kind, name))
        best = heapq.nsmallest(limit, found, key=lambda m: (m[0], len(m[2]), m[2], m[1]))
        matches = [self._match(kind, name) for _, kind, name in best]
        return {"version": self.version, "matches": matches, "more": len(found) > limit}

    def _match(self, kind: str, name: str) -> dict[str, Any]:
        match: dict[str, Any] = {"kind": kind, "name": name}
        if kind == "box":
            match.update(type=self.catalog.boxes[name].type, nodes=list(self.box_nodes.get(name, ())),
                         queries=sorted(self.box_queries.get(name, ())))
        elif kind == "stream":
            match.update(producers=sorted(self.producers.get(name, ())), consumers=len(self.consumers.get(name, ())))
        elif kind == "query":
            match.update(boxes=len(self.catalog.queries[name].boxes))
        else:
            match.update(boxes=len(self.node_boxes.get(name, ())))
        return match

    def scope_boxes(self, *, query: str | None = None, node: str | None = None, box: str | None = None,
                    stream: str | None = None) -> set[str]:
        """The boxes of one graph: a query's, a node's, a box and its neighbours, a stream's ends."""
        cat = self.catalog
        if query is not None:
            if query not in cat.queries:
                raise ScopeError(f"no query {query!r} in the catalog")
            return {b for b in cat.queries[query].boxes if b in cat.boxes}
        if node is not None:
            if node not in cat.nodes and node not in self.node_boxes:
                raise ScopeError(f"no node {node!r} in the catalog")
            return set(self.node_boxes.get(node, ()))
        if box is not None:
            found = cat.boxes.get(box)
            if found is None:
                raise ScopeError(f"no box {box!r} in the catalog")
            near = {box}
            for port in found.inputs:
                near |= self.producers.get(port.stream, set())
            for out in found.outputs:
                near |= self.consumers.get(out, set())
            return near
        if stream is not None:
            ends = self.producers.get(stream, set()) | self.consumers.get(stream, set())
            if not ends and stream not in cat.inputs:
                raise ScopeError(f"no stream {stream!r} in the catalog")
            return set(ends)
        raise ScopeError("name a query, node, box or stream")

    def graph(self, **scope: str | None) -> dict[str, Any]:
        """The elements to draw one scope (as the feed sends them): its boxes and partitions, the queries
        naming them, the publishers, subscribers and inputs of the streams they touch, every node and region."""
        cat = self.catalog
        boxes = self.scope_boxes(**scope)
        streams = {p.stream for b in boxes for p in cat.boxes[b].inputs} | {s for b in boxes for s in cat.boxes[b].outputs}
        if scope.get("stream") is not None:
            streams.add(scope["stream"])
        queries = {q for b in boxes for q in self.box_queries.get(b, ())}
        items = self._items("box", cat.boxes, boxes)
        items += self._items("partition", cat.partitions, boxes)
        items += self._items("query", cat.queries, queries)
        for kind, attr in _WHOLE_KINDS.items():
            elements = getattr(cat, attr)
            items += self._items(kind, elements, elements)
        for kind, attr in _STREAM_KINDS.items():
            elements = getattr(cat, attr)
            items += self._items(kind, elements, (k for k, v in elements.items() if v.stream in streams))
        return {"version": cat.version, "boxes": len(boxes), "items": items}

    def _items(self, kind: str, elements: dict[str, Any], keys: Iterable[str]) -> list[dict[str, Any]]:
        out = []
        for key in keys:
            element = elements.get(key)
            if element is None:
                continue
            cached = self._json.get((kind, key))
            if cached is None or cached[0] is not element:
                cached = (element, jsonable(element))
                self._json[(kind, key)] = cached
            out.append({"kind": kind, "key": key, "value": cached[1]})
        return out
