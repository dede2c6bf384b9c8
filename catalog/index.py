"""Indexes of a catalog, so that checking a change costs what the change touches.

A :class:`CatalogIndex` keeps what checking one catalog version learns
(the whole check parses every box's expressions and infers every stream's
schema), and :meth:`CatalogIndex.derive` checks the next version by looking
only at what changed and at what refers to it:

* **references** (``(kind, name) -> {(dict, key)}``): which elements name a
  stream (produce or read it), a schema, a view, a table, a node or a box;
* **stream states**: every stream's inferred schema, or BROKEN (not told:
  its readers stay quiet);
* **box typings** (:class:`~.schemas_of.BoxTyping`): per box, the schemas
  its out streams get from its in streams', with the problems found, kept
  while the box (so its expressions' text) and its in schemas are the same
  -- an untouched box is never parsed again;
* **stream schemas**: the answer slices need (outputs under their declared
  names), so nothing re-runs inference to slice.

What a change touches: the elements it adds, changes or removes; the
streams those produce or read; the boxes downstream of a box whose out
schemas changed (inferred again from cached typings where inputs are the
same).  :func:`.validate.check_topology`, checking everything, is the
oracle (``tests/test_incremental_validation.py``: random sequences of
changes both ways).

>>> from boreas.catalog import Catalog, read_document
>>> from boreas.catalog.merge import merge
>>> app = read_document('''<borealis><input stream="R" schema="S"/><schema name="S"><field name="a" type="int"/>
...   </schema><box name="f" type="filter"><in stream="R"/><out stream="F"/>
...   <parameter name="expression.0" value="b &gt; 1"/></box></borealis>''', "app.xml")
>>> index = CatalogIndex.build(Catalog())
>>> merged, _ = merge(index.catalog, [app], [])
>>> [d.reason for d in index.derive(merged).problems]
["filter box 'f': unknown field 'b' (fields: a)"]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from .boxtypes import BoxTypeRegistry, builtin_registry
from .diagnostics import Diagnostic
from .index_derivation import Derivation, producers_of
from .model import Box, Catalog, Producer, Schema
from .tracked import CATALOG_DICTS as _DICTS
from .references import Element, Name
from .schemas_of import BoxTyping
from .validate import Checks

@dataclass
class CatalogIndex:
    """One catalog version, checked, with what the check learned; see the module docstring.

    An index is not changed once made: :meth:`derive` returns a new one
    (sharing what did not change), so a submission that is refused, or a
    commit that loses a race, leaves the index it was checked against as
    it was.
    """

    catalog: Catalog
    registry: BoxTypeRegistry
    refs: dict[Name, frozenset[Element]]
    states: dict[str, Schema | None]  # stream -> schema, or BROKEN
    typings: dict[str, BoxTyping]
    stream_schemas: dict[str, Schema]  # what slices need: outputs under their declared names
    problems: list[Diagnostic]
    checks: Checks  # plugged in (validate.Checks), run again where a change reaches
    # The change from the index this one was derived from (what incremental slicing starts from):
    parent: Catalog | None = None
    changed: dict[str, set[str]] = field(default_factory=dict)  # Catalog dict -> keys changed
    moved: set[str] = field(default_factory=set)  # streams whose schema changed (or that came or went)
    whole: bool = True  # everything counted as changed
    # The last index derived from this one: asked again for the same catalog, it is not checked twice.
    _last: CatalogIndex | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def build(cls, catalog: Catalog, registry: BoxTypeRegistry | None = None,
              checks: Checks | None = None) -> CatalogIndex:
        """The index of ``catalog``, checked whole (everything is new to the empty catalog's index)."""
        empty = cls(Catalog(), registry or builtin_registry(), {}, {}, {}, {}, [], checks or Checks())
        return empty.derive(catalog)

    @property
    def ok(self) -> bool:
        return not self.problems

    def producers(self, stream: str) -> list[Producer]:
        """What produces ``stream`` (an ``<input>`` first, then boxes in the catalog's order)."""
        return producers_of(self.catalog, self.refs, stream)

    def box_producers(self, stream: str) -> list[str]:
        """The boxes producing ``stream``, by the references (what a merge asks: catalog/merge.py)."""
        return [key for where, key in self.refs.get(("produces", stream), ()) if where == "boxes"]

    def unplaced_boxes(self) -> list[str]:
        """The boxes on no node (a partitioned box, or one submitted without a deployment)."""
        return [key for where, key in self.refs.get(("unplaced", "box"), ()) if where == "boxes"]

    def stream_boxes(self, stream: str) -> tuple[list[Box], list[Box]]:
        """The boxes producing ``stream`` and those reading it, each in name order, by the references: what
        a walk over every box finds, at the cost of what names the stream."""
        boxes = self.catalog.boxes

        def named(kind: str) -> list[Box]:
            return [boxes[k] for where, k in sorted(self.refs.get((kind, stream), ())) if where == "boxes"]

        return named("produces"), named("reads")

    def reading(self, stream: str, kind: str) -> list[str]:
        """The keys of Catalog dict ``kind`` (``boxes``, ``subscriptions``, ...) whose elements read ``stream``,
        in name order, by the references: what a node handing a box over asks (node/handover.py), at the
        cost of what names the stream, not of a walk over every element."""
        return sorted(key for where, key in self.refs.get(("reads", stream), ()) if where == kind)

    # -- a change ------------------------------------------------------------------------------------

    def derive(self, after: Catalog, touched: Mapping[str, Iterable[str]] | None = None) -> CatalogIndex:
        """The index of ``after``, checked by what changed since this index's catalog.

        ``touched`` (Catalog dict -> keys) says where the change may be
        (what a merge wrote, what a commit names); without it every dict is
        compared, which costs the size of the catalog.  Exact when this
        catalog was valid (a committed one is); otherwise, or when
        ``<type>`` aliases changed (they reach every schema), every element
        counts as changed, which is the whole check again.
        """
        before = self.catalog

        def changed(kind: str) -> set[str]:
            old, new = getattr(before, kind).get, getattr(after, kind).get
            keys = touched.get(kind, ()) if touched is not None else old.__self__.keys() | new.__self__.keys()
            found = set()
            for k in keys:  # (each looked up once: a deployment's part names 10,000 boxes)
                was, now = old(k), new(k)
                if was is not now and was != now:
                    found.add(k)
            return found

        whole = bool(self.problems) or bool(changed("types"))
        keys = {kind: _all_keys(getattr(before, kind), getattr(after, kind)) if whole else changed(kind)
                for kind in _DICTS}
        derived = self._again(after, keys)
        if derived is None:
            d = Derivation(self, after, keys, whole).run()
            derived = CatalogIndex(after, self.registry, d.refs, d.states, d.typings, d.stream_schemas, d.problems,
                                   self.checks, self.catalog, keys, d.moved, d.whole)
            self._last = derived
        return derived

    def _again(self, after: Catalog, keys: dict[str, set[str]]) -> CatalogIndex | None:
        """The last index derived from this one, now for ``after``, when ``after`` holds what that index's
        catalog holds: a Head checks a submission against its index, commits it, then derives its index for
        the committed (equal) catalog: one check, not two.  Only for a catalog without problems (theirs name
        origins, which element equality ignores), and not after partitions changed (planning them edits the
        checked catalog in place after its check)."""
        last = self._last
        if last is None or last.problems or last.changed != keys or keys.get("partitions"):
            return None
        for kind, changed in keys.items():
            new, old = getattr(after, kind), getattr(last.catalog, kind)
            if len(new) != len(old) or any(new.get(k) != old.get(k) for k in changed):
                return None
        return replace(last, catalog=after)


def _all_keys(before: dict[str, Any], after: dict[str, Any]) -> set[str]:
    return set(before) | set(after)
