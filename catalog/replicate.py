"""Keeping a copy of a catalog current with update XML.

Local catalogs (nodes), regional catalogs and the catalogs of global
components never read the global catalog: they change only by the update XML
they are sent.  This module is both ends of that exchange, so every copy
follows the same rules:

* :func:`update_items` turns the difference between two catalogs into update
  items (declarations, ``<modify>``, ``<delete>``, ``<unsubscribe>``) in an
  order that is safe to apply: removals of dependants first, then
  declarations in dependency order (schemas before the streams that use them),
  then removals of schemas and nodes (an input that stays but changes schema,
  or a box that moves, names its old schema or node until it is redeclared).
* :func:`apply_update` applies items to a catalog at the element level,
  atomically: every item is checked, and if one names something the catalog
  does not hold (a box that has moved away, say) nothing is applied and
  :class:`UpdateRejected` lists each such item.  The Head relies on this to
  tell a box that has moved (paper section 3.1.2) from a delivered update.

>>> from boreas.catalog.model import Node, Schema, Field, FieldType
>>> old = Catalog()
>>> new = Catalog(nodes={"localhost:15000": Node("localhost:15000")})
>>> items = update_items(old, new)
>>> items
[Node(endpoint='localhost:15000')]
>>> apply_update(old, items) == new
True
>>> update_items(new, old)[0].node   # a <delete node=...>
'localhost:15000'
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .document_model import (
    DELETE_NAMES,
    Connect,
    Delete,
    Disconnect,
    Modify,
    Move,
    NodeAssignment,
    Unsubscribe,
    merge_params,
)
from .elements import KIND_TO_DICT, element_key, is_element
from .layered import Layered
from .model import Box, Catalog, Table

#: Removal order: what refers to an element goes before it.
DELETE_ORDER = ("subscribe", "publish", "client", "region", "replica_set", "query", "partition", "box",
                "view", "table", "output", "input", "type", "schema", "node", "global")
#: Removed after the declarations, not before: a kept element may still name them.
REMOVE_LAST = ("schema", "node")
#: Declaration order: what an element refers to comes before it.
DECLARE_ORDER = ("schema", "type", "node", "input", "output", "view", "table", "box", "partition", "query",
                 "region", "replica_set", "client", "publish", "subscribe", "global")

#: store kind -> the <delete> attribute that names it
_DELETE_FIELD = {"view": "view", "global": "global_", "node": "node",
                 **{name: name for name in DELETE_NAMES}}


@dataclass(frozen=True, slots=True)
class Rejection:
    """One update item that names something the catalog does not hold."""

    index: int
    kind: str
    key: str
    reason: str

    def as_dict(self) -> dict[str, object]:
        return {"index": self.index, "kind": self.kind, "key": self.key, "reason": self.reason}


class UpdateRejected(Exception):
    """Nothing of the update was applied; ``rejections`` says which items failed and why."""

    def __init__(self, rejections: Iterable[Rejection]):
        self.rejections = list(rejections)
        super().__init__("; ".join(f"item {r.index}: {r.reason}" for r in self.rejections))


def removal(kind: str, key: str, obj: Any) -> Any:
    """The update item that removes element ``(kind, key)``."""
    if kind == "subscribe":
        return Unsubscribe(obj.stream, obj.endpoint)
    return Delete(**{_DELETE_FIELD[kind]: key})


def _declaration(kind: str, old: Any, new: Any) -> Any:
    """A declaration, or ``<modify>`` when only parameters changed (kept or added, none dropped)."""
    if kind in ("box", "table") and old is not None:
        if replace(old, params=new.params) == new and merge_params(old.params, new.params) == new.params:
            changed = tuple(p for p in new.params if p not in old.params)
            if kind == "box":
                return Modify(changed, box=new.name)
            return Modify(changed, table=new.name)
    return new


def update_items(old: Catalog, new: Catalog, touched: Mapping[str, Iterable[str]] | None = None) -> list[Any]:
    """Update items that turn ``old`` into ``new`` when applied with :func:`apply_update`.

    ``touched`` (Catalog dict -> keys, as a commit names them: :func:`.elements.commit_touched`)
    says where ``new`` may differ from ``old``; only those keys are compared, so a commit's items
    cost what it wrote, not the size of the catalog.  They are the items comparing everything gives
    when every key that differs is named (naming more is harmless); without ``touched`` every key
    of both catalogs is compared.

    >>> from boreas.catalog.model import Node
    >>> new = Catalog(nodes={"n:1": Node("n:1"), "n:2": Node("n:2")})
    >>> update_items(Catalog(), new, {"nodes": {"n:2"}})   # (n:1 was not written: not compared)
    [Node(endpoint='n:2')]
    """
    items = _removals(old, new, [k for k in DELETE_ORDER if k not in REMOVE_LAST], touched)
    for kind in DECLARE_ORDER:
        before, after = _dict(old, kind), _dict(new, kind)
        keys = _candidates(kind, touched)
        if keys is None:  # (the same element object is equal: only the others are compared, then sorted)
            keys = _written(before, after)
        if keys is None:
            keys = [k for k, v in after.items() if before.get(k) is not v]
        for key in _sorted(after, keys):
            if before.get(key) != after[key]:
                items.append(_declaration(kind, before.get(key), after[key]))
    return items + _removals(old, new, [k for k in DELETE_ORDER if k in REMOVE_LAST], touched)


def _candidates(kind: str, touched: Mapping[str, Iterable[str]] | None) -> Iterable[str] | None:
    """The keys of ``kind`` a change may have written (None: any key)."""
    return None if touched is None else touched.get(KIND_TO_DICT[kind][0], ())


def _sorted(held: Mapping[str, Any], keys: Iterable[str] | None) -> list[str]:
    """The keys ``held`` has, among ``keys`` (all of them when None), in order."""
    return sorted(held) if keys is None else sorted(k for k in set(keys) if k in held)


def _removals(old: Catalog, new: Catalog, kinds: Iterable[str],
              touched: Mapping[str, Iterable[str]] | None = None) -> list[Any]:
    items = []
    for kind in kinds:
        before, after = _dict(old, kind), _dict(new, kind)
        keys = _candidates(kind, touched)
        if keys is None:
            keys = _written(before, after)
        gone = before.keys() - after.keys() if keys is None else {k for k in keys if k in before and k not in after}
        for key in sorted(gone):
            items.append(removal(kind, key, before[key]))
    return items


def _written(before: Mapping[str, Any], after: Mapping[str, Any]) -> set[str] | None:
    """The keys where two versions of a Catalog dict over one shared base may differ (what either wrote
    over it: a patched slice and the slice it was patched from), or None (compare them whole)."""
    return after.written_since(before) if isinstance(after, Layered) else None


def catalog_items(catalog: Catalog) -> list[Any]:
    """Every element of ``catalog`` as declarations, in dependency order (a full copy)."""
    return update_items(Catalog(), catalog)


def _dict(catalog: Catalog, kind: str) -> dict[str, Any]:
    return getattr(catalog, KIND_TO_DICT[kind][0])


class _Applier:
    def __init__(self, catalog: Catalog, touched: dict[str, set[str]] | None = None):
        self.catalog = catalog.copy()
        self.rejections: list[Rejection] = []
        self.index = 0
        self.touched = touched  # Catalog dict -> keys written (apply_update's touched), when asked

    def _dict(self, kind: str, key: str) -> dict[str, Any]:
        """The Catalog dict of ``kind``, about to be written at ``key`` (recorded in :attr:`touched`)."""
        name = KIND_TO_DICT[kind][0]
        if self.touched is not None:
            self.touched.setdefault(name, set()).add(key)
        return getattr(self.catalog, name)

    def reject(self, kind: str, key: str, reason: str) -> None:
        self.rejections.append(Rejection(self.index, kind, key, reason))

    def apply(self, item: Any) -> None:
        match item:
            case Delete():
                self.delete(item)
            case Modify():
                self.modify(item)
            case Unsubscribe():
                self.unsubscribe(item)
            case NodeAssignment():
                for name in item.names:
                    self.place(name, item.endpoint)
            case Move():
                name = item.box or item.table or ""
                self.place(name, item.node, "box" if item.box else "table")
            case Connect() | Disconnect():
                tag = "connect" if isinstance(item, Connect) else "disconnect"
                self.reject(tag, item.sink if isinstance(item, Connect) else (item.stream or ""),
                            f"<{tag}> is a request to a node, not a catalog element")
            case _ if is_element(item):
                kind, key = element_key(item)
                self._dict(kind, key)[key] = item
            case _:
                self.reject(type(item).__name__, "", f"cannot apply {type(item).__name__} to a catalog")

    def delete(self, d: Delete) -> None:
        for kind, field_name in _DELETE_FIELD.items():
            key = getattr(d, field_name)
            if key is None:
                continue
            if kind == "stream":
                held = [k for k in ("input", "output") if key in _dict(self.catalog, k)]
                if not held:
                    self.reject("stream", key, f"stream {key!r} is not declared here")
                for k in held:
                    del self._dict(k, key)[key]
            elif key in _dict(self.catalog, kind):
                del self._dict(kind, key)[key]
            else:
                self.reject(kind, key, f"{kind} {key!r} is not here")

    def modify(self, m: Modify) -> None:
        kind, name = ("box", m.box) if m.box is not None else ("table", m.table)
        target: dict[str, Box | Table] = _dict(self.catalog, kind)
        if name is None or name not in target:
            self.reject(kind, name or "", f"cannot modify {kind} {name!r}: it is not here")
            return
        self._dict(kind, name)[name] = replace(target[name], params=merge_params(target[name].params, m.params))

    def unsubscribe(self, u: Unsubscribe) -> None:
        subs = self.catalog.subscriptions
        keys = [k for k, s in subs.items()
                if s.stream == u.stream and (u.endpoint is None or s.endpoint == u.endpoint)]
        if not keys:
            self.reject("subscribe", f"{u.stream}|{u.endpoint or ''}",
                        f"no subscription to stream {u.stream!r}" + (f" by {u.endpoint}" if u.endpoint else ""))
        for key in keys:
            del self._dict("subscribe", key)[key]

    def place(self, name: str, endpoint: str, kind: str | None = None) -> None:
        for k in ([kind] if kind else ["box", "table", "query"]):
            target = _dict(self.catalog, k)
            if name in target:
                if k == "query":
                    for member in target[name].boxes:
                        self.place(member, endpoint, "box")
                    for member in target[name].tables:
                        self.place(member, endpoint, "table")
                else:
                    self._dict(k, name)[name] = replace(target[name], node=endpoint)
                return
        self.reject(kind or "box", name, f"{kind or 'box or query'} {name!r} is not here")


def apply_update(catalog: Catalog, items: Sequence[Any], version: int | None = None,
                 touched: dict[str, set[str]] | None = None) -> Catalog:
    """The catalog after ``items``; raises :class:`UpdateRejected` and changes nothing on a miss.

    ``touched``, when given, gets the keys written per Catalog dict (every other key holds the very object
    ``catalog`` holds there): what a node's index derives the new catalog by (catalog/index.py ``derive``)."""
    applier = _Applier(catalog, touched)
    for index, item in enumerate(items):
        applier.index = index
        applier.apply(item)
    if applier.rejections:
        raise UpdateRejected(applier.rejections)
    if version is not None:
        applier.catalog.version = version
    return applier.catalog
