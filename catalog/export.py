"""A catalog written back out: application and deployment XML, and a summary.

Export is the inverse of a submission: applying the exported pair to an
empty catalog gives an equal catalog.  Boxes and tables that belong to a
query are written inside it; placement goes to the deployment as
``<node endpoint=... query=...>`` naming the boxes on each node, and a
partitioned box's as its ``<partition>`` in catalog form (layout kept).

>>> from boreas.catalog.model import Catalog, Node
>>> c = Catalog(); c.nodes["localhost:15000"] = Node("localhost:15000")
>>> print(export_deployment(c).strip())
<deploy>
  <node endpoint="localhost:15000" query=""/>
</deploy>
"""

from __future__ import annotations

from collections import Counter

from lxml import etree

from .model import Box, Catalog, Partition, Table
from .xmlcodec import encode
from .words import counted


def _doc(root: etree._Element) -> str:
    etree.indent(root, space="  ")
    return etree.tostring(root, encoding="unicode", pretty_print=True)


def export_application(catalog: Catalog) -> str:
    root = etree.Element("borealis")
    for collection in (catalog.schemas, catalog.types, catalog.inputs, catalog.outputs):
        for obj in collection.values():
            root.append(encode(obj))
    in_query: set[str] = set()
    for query in catalog.queries.values():
        el = encode(query)
        for attr in ("boxes", "tables"):
            el.attrib.pop(attr, None)
        members: list[Box | Table] = [catalog.boxes[b] for b in query.boxes if b in catalog.boxes]
        members += [catalog.tables[t] for t in query.tables if t in catalog.tables]
        for member in members:
            el.append(encode(member, with_node=False))
            in_query.add(member.name)
        root.append(el)
    for collection in (catalog.boxes, catalog.tables):
        for obj in collection.values():
            if obj.name not in in_query:
                root.append(encode(obj, with_node=False))
    for view in catalog.views.values():
        root.append(encode(view))
    return _doc(root)


def export_deployment(catalog: Catalog) -> str:
    root = etree.Element("deploy")
    placed: dict[str, list[str]] = {endpoint: [] for endpoint in catalog.nodes}
    for obj in [*catalog.boxes.values(), *catalog.tables.values()]:
        if obj.node is not None:
            placed.setdefault(obj.node, []).append(obj.name)
    for endpoint, names in placed.items():
        etree.SubElement(root, "node", endpoint=endpoint, query=" ".join(names))
    for part in catalog.partitions.values():  # the catalog form: applied, it keeps the layout
        root.append(encode(part))
    for rs in catalog.replica_sets.values():
        root.append(encode(rs))
    for region in catalog.regions.values():
        root.append(encode(region))
    by_client = {endpoint: encode(client) for endpoint, client in catalog.clients.items()}
    for pub in catalog.publications.values():
        el = encode(pub)
        parent = by_client.get(el.attrib.pop("client", ""), root)
        parent.append(el)
    for sub in catalog.subscriptions.values():
        parent = by_client.get(sub.endpoint, root)
        parent.append(encode(sub))
    for el in by_client.values():
        if len(el):
            root.append(el)
    return _doc(root)


def summary(catalog: Catalog) -> str:
    """A few lines a person reads: counts, nodes and what runs where."""
    producers = catalog.producers()
    lines = [
        f"catalog version {catalog.version}: {counted(len(catalog.boxes), 'box')}, "
        f"{counted(len(producers), 'stream')}, {counted(len(catalog.schemas), 'schema')}, "
        f"{counted(len(catalog.queries), 'query')}, {counted(len(catalog.nodes), 'node')}"
    ]
    types = Counter(box.type for box in catalog.boxes.values())
    if types:
        lines.append("box types: " + ", ".join(f"{t} {n}" for t, n in sorted(types.items())))
    for endpoint in sorted(catalog.nodes):
        boxes = [name for b in sorted(catalog.boxes_on(endpoint), key=lambda b: b.name)
                 for name in _placed(catalog, b.name, endpoint)]
        regions = sorted(r.region for r in catalog.regions.values() if r.node == endpoint)
        shown = ", ".join(boxes[:8]) + (f", ... ({len(boxes)} in all)" if len(boxes) > 8 else "")
        region_note = f"  [regions: {', '.join(regions)}]" if regions else ""
        lines.append(f"node {endpoint}: {shown or '(no boxes)'}{region_note}")
    for name, part in sorted(catalog.partitions.items()):
        lines.append(describe_partition(part))
    unplaced = sorted(b.name for b in catalog.boxes.values() if not catalog.placement(b.name))
    if unplaced:
        lines.append(f"not yet deployed: {', '.join(unplaced)}")
    if catalog.inputs:
        lines.append("inputs: " + ", ".join(sorted(catalog.inputs)))
    if catalog.outputs:
        lines.append("outputs: " + ", ".join(sorted(catalog.outputs)))
    for sub in sorted(catalog.subscriptions.values(), key=lambda s: s.key):
        lines.append(f"subscription: {sub.stream} -> {sub.endpoint}")
    for component in sorted(catalog.globals):
        lines.append(f"global component: {component}")
    return "\n".join(lines)


def describe_partition(part: Partition) -> str:
    """``partition q3: 3 members, 8 segments, layout 4, key o_orderkey`` (then ``, replicated m2`` for maps every
    member holds whole, and ``, joining NODE`` for nodes added that no layout has made members yet)."""
    members = len(part.layout_nodes)
    line = (f"partition {part.box}: {members} member{'s' if members != 1 else ''}, "
            f"{len(part.segments)} segment{'s' if len(part.segments) != 1 else ''}, layout {part.layout}")
    joining = f", joining {', '.join(part.joining)}" if part.joining else ""
    replicated = f", replicated {' '.join(part.replicate)}" if part.replicate else ""
    return line + (f", key {part.key}" if part.key else "") + replicated + joining


def _placed(catalog: Catalog, box: str, endpoint: str) -> list[str]:
    """How a node's box is listed: its name, or for a partitioned box the segments there (``q3/0, q3/3``)."""
    part = catalog.partitions.get(box)
    if part is None:
        return [box]
    members = set(part.member_of(endpoint))
    return [f"{box}/{s.id}" for s in sorted(part.segments, key=lambda s: s.id) if s.member in members] or [box]
