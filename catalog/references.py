"""Which catalog elements name which things: the reference part of a :class:`~.index.CatalogIndex`.

A name is ``(kind, name)``: ``("reads", stream)``, ``("produces", stream)``,
``("node", endpoint)``, ``("schema", name)``, ...; the references map each
name to the elements (``(Catalog dict, key)``) that name it, so a changed
element finds what depends on it without a scan of the catalog.

The map is moved by a change in one batch per name: a deployment of 500
boxes onto a node holding 5,000 changes ``("node", endpoint)``'s set once,
not 500 times (each a copy of the whole set: that was quadratic in the
boxes per node, minutes at 100,000 boxes).

>>> from boreas.catalog.model import Catalog, Input
>>> refs = {}
>>> after = Catalog(inputs={"R": Input("R", "S")})
>>> sorted(move_references(refs, Catalog(), after, {"inputs": {"R"}}))
['R']
>>> sorted(refs)
[('produces', 'R'), ('schema', 'S')]
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from .changelog import SOURCES as CHANGELOG_SOURCES
from .layered import LayeredSet
from .model import Catalog

Name = tuple[str, str]  # (what kind of name, the name): ("reads", stream), ("node", endpoint), ...
Element = tuple[str, str]  # (Catalog dict, key)

#: The Catalog dicts whose elements refer to something (the others are only referred to).
REFERRING = ("boxes", "inputs", "outputs", "tables", "views", "publications", "subscriptions", "queries",
             "partitions")
#: What a changed element of these dicts is named as, for those that refer to it.
NAMED_AS = {"views": "view", "tables": "table", "nodes": "node", "boxes": "box", "schemas": "schema"}


def element_refs(kind: str, obj: Any) -> Iterator[Name]:
    """The names an element of Catalog dict ``kind`` refers to (what makes it need checking again)."""
    if kind == "boxes":
        yield from (("produces", s) for s in obj.outputs)
        yield from (("reads", p.stream) for p in obj.inputs)
        yield from (("view", p.view) for p in obj.inputs if p.view is not None)
        yield from (("table", t) for t in obj.access)
        if obj.node is not None:
            yield ("node", obj.node)
        else:  # (so a deployment checks those, not every box: placement.py)
            yield ("unplaced", "box")
        if obj.type in CHANGELOG_SOURCES:  # (so a change can tell no box makes a changelog: index_derivation.py)
            yield ("changelog source", obj.type)
    elif kind == "inputs":
        yield from (("produces", obj.stream), ("schema", obj.schema))
    elif kind in ("outputs", "tables", "views", "publications", "subscriptions"):
        stream = obj.stream
        if stream is not None:
            yield ("reads", stream)
        schema = getattr(obj, "schema", None)
        if schema is not None:
            yield ("schema", schema)
        node = getattr(obj, "node", None) if kind in ("tables", "publications") else None
        if node:
            yield ("node", node)
    elif kind == "queries":
        yield from (("box", b) for b in obj.boxes)
        yield from (("table", t) for t in obj.tables)
    elif kind == "partitions":
        yield ("box", obj.box)
        yield from (("member", n) for n in obj.nodes)


def _box_refs(box: Any) -> set[Name]:
    """``set(element_refs("boxes", box))``, built without generators (a deployment moves 10,000 boxes')."""
    found = {("produces", s) for s in box.outputs}
    for port in box.inputs:
        found.add(("reads", port.stream))
        if port.view is not None:
            found.add(("view", port.view))
    for table in box.access:
        found.add(("table", table))
    found.add(("node", box.node) if box.node is not None else ("unplaced", "box"))
    if box.type in CHANGELOG_SOURCES:
        found.add(("changelog source", box.type))
    return found


class Produced:
    """``stream in produced``: whether anything produces it, answered from the references."""

    def __init__(self, refs: dict[Name, frozenset[Element]]):
        self.refs = refs

    def __contains__(self, stream: object) -> bool:
        return bool(self.refs.get(("produces", stream)))  # type: ignore[arg-type]


def move_references(refs: dict[Name, frozenset[Element]], before: Catalog, after: Catalog,
                    changed: Mapping[str, set[str]]) -> set[str]:
    """Move the changed elements' references in ``refs`` (in place); the streams that gained or lost a
    producer.  The sets in ``refs`` are frozen (an index shares them with the one it came from), so each
    name that changes gets one new set, built from all of its additions and removals at once."""
    added: dict[Name, set[Element]] = {}
    removed: dict[Name, set[Element]] = {}
    touched: set[str] = set()
    for kind in REFERRING:
        old_items, new_items = getattr(before, kind), getattr(after, kind)
        refs_of = _box_refs if kind == "boxes" else (lambda obj, kind=kind: set(element_refs(kind, obj)))
        for key in changed.get(kind, ()):
            old, new = old_items.get(key), new_items.get(key)
            old_refs = refs_of(old) if old is not None else set()
            new_refs = refs_of(new) if new is not None else set()
            element = (kind, key)
            for name in old_refs - new_refs:
                removed.setdefault(name, set()).add(element)
            for name in new_refs - old_refs:
                added.setdefault(name, set()).add(element)
            if kind == "inputs" or (kind == "boxes" and getattr(old, "outputs", None) != getattr(new, "outputs", None)):
                # (a new reader, or a move, changes nothing for the stream's other readers)
                touched.update(s for k, s in old_refs | new_refs if k == "produces")
    for name in added.keys() | removed.keys():  # (a node's boxes: a LayeredSet over the set before, not a copy)
        old_set, gone = refs.get(name), removed.get(name)
        if old_set is None and gone is None:  # (a name new in this change: a deployment's every new stream)
            refs[name] = frozenset(added[name])
            continue
        now = LayeredSet.moved(old_set, gone or (), added.get(name, ()))
        if now:
            refs[name] = now
        else:
            refs.pop(name, None)
    return touched
