"""Catalog elements to XML and back, one element at a time.

The same encoding serves the store (each element's text), update XML sent
between Head, nodes and regions, and export.  Decoding assumes the element
passed its XSD (``boreas.schemas``), so it checks only what an XSD cannot
say, raising :class:`DecodeError` with a one-line reason.

>>> from lxml import etree
>>> box = decode(etree.fromstring(
...     '<box name="b" type="filter"><in stream="A"/><out stream="B"/>'
...     '<parameter name="expression.0" value="x &gt; 1"/></box>'))
>>> box.name, box.inputs[0].stream, box.param("expression.0")
('b', 'A', 'x > 1')
>>> decode(etree.fromstring(to_text(box))) == box
True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from lxml import etree

from .arrays import check_alias, field_type
from .diagnostics import CATALOG, Origin
from .model import (
    NAMED_BY_APP,
    Box,
    Client,
    ConnectionPointView,
    Field,
    FieldType,
    GlobalComponent,
    InPort,
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
from .box_text import box_text
from .partition_codec import decode_partition, encode_partition
from .watermarks import read_idle_timeout, read_watermark
from .xml_attrs import DecodeError, child_origin, children, int_attr, set_attrs, sub_element

QUEUE_ATTRS = ("update_queue", "queue_type", "key")
_QUEUE_ATTRS = frozenset(QUEUE_ATTRS)


def _attrs(el: etree._Element) -> tuple[tuple[str, str], ...]:
    """The queue attributes set, in QUEUE_ATTRS order (most elements have none: told from the names alone,
    a third of the CPU of asking for each; a full copy asks twice a box: issue 37)."""
    if _QUEUE_ATTRS.isdisjoint(el.keys()):
        return ()
    return tuple((a, el.get(a)) for a in QUEUE_ATTRS if el.get(a) is not None)


def _params(el: etree._Element) -> tuple[tuple[str, str], ...]:
    return tuple((p.get("name"), p.get("value")) for p in el if p.tag == "parameter")


def _names(text: str | None) -> tuple[str, ...]:
    return tuple((text or "").split())


# -- decoding ---------------------------------------------------------------


def _schema(el: etree._Element, origin: Origin) -> Schema:
    fields = []
    elements = children(el, "field")
    for i, f in enumerate(elements, start=1):
        where = child_origin(origin, f, f"/field[{i}]" if len(elements) > 1 else "/field")
        try:
            ftype, array = field_type(f.get("type"))
        except ValueError as exc:
            raise DecodeError(f"field {f.get('name')!r}: {exc}", where) from None
        size = int_attr(f, "size")
        if ftype == FieldType.STRING and size is None:
            raise DecodeError(f"string field {f.get('name')!r} needs a size", where)
        fields.append(Field(f.get("name"), ftype, size, array, where, _nullable(f, where)))
    names = [f.name for f in fields]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise DecodeError(f"schema {el.get('name')!r} declares field {dupes[0]!r} twice")
    return Schema(el.get("name"), tuple(fields), origin)


def _nullable(el: etree._Element, where: Origin) -> bool:
    """A ``<field nullable=...>``: XML Schema's boolean (``true``/``false``/``1``/``0``); absent, false."""
    text = (el.get("nullable") or "false").strip()
    if text not in ("true", "false", "1", "0"):
        raise DecodeError(f"field {el.get('name')!r}: nullable={text!r} is not true or false", where)
    return text in ("true", "1")


def _box(el: etree._Element, origin: Origin) -> Box:
    """One pass over the children (a full copy decodes 100,000 boxes: issue 37)."""
    inputs, outputs, params, access = [], [], [], []
    seen: set[str] = set()
    for child in el:
        tag = child.tag
        if tag == "in":
            inputs.append(InPort(child.get("stream"), child.get("connection_point_view"), _attrs(child)))
        elif tag == "out":
            outputs.append(child.get("stream"))
        elif tag == "parameter":
            name = child.get("name")
            if name in seen:
                raise DecodeError(f"box {el.get('name')!r} sets parameter {name!r} twice")
            seen.add(name)
            params.append((name, child.get("value")))
        elif tag == "access":
            access.append(child.get("table"))
    return Box(el.get("name"), el.get("type"), tuple(inputs), tuple(outputs), tuple(params), tuple(access),
               el.get("node"), _attrs(el), origin, el.get(APP_ATTR) or "")  # (built once: see decode)


def _table(el: etree._Element, origin: Origin) -> Table:
    return Table(
        el.get("name"),
        el.get("schema"),
        el.get("stream"),
        tuple(k.get("field") for k in children(el, "key")),
        tuple(i.get("field") for i in children(el, "index") if i.get("field")),
        _params(el),
        el.get("node"),
        origin,
    )


