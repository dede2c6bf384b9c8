"""Merge a submission (application and deployment documents) into a catalog.

Merging is the part of validation that is about *this* submission against
what is already there: duplicates, redefined schemas, deletes and modifies
of things that exist, and where each box is placed.  It works on a copy and
returns it with the problems found; the caller commits nothing unless the
list is empty.  Whole-topology checks (producers, schemas of streams, box
parameters) follow in :mod:`boreas.catalog.validate`.

A submission *replaces* (``boreas submit --replace``, docs/xml.md "The edit
loop") when its declarations are the new version of what they name: an
element declared again as it is stays untouched, one declared differently
takes the new declaration, and the boxes and tables a query declared again no
longer holds go.  Without ``replace`` declaring an existing name is a
duplicate.  What may not change in place is :mod:`.app_diff`'s to say.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, Protocol

from .app_prune import prune_left_out
from .declared_inputs import as_declarations
from .diagnostics import CATALOG, Diagnostic, Origin
from .document_model import Application, Delete, Deployment, Modify, merge_params
from .evolve import evolve
from .model import (
    NAMED_BY_APP,
    Box,
    Catalog,
    ConnectionPointView,
    Input,
    Output,
    Query,
    Schema,
    Table,
    TypeAlias,
)
from .placement import Placement
from .tracked import TRACKED, tracked_copy, untracked

# model class -> (Catalog dict, key attribute, what to call it in messages)
_PLACES: dict[type, tuple[str, str, str]] = {
    Schema: ("schemas", "name", "schema"),
    TypeAlias: ("types", "name", "type"),
    Input: ("inputs", "stream", "input stream"),
    Output: ("outputs", "stream", "output stream"),
    Box: ("boxes", "name", "box"),
    Table: ("tables", "name", "table"),
    Query: ("queries", "name", "query"),
    ConnectionPointView: ("views", "name", "connection point view"),
}


def _where(origin: Origin) -> str:
    return "in the global catalog" if origin == CATALOG or origin.file == CATALOG.file else f"at {origin}"


class BaseFacts(Protocol):
    """What a merge asks of the catalog it starts from (a :class:`~.index.CatalogIndex` answers it)."""

    def box_producers(self, stream: str) -> Iterable[str]: ...

    def unplaced_boxes(self) -> Iterable[str]: ...


class Merger:
    """Applies documents in order to a copy of ``base``; see :func:`merge`."""

    def __init__(self, base: Catalog, replacing: bool = False, facts: BaseFacts | None = None):
        self.replacing = replacing
        # stream -> the boxes of ``base`` producing it (an index's references)
        self.base_producers = facts.box_producers if facts is not None else None
        self.catalog = tracked_copy(base)  # notes what it changes, for the incremental check (.index)
        self.base = base
        self.problems: list[Diagnostic] = []
        self.deleted_streams: set[str] = set()
        self.declared: dict[str, set[str]] = {}  # Catalog dict -> keys this submission declares
        self.requeried: dict[str, Query] = {}  # (replacing) a query declared again -> what it was
        self.apps: dict[str, str] = {}  # application name -> the file that declares it (its first)
        # The deployment's half (claims, partitions, moves): it owns the claims, and fails through us.
        self.placement = Placement(self.catalog, base, self.fail,
                                   facts.unplaced_boxes if facts is not None else None)

    def fail(self, origin: Origin, reason: str) -> None:
        self.problems.append(Diagnostic.at(origin, reason))

    # -- application ------------------------------------------------------

    def application(self, app: Application) -> None:
        name = app.app_name
        self.apps.setdefault(name, app.source)
        for obj in app.declarations:
            self.declare(evolve(obj, app=name) if isinstance(obj, NAMED_BY_APP) else obj)
        streams = {*self.declared.get("inputs", ()), *(s for b in self.declared.get("boxes", ())
                                                       if b in self.catalog.boxes for s in self.catalog.boxes[b].outputs)}
        outputs = self.declared.setdefault("outputs", set())
        outputs |= as_declarations(self.catalog, streams, outputs, self.fail, self.produced)  # (declared_inputs.py)
        self.prune_queries()
        for delete in app.deletes:
            self.delete(delete)
        for modify in app.modifies:
            self.modify(modify)

    def declare(self, obj: Any) -> None:
        attr, key_attr, noun = _PLACES[type(obj)]
        target: dict[str, Any] = getattr(self.catalog, attr)
        key = getattr(obj, key_attr)
        existing = target.get(key)
        self.declared.setdefault(attr, set()).add(key)
        if existing is not None and self.replacing and not isinstance(obj, (Schema, TypeAlias)):
            self.redeclare(target, existing, obj)
            return
        if existing is None:
            target[key] = obj
            if isinstance(obj, (Box, Table)) and obj.node:
                tag = "box" if isinstance(obj, Box) else "table"
                self.placement.claim(obj.name, obj.node, obj.origin, f"<{tag} name='{obj.name}' node='{obj.node}'>")
            return
        if isinstance(obj, (Schema, TypeAlias)):
            if existing == obj:
                return  # the paper: declaring an identical schema again is a no-op
            detail = (f": {existing.describe()} {_where(existing.origin)}, now {obj.describe()}"
                      if isinstance(obj, Schema) else f" {_where(existing.origin)}")
            self.fail(obj.origin, f"{noun} {key!r} is already defined differently{detail}; "
                                  f"{noun}s can never be redefined (give the new one another name)")
            return
        self.fail(obj.origin, f"duplicate {noun} {key!r}: already declared {_where(existing.origin)}")

    def redeclare(self, target: dict[str, Any], existing: Any, obj: Any) -> None:
        """(replacing) ``obj`` is the new version of ``existing``: it takes its place, where it runs kept."""
        attr, key_attr, _ = _PLACES[type(obj)]
        key = getattr(obj, key_attr)
        if getattr(obj, "node", "") is None and getattr(existing, "node", None) is not None:
            obj = replace(obj, node=existing.node)  # placed by the deployment, not the application
        if isinstance(obj, Query):
            self.requeried.setdefault(key, existing)
        if isinstance(obj, (Box, Table)) and obj.node and obj.node != existing.node:
            tag = "box" if isinstance(obj, Box) else "table"
            self.placement.claim(key, obj.node, obj.origin, f"<{tag} name='{key}' node='{obj.node}'>")
            obj = replace(obj, node=existing.node)  # (resolve_placements refuses the change of node)
        owner = getattr(existing, "app", None)
        if owner and owner != obj.app:
            self.fail(obj.origin, f"{_PLACES[type(obj)][2]} {key!r} belongs to application {owner!r}, "
                                  f"not {obj.app!r}: replace that application (boreas submit --replace "
                                  f"--app {owner} ...), or give this one another name")
            return
        # An element stored before applications were recorded takes this one's name (app_diff.adopted says so).
        if obj != existing or owner == "":
            target[key] = obj

    def prune_queries(self) -> None:
        """(replacing) The boxes and tables a query declared again no longer holds go with their streams;
        a box added to it runs where the query ran (when on one node; a deployment may say otherwise)."""
        declared_boxes, declared_tables = self.declared.get("boxes", set()), self.declared.get("tables", set())
        for name, before in self.requeried.items():
            ran = {self.base.boxes[b].node for b in before.boxes if b in self.base.boxes}
            for box in before.boxes:
                if box not in declared_boxes:
                    self._remove_box(box)
            for table in before.tables:
                if table not in declared_tables:
                    self.catalog.tables.pop(table, None)
            query = self.catalog.queries.get(name)
            if len(ran) == 1 and None not in ran and query is not None:
                for box in query.boxes:
                    item = self.catalog.boxes.get(box)
                    if item is not None and item.node is None:
                        self.catalog.boxes[box] = replace(item, node=next(iter(ran)))
        self.requeried.clear()

    def prune_left_out(self) -> None:
        """(replacing) What these applications declared before and no longer declare goes (:mod:`.app_prune`)."""
        self.problems += prune_left_out(self.catalog, self.declared, self.apps, self._remove_box)

    def delete(self, d: Delete) -> None:
        if d.query is not None:
            query = self.catalog.queries.get(d.query)
            if query is not None:
                del self.catalog.queries[d.query]
                for name in query.boxes:
                    self._remove_box(name)
                for name in query.tables:
                    self.catalog.tables.pop(name, None)
            elif d.query in self.catalog.boxes:  # Borealis lets a box stand for a query
                self._remove_box(d.query)
            else:
                self.fail(d.origin, f"cannot delete query {d.query!r}: no such query or box")
        if d.box is not None:
            if d.box in self.catalog.boxes:
                self._remove_box(d.box)
            else:
                self.fail(d.origin, f"cannot delete box {d.box!r}: no such box")
        if d.stream is not None:
            self._remove_stream(d.stream, d.origin)

    def _remove_stream(self, stream: str, origin: Origin) -> None:
        """A stream's declaration, publications and subscriptions; refused while a box or table uses it."""
        catalog = self.catalog
        users = sorted({b.name for b in catalog.boxes.values()
                        if stream in b.outputs or any(p.stream == stream for p in b.inputs)}
                       | {t.name for t in catalog.tables.values() if t.stream == stream})
        if users:
            self.fail(origin, f"cannot delete stream {stream!r}: {', '.join(users)} still "
                              f"{'uses' if len(users) == 1 else 'use'} it (delete {'it' if len(users) == 1 else 'them'}"
                              " first, or in the same document before the stream)")
            return
        known = stream in catalog.inputs or stream in catalog.outputs
        catalog.inputs.pop(stream, None)
        catalog.outputs.pop(stream, None)
        for key in [k for k, p in catalog.publications.items() if p.stream == stream]:
            known = True
            del catalog.publications[key]
        for key in [k for k, s in catalog.subscriptions.items() if s.stream == stream]:
            known = True
            del catalog.subscriptions[key]
        if not known:
            self.fail(origin, f"cannot delete stream {stream!r}: no such stream")
        self.deleted_streams.add(stream)

    def _remove_box(self, name: str) -> None:
        box = self.catalog.boxes.pop(name, None)
        if box is None:
            return
        self.catalog.partitions.pop(name, None)  # a partition goes with its box
        self.deleted_streams.update(box.outputs)
        for qname, query in list(self.catalog.queries.items()):
            if name in query.boxes:
                self.catalog.queries[qname] = replace(
                    query, boxes=tuple(b for b in query.boxes if b != name))

    def modify(self, m: Modify) -> None:
        noun, name, items = (("box", m.box, self.catalog.boxes) if m.box is not None
                             else ("table", m.table, self.catalog.tables))
        if name is None:
            return  # reported when the document was read
        item = items.get(name)
        if item is None:
            self.fail(m.origin, f"cannot modify {noun} {name!r}: no such {noun}")
            return
        items[name] = replace(item, params=merge_params(item.params, m.params))
        part = self.catalog.partitions.get(name) if m.box is not None else None
        if part is not None and part.planned and any(item.param(p) != items[name].param(p) for p in _PROGRAM_PARAMS):
            # A new program rebuilds the box empty: its partition is planned again on commit.
            self.catalog.partitions[name] = replace(part, segments=(), maps=(), layout=0, id="")

    def produced(self, streams: Iterable[str]) -> set[str]:
        """Which of ``streams`` a box of the merged catalog produces.  With ``base_producers``, by the base's
        producers not written since and the outputs of the boxes written (the cost of what the submission
        wrote); otherwise by a walk over every box."""
        boxes = self.catalog.boxes
        if self.base_producers is None:
            return set(streams) & {s for box in boxes.values() for s in box.outputs}
        written = boxes.touched if isinstance(boxes, TRACKED) else set(boxes)
        found = {s for k in written if k in boxes for s in boxes[k].outputs}
        return {s for s in streams if s in found or any(
            k in boxes and k not in written for k in self.base_producers(s))}

    def drop_orphans(self) -> None:
        """Outputs and subscriptions of streams whose producer was deleted go with it."""
        if not self.deleted_streams:
            return  # (the scan below costs the size of the catalog: only a delete pays it)
        gone = {s for s in self.deleted_streams if s not in self.catalog.inputs} - self.produced(self.deleted_streams)
        for stream in gone:
            self.catalog.outputs.pop(stream, None)
        for key, sub in list(self.catalog.subscriptions.items()):
            if sub.stream in gone:
                del self.catalog.subscriptions[key]


