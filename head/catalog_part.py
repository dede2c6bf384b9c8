"""The part of the catalog one change is about: ``GET /catalog?box=B&stream=S``.

An optimizer decides against the catalog and, once the node answered, waits
until the change shows (client/optimizer.py).  Reading the whole catalog for
that costs what the catalog weighs (25 MB at 100,000 boxes), on every look;
what a move, a connect or a disconnect checks is a few boxes and the boxes
around a few streams.  So the Head answers a read naming boxes and streams
with a catalog holding only: the named boxes (and their partitions), every
box that writes or reads a named stream (from the index, not a scan), a
named stream's ``<input>``/``<output>``, and the nodes those boxes run on.
The checks the optimizer makes on it give the same answers as on the whole
catalog, because they look at nothing else (:mod:`boreas.client.optimizer_updates`).

>>> from boreas.catalog.index import CatalogIndex
>>> from boreas.catalog.model import Box, Catalog, InPort, Node
>>> cat = Catalog(version=3, nodes={"n:1": Node("n:1")},
...               boxes={"a": Box("a", "filter", (InPort("in"),), ("s",), node="n:1"),
...                      "b": Box("b", "filter", (InPort("s"),), ("t",)), "c": Box("c", "filter", (InPort("x"),), ("y",))})
>>> part = catalog_part(CatalogIndex.build(cat), boxes=["c", "nosuch"], streams=["s"])
>>> sorted(part.boxes), sorted(part.nodes), part.version
(['a', 'b', 'c'], ['n:1'], 3)
"""

from __future__ import annotations

from collections.abc import Iterable

from boreas.catalog.index import CatalogIndex
from boreas.catalog.model import Catalog


def catalog_part(index: CatalogIndex, boxes: Iterable[str], streams: Iterable[str]) -> Catalog:
    """The named boxes, the boxes around the named streams, and what a check of them looks at."""
    whole = index.catalog
    part = Catalog(version=whole.version)
    names = {b for b in boxes if b in whole.boxes}
    for stream in streams:
        for use in ("produces", "reads"):
            names |= {key for kind, key in index.refs.get((use, stream), ()) if kind == "boxes"}
        if stream in whole.inputs:
            part.inputs[stream] = whole.inputs[stream]
        if stream in whole.outputs:
            part.outputs[stream] = whole.outputs[stream]
    for name in sorted(names):
        box = part.boxes[name] = whole.boxes[name]
        nodes = [box.node] if box.node else []
        if name in whole.partitions:
            part.partitions[name] = whole.partitions[name]
            nodes += part.partitions[name].nodes
        for node in nodes:
            if node in whole.nodes:
                part.nodes[node] = whole.nodes[node]
    return part