def _only(el: etree._Element, tag: str) -> etree._Element | None:
    """The one ``<tag>`` child, or None; Borealis takes each view child at most once, in any order."""
    found = children(el, tag)
    if len(found) > 1:
        raise DecodeError(f"connection point view {el.get('name')!r} has {len(found)} <{tag}> elements; "
                          f"give at most one")
    return found[0] if found else None


def _view(el: etree._Element, origin: Origin) -> ConnectionPointView:
    size, rng, order, radius = (_only(el, tag) for tag in ("size", "range", "order", "radius"))
    if (size is None) == (rng is None):
        raise DecodeError(f"connection point view {el.get('name')!r} needs exactly one of "
                          f"<size value=...> (the last N tuples) or <range start=... end=...>")
    size_value = int_attr(size, "value") if size is not None else None
    if size is not None and size_value is None:
        raise DecodeError(f"connection point view {el.get('name')!r}: <size value> must be a whole number")
    return ConnectionPointView(
        el.get("name"),
        el.get("stream"),
        size_value,
        (rng.get("start"), rng.get("end")) if rng is not None else None,
        (order.get("field") or None) if order is not None else None,
        _params(el),
        int_attr(radius, "value") if radius is not None else None,
        origin,
    )


def _type(el: etree._Element, origin: Origin) -> TypeAlias:
    alias = TypeAlias(el.get("name"), el.get("array"), int_attr(el, "size"), origin)
    problem = check_alias(alias)
    if problem:
        raise DecodeError(problem)
    return alias


def _region(el: etree._Element, origin: Origin) -> Region:
    node, endpoint, name = el.get("node"), el.get("endpoint"), el.get("name")
    if not node:
        if not endpoint:
            raise DecodeError("<region> needs a node attribute (a node to include in the region), or an "
                              "endpoint attribute (where the region's regional component listens)")
        return Region(name or "default", "", endpoint, name, origin)  # a regional component registers
    return Region(name or endpoint or "default", node, endpoint, name, origin)


def _input(el: etree._Element, origin: Origin) -> Input:
    """An ``<input>``; its ``watermark`` and ``idle-timeout`` are checked here (catalog/watermarks.py)."""
    watermark, idle = el.get("watermark"), el.get("idle-timeout")
    try:
        if watermark is not None:
            read_watermark(watermark)
        if idle is not None:
            read_idle_timeout(idle)
    except ValueError as exc:
        raise DecodeError(f"input {el.get('stream')!r}: {exc}") from None
    if idle is not None and watermark is None:
        raise DecodeError(f"input {el.get('stream')!r}: idle-timeout without a watermark has no effect")
    return Input(el.get("stream"), el.get("schema"), el.get("node"), origin, watermark=watermark, idle_timeout=idle)


_DECODERS: dict[str, Callable[[etree._Element, Origin], Any]] = {
    "schema": _schema,
    "type": _type,
    "input": _input,
    "output": lambda el, o: Output(el.get("stream"), el.get("schema"), el.get("node"), o),
    "box": _box,
    "table": _table,
    "query": lambda el, o: Query(el.get("name"), _names(el.get("boxes")), _names(el.get("tables")),
                                 _attrs(el), o),
    "connection_point_view": _view,
    "node": lambda el, o: Node(el.get("endpoint"), o),
    "region": _region,
    "replica_set": lambda el, o: ReplicaSet(
        el.get("name"), _names(el.get("query")),
        tuple(n.get("endpoint") for n in children(el, "node")), o),
    "publish": lambda el, o: Publication(el.get("stream"), el.get("node") or el.get("endpoint"),
                                         el.get("client"), o),
    "subscribe": lambda el, o: Subscription(el.get("stream"), el.get("endpoint") or "", el.get("gap"), o,
                                            el.get("on-slow"), el.get("name")),
    "client": lambda el, o: Client(el.get("endpoint") or "", el.get("prefix"), o),
    "global": lambda el, o: GlobalComponent(el.get("endpoint"), o),
    "partition": decode_partition,
}


#: The catalog-form attribute naming the application that declared an element (docs/xml.md "The edit loop").
APP_ATTR = "application"


def decode(el: etree._Element, origin: Origin = CATALOG) -> Any:
    """The model object for one declaration element."""
    try:
        decoder = _DECODERS[el.tag]
    except KeyError:
        raise DecodeError(f"<{el.tag}> is not a catalog declaration") from None
    obj = decoder(el, origin)
    app = el.get(APP_ATTR)  # catalog form only (:func:`to_text`); absent in what older Boreas stored
    # (A box reads its own: a catalog of 100,000 boxes is not built twice, replace() each.)
    return replace(obj, app=app) if app and isinstance(obj, NAMED_BY_APP) and obj.app != app else obj