#: Parameters that make an ``m3`` box's program: changing one rebuilds the box and re-plans its partition.
_PROGRAM_PARAMS = ("sql", "m3", "sign-field")


def merge(
    base: Catalog, applications: list[Application], deployments: list[Deployment]
) -> tuple[Catalog, list[Diagnostic]]:
    """The catalog with the submission applied, and what was wrong with it.

    Node positions (``#1``) have been resolved by whoever took the
    submission (the Head against its nodes, :func:`~.submission.plan_submission`
    by the default layout otherwise): merging knows endpoints only.
    """
    catalog, problems, _ = merge_touched(base, applications, deployments)
    return catalog, problems


def merge_touched(
    base: Catalog, applications: list[Application], deployments: list[Deployment], replacing: bool = False,
    facts: BaseFacts | None = None,
) -> tuple[Catalog, list[Diagnostic], dict[str, set[str]]]:
    """:func:`merge`, and the keys it wrote or removed in each Catalog dict (what the change may touch);
    ``replacing``: the application's declarations replace what they name (the edit loop);
    ``facts``: ``base``'s checked index, so that what a merge asks of every box (what produces a
    stream, which boxes are on no node) costs what it wrote, not the size of ``base``."""
    merger = Merger(base, replacing, facts)
    for app in applications:
        merger.application(app)
    if replacing:
        merger.prune_left_out()
    for dep in deployments:
        merger.placement.deployment(dep)
    merger.placement.resolve_placements(deploying=bool(deployments))
    merger.drop_orphans()
    catalog, touched = untracked(merger.catalog)
    return catalog, merger.problems, touched
