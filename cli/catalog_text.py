"""The catalog and its changes in words: ``catalog show`` (text and ``--json``) and ``boreas watch``'s lines.

``boreas watch`` prints the catalog, then one line per change, each starting
with what kind of change it is: ``+`` added, ``-`` removed, ``~`` changed (a
box moved, its parameters modified, anything declared again differently).
Every element is named by its XML tag (``box``, ``subscribe``, ``global``,
``region``, ...), the same word whether it comes or goes.

Describing is pure (a catalog, an update item, the catalog before it) and
needs no Head, so it lives apart from the commands that fetch what it
describes (:mod:`.clients`, ``catalog show`` in :mod:`.main`).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from boreas.catalog.document_model import DELETE_NAMES, Delete, Modify, Move, Unsubscribe
from boreas.catalog.elements import KIND_TO_DICT, element_key, is_element
from boreas.catalog.export import summary
from boreas.catalog.model import Box, Catalog, Region
from boreas.catalog.updates import describe_item


def describe_catalog(catalog: Catalog, live: list[dict[str, Any]] | None = None) -> str:
    """The catalog's summary; with the Head's node rows, which nodes are up (the catalog only
    names the nodes a deployment placed something on)."""
    lines = summary(catalog).splitlines()
    n = len(catalog.nodes)
    lines[0] = re.sub(r", \d+ nodes?$", f", {n} node{'s' if n != 1 else ''} in the deployment", lines[0])
    if live is not None:
        up = sorted(row["endpoint"] for row in live if row.get("alive"))
        down = sorted(row["endpoint"] for row in live if not row.get("alive") and row.get("registered"))
        text = f"nodes up: {len(up)}" + (f" ({', '.join(up)})" if up else "")
        if down:
            text += f"; down: {len(down)} ({', '.join(down)})"
        lines.insert(1, text)
    return "\n".join(lines)


def _element_json(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _element_json(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                if f.name != "origin"}
    if isinstance(obj, (tuple, list)):
        if obj and all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) for p in obj):
            return {k: _element_json(v) for k, v in obj}  # parameters and attributes
        return [_element_json(v) for v in obj]
    return obj


def catalog_as_json(catalog: Catalog, live: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """``catalog show --json``: the version and every element by kind and key (as the XML names
    them); with the Head's node rows, ``nodes_up``."""
    out: dict[str, Any] = {"version": catalog.version}
    for attr, _tag in KIND_TO_DICT.values():
        out[attr] = {key: _element_json(obj) for key, obj in sorted(getattr(catalog, attr).items())}
    if live is not None:
        out["nodes_up"] = sorted(row["endpoint"] for row in live if row.get("alive"))
    return out


def _region_text(region: Region) -> str:
    if region.is_registration:
        if region.endpoint and region.endpoint != region.region:
            return f"region {region.region}: regional component at {region.endpoint}"
        return f"region {region.region}: regional component registered"
    return f"region {region.region} includes {region.node}"


def _value(value: Any) -> str:
    if isinstance(value, tuple):
        return ", ".join(str(getattr(v, "stream", v)) for v in value) or "(none)"
    return "(none)" if value is None else str(value)


def _changed_params(old: tuple[tuple[str, str], ...], new: tuple[tuple[str, str], ...]) -> list[str]:
    before, after = dict(old), dict(new)
    parts = [f"{k}={v!r}" + (f" (was {before[k]!r})" if k in before else " (new)")
             for k, v in after.items() if before.get(k) != v]
    return parts + [f"{k} removed (was {before[k]!r})" for k in before if k not in after]


def _changed(kind: str, key: str, old: Any, new: Any) -> str:
    """``~`` and what changed of an element declared again."""
    what = f"{kind} {key}" + (f" ({new.type})" if isinstance(new, Box) else "")
    if isinstance(new, Region):
        what = _region_text(new)
    parts = []
    for f in dataclasses.fields(new):
        name = f.name
        if name == "origin" or getattr(old, name) == getattr(new, name):
            continue
        before, after = getattr(old, name), getattr(new, name)
        if name == "node" and isinstance(new, Box):
            parts.append(f"moved from {before} to {after}" if before and after
                         else f"placed on {after}" if after else f"taken off {before}")
        elif name == "params":
            parts += _changed_params(before, after)
        else:
            label = {"inputs": "in streams", "outputs": "out streams"}.get(name, name)
            parts.append(f"{label} {_value(after)} (was {_value(before)})")
    return f"~ {what}: " + ("; ".join(parts) if parts else "declared again, unchanged")


def describe_change(item: Any, before: Catalog) -> str:
    """One line for an update item, against the catalog it changes: ``+`` added, ``-`` removed,
    ``~`` changed (moved, modified, declared again differently)."""
    if is_element(item):
        kind, key = element_key(item)
        old = getattr(before, KIND_TO_DICT[kind][0]).get(key)
        if old is not None:
            return _changed(kind, key, old, item)
        return "+ " + (_region_text(item) if isinstance(item, Region) else describe_item(item)[2:])
    match item:
        case Delete():
            gone = []
            for name in (*DELETE_NAMES, "node", "global_"):
                key = getattr(item, name, None)
                if not key:
                    continue
                kind = name.rstrip("_")
                old = getattr(before, KIND_TO_DICT[kind][0]).get(key) if kind in KIND_TO_DICT else None
                if isinstance(old, Region):
                    gone.append(_region_text(old))
                elif old is not None and kind == "publish":
                    gone.append(describe_item(old)[2:])
                elif isinstance(old, Box):
                    gone.append(f"box {key} ({old.type})" + (f" on {old.node}" if old.node else ""))
                else:
                    gone.append(f"{kind} {key}")
            return "- " + ", ".join(gone)
        case Unsubscribe():
            return f"- subscribe {item.stream} -> {item.endpoint or 'every endpoint'}"
        case Modify():
            kind, key = ("box", item.box) if item.box else ("table", item.table)
            old = (before.boxes if item.box else before.tables).get(key or "")
            what = f"{kind} {key}" + (f" ({old.type})" if isinstance(old, Box) else "")
            merged = dict(old.params) if old is not None else {}
            merged.update(item.params)
            changes = _changed_params(old.params, tuple(merged.items())) if old is not None else []
            return f"~ {what}: " + ("; ".join(changes) or ", ".join(f"{k}={v!r}" for k, v in item.params))
        case Move():
            kind, key = ("box", item.box) if item.box else ("table", item.table)
            old = (before.boxes if item.box else before.tables).get(key or "")
            where = getattr(old, "node", None)
            return f"~ {kind} {key}: moved " + (f"from {where} " if where else "") + f"to {item.node}"
    return describe_item(item)
