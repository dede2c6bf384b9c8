"""What replacing an application changes, and what it may not change in place.

``boreas submit --replace`` (docs/xml.md, "The edit loop") merges the new
version of an application over the catalog (:mod:`.merge`); this module
compares the catalog before and after:

* :func:`application_changes` sorts the boxes and streams the submission
  names into **kept** (declared again as they are: they run on untouched,
  state and all), **changed** (the node builds the box again from its new
  declaration, with empty state), **added** and **removed** -- what the CLI
  prints and the Head returns with the submission;
* :func:`in_place_problems` refuses what cannot change while it runs, each
  at the element of the new document that asks for it: a stream whose schema
  changes while a box that stays, a table or a subscriber still reads it
  (they would get rows of another shape), a changed ``m3`` box (its maps hold
  every row it has read; built again they would start empty and the view
  would be wrong, as the rows already read are not replayed), and a changed
  partitioned box (its segments are laid out for the old declaration).

>>> from boreas.catalog import Catalog, plan_submission, read_document
>>> app = '''<borealis><input stream="R" schema="S"/><schema name="S"><field name="a" type="int"/></schema>
...   <box name="f" type="filter"><in stream="R"/><out stream="F"/><parameter name="expression.0" value="a &gt; 1"/>
...   </box><box name="g" type="filter"><in stream="R"/><out stream="G"/><parameter name="expression.0" value="a &gt; 2"/>
...   </box></borealis>'''
>>> before = plan_submission(Catalog(), [read_document(app, "app.xml")]).catalog
>>> edited = read_document(app.replace("a &gt; 2", "a &gt; 3"), "app.xml")
>>> after = plan_submission(before, [edited], replacing=True)
>>> print("\\n".join(after.changes.lines()))
kept: box f; streams F, G, R
changed: box g
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .diagnostics import CATALOG, Diagnostic, Origin
from .document_model import Application
from .model import Box, Catalog, Input, Output, Query, Schema, Table

#: The order a person reads the four lists in.
KINDS = ("kept", "changed", "added", "removed")


@dataclass
class ApplicationChanges:
    """The boxes and streams a replacing submission keeps, changes, adds and removes (names, sorted)."""

    boxes: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in KINDS})
    streams: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in KINDS})
    notes: list[str] = field(default_factory=list)  # what a person should know besides (see adopted)

    def as_dict(self) -> dict[str, Any]:
        """The JSON the Head returns with the submission (``changes``)."""
        return {**{kind: {"boxes": self.boxes[kind], "streams": self.streams[kind]} for kind in KINDS},
                "notes": self.notes}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ApplicationChanges:
        changes = cls()
        for kind in KINDS:
            changes.boxes[kind] = list(data.get(kind, {}).get("boxes", []))
            changes.streams[kind] = list(data.get(kind, {}).get("streams", []))
        changes.notes = list(data.get("notes", []))
        return changes

    def lines(self) -> list[str]:
        """One line per kind that has something: ``changed: box g; stream G``."""
        out = []
        for kind in KINDS:
            parts = [_listed(noun, names) for noun, names in (("box", self.boxes[kind]),
                                                                ("stream", self.streams[kind])) if names]
            if parts:
                out.append(f"{kind}: {'; '.join(parts)}")
        return (out or ["nothing changed: every box and stream is as submitted before"]) + [
            f"note: {note}" for note in self.notes]


def _listed(noun: str, names: list[str]) -> str:
    return f"{noun if len(names) == 1 else 'boxes' if noun == 'box' else noun + 's'} {', '.join(names)}"


def declared_names(applications: Iterable[Application]) -> tuple[set[str], set[str]]:
    """The boxes and the streams (declared, or a declared box's out streams) the documents name."""
    boxes: set[str] = set()
    streams: set[str] = set()
    for app in applications:
        for obj in app.declarations:
            if isinstance(obj, Box):
                boxes.add(obj.name)
                streams.update(obj.outputs)
            elif isinstance(obj, (Input, Output)):
                streams.add(obj.stream)
    return boxes, streams


def _streams(catalog: Catalog) -> set[str]:
    return {*catalog.inputs, *catalog.outputs, *(s for b in catalog.boxes.values() for s in b.outputs)}


def _same_shape(a: Schema | None, b: Schema | None) -> bool:
    return a is None or b is None or a.fields == b.fields


def _stream_declaration(catalog: Catalog, stream: str) -> object:
    return catalog.inputs.get(stream) or catalog.outputs.get(stream)


def application_changes(before: Catalog, after: Catalog, applications: Sequence[Application],
                        schemas_before: dict[str, Schema], schemas_after: dict[str, Schema]) -> ApplicationChanges:
    """How the submission's boxes and streams fare; names it does not mention and did not remove are left out."""
    declared_boxes, declared_streams = declared_names(applications)
    changes = ApplicationChanges()
    for name in sorted(declared_boxes | before.boxes.keys() | after.boxes.keys()):
        old, new = before.boxes.get(name), after.boxes.get(name)
        if old is None and new is not None:
            changes.boxes["added"].append(name)
        elif new is None and old is not None:
            changes.boxes["removed"].append(name)
        elif old is not None and new is not None and name in declared_boxes:
            changes.boxes["kept" if old == new else "changed"].append(name)
    old_streams, new_streams = _streams(before), _streams(after)
    producers_before, producers_after = before.producers(), after.producers()
    for stream in sorted(declared_streams | old_streams | new_streams):
        if stream not in old_streams and stream in new_streams:
            changes.streams["added"].append(stream)
        elif stream in old_streams and stream not in new_streams:
            changes.streams["removed"].append(stream)
        elif stream in declared_streams and stream in new_streams:
            same = (_same_shape(schemas_before.get(stream), schemas_after.get(stream))
                    and _stream_declaration(before, stream) == _stream_declaration(after, stream)
                    and producers_before.get(stream) == producers_after.get(stream))
            changes.streams["kept" if same else "changed"].append(stream)
    changes.notes = adopted(before, applications)
    return changes


def adopted(before: Catalog, applications: Sequence[Application]) -> list[str]:
    """A note per application that declares elements stored before applications were recorded.

    Those elements now record it, but what this version leaves out of the old one cannot be known
    this time: it is not removed (the next replacing submission removes what it leaves out)."""
    notes = []
    for app in applications:
        old = sorted({f"{_NOUNS[attr]} {key}"
                      for obj in app.declarations for attr, key in [_key(obj)]
                      if attr and (item := getattr(before, attr).get(key)) is not None and not item.app})
        if old:
            shown = ", ".join(old[:3]) + (", ..." if len(old) > 3 else "")
            notes.append(f"{len(old)} element{'s' if len(old) > 1 else ''} of {app.source} ({shown}) were "
                         f"submitted before Boreas recorded applications: they now belong to application "
                         f"{app.app_name!r}, but whatever the earlier version declared and this file leaves out "
                         f"is not removed this time (boreas drop NAME)")
    return notes


_NOUNS = {"boxes": "box", "inputs": "input", "outputs": "output", "tables": "table", "queries": "query"}


def _key(obj: object) -> tuple[str, str]:
    """The Catalog dict and key of an element that records its application (``("", "")`` otherwise)."""
    if isinstance(obj, Box):
        return "boxes", obj.name
    if isinstance(obj, (Input, Output)):
        return ("inputs" if isinstance(obj, Input) else "outputs"), obj.stream
    if isinstance(obj, (Table, Query)):
        return ("tables" if isinstance(obj, Table) else "queries"), obj.name
    return "", ""


def _declared_at(applications: Sequence[Application]) -> dict[str, Origin]:
    """Where the documents declare each stream (its ``<input>``/``<output>``, else its producing box)."""
    found: dict[str, Origin] = {}
    for app in applications:
        for obj in app.declarations:
            if isinstance(obj, (Input, Output)):
                found[obj.stream] = obj.origin
    for app in applications:
        for obj in app.declarations:
            if isinstance(obj, Box):
                for stream in obj.outputs:
                    found.setdefault(stream, obj.origin)
    return found


def in_place_problems(before: Catalog, after: Catalog, schemas_before: dict[str, Schema],
                      schemas_after: dict[str, Schema], applications: Sequence[Application] = ()) -> list[Diagnostic]:
    """Each change a running application cannot take, with where the documents ask for it and why."""
    declared_at = _declared_at(applications)
    problems = []
    kept = {name for name, box in after.boxes.items() if before.boxes.get(name) == box}
    for stream in sorted(schemas_before.keys() & schemas_after.keys()):
        old, new = schemas_before[stream], schemas_after[stream]
        if _same_shape(old, new):
            continue
        readers = sorted(f"box {name}" for name in kept if any(p.stream == stream for p in after.boxes[name].inputs))
        readers += sorted(f"table {t.name}" for t in after.tables.values()
                          if t.stream == stream and before.tables.get(t.name) == t)
        readers += sorted(f"subscriber {s.name or s.endpoint}" for s in after.subscriptions.values()
                          if s.stream == stream)
        if readers:
            problems.append(Diagnostic.at(declared_at.get(stream, CATALOG), (
                f"stream {stream!r} would change its schema from {old.describe()} to {new.describe()}"
                f"{unselected_columns_note(after, stream, old, new)} while "
                f"{', '.join(readers)} still {'reads' if len(readers) == 1 else 'read'} it: change "
                f"{'it' if len(readers) == 1 else 'them'} in the same submission, or give the stream a new name")))
    for name, new_box in sorted(after.boxes.items()):
        old_box = before.boxes.get(name)
        if old_box is None or replace(new_box, node=old_box.node) == old_box:
            continue
        if old_box.type == "m3":
            problems.append(Diagnostic.at(new_box.origin, (
                f"m3 box {name!r} cannot change in place: its maps hold every row it has read, and built "
                f"again they would start empty (those rows are not replayed), so its view would be wrong; "
                f"drop it (boreas drop {name}), submit it again and publish its inputs again")))
        elif name in before.partitions:
            problems.append(Diagnostic.at(new_box.origin, (
                f"box {name!r} is partitioned: its declaration cannot change in place (its segments are "
                f"laid out for it); drop it (boreas drop {name}) and submit it again")))
    return problems


def unselected_columns_note(catalog: Catalog, stream: str, old: Schema, new: Schema) -> str:
    """Why an ``m3`` box's out stream has fewer fields than ``old`` (its schema before, or as declared): an
    SQL view outputs only the columns its SELECT names (docs/m3.md), so GROUP BY columns it does not select
    left the stream; "" when the producer is no ``m3`` box or ``new`` is not ``old`` less some fields.

    >>> from .model import Field, FieldType
    >>> box = Box("q", "m3", (), ("V",))
    >>> old = Schema("o", (Field("b", FieldType.INT), Field("s", FieldType.DOUBLE)))
    >>> unselected_columns_note(Catalog(boxes={"q": box}), "V", old, Schema("n", old.fields[1:]))[:50]
    ' (an m3 view outputs the columns its SELECT names:'
    """
    box = next((catalog.boxes.get(p.box) for p in catalog.producers().get(stream, []) if p.box), None)
    if box is None or box.type != "m3":
        return ""
    kept, dropped = 0, []
    for f in old.fields:
        if kept < len(new.fields) and new.fields[kept].name.lower() == f.name.lower() and f.same_shape(new.fields[kept]):
            kept += 1
        else:
            dropped.append(f.name)
    if kept != len(new.fields) or not dropped:
        return ""
    return (f" (an m3 view outputs the columns its SELECT names: GROUP BY columns the SELECT does not name "
            f"({', '.join(dropped)}) are the view's internal keys, read by name with boreas query but in no row; "
            f"select them to keep them in the stream)")
