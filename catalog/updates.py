"""Writing update XML: the envelope Head, nodes and regions send each other.

An update document is a batch of declarations and operations in order,
tagged with the catalog version it produces.  Reading one back
(:func:`boreas.catalog.documents.read_document`) gives the same items, so
every component speaks the same language on the wire.

>>> from boreas.catalog.documents import Move, read_document
>>> text = update_document([Move("localhost:15100", box="b1")], version=7, origin="localhost:15000")
>>> print(text)
<update version="7" origin="localhost:15000"><move node="localhost:15100" box="b1"/></update>
>>> read_document(text, "u.xml").items == [Move("localhost:15100", box="b1")]
True
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lxml import etree

from .document_model import (
    DELETE_NAMES,
    Connect,
    Delete,
    Disconnect,
    Modify,
    Move,
    NodeAssignment,
    Unsubscribe,
)
from .model import Box
from .xmlcodec import element_text, encode
from .words import counted


def _element(tag: str, **attrs: object) -> etree._Element:
    el = etree.Element(tag)
    for name, value in attrs.items():
        if value is not None:
            el.set(name, str(value))
    return el


def _parameters(el: etree._Element, params: tuple[tuple[str, str], ...]) -> etree._Element:
    for name, value in params:
        etree.SubElement(el, "parameter", name=name, value=value)
    return el


def encode_item(item: Any) -> etree._Element:
    """One update-XML element for a declaration or an operation."""
    match item:
        case Delete():
            names = {name: getattr(item, name) for name in DELETE_NAMES}
            return _element("delete", node=item.node, **names, **{"global": item.global_})
        case Modify():
            return _parameters(_element("modify", box=item.box, table=item.table), item.params)
        case Move():
            return _element("move", node=item.node, box=item.box, table=item.table)
        case Unsubscribe():
            return _element("unsubscribe", stream=item.stream, endpoint=item.endpoint)
        case NodeAssignment():
            return _element("node", endpoint=item.endpoint, query=" ".join(item.names))
        case Connect():
            el = _element("connect", box=item.sink, port=item.port,
                          upstream="1" if item.upstream else None, node=item.node)
            el.append(encode(item.box))
            return el
        case Disconnect():
            return _element("disconnect", stream=item.stream, box=item.box)
        case _:
            return encode(item)


def update_document(
    items: Iterable[Any], version: int | None = None, origin: str | None = None, id: str | None = None,
    copy: str | None = None, part: int | None = None, parts: int | None = None,
) -> str:
    """The ``<update>`` envelope carrying ``items`` in order (each item serialized on its own, a box
    written directly: what serializing them in one tree writes)."""
    root = _element("update", version=version, origin=origin, id=id, copy=copy, part=part, parts=parts)
    envelope = etree.tostring(root, encoding="unicode")  # <update .../>
    texts = [element_text(item) if isinstance(item, Box) else etree.tostring(encode_item(item), encoding="unicode")
             for item in items]
    return f"{envelope[:-2]}>{''.join(texts)}</update>" if texts else envelope


def describe_item(item: Any) -> str:
    """One line a person reads for an update item (``boreas watch`` prints these).

    >>> from boreas.catalog.documents import Delete
    >>> describe_item(Delete(box="b1"))
    '- box b1'
    >>> from boreas.catalog.model import Node
    >>> describe_item(Node("localhost:15000"))
    '+ node localhost:15000'
    """
    match item:
        case Delete():
            what = [f"{name} {getattr(item, name)}" for name in DELETE_NAMES if getattr(item, name)]
            what += [f"node {item.node}"] if item.node else []
            what += [f"global component {item.global_}"] if item.global_ else []
            return "- " + ", ".join(what)
        case Modify():
            params = ", ".join(f"{k}={v}" for k, v in item.params)
            return f"~ {'box' if item.box else 'table'} {item.box or item.table}: {params}"
        case Unsubscribe():
            return f"- subscription {item.stream} -> {item.endpoint or 'all'}"
        case Move():
            return f"> {'box' if item.box else 'table'} {item.box or item.table} moved to {item.node}"
    el = encode_item(item)
    name = el.get("name") or el.get("stream") or el.get("endpoint") or el.get("node") or ""
    extra = []
    if el.tag == "box":
        extra.append(f"({el.get('type')})" + (f" on {el.get('node')}" if el.get("node") else ""))
    elif el.tag == "subscribe":
        extra.append(f"-> {el.get('endpoint')}")
    elif el.tag == "publish":
        extra.append(f"at {el.get('node')}" if el.get("node") else "")
    elif el.tag == "region":
        name = f"{el.get('endpoint') or el.get('name') or 'default'} includes {el.get('node')}"
    elif el.tag == "partition":
        name = el.get("box") or ""
        members, segments = len(el.findall("node")), len(el.findall("segment"))
        extra.append(f"({counted(members, 'member')}, {counted(segments, 'segment')})")
    return " ".join(p for p in ["+", el.tag, name, *extra] if p)
