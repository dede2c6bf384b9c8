"""Whole-catalog reads (issue 37, cheap reads): ``GET /catalog`` and a global component's full copy
come from one serialization per catalog version (head/catalog_copy.py); watches still get deltas."""

from __future__ import annotations

import asyncio

import aiohttp
from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.document_model import Update
from boreas.catalog.replicate import apply_update, catalog_items
from boreas.catalog.updates import update_document
from boreas.head import catalog_copy
from boreas.head.catalog_copy import CatalogCopies
from boreas.head.service import HeadService
from boreas.regional.global_component import GlobalComponent

NODES = ("localhost:15001", "localhost:15002")


def application(boxes: int, threshold: float = 0.5) -> tuple[str, str]:
    """A chain of filters per node, as bench/catalog.py makes them (smaller)."""
    app = ['<borealis><schema name="R"><field name="sensor" type="int"/><field name="value" type="double"/>'
           '</schema>']
    placement: dict[str, list[str]] = {n: [] for n in NODES}
    for c in range(len(NODES)):
        app.append(f'<input stream="in{c}" schema="R"/>')
    for i in range(boxes):
        c = i % len(NODES)
        upstream = f"in{c}" if i < len(NODES) else f"b{i - len(NODES)}_t"
        app.append(f'<box name="b{i}" type="filter"><in stream="{upstream}"/><out stream="b{i}_t"/>'
                   f'<parameter name="expression.0" value="value &gt; {threshold + i}"/></box>')
        placement[NODES[c]].append(f"b{i}")
    app += [f'<output stream="b{i}_t" schema="R"/>' for i in range(boxes - len(NODES), boxes)]
    dep = ["<deploy>", *(f'<node endpoint="{n}" query="{" ".join(b)}"/>' for n, b in placement.items()), "</deploy>"]
    return "".join(app) + "</borealis>", "".join(dep)


def planned(boxes: int) -> Catalog:
    app, dep = application(boxes)
    plan = plan_submission(Catalog(), [read_document(app, "app.xml"), read_document(dep, "dep.xml")])
    assert plan.ok, plan.problems
    plan.catalog.version = 3
    return plan.catalog


def modify(catalog: Catalog, box: str, value: str) -> Catalog:
    doc = read_document(f'<update><modify box="{box}"><parameter name="expression.0" value="{value}"/>'
                        f'</modify></update>', "u.xml")
    return apply_update(catalog, doc.items, catalog.version + 1)


def test_the_documents_are_what_update_document_makes_of_the_whole_catalog(monkeypatch):
    monkeypatch.setattr(catalog_copy, "COPY_CHUNK", 7)  # several parts
    catalog = planned(20)
    current = {"catalog": catalog}
    copies = CatalogCopies(lambda: current["catalog"], "head")
    items = catalog_items(catalog)
    assert copies.document() == update_document(items, version=3, origin="head").encode()
    copy = copies.full_copy()
    chunks = [items[i:i + 7] for i in range(0, len(items), 7)]
    assert copy.version == 3 and copy.documents == tuple(
        update_document(chunk, version=3, origin="head", copy="v3", part=i, parts=len(chunks))
        for i, chunk in enumerate(chunks, start=1))
    assert len(copy.documents) == len(chunks) > 1

    # A new version encodes only the element that changed; the rest is reused.
    encoded = copies.encoded
    current["catalog"] = changed = modify(catalog, "b5", "value &gt; 99.5")
    assert copies.document() == update_document(catalog_items(changed), version=4, origin="head").encode()
    assert copies.encoded == encoded + 1 and copies.full_copy().version == 4
    assert b"value &gt; 99.5" in copies.document()

    # An empty catalog is one empty document, a copy of one part.
    current["catalog"] = Catalog()
    assert copies.document() == b'<update version="0" origin="head"/>'
    assert copies.full_copy().documents == ('<update version="0" origin="head" copy="v0" part="1" parts="1"/>',)


