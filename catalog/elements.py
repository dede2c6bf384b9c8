"""The catalog as store elements: ``(kind, key) -> XML text``, and diffs.

A :class:`~boreas.catalog.model.Catalog` is stored one element per entry, so
a commit touches only what changed and a watcher sees exactly which elements
changed.  This module is the one place that knows which dict of the model a
store kind lives in.

>>> from boreas.catalog.model import Catalog, Node
>>> old = Catalog()
>>> new = old.copy(); new.nodes["localhost:15000"] = Node("localhost:15000")
>>> [(c.kind, c.key, c.text) for c in diff(old, new)]
[('node', 'localhost:15000', '<node endpoint="localhost:15000"/>')]
>>> catalog_from_elements(to_elements(new), version=1) == new
True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from lxml import etree

from .diagnostics import CATALOG
from .evolve import evolve
from .model import (
    Box,
    Catalog,
    Client,
    ConnectionPointView,
    GlobalComponent,
    Input,
    Node,
    Output,
    Partition,
    Publication,
    Query,
    Region,
    ReplicaSet,
    Schema,
    Subscription,
    Table,
    TypeAlias,
)

if TYPE_CHECKING:  # (the store is imported where a change is made: reading an update, as a client does, needs
    # none of it; issue 37)
    from .store.base import Change, Commit, Snapshot
from .xmlcodec import decode, to_text

#: store kind -> (Catalog attribute, XML tag)
KIND_TO_DICT: dict[str, tuple[str, str]] = {
    "schema": ("schemas", "schema"),
    "type": ("types", "type"),
    "input": ("inputs", "input"),
    "output": ("outputs", "output"),
    "box": ("boxes", "box"),
    "table": ("tables", "table"),
    "query": ("queries", "query"),
    "view": ("views", "connection_point_view"),
    "node": ("nodes", "node"),
    "region": ("regions", "region"),
    "replica_set": ("replica_sets", "replica_set"),
    "publish": ("publications", "publish"),
    "subscribe": ("subscriptions", "subscribe"),
    "client": ("clients", "client"),
    "global": ("globals", "global"),
    "partition": ("partitions", "partition"),
}
TAG_TO_KIND = {tag: kind for kind, (_, tag) in KIND_TO_DICT.items()}

#: model class -> (store kind, attribute holding its key)
_CLASS_TO_KIND: dict[type, tuple[str, str]] = {
    Schema: ("schema", "name"),
    TypeAlias: ("type", "name"),
    Input: ("input", "stream"),
    Output: ("output", "stream"),
    Box: ("box", "name"),
    Table: ("table", "name"),
    Query: ("query", "name"),
    ConnectionPointView: ("view", "name"),
    Node: ("node", "endpoint"),
    Region: ("region", "key"),
    ReplicaSet: ("replica_set", "name"),
    Publication: ("publish", "key"),
    Subscription: ("subscribe", "key"),
    Client: ("client", "endpoint"),
    GlobalComponent: ("global", "endpoint"),
    Partition: ("partition", "box"),
}


def element_key(obj: Any) -> tuple[str, str]:
    """The ``(kind, key)`` a model object is stored under.

    >>> element_key(Node("localhost:15000"))
    ('node', 'localhost:15000')
    """
    kind, attr = _CLASS_TO_KIND[type(obj)]
    return kind, getattr(obj, attr)


def is_element(obj: Any) -> bool:
    return type(obj) in _CLASS_TO_KIND

_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)


def to_elements(catalog: Catalog) -> dict[tuple[str, str], str]:
    out: dict[tuple[str, str], str] = {}
    for kind, (attr, _) in KIND_TO_DICT.items():
        for key, obj in getattr(catalog, attr).items():
            out[(kind, key)] = to_text(obj)
    return out


def catalog_from_elements(elements: Mapping[tuple[str, str], str], version: int = 0,
                          boxes: Mapping[str, Box] | None = None) -> Catalog:
    """The catalog of the stored ``elements``; a box named in ``boxes`` is taken from there, not decoded from
    its text (the boxes saved for this version in bulk: catalog/saved_boxes.py)."""
    catalog = Catalog(version=version)
    boxes = boxes or {}
    for (kind, key), text in sorted(elements.items()):
        attr, _ = KIND_TO_DICT[kind]
        found = boxes.get(key) if kind == "box" else None
        getattr(catalog, attr)[key] = found if found is not None else decode(etree.fromstring(text, _PARSER))
    return catalog


def catalog_from_snapshot(snapshot: Snapshot) -> Catalog:
    return catalog_from_elements(snapshot.elements, snapshot.version)


def diff(old: Catalog, new: Catalog, touched: Mapping[str, Iterable[str]] | None = None) -> list[Change]:
    """The changes that turn ``old`` into ``new``, in a stable order.

    ``touched`` (Catalog dict -> keys, as a merge notes them: catalog/tracked.py)
    says where ``new`` may differ; a dict it does not name is compared whole.
    Either way the changes are the same set and apply to the same catalog
    (new keys in ``new``'s order, so a follower's dicts keep the order); with
    it, changed keys ``old`` held come in name order rather than ``new``'s
    (their places do not move), and a small change costs what it wrote, not
    the size of the catalog."""
    from .store.base import Change

    changes: list[Change] = []
    for kind, (attr, _) in KIND_TO_DICT.items():
        before, after = getattr(old, attr), getattr(new, attr)
        keys = touched.get(attr) if touched is not None else None
        items = after.items() if keys is None else _in_order(before, after, keys)
        for key, obj in items:
            old_obj = before.get(key)
            # (an element's application is not part of its value, but the store keeps it)
            if old_obj != obj or getattr(old_obj, "app", "") != getattr(obj, "app", ""):
                changes.append(Change(kind, key, to_text(obj)))
        gone = before.keys() - after.keys() if keys is None else [k for k in keys if k in before and k not in after]
        for key in gone:
            changes.append(Change(kind, key, None))
    return changes


def _in_order(before: Mapping[str, Any], after: Mapping[str, Any], keys: Iterable[str]) -> list[tuple[str, Any]]:
    """``after``'s items under ``keys``, in ``after``'s order: the keys ``before`` holds first (a change to
    them keeps their place), then the new ones, found from ``after``'s end (where a merge appends them)."""
    keys = set(keys)
    kept = sorted(k for k in keys if k in before and k in after)
    new = {k for k in keys if k not in before and k in after}
    tail: list[str] = []
    if new:
        for key in reversed(after):  # (stops once every new key is found)
            if key in new:
                tail.append(key)
                if len(tail) == len(new):
                    break
    return [(k, after[k]) for k in kept] + [(k, after[k]) for k in reversed(tail)]


