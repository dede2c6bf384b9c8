"""The slice of the global catalog that one node holds in its local catalog.

Paper section 2.1: the Head breaks the topology up and sends each node only
what it needs to run its boxes without ever asking anyone: the boxes placed
on it (and their queries, tables and views), the schema of every stream its
boxes read or write, where each of those streams comes from and goes to.
A stream that crosses into the node is an ``<input>`` of the slice, with a
``<publish client=UPSTREAM>`` naming the node (or client) that sends it; a
stream that leaves the node is an ``<output>`` with one ``<subscribe>`` per
downstream node and per subscribed client.  So a node's local catalog is a
self-contained topology, and a node knows its neighbours by endpoint.

The slice is a pure function of the global catalog, which is what lets the
Head bring a node that restarted empty, or missed updates while it was down,
back to exactly what it should hold: compare and send the difference.

>>> from boreas.catalog import read_file, plan_submission
>>> docs = [read_file("examples/xml/sensor_chain.xml"), read_file("examples/xml/sensor_chain_deploy.xml")]
>>> catalog = plan_submission(Catalog(), docs).catalog
>>> part = node_slice(catalog, "localhost:15001")
>>> sorted(part.boxes), sorted(part.inputs), sorted(part.outputs)
(['to_fahrenheit'], ['Valid'], ['Converted'])
>>> [(p.stream, p.client) for p in part.publications.values()]
[('Valid', 'localhost:15000')]
>>> [(s.stream, s.endpoint) for s in part.subscriptions.values()]
[('Converted', 'localhost:15002')]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from .boxtypes import BoxTypeRegistry
from .model import (
    Catalog,
    Input,
    Node,
    Output,
    Publication,
    Query,
    Region,
    Schema,
    Subscription,
)
from .slice_topology import ScannedTopology, Topology, entries
from .table_params import ACCESSING
from .validate import stream_schemas


class SliceMaker:
    """Slices of one catalog version, asking a :class:`~.slice_topology.Topology` where things are.

    Without one, the whole catalog is scanned once for all nodes
    (:class:`~.slice_topology.ScannedTopology`); the Head passes an
    :class:`~.slice_index.IndexedTopology` and slices only the nodes a
    change reaches.
    """

    def __init__(self, catalog: Catalog, schemas: Mapping[str, Schema] | None = None,
                 registry: BoxTypeRegistry | None = None, topology: Topology | None = None):
        self.catalog = catalog
        self.schemas = schemas if schemas is not None else stream_schemas(catalog, registry)
        self.topology = topology if topology is not None else ScannedTopology(catalog)

    def nodes(self) -> set[str]:
        """Every node that holds something: declared, or placed on, or published into."""
        return self.topology.holders()

    def entries(self, stream: str) -> set[str]:
        """Where an input stream enters the network: a partition's members, its publish nodes, else its consumers."""
        return entries(self.topology, stream)

    def slice(self, node: str, ledger: dict[str, set[str]] | None = None) -> Catalog:
        """``node``'s slice; ``ledger`` (if given) is filled with the neighbour nodes each stream brought in,
        what :func:`~.slice_index.patch_slice` needs to patch this slice after a change."""
        cat = self.catalog
        part = Catalog(version=cat.version)
        topology = self.topology
        for name in topology.boxes_on(node):
            part.boxes[name] = cat.boxes[name]
        for name in topology.partitions_with(node):  # a member: the box runs here too
            part.boxes[name] = replace(cat.boxes[name], node=node)
            part.partitions[name] = cat.partitions[name]
        for name in topology.tables_on(node):
            table = cat.tables[name]
            part.tables[table.name] = table
        accessed = {t for b in part.boxes.values() if b.type in ACCESSING for t in b.access if t in cat.tables}
        for name in sorted(accessed - set(part.tables)):
            part.tables[name] = cat.tables[name]  # a table's rows live where its boxes run (catalog/table_params.py)
        produced = {s for b in part.boxes.values() for s in b.outputs}
        consumed = {p.stream for b in part.boxes.values() for p in b.inputs}
        entering = topology.inputs_entering(node)
        ledger = {} if ledger is None else ledger
        for stream in sorted((consumed - produced) | entering):
            self.arrive(part, node, stream, ledger)
        for stream in sorted(produced | entering):
            self.leave(part, node, stream, ledger)
        for name in topology.queries_naming(set(part.boxes), set(part.tables)):
            self.place_query(part, name)
        self.finish(part, node, ledger)
        return part

    def place_query(self, part: Catalog, name: str) -> None:
        """The query ``name`` as ``part`` holds it: only its members there (or not at all)."""
        part.queries.pop(name, None)
        query = self.catalog.queries.get(name)
        if query is None:
            return
        boxes = tuple(b for b in query.boxes if b in part.boxes)
        tables = tuple(t for t in query.tables if t in part.tables)
        if boxes or tables:
            part.queries[query.name] = Query(query.name, boxes, tables, query.attrs, query.origin)

    def finish(self, part: Catalog, node: str, ledger: Mapping[str, set[str]]) -> None:
        """What a slice derives from its boxes, tables and streams (made anew, each cheap per element held):
        its nodes, schemas, ``<type>`` aliases, views, regions, replica sets and clients."""
        self._nodes(part, node, ledger)
        part.schemas = {}
        for table in part.tables.values():
            self._schema(part, table.schema)
        self._stream_schemas(part, None)
        part.views = {}
        self._views(part, part.boxes, None)
        self._rest(part, node)

    def refinish(self, part: Catalog, node: str, ledger: Mapping[str, set[str]], streams: set[str],
                 used: set[str], boxes: set[str]) -> None:
        """:meth:`finish` for a slice patched from the previous one (:func:`~.slice_index.patch_slice`;
        ``part`` still holds that slice's schemas and views): only ``streams`` (every stream the change
        touches on this node; ``used`` those a box here reads or writes) and the changed ``boxes`` can
        add a schema or a view, and one the slice held is looked for among its other elements only when
        none of those uses it.  So a move costs what it touches, not the 5,000 boxes a node holds at
        100,000 (issue 37).  Equal to :meth:`finish` (tests/test_incremental_slices.py)."""
        held_schemas, held_views = part.schemas, part.views
        self._nodes(part, node, ledger)
        part.schemas = {}
        for table in part.tables.values():
            self._schema(part, table.schema)
        for stream in used | (streams & (set(part.inputs) | set(part.outputs))):
            schema = self.schemas.get(stream)
            if schema is not None:
                part.schemas.setdefault(schema.name, schema)
        for stream in streams:
            for declared in (part.inputs.get(stream), part.outputs.get(stream)):
                if declared is not None:
                    self._schema(part, declared.schema)
        if not held_schemas.keys() <= part.schemas.keys():  # (a held one no touched stream uses: look)
            self._stream_schemas(part, set(held_schemas) - set(part.schemas))
        part.views = {}
        self._views(part, [part.boxes[name] for name in boxes if name in part.boxes], None)
        if not held_views.keys() <= part.views.keys():
            self._views(part, part.boxes, set(held_views) - set(part.views))
        self._rest(part, node)

    def _nodes(self, part: Catalog, node: str, ledger: Mapping[str, set[str]]) -> None:
        cat = self.catalog
        part.nodes = {node: cat.nodes.get(node) or Node(node)}
        for partition in part.partitions.values():
            for member in partition.nodes:
                part.nodes.setdefault(member, cat.nodes.get(member) or Node(member))
        for neighbours in ledger.values():
            for neighbour in neighbours:
                part.nodes.setdefault(neighbour, Node(neighbour))

    def _stream_schemas(self, part: Catalog, wanted: set[str] | None) -> None:
        """The schemas of the slice's streams and declared inputs and outputs; with ``wanted``, only those
        named there, stopping once each is found."""
        def found(schema: Schema | None) -> bool:
            if schema is not None and (wanted is None or schema.name in wanted):
                part.schemas.setdefault(schema.name, schema)
                if wanted is not None:
                    wanted.discard(schema.name)
                    return not wanted
            return False

        streams = ({s for b in part.boxes.values() for s in b.outputs}
                   | {p.stream for b in part.boxes.values() for p in b.inputs}) if wanted is None else (
            s for b in part.boxes.values() for s in (*b.outputs, *(p.stream for p in b.inputs)))
        for stream in streams:
            if found(self.schemas.get(stream)):
                break
        else:
            for stream in [*part.inputs, *part.outputs]:
                if found(self.schemas.get(stream)):
                    break
        for declared in [*part.inputs.values(), *part.outputs.values()]:
            if wanted is None or declared.schema in wanted or declared.schema in part.schemas:
                self._schema(part, declared.schema)

    def _views(self, part: Catalog, boxes, wanted: set[str] | None) -> None:
        """The views the boxes' in ports read; with ``wanted``, only those, stopping once each is found.
        ``boxes``: a slice's boxes (any mapping: a large one is a :class:`~.layered.Layered`, not a dict)
        or the boxes themselves."""
        views = self.catalog.views
        for box in boxes.values() if isinstance(boxes, Mapping) else boxes:
            for port in box.inputs:
                if port.view and port.view in views and (wanted is None or port.view in wanted):
                    part.views[port.view] = views[port.view]
                    if wanted is not None:
                        wanted.discard(port.view)
                        if not wanted:
                            return

    def _rest(self, part: Catalog, node: str) -> None:
        cat = self.catalog
        part.types = {}
        for schema in list(part.schemas.values()):  # the <type> aliases its array fields name
            for f in schema.fields:
                if f.array is not None and f.array in cat.types:
                    part.types[f.array] = cat.types[f.array]
        part.regions = {region.key: region_endpoint(cat, region) for region in cat.regions.values()
                        if region.node == node}
        part.replica_sets = {rs.name: rs for rs in cat.replica_sets.values() if node in rs.nodes}
        endpoints = {s.endpoint for s in part.subscriptions.values()}
        endpoints |= {p.client for p in part.publications.values() if p.client}
        part.clients = {e: cat.clients[e] for e in endpoints if e in cat.clients}

    def _schema(self, part: Catalog, name: str | None) -> None:
        if name and name in self.catalog.schemas:
            part.schemas[name] = self.catalog.schemas[name]

    def arrive(self, part: Catalog, node: str, stream: str, ledger: dict[str, set[str]]) -> None:
        """``stream`` enters this node: from a publisher, or from the node that produces it."""
        schema = self.schemas.get(stream)
        declared = self.catalog.inputs.get(stream)
        schema_name = schema.name if schema else (declared.schema if declared else None)
        if schema_name is None:
            return  # unknowable schema: the topology would not have validated
        part.inputs[stream] = Input(stream, schema_name, node, watermark=declared.watermark if declared else None,
                                    idle_timeout=declared.idle_timeout if declared else None)
        upstream = self.topology.producer_node(stream)
        if upstream is None and stream in self.catalog.inputs:  # a published input stream
            entries = self.topology.entry_nodes(stream)
            if node in entries:
                for pub in self.topology.publications_of(stream):
                    if pub.node == node:
                        part.publications[pub.key] = pub
                return
            upstream = min(entries) if entries else None  # forwarded by the node it enters at
        if upstream and upstream != node:
            ledger.setdefault(stream, set()).add(upstream)
            pub = Publication(stream, node, upstream)
            part.publications[pub.key] = pub

    def leave(self, part: Catalog, node: str, stream: str, ledger: dict[str, set[str]]) -> None:
        """``stream`` is produced (or enters) here: send it to remote consumers and subscribers."""
        topology = self.topology
        targets = sorted(topology.consumer_nodes(stream) - {node})
        subs = topology.subscriptions_of(stream)
        if stream in self.catalog.inputs:  # (a box's stream has no entry nodes nor members: not asked)
            entry_nodes = topology.entry_nodes(stream)
            if node not in entry_nodes:
                targets = []  # entered here only because it is consumed here
            members = topology.member_entries(stream)
            if members is not None:
                # it enters at every member, each getting its publishers' share: each member forwards
                # its share to consumers that are not members
                targets = [t for t in targets if t not in members]
            elif entry_nodes:
                # several entry nodes: the first one forwards to consumers elsewhere
                if node != min(entry_nodes):
                    targets = []
        if not targets and not subs and stream not in self.catalog.outputs:
            return
        declared = self.catalog.outputs.get(stream)
        schema = self.schemas.get(stream)
        if declared is not None:
            part.outputs[stream] = Output(stream, declared.schema or (schema.name if schema else None), node)
        elif schema is not None and stream not in part.inputs:
            part.outputs[stream] = Output(stream, schema.name, node)
        for target in targets:
            ledger.setdefault(stream, set()).add(target)
            sub = Subscription(stream, target)
            part.subscriptions[sub.key] = sub
        for sub in subs:
            part.subscriptions[sub.key] = sub


