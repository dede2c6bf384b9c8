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
    SegmentPlacement,
    Subscription,
    Table,
    TypeAlias,
)

QUEUE_ATTRS = ("update_queue", "queue_type", "key")


class DecodeError(ValueError):
    """An element is well-formed and schema-valid but means nothing sensible.

    ``origin``, when given, is the child element at fault (a ``<field>`` of a
    ``<schema>``), so the message points at its line rather than the parent's.
    """

    def __init__(self, reason: str, origin: Origin | None = None):
        super().__init__(reason)
        self.origin = origin


def _int(el: etree._Element, attr: str) -> int | None:
    text = el.get(attr)
    if text is None or text.strip() == "":
        return None
    try:
        return int(text)
    except ValueError:
        raise DecodeError(f"<{el.tag}> attribute {attr}={text!r} is not a whole number") from None


def _attrs(el: etree._Element) -> tuple[tuple[str, str], ...]:
    attrib = el.attrib
    return tuple((a, attrib[a]) for a in QUEUE_ATTRS if a in attrib)


def _params(el: etree._Element) -> tuple[tuple[str, str], ...]:
    return tuple((p.get("name"), p.get("value")) for p in el if p.tag == "parameter")


def _names(text: str | None) -> tuple[str, ...]:
    return tuple((text or "").split())


def _children(el: etree._Element, tag: str) -> list[etree._Element]:
    return [c for c in el if c.tag == tag]


# -- decoding ---------------------------------------------------------------


def _schema(el: etree._Element, origin: Origin) -> Schema:
    fields = []
    children = _children(el, "field")
    for i, f in enumerate(children, start=1):
        step = f"/field[{i}]" if len(children) > 1 else "/field"
        where = Origin(origin.file, f.sourceline, origin.path + step) if origin.path else origin
        try:
            ftype, array = field_type(f.get("type"))
        except ValueError as exc:
            raise DecodeError(f"field {f.get('name')!r}: {exc}", where) from None
        size = _int(f, "size")
        if ftype == FieldType.STRING and size is None:
            raise DecodeError(f"string field {f.get('name')!r} needs a size", where)
        fields.append(Field(f.get("name"), ftype, size, array, where))
    names = [f.name for f in fields]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise DecodeError(f"schema {el.get('name')!r} declares field {dupes[0]!r} twice")
    return Schema(el.get("name"), tuple(fields), origin)


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
               el.get("node"), _attrs(el), origin)


def _table(el: etree._Element, origin: Origin) -> Table:
    return Table(
        el.get("name"),
        el.get("schema"),
        el.get("stream"),
        tuple(k.get("field") for k in _children(el, "key")),
        tuple(i.get("field") for i in _children(el, "index") if i.get("field")),
        _params(el),
        el.get("node"),
        origin,
    )


def _only(el: etree._Element, tag: str) -> etree._Element | None:
    """The one ``<tag>`` child, or None; Borealis takes each view child at most once, in any order."""
    found = _children(el, tag)
    if len(found) > 1:
        raise DecodeError(f"connection point view {el.get('name')!r} has {len(found)} <{tag}> elements; "
                          f"give at most one")
    return found[0] if found else None


def _view(el: etree._Element, origin: Origin) -> ConnectionPointView:
    size, rng, order, radius = (_only(el, tag) for tag in ("size", "range", "order", "radius"))
    if (size is None) == (rng is None):
        raise DecodeError(f"connection point view {el.get('name')!r} needs exactly one of "
                          f"<size value=...> (the last N tuples) or <range start=... end=...>")
    size_value = _int(size, "value") if size is not None else None
    if size is not None and size_value is None:
        raise DecodeError(f"connection point view {el.get('name')!r}: <size value> must be a whole number")
    return ConnectionPointView(
        el.get("name"),
        el.get("stream"),
        size_value,
        (rng.get("start"), rng.get("end")) if rng is not None else None,
        (order.get("field") or None) if order is not None else None,
        _params(el),
        _int(radius, "value") if radius is not None else None,
        origin,
    )


def _type(el: etree._Element, origin: Origin) -> TypeAlias:
    alias = TypeAlias(el.get("name"), el.get("array"), _int(el, "size"), origin)
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


def _child_origin(origin: Origin, el: etree._Element, step: str) -> Origin:
    return Origin(origin.file, el.sourceline, origin.path + step) if origin.path else origin