def apply_commit(catalog: Catalog, commit: Commit) -> Catalog:
    """The catalog after ``commit`` (a watcher keeps its copy current this way)."""
    return apply_changes(catalog, commit.changes, commit.version)


def adopt_commit(catalog: Catalog, commit: Commit, planned: Catalog) -> Catalog:
    """The catalog after ``commit``, equal to :func:`apply_commit`'s, its boxes taken from ``planned``.

    ``commit`` must be the :func:`diff` of ``catalog`` (the very object) to ``planned``: what a Head
    commits from the catalog it holds, then follows.  Decoding its own commit's texts again was the Head's
    largest cost per new box after the check (each box's XML parsed and decoded once more: issue 37); a
    planned box is the value the text was written from, so only its origin is set to the catalog's (what
    decoding gives every element).  Other kinds are decoded as :func:`apply_commit` does: a schema's fields
    carry origins of their own, and they are few."""
    new = catalog.copy()
    new.version = commit.version
    boxes, planned_boxes = new.boxes, planned.boxes
    for change in commit.changes:
        if change.kind == "box" and change.text is not None:
            box = planned_boxes[change.key]
            boxes[change.key] = box if box.origin is CATALOG else evolve(box, origin=CATALOG)
        else:
            _apply_change(new, change)
    return new


def commit_touched(commit: Commit) -> dict[str, set[str]]:
    """The keys a commit changes, by Catalog dict (where :meth:`.index.CatalogIndex.derive` need look)."""
    touched: dict[str, set[str]] = {}
    for change in commit.changes:
        touched.setdefault(KIND_TO_DICT[change.kind][0], set()).add(change.key)
    return touched


def apply_changes(catalog: Catalog, changes: Iterable[Change], version: int) -> Catalog:
    new = catalog.copy()
    new.version = version
    for change in changes:
        _apply_change(new, change)
    return new


def _apply_change(catalog: Catalog, change: Change) -> None:
    """One change applied in place: its element decoded from its text, or removed."""
    target = getattr(catalog, KIND_TO_DICT[change.kind][0])
    if change.text is None:
        target.pop(change.key, None)
    else:
        target[change.key] = decode(etree.fromstring(change.text, _PARSER))