async def test_the_head_reads_and_copies_each_version_once():
    head = HeadService("memory://", token=None, snapshot_interval=0, nodes=NODES)
    await head.start("127.0.0.1", 0)
    url = f"http://{head.server.endpoint}/catalog"
    copies, changes = [], []
    component = GlobalComponent(f"http://{head.server.endpoint}", None, on_copy=copies.append,
                                on_change=lambda version, items, catalog: changes.append(version))
    try:
        app, dep = application(30)
        submission = await head.submit([read_document(app, "app.xml"), read_document(dep, "dep.xml")])
        await head.caught_up(submission.version)
        async with aiohttp.ClientSession() as session:
            async with session.get(url) as first, session.get(url) as second:
                one, two = await first.read(), await second.read()
            assert one == two  # one version, one serialization
            doc = read_document(one, "GET /catalog")
            assert isinstance(doc, Update) and doc.version == submission.version
            assert apply_update(Catalog(), doc.items, doc.version) == head.catalog

            # The component gets the whole catalog first ...
            await component.start("127.0.0.1", 0)
            await asyncio.wait_for(component.ready.wait(), 10)
            assert len(copies) == 1 and component.catalog == head.catalog

            # ... then every change, one delta per version; GET /catalog shows the new version.
            versions = []
            for value in ("value &gt; 7.5", "value &gt; 8.5"):
                change = read_document(f'<borealis><modify box="b3"><parameter name="expression.0" '
                                       f'value="{value}"/></modify></borealis>', "m.xml")
                versions.append((await head.submit([change])).version)
                await head.caught_up(versions[-1])
            async with session.get(url) as third:
                newer = read_document(await third.read(), "GET /catalog")
        assert isinstance(newer, Update) and newer.version == versions[-1] > doc.version
        assert apply_update(Catalog(), newer.items, newer.version).boxes["b3"].param("expression.0") == "value > 8.5"
        for _ in range(200):
            if component.catalog.version == head.catalog.version:
                break
            await asyncio.sleep(0.02)
        assert component.catalog == head.catalog and len(copies) == 1
        assert changes[-2:] == versions and changes == list(range(changes[0], versions[-1] + 1))
    finally:
        await component.close()
        await head.close()


def _outcome(check, *args) -> str:
    """What an optimizer's check says: its answer, or the reason it refuses."""
    from boreas.client.errors import OptimizerFailed

    try:
        return repr(check(*args))
    except OptimizerFailed as exc:
        return f"refused: {exc}"


def test_an_optimizer_decides_the_same_on_the_part_of_the_catalog_a_change_is_about():
    """``GET /catalog?box=&stream=`` (head/catalog_part.py): every check a move, connect or disconnect makes gives
    the answer it gives on the whole catalog, read back the same way (update XML, the schema gate skipped)."""
    from boreas.catalog.index import CatalogIndex
    from boreas.client.optimizer_updates import (
        check_insertion,
        connect_added,
        connect_document,
        filter_box,
        in_stream,
        inserted_box,
        node_of,
        the_box,
    )
    from boreas.head.catalog_part import catalog_part

    whole = planned(40)
    index = CatalogIndex.build(whole)

    def read(catalog: Catalog) -> Catalog:  # as HeadView.catalog reads the Head's answer
        doc = read_document(update_document(catalog_items(catalog), version=catalog.version, origin="head"),
                            "the Head's catalog", check_schema=False)
        return apply_update(Catalog(), doc.items, doc.version or 0)

    full = read(whole)
    for box in ("b0", "b39", "nosuch"):  # move
        part = read(catalog_part(index, [box], []))
        assert _outcome(the_box, part, box) == _outcome(the_box, full, box)
        assert _outcome(node_of, part, box) == _outcome(node_of, full, box)
        assert part.version == full.version
    for sink, port, name in (("b5", 0, "f"), ("b5", 1, "f"), ("b5", 0, "b7"), ("b5", 0, "b3_t"),
                             ("b5", 0, "in1"), ("nosuch", 0, "f")):  # connect: the ports, and names taken
        inserted = inserted_box(connect_document(sink, port, filter_box(name, "x", "value > 1.0")))
        taken = [inserted.name, *inserted.outputs]
        part = read(catalog_part(index, [sink, *taken], taken))
        assert _outcome(check_insertion, part, sink, port, inserted) == \
            _outcome(check_insertion, full, sink, port, inserted), (sink, port, name)
        assert _outcome(in_stream, part, sink, port) == _outcome(in_stream, full, sink, port)
    for stream in ("b3_t", "b39_t", "in0", "nosuch"):  # disconnect
        part = read(catalog_part(index, [], [stream]))
        assert _outcome(connect_added, part, stream) == _outcome(connect_added, full, stream), stream
    assert len(read(catalog_part(index, ["b0"], [])).boxes) == 1  # the part is the part