def _partition(el: etree._Element, origin: Origin) -> Partition:
    """``<partition>`` as deployment XML writes it (members, segments=, key=, replicate=, pins) or in catalog form.

    Member *i* is the *i*-th ``<node>``, or the one with ``member="i"``.  A
    ``<map>`` with a ``position`` is a planned map's partition column, one
    without ``key`` a planned map kept whole (home), one with only ``key`` a pin.
    """
    box = el.get("box")
    where = f"partition of box {box!r}"
    nodes = _children(el, "node")
    members = [_int(n, "member") for n in nodes]
    if any(m is not None for m in members):
        if sorted(m if m is not None else -1 for m in members) != list(range(len(nodes))):
            raise DecodeError(f"{where}: <node member> numbers the members 0 to {len(nodes) - 1}, each once "
                              f"(or leave member out everywhere: member i is the i-th <node>)")
        nodes = [n for _, n in sorted(zip(members, nodes), key=lambda pair: pair[0])]
    pins: dict[str, str] = {}
    maps: dict[str, tuple[str, str | None, int | None]] = {}
    elements = _children(el, "map")
    for i, m in enumerate(elements, start=1):
        at = _child_origin(origin, m, f"/map[{i}]" if len(elements) > 1 else "/map")
        name, key, position = m.get("name"), m.get("key"), _int(m, "position")
        if position is None and key is not None:  # a pin, as the user wrote it
            if name in pins:
                raise DecodeError(f"{where} pins map {name!r} twice", at)
            pins[name] = key
            continue
        if position is not None and (key is None or position < 0):
            raise DecodeError(f"{where}: <map name={name!r} position={position}> needs key= (the name of "
                              f"key column {position}) and a position of 0 or more", at)
        if name in maps:
            raise DecodeError(f"{where} places map {name!r} twice", at)
        maps[name] = (name, key, position)
    segments = []
    elements = _children(el, "segment")
    for i, seg in enumerate(elements, start=1):
        at = _child_origin(origin, seg, f"/segment[{i}]" if len(elements) > 1 else "/segment")
        sid, slots = _int(seg, "id"), (seg.get("slots") or "").split()
        try:
            lo, hi = (int(x) for x in slots)
        except ValueError:
            raise DecodeError(f"segment {sid} of box {box!r}: slots={seg.get('slots')!r}: give its first slot "
                              f"and one past its last, two whole numbers (slots=\"0 512\")", at) from None
        segments.append(SegmentPlacement(sid, lo, hi, _int(seg, "member")))
    replicate = (el.get("replicate") or "").split()
    if len(set(replicate)) != len(replicate):
        twice = next(name for name in replicate if replicate.count(name) > 1)
        raise DecodeError(f"{where} replicates map {twice!r} twice (replicate={el.get('replicate')!r})", origin)
    clash = next((name for name in replicate if name in pins or name in maps), None)
    if clash is not None:
        raise DecodeError(f"{where} both replicates map {clash!r} and places it with a <map> element: a "
                          f"replicated map has no partition key; drop one", origin)
    layout = _int(el, "layout")
    epoch_ms = _int(el, "epoch-ms")
    return Partition(
        box, tuple(n.get("endpoint") for n in nodes), tuple(segments), _int(el, "segments"), el.get("key"),
        tuple(pins.items()), tuple(maps.values()), (1 if segments else 0) if layout is None else layout,
        100 if epoch_ms is None else epoch_ms, el.get("id") or "", origin, _int(el, "members"),
        _int(el, "coordinators"), tuple(replicate))


_DECODERS: dict[str, Callable[[etree._Element, Origin], Any]] = {
    "schema": _schema,
    "type": _type,
    "input": lambda el, o: Input(el.get("stream"), el.get("schema"), el.get("node"), o),
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
        tuple(n.get("endpoint") for n in _children(el, "node")), o),
    "publish": lambda el, o: Publication(el.get("stream"), el.get("node") or el.get("endpoint"),
                                         el.get("client"), o),
    "subscribe": lambda el, o: Subscription(el.get("stream"), el.get("endpoint") or "", el.get("gap"), o,
                                            el.get("on-slow"), el.get("name")),
    "client": lambda el, o: Client(el.get("endpoint") or "", el.get("prefix"), o),
    "global": lambda el, o: GlobalComponent(el.get("endpoint"), o),
    "partition": _partition,
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
    return replace(obj, app=app) if app and isinstance(obj, NAMED_BY_APP) else obj


# -- encoding ---------------------------------------------------------------


