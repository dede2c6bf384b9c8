"""What an optimizer sends, and the checks it makes first: pure functions of names and a catalog.

:class:`~boreas.client.optimizer.Optimizer` builds its update XML and its
layout changes here, and decides here whether a change makes sense against
the catalog it reads (the Head's, the Head's own in the web UI, a region's),
so every caller refuses the same changes with the same reasons, before any
node is asked.  Nothing here talks to the network.

>>> move_document("box1", "localhost:15002")
'<update origin="optimizer"><move node="localhost:15002" box="box1"/></update>'
>>> print(connect_document("box1", 0, filter_box("warm", "Source", "time % 3 <> 0"), upstream=True))
<update origin="optimizer"><connect box="box1" port="0" upstream="1"><box name="warm" type="filter"><in stream="Source"/><out stream="warm"/><parameter name="expression.0" value="time % 3 &lt;&gt; 0"/></box></connect></update>
>>> disconnect_document("warm", origin="localhost:16000")
'<update origin="localhost:16000"><disconnect stream="warm"/></update>'
>>> segment_name("q3/2"), move_change("q3/2", "n:1"), move_change("q3", "n:1")
(('q3', 2), {'move': [2, 'n:1']}, {'move_all': 'n:1'})
"""

from __future__ import annotations

from typing import Any

from boreas.catalog.diagnostics import ValidationFailed
from boreas.catalog.documents import Disconnect, Move, read_document
from boreas.catalog.model import Box, Catalog
from boreas.catalog.updates import update_document
from boreas.catalog.xmlsafe import parse_xml
from lxml import etree

from .errors import OptimizerFailed

#: The ``origin`` of an optimizer's update XML (a regional component puts its endpoint instead).
ORIGIN = "optimizer"


# -- update XML for the node that holds the box ------------------------------------


def move_document(box: str, target: str, origin: str = ORIGIN) -> str:
    """``<update><move box=BOX node=TARGET/></update>``, for the node that holds ``box``."""
    return update_document([Move(target, box=box)], origin=origin)


def disconnect_document(stream: str, origin: str = ORIGIN) -> str:
    """``<update><disconnect stream=S/></update>``, for the node of the box that reads ``stream``."""
    return update_document([Disconnect(stream)], origin=origin)


def filter_box(name: str, stream: str, expression: str) -> str:
    """A filter box ``name`` reading ``stream`` and writing a stream also called ``name``.

    >>> filter_box("warm", "Valid", "celsius > 0.0")
    '<box name="warm" type="filter"><in stream="Valid"/><out stream="warm"/><parameter name="expression.0" value="celsius &gt; 0.0"/></box>'
    """
    box = etree.Element("box", name=name, type="filter")
    etree.SubElement(box, "in", stream=stream)
    etree.SubElement(box, "out", stream=name)
    etree.SubElement(box, "parameter", name="expression.0", value=expression)
    return etree.tostring(box, encoding="unicode")


def connect_document(sink: str, port: int, box_xml: str, upstream: bool = False, source: str = "box XML",
                     origin: str = ORIGIN) -> str:
    """``<update><connect box=SINK port=N [upstream=1]><box .../></connect></update>``.

    ``box_xml`` is a ``<box>`` element, or a document holding exactly one
    (``source`` names it in errors).

    >>> connect_document("b", 0, "<borealis/>")
    Traceback (most recent call last):
    ...
    boreas.client.errors.OptimizerFailed: box XML: expected one <box> to insert, found 0
    """
    try:
        root = parse_xml(box_xml, source).getroot()
    except ValidationFailed as exc:
        raise OptimizerFailed(str(exc), 422, [d.as_dict() for d in exc.diagnostics]) from None
    boxes = [root] if root.tag == "box" else list(root.iter("box"))
    if len(boxes) != 1:
        raise OptimizerFailed(f"{source}: expected one <box> to insert, found {len(boxes)}", 422)
    update = etree.Element("update", origin=origin)
    connect = etree.SubElement(update, "connect", box=sink, port=str(port))
    if upstream:
        connect.set("upstream", "1")
    connect.append(boxes[0])
    return etree.tostring(update, encoding="unicode")


def inserted_box(document: str) -> Box:
    """The box a connect document inserts (it is read as the node will read it)."""
    try:
        return read_document(document.encode(), "connect").items[0].box
    except ValidationFailed as exc:
        raise OptimizerFailed(str(exc), 422, [d.as_dict() for d in exc.diagnostics]) from None


# -- layout changes for a partitioned box's leader -----------------------------------


