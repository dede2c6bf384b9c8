"""Random edits of a small catalog, for property tests of what is computed incrementally.

Each edit is what one kind of change does to the global catalog: a
submission declares or deletes boxes, streams, views, tables, queries,
partitions, schemas and ``<type>`` aliases, a deployment places boxes and
publishes or subscribes, a move re-places a box, a connect inserts a filter
before a box's in port and a disconnect takes it out again.  Names come
from a small universe, so edits collide: two producers of a stream, a box
reading what nothing produces, a cycle, a query naming a deleted box.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import replace

from boreas.catalog import layered, model
from boreas.catalog.diagnostics import Origin
from boreas.catalog.model import (
    Box,
    Catalog,
    Client,
    ConnectionPointView,
    Field,
    FieldType,
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
from hypothesis import strategies as st

STREAMS = [f"s{i}" for i in range(5)]
BOXES = [f"b{i}" for i in range(5)]
NODES = ["n0", "n1", "n2"]
SCHEMAS = ["S", "T", "U"]
EXPRESSIONS = ["a > 1", "a > 1", "b > 1.5", "b > 1.5", "zz > 1", "a >", "a + 1", "a * b"]

Edit = Callable[[Catalog], None]


def chain() -> Catalog:
    """Where sequences start: input s0 through filters b0, b1, b2 (s1, s2, s3), each reading both fields,
    so that a schema changed upstream reaches every box downstream."""
    catalog = Catalog()
    catalog.schemas["S"] = _schema("S")
    catalog.inputs["s0"] = Input("s0", "S", origin=_origin())
    for n in NODES:
        catalog.nodes[n] = Node(n, _origin())
    for i, expr in enumerate(["a > 1", "b > 1.5", "a * b > 2"]):
        catalog.boxes[f"b{i}"] = Box(f"b{i}", "filter", (InPort(f"s{i}"),), (f"s{i + 1}",),
                                     (("expression.0", expr),), node=NODES[i % 3], origin=_origin())
    catalog.outputs["s3"] = Output("s3", "S", origin=_origin())
    for stream in STREAMS[:4]:  # views a box's port may read (put_box): a slice holds those its boxes read
        catalog.views[f"w{stream[1:]}"] = ConnectionPointView(f"w{stream[1:]}", stream, size=2, origin=_origin())
    catalog.subscriptions[Subscription("s3", "client:9000").key] = Subscription("s3", "client:9000")
    return catalog
_counter = iter(range(10**9))


def _origin() -> Origin:
    """A fresh origin, so every diagnostic says which element it is about."""
    return Origin("edit.xml", next(_counter))


def _schema(name: str) -> Schema:
    if name == "S":
        return Schema("S", (Field("a", FieldType.INT), Field("b", FieldType.DOUBLE)), _origin())
    if name == "T":
        return Schema("T", (Field("a", FieldType.INT),), _origin())
    return Schema(name, (Field("a", FieldType.INT), Field("img", None, array="image")), _origin())


@st.composite
def put_box(draw: st.DrawFn) -> Edit:
    name = draw(st.sampled_from(BOXES))
    kind = draw(st.sampled_from(["filter", "filter", "filter", "map", "union", "fliter"]))
    ins = draw(st.lists(st.sampled_from(STREAMS), min_size=1, max_size=2))
    view = draw(st.sampled_from([None, None, None, "w"]))  # (a port reading its stream's view: chain()'s w0-w3)
    outs = draw(st.lists(st.sampled_from(STREAMS), min_size=1, max_size=2))
    expr = draw(st.sampled_from(EXPRESSIONS))
    node = draw(st.sampled_from([None, *NODES, "n9"]))
    params: tuple[tuple[str, str], ...] = (("expression.0", expr),)
    if kind == "map":
        params += (("output-field-name.0", "m"),)
    if kind == "filter" and len(outs) == 2:
        params += (("pass-on-false-port", "1"),)
    box = Box(name, kind, tuple(InPort(s, view and f"w{s[1:]}" if i == 0 else None) for i, s in enumerate(ins)), tuple(outs), params,
              node=node, origin=_origin())
    return lambda c: c.boxes.__setitem__(name, box)


def _pop(kind: str, key: str) -> Edit:
    return lambda c: getattr(c, kind).pop(key, None)


@st.composite
def move(draw: st.DrawFn) -> Edit:
    name, node = draw(st.sampled_from(BOXES)), draw(st.sampled_from(NODES))

    def edit(c: Catalog) -> None:
        if name in c.boxes:
            c.boxes[name] = replace(c.boxes[name], node=node)
    return edit


@st.composite
def connect(draw: st.DrawFn) -> Edit:
    """A filter inserted before a box's in port (as ``head/learning.py`` commits a node's connect)."""
    sink, port, n = draw(st.sampled_from(BOXES)), draw(st.integers(0, 1)), draw(st.integers(0, 3))

    def edit(c: Catalog) -> None:
        box = c.boxes.get(sink)
        if box is None or port >= len(box.inputs) or f"f{n}" in c.boxes:
            return
        stream = box.inputs[port].stream
        c.boxes[f"f{n}"] = Box(f"f{n}", "filter", (InPort(stream),), (f"x{n}",), (("expression.0", "a > 2"),),
                               node=box.node, origin=_origin())
        c.boxes[sink] = box.rewired(port, f"x{n}")
    return edit


@st.composite
def disconnect(draw: st.DrawFn) -> Edit:
    n = draw(st.integers(0, 3))

    def edit(c: Catalog) -> None:
        box = c.boxes.get(f"f{n}")
        sinks = [(b, i) for b in c.boxes.values() for i, p in enumerate(b.inputs) if p.stream == f"x{n}"]
        if box is None or len(sinks) != 1:
            return
        sink, port = sinks[0]
        del c.boxes[box.name]
        c.boxes[sink.name] = sink.rewired(port, box.inputs[0].stream)
    return edit


def _put(kind: str, key: str, obj: object) -> Edit:
    return lambda c: getattr(c, kind).__setitem__(key, obj)


def _put_pub(stream: str, node: str) -> Edit:
    pub = Publication(stream, node, origin=_origin())
    return _put("publications", pub.key, pub)


def _put_sub(stream: str) -> Edit:
    sub = Subscription(stream, "client:9000", origin=_origin())
    return _put("subscriptions", sub.key, sub)


streams, boxes, nodes, schemas = (st.sampled_from(x) for x in (STREAMS, BOXES, NODES, SCHEMAS))

#: Submissions of boxes, and what nodes do to them (moves, connects, disconnects).
BOX_EDITS = st.one_of(
    put_box(), move(), connect(), disconnect(),
    boxes.map(lambda b: _pop("boxes", b)),
)
#: Streams, schemas, views, tables, queries and partitions declared and deleted.
STREAM_EDITS = st.one_of(
    st.builds(lambda s, sc: _put("inputs", s, Input(s, sc, origin=_origin())), streams, schemas),
    streams.map(lambda s: _pop("inputs", s)),
    st.builds(lambda s, sc: _put("outputs", s, Output(s, sc, origin=_origin())), streams,
              st.sampled_from([None, "S", "T", "V"])),
    streams.map(lambda s: _pop("outputs", s)),
    schemas.map(lambda s: _put("schemas", s, _schema(s))),
    schemas.map(lambda s: _pop("schemas", s)),
    st.just(_put("types", "image", TypeAlias("image", "byte(0...3)", origin=_origin()))),
    st.just(_pop("types", "image")),
    st.builds(lambda s: _put("views", "v", ConnectionPointView("v", s, origin=_origin())), streams),
    st.just(_pop("views", "v")),
    st.builds(lambda s, sc: _put("tables", "t", Table("t", sc, s, origin=_origin())), streams, schemas),
    st.just(_pop("tables", "t")),
    st.builds(lambda bs: _put("queries", "q", Query("q", tuple(bs), origin=_origin())),
              st.lists(boxes, max_size=3)),
    st.builds(lambda b, ns: _put("partitions", b, Partition(b, tuple(ns), origin=_origin())), boxes,
              st.lists(nodes, max_size=2)),
    boxes.map(lambda b: _pop("partitions", b)),
)
#: Deployment: nodes, publications, subscriptions, regions, replica sets, clients.
DEPLOY_EDITS = st.one_of(
    st.builds(_put_pub, streams, nodes),
    st.builds(_put_sub, streams),
    streams.map(lambda s: _pop("subscriptions", Subscription(s, "client:9000").key)),
    nodes.map(lambda n: _put("nodes", n, Node(n, _origin()))),
    nodes.map(lambda n: _pop("nodes", n)),
    nodes.map(lambda n: _put("regions", f"r|{n}", Region("r", n, origin=_origin()))),
    nodes.map(lambda n: _pop("regions", f"r|{n}")),
    st.sampled_from(["reg:1", "reg:2"]).map(lambda e: _put("regions", "r|", Region("r", "", e, origin=_origin()))),
    st.builds(lambda ns: _put("replica_sets", "rs", ReplicaSet("rs", ("q",), tuple(ns), origin=_origin())),
              st.lists(nodes, max_size=2)),
    st.just(_put("clients", "client:9000", Client("client:9000", origin=_origin()))),
    st.just(_pop("clients", "client:9000")),
)
EDITS = st.one_of(BOX_EDITS, STREAM_EDITS, DEPLOY_EDITS)


@contextlib.contextmanager
def layered_everywhere() -> Iterator[None]:
    """Every Catalog dict copied while inside is shared as a ``Layered`` version (``model.LAYER_FROM`` 0),
    and every reference set changed is a ``LayeredSet`` (``layered.SET_FROM`` 0), so a property test's
    small catalogs take the path a Head's 100,000-box catalog takes."""
    was = model.LAYER_FROM, layered.SET_FROM
    model.LAYER_FROM = layered.SET_FROM = 0
    try:
        yield
    finally:
        model.LAYER_FROM, layered.SET_FROM = was