def _set(el: etree._Element, **attrs: object) -> etree._Element:
    for name, value in attrs.items():
        if value is not None:
            el.set(name.rstrip("_"), str(value))
    return el


def _sub(parent: etree._Element, tag: str, **attrs: object) -> etree._Element:
    return _set(etree.SubElement(parent, tag), **attrs)


def _add_params(el: etree._Element, params: tuple[tuple[str, str], ...]) -> None:
    for name, value in params:
        _sub(el, "parameter", name=name, value=value)


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
            el = _set(etree.Element("schema"), name=obj.name)
            for f in obj.fields:
                _sub(el, "field", name=f.name, type=f.declared_type, size=f.size)
        case TypeAlias():
            el = _set(etree.Element("type"), name=obj.name, array=obj.array, size=obj.size)
        case Input():
            el = _set(etree.Element("input"), stream=obj.stream, schema=obj.schema, node=node)
        case Output():
            el = _set(etree.Element("output"), stream=obj.stream, schema=obj.schema, node=node)
        case Box():
            el = _set(etree.Element("box"), name=obj.name, type=obj.type, node=node, **dict(obj.attrs))
            for port in obj.inputs:
                _sub(el, "in", stream=port.stream, connection_point_view=port.view, **dict(port.attrs))
            for stream in obj.outputs:
                _sub(el, "out", stream=stream)
            _add_params(el, obj.params)
            for table in obj.access:
                _sub(el, "access", table=table)
        case Table():
            el = _set(etree.Element("table"), name=obj.name, schema=obj.schema, stream=obj.stream,
                      node=node)
            for key in obj.keys:
                _sub(el, "key", field=key)
            for index in obj.indexes:
                _sub(el, "index", field=index)
            _add_params(el, obj.params)
        case Query():
            el = _set(etree.Element("query"), name=obj.name,
                      boxes=" ".join(obj.boxes) or None, tables=" ".join(obj.tables) or None,
                      **dict(obj.attrs))
        case ConnectionPointView():
            el = _set(etree.Element("connection_point_view"), name=obj.name, stream=obj.stream)
            if obj.range is not None:
                _sub(el, "range", start=obj.range[0], end=obj.range[1])
            else:
                _sub(el, "size", value=obj.size)
            if obj.order_field:
                _sub(el, "order", field=obj.order_field)
            if obj.radius is not None:
                _sub(el, "radius", value=obj.radius)
            _add_params(el, obj.params)
        case Node():
            el = _set(etree.Element("node"), endpoint=obj.endpoint)
        case Region():
            el = _set(etree.Element("region"), node=obj.node or None, endpoint=obj.endpoint, name=obj.name)
        case ReplicaSet():
            el = _set(etree.Element("replica_set"), name=obj.name, query=" ".join(obj.queries) or None)
            for endpoint in obj.nodes:
                _sub(el, "node", endpoint=endpoint)
        case Publication():
            el = _set(etree.Element("publish"), stream=obj.stream, node=obj.node, client=obj.client)
        case Subscription():
            el = _set(etree.Element("subscribe"), stream=obj.stream, endpoint=obj.endpoint, gap=obj.gap,
                      **{"on-slow": obj.on_slow}, name=obj.name)
        case Client():
            el = _set(etree.Element("client"), endpoint=obj.endpoint, prefix=obj.prefix)
        case GlobalComponent():
            el = _set(etree.Element("global"), endpoint=obj.endpoint)
        case Partition():
            el = _set(etree.Element("partition"), box=obj.box, layout=obj.layout or None,
                      **{"epoch-ms": obj.epoch_ms}, id=obj.id or None, key=obj.key, segments=obj.count,
                      members=obj.members, coordinators=obj.coordinators,
                      replicate=" ".join(obj.replicate) or None)
            for member, endpoint in enumerate(obj.nodes):
                _sub(el, "node", endpoint=endpoint, member=member)
            for name, key in obj.pins:
                _sub(el, "map", name=name, key=key)
            for name, key, position in obj.maps:
                _sub(el, "map", name=name, key=key, position=position)
            for seg in obj.segments:
                _sub(el, "segment", id=seg.id, slots=f"{seg.lo} {seg.hi}", member=seg.member)
        case _:
            raise TypeError(f"cannot encode {type(obj).__name__}")
    return el


def to_text(obj: Any) -> str:
    """Catalog form (what the stores keep): with placement and the declaring application."""
    return etree.tostring(encode(obj, with_app=True), encoding="unicode")
