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

from .documents import DELETE_NAMES, Connect, Delete, Disconnect, Modify, Move, NodeAssignment, Unsubscribe
from .xmlcodec import encode


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
    items: Iterable[Any], version: int | None = None, origin: str | None = None, id: str | None = None
) -> str:
    """The ``<update>`` envelope carrying ``items`` in order."""
    root = _element("update", version=version, origin=origin, id=id)
    for item in items:
        root.append(encode_item(item))
    return etree.tostring(root, encoding="unicode")