def node_slice(catalog: Catalog, node: str, registry: BoxTypeRegistry | None = None) -> Catalog:
    """What ``node`` holds in its local catalog when the global catalog is ``catalog``."""
    return SliceMaker(catalog, registry=registry).slice(node)


def node_slices(catalog: Catalog, schemas: Mapping[str, Schema] | None = None,
                registry: BoxTypeRegistry | None = None) -> dict[str, Catalog]:
    """Every node's slice of one catalog version."""
    maker = SliceMaker(catalog, schemas, registry)
    return {node: maker.slice(node) for node in sorted(maker.nodes())}


def region_endpoint(catalog: Catalog, membership: Region) -> Region:
    """The membership with the endpoint its node reflects to: its own, or the region's registration.

    A membership whose region has no component registered yet keeps no
    endpoint; the node reflects nowhere for it until one registers.
    """
    if membership.endpoint:
        return membership
    registration = catalog.regions.get(f"{membership.region}|")
    if registration is None or not registration.endpoint:
        return membership
    return Region(membership.region, membership.node, registration.endpoint, membership.region, membership.origin)


def stream_route(catalog: Catalog, stream: str, registry: BoxTypeRegistry | None = None) -> dict | None:
    """Where a stream enters and where it is produced, with its schema (``GET /streams/NAME``).

    ``entries`` are the nodes a publisher sends to (an input stream's publish
    nodes, else every node that consumes it); ``producer`` is the node whose
    box writes it (None for an input stream: its entry nodes have it).  A
    stream read by a partitioned box enters at its members (``entries`` by
    member number) and ``"pick": "member"`` says a producer sends to one;
    ``"coordinators"``, once a layout change listed them, the member numbers
    it picks among by rendezvous hashing (docs/cumulus.md §6.5).
    """
    maker = SliceMaker(catalog, registry=registry)
    if not maker.topology.produced(stream):
        return None
    schema = maker.schemas.get(stream)
    is_input = stream in catalog.inputs
    entries = sorted(maker.entries(stream)) if is_input else []
    members = maker.topology.member_entries(stream) if is_input else None
    producer = maker.topology.producer_node(stream)
    listed = _coordinator_list(catalog, stream) if members else None
    return {
        "stream": stream,
        "input": is_input,
        "entries": list(members) if members else entries,
        **({"pick": "member"} if members else {}),
        **({"coordinators": list(listed)} if listed else {}),
        "producer": producer,
        "schema": None if schema is None else {
            "name": schema.name,
            "fields": [[f.name, f.declared_type, f.size] for f in schema.fields],
            **({"nullable": [f.name for f in schema.fields if f.nullable]} if any(f.nullable for f in schema.fields)
               else {}),
        },
    }


def _coordinator_list(catalog: Catalog, stream: str) -> tuple[int, ...] | None:
    """The committed coordinator list of the partitioned box whose members ``stream`` enters at, if it has one."""
    for name, partition in catalog.partitions.items():
        box = catalog.boxes.get(name)
        if box is not None and partition.nodes and any(port.stream == stream for port in box.inputs):
            return partition.coordinator_list
    return None
