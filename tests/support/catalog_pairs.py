"""Random pairs of catalogs for the replication property tests, and helpers about update items.

:func:`catalogs` plans random valid topologies (``support/topologies.py``) into
catalogs; :func:`catalog_pairs` gives two of them, often one an edit of the
other so they share names.  ``test_replicate.py``, ``test_replicate_slices.py``
and ``test_replicate_examples.py`` all draw from them, so they live here.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from boreas.catalog.documents import Delete, Modify, Unsubscribe, read_document
from boreas.catalog.elements import KIND_TO_DICT, element_key, is_element
from boreas.catalog.model import Catalog, Field, FieldType, Schema
from boreas.catalog.updates import update_document
from hypothesis import strategies as st

from support.topologies import plan_pair, plan_problems, topologies

DICTS = [attr for attr, _ in KIND_TO_DICT.values()]


@st.composite
def catalogs(draw) -> Catalog:
    """A random valid, placed topology, planned into a catalog."""
    topo = draw(topologies())
    plan = plan_pair(topo.app, topo.dep)
    assert plan.ok, f"{plan_problems(plan)}\n{topo.app}\n{topo.dep}"
    return plan.catalog


def _schema_closed(catalog: Catalog) -> Catalog:
    """``catalog`` without the inputs, outputs and tables that name a missing schema."""
    for attr in ("inputs", "outputs", "tables"):
        d = getattr(catalog, attr)
        for key in [k for k, v in d.items() if v.schema is not None and v.schema not in catalog.schemas]:
            del d[key]
    return catalog


@st.composite
def edited(draw, base: Catalog, other: Catalog) -> Catalog:
    """``base`` with elements dropped, parameters changed (so ``<modify>`` is exercised),
    boxes and tables moved, schemas redefined and elements of ``other`` mixed in.
    Not necessarily a valid topology, but no input/output/table names a missing schema."""
    new = base.copy()
    for attr in DICTS:
        d = getattr(new, attr)
        for key in sorted(d):
            if draw(st.integers(0, 5)) == 0:
                del d[key]
    nodes = sorted(set(new.nodes) | {"elsewhere:15999"})
    for attr in ("boxes", "tables"):
        d = getattr(new, attr)
        for key in sorted(d):
            obj = d[key]
            params = list(obj.params)
            how = draw(st.sampled_from(["keep", "keep", "add", "change", "drop", "move"]))
            if how == "add":
                params.append((f"extra-{len(params)}", draw(st.sampled_from(["0", "1", "x y"]))))
            elif how == "change" and params:
                i = draw(st.integers(0, len(params) - 1))
                params[i] = (params[i][0], params[i][1] + "0")
            elif how == "drop" and params:
                del params[draw(st.integers(0, len(params) - 1))]
            elif how == "move":
                obj = replace(obj, node=draw(st.sampled_from(nodes)))
            d[key] = replace(obj, params=tuple(params))
    for name in sorted(new.schemas):
        if draw(st.integers(0, 5)) == 0:  # same name, other fields
            new.schemas[name] = Schema(name, (Field("redefined", FieldType.LONG),))
    for attr in DICTS:
        mine, theirs = getattr(new, attr), getattr(other, attr)
        for key in sorted(theirs):
            if draw(st.integers(0, 2)) == 0:
                mine[key] = theirs[key]
    return _schema_closed(new)


@st.composite
def catalog_pairs(draw) -> tuple[Catalog, Catalog]:
    """Two catalogs: independent topologies, or one and an edit of it (which shares names)."""
    a, other = draw(catalogs()), draw(catalogs())
    how = draw(st.sampled_from(["independent", "edit", "edit-back", "empty"]))
    if how == "independent":
        return a, other
    if how == "empty":
        return (a, Catalog()) if draw(st.booleans()) else (Catalog(), a)
    b = draw(edited(a, other))
    return (a, b) if how == "edit" else (b, a)



DELETE_KIND = {"global_": "global", "node": "node", "view": "view", "query": "query", "box": "box",
                "table": "table", "stream": "stream", "schema": "schema", "type": "type",
                "input": "input", "output": "output", "region": "region", "publish": "publish",
                "client": "client", "replica_set": "replica_set"}


def item_key(item: Any) -> tuple[str, str]:
    """The ``(kind, key)`` of the element an update item declares, changes or removes."""
    match item:
        case Delete():
            named = [(kind, getattr(item, attr)) for attr, kind in DELETE_KIND.items()
                     if getattr(item, attr) is not None]
            assert len(named) == 1, item
            return named[0]
        case Unsubscribe():
            return "subscribe", f"{item.stream}|{item.endpoint}"
        case Modify():
            return ("box", item.box) if item.box is not None else ("table", item.table)
    assert is_element(item), item
    return element_key(item)


def via_xml(items: list[Any], version: int | None = None) -> list[Any]:
    doc = read_document(update_document(items, version=version, origin="head"), "update.xml")
    assert doc.version == version
    return doc.items