# -- encoding ---------------------------------------------------------------


def _add_params(el: etree._Element, params: tuple[tuple[str, str], ...]) -> None:
    for name, value in params:
        sub_element(el, "parameter", name=name, value=value)


def encode(obj: Any, with_node: bool = True, with_app: bool = False) -> etree._Element:
    """The XML element for one model object (``with_node=False`` drops placement).

    ``with_app``: write the application that declared it (catalog form, for the stores).  Nodes
    are sent no such attribute: they need not know it, and update XML has none."""
    el = _encode(obj, getattr(obj, "node", None) if with_node else None)
    if with_app and getattr(obj, "app", ""):
        el.set(APP_ATTR, obj.app)
    return el


def _encode(obj: Any, node: str | None) -> etree._Element:
    match obj:
        case Schema():
            el = set_attrs(etree.Element("schema"), name=obj.name)
            for f in obj.fields:
                sub_element(el, "field", name=f.name, type=f.declared_type, size=f.size,
                            nullable="true" if f.nullable else None)
        case TypeAlias():
            el = set_attrs(etree.Element("type"), name=obj.name, array=obj.array, size=obj.size)
        case Input():
            el = set_attrs(etree.Element("input"), stream=obj.stream, schema=obj.schema, node=node,
                           watermark=obj.watermark, **{"idle-timeout": obj.idle_timeout})
        case Output():
            el = set_attrs(etree.Element("output"), stream=obj.stream, schema=obj.schema, node=node)
        case Box():
            el = set_attrs(etree.Element("box"), name=obj.name, type=obj.type, node=node, **dict(obj.attrs))
            for port in obj.inputs:
                sub_element(el, "in", stream=port.stream, connection_point_view=port.view, **dict(port.attrs))
            for stream in obj.outputs:
                sub_element(el, "out", stream=stream)
            _add_params(el, obj.params)
            for table in obj.access:
                sub_element(el, "access", table=table)
        case Table():
            el = set_attrs(etree.Element("table"), name=obj.name, schema=obj.schema, stream=obj.stream,
                           node=node)
            for key in obj.keys:
                sub_element(el, "key", field=key)
            for index in obj.indexes:
                sub_element(el, "index", field=index)
            _add_params(el, obj.params)
        case Query():
            el = set_attrs(etree.Element("query"), name=obj.name,
                           boxes=" ".join(obj.boxes) or None, tables=" ".join(obj.tables) or None,
                           **dict(obj.attrs))
        case ConnectionPointView():
            el = set_attrs(etree.Element("connection_point_view"), name=obj.name, stream=obj.stream)
            if obj.range is not None:
                sub_element(el, "range", start=obj.range[0], end=obj.range[1])
            else:
                sub_element(el, "size", value=obj.size)
            if obj.order_field:
                sub_element(el, "order", field=obj.order_field)
            if obj.radius is not None:
                sub_element(el, "radius", value=obj.radius)
            _add_params(el, obj.params)
        case Node():
            el = set_attrs(etree.Element("node"), endpoint=obj.endpoint)
        case Region():
            el = set_attrs(etree.Element("region"), node=obj.node or None, endpoint=obj.endpoint, name=obj.name)
        case ReplicaSet():
            el = set_attrs(etree.Element("replica_set"), name=obj.name, query=" ".join(obj.queries) or None)
            for endpoint in obj.nodes:
                sub_element(el, "node", endpoint=endpoint)
        case Publication():
            el = set_attrs(etree.Element("publish"), stream=obj.stream, node=obj.node, client=obj.client)
        case Subscription():
            el = set_attrs(etree.Element("subscribe"), stream=obj.stream, endpoint=obj.endpoint, gap=obj.gap,
                           **{"on-slow": obj.on_slow}, name=obj.name)
        case Client():
            el = set_attrs(etree.Element("client"), endpoint=obj.endpoint, prefix=obj.prefix)
        case GlobalComponent():
            el = set_attrs(etree.Element("global"), endpoint=obj.endpoint)
        case Partition():
            el = encode_partition(obj)
        case _:
            raise TypeError(f"cannot encode {type(obj).__name__}")
    return el


def element_text(obj: Any, with_app: bool = False) -> str:
    """:func:`encode`'s element serialized (a box written directly: :func:`.box_text.box_text`)."""
    if isinstance(obj, Box):
        text = box_text(obj, obj.node, obj.app if with_app else "")
        if text is not None:
            return text
    return etree.tostring(encode(obj, with_app=with_app), encoding="unicode")


def to_text(obj: Any) -> str:
    """Catalog form (what the stores keep): with placement and the declaring application."""
    return element_text(obj, with_app=True)
