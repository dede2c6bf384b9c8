"""Random valid Borealis topologies for property tests: a hypothesis strategy.

:func:`topologies` builds random *valid* (application XML, deployment XML)
pairs, spelling endpoints, names and XML headers in the many ways real files
do.  Several test modules draw from it (``test_properties.py``,
``test_properties_broken_input.py``, ``test_replicate*.py``), so it lives here
rather than in one of them.

Their example counts and hypothesis settings: ``support/property_scale.py``.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field

from boreas.catalog import Catalog, FieldType, plan_submission, read_document
from hypothesis import strategies as st
from lxml import etree

_TAIL = string.ascii_letters + string.digits + "_"


def _names(prefix: str, n_min: int, n_max: int, tail: str = _TAIL) -> st.SearchStrategy[list[str]]:
    """Unique XML-safe identifiers, all starting with ``prefix`` (which keeps kinds apart
    and keeps field names clear of SQL keywords in expressions)."""
    one = st.text(tail, min_size=1, max_size=6).map(lambda s: prefix + s)
    return st.lists(one, min_size=n_min, max_size=n_max, unique=True)


#: Names that are not used in expressions may also carry '.' and '-'.
_LOOSE = _TAIL + ".-"

#: Endpoints for <input node=...> / <output node=...> (not necessarily deployed nodes).
_LOOSE_ENDPOINTS = [":15000", "host7:15100", "LOCALHOST:15200", "15300", "[::1]:15400"]


@dataclass
class Stream:
    name: str
    fields: list[str]              # field names in scope for expressions
    schema: str | None             # the named schema it carries (None: a derived map schema)


@dataclass
class Topology:
    app: str
    dep: str
    names: list[str] = field(default_factory=list)  # every name used, for mutations


def _endpoint_spellings(host: str, port: int) -> list[str]:
    """Different ways Borealis XML writes the same node endpoint."""
    if host == "localhost":
        out = [f":{port}", f"localhost:{port}", f"LocalHost:{port}", str(port)]
        if port == 15000:
            out.append("localhost")
    else:
        out = [f"{host}:{port}", f"{host.upper()}:{port}"]
        if port == 15000:
            out.append(host)
    return out


def _doc_text(root: etree._Element, draw) -> str:
    etree.indent(root, space="  ")
    text = etree.tostring(root, encoding="unicode")
    head = draw(st.sampled_from(["", '<?xml version="1.0"?>\n',
                                 '<?xml version="1.0"?>\n<!DOCTYPE borealis SYSTEM "borealis.dtd">\n']))
    return head + text + "\n"


def _queue_attrs(draw, el: etree._Element, fields: list[str]) -> None:
    if draw(st.integers(0, 5)) == 0:
        el.set("update_queue", draw(st.sampled_from(["0", "1"])))
        el.set("queue_type", str(draw(st.integers(0, 8))))
        if fields:
            el.set("key", draw(st.sampled_from(fields)))


@st.composite
def topologies(draw) -> Topology:
    used: list[str] = []

    # -- schemas ------------------------------------------------------------
    schema_names = draw(_names("S", 1, 3, _LOOSE))
    schemas: dict[str, list[tuple[str, FieldType, int | None]]] = {}
    for name in schema_names:
        fnames = draw(_names("fld_", 1, 4))
        fields = []
        for fname in fnames:
            ftype = draw(st.sampled_from(list(FieldType)))
            size = draw(st.integers(1, 64)) if ftype == FieldType.STRING else None
            fields.append((fname, ftype, size))
        schemas[name] = fields
        used += [name, *fnames]

    # -- streams: inputs, then a DAG of boxes over earlier streams -----------
    stream_pool = iter(draw(_names("s_", 40, 40, _LOOSE)))
    box_names = draw(_names("b_", 1, 8, _LOOSE))
    streams: list[Stream] = []
    inputs: list[Stream] = []
    for _ in range(draw(st.integers(1, 3))):
        schema = draw(st.sampled_from(schema_names))
        s = Stream(next(stream_pool), [f for f, _, _ in schemas[schema]], schema)
        streams.append(s)
        inputs.append(s)

    views: list[etree._Element] = []
    boxes: dict[str, etree._Element] = {}
    box_outputs: dict[str, list[Stream]] = {}
    consumed: set[str] = set()

    def in_port(box_el: etree._Element, s: Stream) -> None:
        port = etree.SubElement(box_el, "in", stream=s.name)
        consumed.add(s.name)
        if draw(st.integers(0, 6)) == 0:  # read it through a connection point view
            vname = f"v{len(views)}_" + draw(st.text(_LOOSE, max_size=3))
            view = etree.Element("connection_point_view", name=vname, stream=s.name)
            if draw(st.booleans()):
                etree.SubElement(view, "size", value=str(draw(st.integers(0, 1000))))
            else:
                etree.SubElement(view, "range", start=str(draw(st.integers(0, 9))),
                                 end=str(draw(st.integers(10, 99))))
            if draw(st.booleans()):
                etree.SubElement(view, "order", field=draw(st.sampled_from(s.fields)))
            views.append(view)
            port.set("connection_point_view", view.get("name"))
        _queue_attrs(draw, port, s.fields)

    for bname in box_names:
        kinds = ["filter", "map"]
        groups: dict[str, list[Stream]] = {}
        for s in streams:
            if s.schema is not None:
                groups.setdefault(s.schema, []).append(s)
        if groups:
            kinds.append("union")
        kind = draw(st.sampled_from(kinds))
        el = etree.Element("box", name=bname, type=kind)
        _queue_attrs(draw, el, [])
        params: list[tuple[str, str]] = []
        if kind == "filter":
            src = draw(st.sampled_from(streams))
            in_port(el, src)
            n_pred = draw(st.integers(1, 2))
            for i in range(n_pred):
                fname = draw(st.sampled_from(src.fields))
                op = draw(st.sampled_from([">", "<", ">=", "<=", "=", "==", "!=", "<>"]))
                const = draw(st.one_of(st.integers(-1000, 1000).map(str),
                                       st.sampled_from(["3.5", "-0.25", "'abc'", "''"])))
                params.append((f"expression.{i}", f"{fname} {op} {const}"))
            false_port = draw(st.booleans())
            if false_port:
                params.append(("pass-on-false-port", "1"))
            outs = [Stream(next(stream_pool), src.fields, src.schema)
                    for _ in range(n_pred + (1 if false_port else 0))]
        elif kind == "map":
            src = draw(st.sampled_from(streams))
            in_port(el, src)
            out_fields = draw(_names("o_", 1, 3))
            for i, oname in enumerate(out_fields):
                a = draw(st.sampled_from(src.fields))
                b = draw(st.sampled_from(src.fields))
                expr = draw(st.sampled_from([a, f"{a} + 1", f"{a} * 2.5", f"{a} - {b}",
                                             f"({a} + {b}) / 2", f"-{a}"]))
                params.append((f"expression.{i}", expr))
                params.append((f"output-field-name.{i}", oname))
            used.extend(out_fields)
            outs = [Stream(next(stream_pool), out_fields, None)]
        else:
            schema = draw(st.sampled_from(sorted(groups)))
            members = draw(st.lists(st.sampled_from(groups[schema]), min_size=1, max_size=3,
                                    unique_by=lambda s: s.name))
            for s in members:
                in_port(el, s)
            outs = [Stream(next(stream_pool), members[0].fields, schema)
                    for _ in range(draw(st.integers(1, 2)))]
        for s in outs:
            etree.SubElement(el, "out", stream=s.name)
        params = draw(st.permutations(params))
        for name, value in params:
            etree.SubElement(el, "parameter", name=name, value=value)
        boxes[bname] = el
        box_outputs[bname] = outs
        streams.extend(outs)
    used += box_names + [s.name for s in streams] + [v.get("name") for v in views]

    # -- tables (optional): accessed by a filter, maybe placed ----------------
    tables: dict[str, etree._Element] = {}
    for tname in draw(_names("t_", 0, 2, _LOOSE)):
        schema = draw(st.sampled_from(schema_names))
        t = etree.Element("table", name=tname, schema=schema)
        if draw(st.booleans()):
            t.set("stream", draw(st.sampled_from(streams)).name)
        etree.SubElement(t, "key", field=draw(st.sampled_from(schemas[schema]))[0])
        if draw(st.booleans()):
            etree.SubElement(t, "index", field=draw(st.sampled_from(schemas[schema]))[0])
        if draw(st.booleans()):
            etree.SubElement(t, "parameter", name="truncate", value="0")
        filters = [b for b in boxes.values() if b.get("type") == "filter"]
        if filters and draw(st.booleans()):
            etree.SubElement(draw(st.sampled_from(filters)), "access", table=tname)
        tables[tname] = t
        used.append(tname)

    # -- outputs on some terminal streams ------------------------------------
    outputs: list[etree._Element] = []
    terminal = [s for outs in box_outputs.values() for s in outs if s.name not in consumed]
    for s in draw(st.lists(st.sampled_from(terminal), unique_by=lambda s: s.name)) if terminal else []:
        out = etree.Element("output", stream=s.name)
        if s.schema is not None and draw(st.booleans()):
            out.set("schema", s.schema)  # a filter's or union's out stream carries it as is
        if draw(st.integers(0, 3)) == 0:
            out.set("node", draw(st.sampled_from(_LOOSE_ENDPOINTS)))
        outputs.append(out)

    # -- queries group some boxes (and tables) --------------------------------
    query_names = draw(_names("q_", 0, 3, _LOOSE))
    members: dict[str, list[str]] = {q: [] for q in query_names}
    owner: dict[str, str | None] = {}
    for name in [*box_names, *tables]:
        q = draw(st.sampled_from([None, *query_names]))
        owner[name] = q
        if q is not None:
            members[q].append(name)
    used += query_names  # a query may stay empty

    # -- the application document ----------------------------------------------
    top: list[etree._Element] = []
    for name, fields in schemas.items():
        el = etree.Element("schema", name=name)
        for fname, ftype, size in fields:
            f = etree.SubElement(el, "field", name=fname, type=ftype.value)
            if size is not None:
                f.set("size", str(size))
        top.append(el)
    for s in inputs:
        el = etree.Element("input", stream=s.name, schema=s.schema)
        if draw(st.integers(0, 3)) == 0:
            el.set("node", draw(st.sampled_from(_LOOSE_ENDPOINTS)))
        top.append(el)
    top += outputs + views
    if draw(st.integers(0, 3)) == 0:
        alias = etree.Element("type", name=draw(_names("T", 1, 1, _LOOSE))[0], array="byte")
        if draw(st.booleans()):
            alias.set("size", str(draw(st.integers(1, 99))))
        top.append(alias)
    query_els = {}
    for q in query_names:
        qel = etree.Element("query", name=q)
        _queue_attrs(draw, qel, [])
        query_els[q] = qel
    for name, el in [*boxes.items(), *tables.items()]:
        if owner[name] is None:
            top.append(el)
        else:
            query_els[owner[name]].append(el)
    # Declarations other than boxes and tables may also sit inside a query.
    for el in list(top):
        if query_els and el.tag in ("schema", "input", "output") and draw(st.integers(0, 4)) == 0:
            top.remove(el)
            draw(st.sampled_from(sorted(query_els.items())))[1].append(el)
    top += list(query_els.values())
    app = etree.Element("borealis")
    for el in draw(st.permutations(top)):
        app.append(el)

    # -- nodes and placement ------------------------------------------------------
    hosts = draw(st.lists(st.tuples(st.sampled_from(["localhost", "host7", "node-b", "10.0.0.3", "[::1]"]),
                                    st.sampled_from([15000, 15100, 15200, 15300, 16000])),
                          min_size=1, max_size=4, unique=True))
    spellings = [_endpoint_spellings(h, p) for h, p in hosts]
    placed: list[list[str]] = [[] for _ in hosts]
    units: list[str] = []
    for q in query_names:
        if members[q] and draw(st.booleans()):
            units.append(q)  # the whole query on one node
        else:
            units += members[q]  # or each member by its own name
    units += [n for n in [*box_names, *tables] if owner[n] is None]
    for unit in units:
        if unit in tables and draw(st.booleans()):
            continue  # tables need not be placed
        placed[draw(st.integers(0, len(hosts) - 1))].append(unit)
    deploy_items: list[etree._Element] = []
    for i, names in enumerate(placed):
        names = draw(st.permutations(names))
        cut = draw(st.integers(0, len(names)))  # maybe split over two <node> elements
        parts = [names[:cut], names[cut:]] if 0 < cut < len(names) else [names]
        for part in parts:
            node = etree.Element("node", endpoint=draw(st.sampled_from(spellings[i])))
            if part or draw(st.booleans()):
                node.set("query", " ".join(part))
            deploy_items.append(node)

    # -- regions -------------------------------------------------------------------
    for i in range(len(hosts)):
        for region in draw(st.lists(st.sampled_from(["default", ":30000", "reg1:30100", "west"]),
                                    unique=True, max_size=2)):
            el = etree.Element("region", node=draw(st.sampled_from(spellings[i])))
            if region == "west":
                el.set("name", region)
            elif region != "default":
                el.set("endpoint", region)
            deploy_items.append(el)

    # -- replica sets ----------------------------------------------------------------
    if query_names and draw(st.integers(0, 3)) == 0:
        rs = etree.Element("replica_set", name=draw(_names("rs_", 1, 1, _LOOSE))[0])
        rs.set("query", " ".join(draw(st.lists(st.sampled_from(query_names), min_size=1,
                                               unique=True))))
        for i in draw(st.lists(st.integers(0, len(hosts) - 1), min_size=1, unique=True)):
            etree.SubElement(rs, "node", endpoint=draw(st.sampled_from(spellings[i])))
        deploy_items.append(rs)

    # -- publications, subscriptions and clients --------------------------------------
    publishes: list[etree._Element] = []
    for s in inputs:
        if draw(st.booleans()):
            pub = etree.Element("publish", stream=s.name)
            where = draw(st.sampled_from([None, "node", "endpoint"]))
            if where:
                pub.set(where, draw(st.sampled_from(draw(st.sampled_from(spellings)))))
            publishes.append(pub)
    clients = draw(st.lists(st.sampled_from([(":25000", "localhost:25000"),
                                             ("25100", "localhost:25100"),
                                             ("mon3:25200", "mon3:25200")]),
                            max_size=2, unique=True))
    client_els = []
    for spelled, _ in clients:
        cl = etree.Element("client", endpoint=spelled)
        if draw(st.booleans()):
            cl.set("prefix", draw(_names("P", 1, 1))[0])
        client_els.append(cl)
    sub_endpoints = [(None, "localhost:25000"), (":25000", "localhost:25000"),
                     ("localhost:25300", "localhost:25300"), ("mon3", "mon3:25000")]
    seen_subs: set[tuple[str, str]] = set()

    def subscribe(s: Stream) -> None:
        choices = [(None, spelled, key) for spelled, key in sub_endpoints]
        choices += [(i, None, key) for i, (_, key) in enumerate(clients)]
        where, spelled, key = draw(st.sampled_from(choices))
        if (s.name, key) in seen_subs:
            return
        seen_subs.add((s.name, key))
        sub = etree.Element("subscribe", stream=s.name)
        if spelled is not None:
            sub.set("endpoint", spelled)
        if draw(st.integers(0, 3)) == 0:
            sub.set("gap", str(draw(st.integers(0, 100))))
        (client_els[where] if where is not None else deploy_items).append(sub)

    def client_subscription(i: int) -> None:
        s = draw(st.sampled_from(streams))
        if (s.name, clients[i][1]) not in seen_subs:
            seen_subs.add((s.name, clients[i][1]))
            client_els[i].append(etree.Element("subscribe", stream=s.name))

    for i in range(len(clients)):
        if draw(st.booleans()):
            client_subscription(i)
    for s in draw(st.lists(st.sampled_from(streams), max_size=4)):
        subscribe(s)
    for pub in publishes:
        if client_els and draw(st.booleans()):
            draw(st.sampled_from(client_els)).append(pub)
        else:
            deploy_items.append(pub)
    for cl in client_els:
        if not len(cl):  # the XSD wants a child; it may be a publish only
            cl.append(etree.Element("subscribe", stream=draw(st.sampled_from(streams)).name))
    deploy_items += client_els
    dep = etree.Element("deploy")
    for el in draw(st.permutations(deploy_items)):
        dep.append(el)
    return Topology(_doc_text(app, draw), _doc_text(dep, draw), used)


def plan_pair(app: str, dep: str, base: Catalog | None = None):
    return plan_submission(base or Catalog(),
                           [read_document(app, "app.xml"), read_document(dep, "deploy.xml")])


def plan_problems(plan) -> str:
    return "\n".join(str(p) for p in plan.problems)