def segment_name(text: str) -> tuple[str, int]:
    """``q3/2`` as ``("q3", 2)``."""
    box, _, seg = text.rpartition("/")
    if not box or not seg.isdigit():
        raise OptimizerFailed(f"{text!r} does not name a segment: write BOX/SEGMENT, e.g. q3/2", 422)
    return box, int(seg)


def move_change(name: str, target: str) -> dict[str, Any]:
    """The layout change moving segment ``BOX/SEG`` (``{"move": [SEG, TARGET]}``) or every segment of ``BOX``
    (``{"move_all": TARGET}``) to ``target``."""
    if "/" in name:
        return {"move": [segment_name(name)[1], target]}
    return {"move_all": target}


def rebalance_change(answers: list[dict[str, Any]]) -> dict[str, Any]:
    """``{"rebalance": entries per segment, "guests": members}`` from every member's ``GET /segments/{box}``.

    A member a node hosts as a guest after a failover (every hosted member
    but its own) is to be emptied.

    >>> rebalance_change([{"member": 0, "segments": {"0": {"m": 3}, "1": {"m": 1}}},
    ...                   {"member": 1, "own": 0, "segments": {"2": {"m": 4, "n": 1}}}])
    {'rebalance': {'0': 3, '1': 1, '2': 5}, 'guests': [1]}
    """
    counts: dict[str, int] = {}
    guests: set[int] = set()
    for answer in answers:
        for sid, per_map in answer.get("segments", {}).items():
            counts[sid] = counts.get(sid, 0) + sum(per_map.values())
        if answer.get("own", answer.get("member")) != answer.get("member"):
            guests.add(int(answer["member"]))
    return {"rebalance": counts, "guests": sorted(guests)}


# -- checks against the catalog the optimizer reads -----------------------------------


def the_box(catalog: Catalog, name: str, where: str = "the catalog") -> Box:
    """The box ``name``; 404 when the catalog (``where``: which one, e.g. a region's) has none."""
    box = catalog.boxes.get(name)
    if box is None:
        raise OptimizerFailed(f"no box {name!r} in {where} (version {catalog.version})", 404)
    return box


def node_of(catalog: Catalog, name: str, where: str = "the catalog") -> str:
    """The node running box ``name`` (not a partitioned one); 404 unknown, 409 not deployed."""
    node = the_box(catalog, name, where).node
    if not node:
        raise OptimizerFailed(f"box {name!r} is not deployed on any node")
    return node


def check_member(catalog: Catalog, box: str, target: str) -> None:
    """A partitioned box's segments move only onto its members (joining ones included).

    A member may also be named by its number (``"1"``: after a failover one
    node hosts two members) or by ``":PORT"``; the leader resolves those.
    """
    part = catalog.partitions[box]
    if target not in part.nodes and not target.isdigit() and not target.startswith(":"):
        raise OptimizerFailed(f"{target} is not a member of partitioned box {box!r} "
                              f"(members: {', '.join(part.nodes)})")


def in_stream(catalog: Catalog, sink: str, port: int, where: str = "the catalog") -> str:
    """The stream in port ``port`` of box ``sink`` reads; 422 when it has no such port."""
    box = the_box(catalog, sink, where)
    if not 0 <= port < len(box.inputs):
        raise OptimizerFailed(f"box {sink!r} has in ports 0-{len(box.inputs) - 1}, not {port}", 422)
    return box.inputs[port].stream


def check_insertion(catalog: Catalog, sink: str, port: int, inserted: Box) -> None:
    """The sink has in port ``port``, and the inserted box's name and out streams are free."""
    in_stream(catalog, sink, port)
    written = {s for b in catalog.boxes.values() for s in b.outputs}
    for name in (inserted.name, *inserted.outputs):
        if name in catalog.boxes or name in catalog.inputs or name in written:
            raise OptimizerFailed(f"{name!r} is taken: name the filter (and the stream it writes) otherwise")


def connect_added(catalog: Catalog, stream: str) -> tuple[Box, Box]:
    """The box reading ``stream`` and the box writing it, when a connect could have added it.

    Such a stream has exactly one box writing it and one reading it, on a node.
    """
    sinks = [b for b in catalog.boxes.values() if any(p.stream == stream for p in b.inputs)]
    producer = next((b for b in catalog.boxes.values() if stream in b.outputs), None)
    if len(sinks) != 1 or producer is None or not sinks[0].node:
        raise OptimizerFailed(f"stream {stream!r} is not a stream a connect added (one box writes it, "
                              "one box reads it)")
    return sinks[0], producer
