"""A full copy streamed to a global component (head/copy_sender.py, regional/copy_stream.py).

The component decodes the copy as its chunks arrive, with a parser target
instead of a tree; what it ends with must be exactly the Head's catalog and
exactly what the same document's items make when read whole by
``read_document`` (random catalogs, any chunking), and it must refuse what
the hardened parser refuses (DTDs, entities, limits) without reading a file.
The feed streams a copy to ``POST /copy``, holds the commits made meanwhile,
and sends an older component (no ``/copy``) the parts instead.
"""

from __future__ import annotations

import asyncio
import gc

import pytest
from aiohttp import web
from boreas.catalog.diagnostics import ValidationFailed
from boreas.catalog.documents import read_document
from boreas.catalog.model import Catalog
from boreas.catalog.replicate import apply_update, catalog_items, update_items
from boreas.catalog.updates import update_document
from boreas.catalog.xmlsafe import XmlLimits
from boreas.head.catalog_copy import CatalogCopies
from boreas.head.global_feed import GlobalFeed
from boreas.regional.copy_stream import CopyStream
from boreas.regional.full_copy import CopyAssembly, read_head_update
from boreas.regional.global_component import GlobalComponent
from boreas.wire.client import PeerClient, PeerRefused
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from support.catalog_pairs import catalogs
from support.property_scale import SETTINGS, examples
from test_catalog_reads import modify, planned


def _streamed(data: bytes, size: int, limits: XmlLimits | None = None) -> Catalog:
    stream = CopyStream(limits=limits) if limits else CopyStream()
    for start in range(0, len(data), size):
        stream.feed(data[start:start + size])
    return stream.close()


def _whole(catalog: Catalog) -> bytes:
    return update_document(catalog_items(catalog), version=catalog.version, origin="head").encode()


@settings(max_examples=examples(30), **SETTINGS)
@given(catalogs(), st.integers(1, 4096))
def test_a_streamed_copy_is_the_catalog_and_what_reading_it_whole_makes(catalog, size):
    catalog.version = 7
    data = _whole(catalog)
    got = _streamed(data, size)
    assert got == catalog and got.version == 7
    whole = apply_update(Catalog(), read_head_update(data).items, 7)
    assert got == whole
    for kind in ("boxes", "tables", "queries", "nodes"):  # (values compared, and the order kept)
        assert list(getattr(got, kind).items()) == list(getattr(whole, kind).items())


def test_the_heads_kept_serialization_streams_to_its_catalog():
    catalog = planned(50)
    built = CatalogCopies(lambda: catalog, "head").serialize()
    assert _streamed(built.document, 1000) == catalog


def test_box_spellings_are_read_as_any_update_documents_are():
    boxes = ('<box name="f" type="filter" node=":15001" update_queue="1"><in stream="a" key="k"/>'
             '<out stream="b"/><parameter name="expression.0">\n  x &gt; 1 </parameter>'
             '<access table="t"/></box>')
    text = f'<update version="3"><node endpoint=":15001"/>{boxes}<output stream="b" node=":15001"/></update>'
    got = _streamed(text.encode(), 5)
    assert got == apply_update(Catalog(), read_head_update(text).items, 3)
    box = got.boxes["f"]
    assert box.node == "localhost:15001" and box.params == (("expression.0", "x > 1"),)
    assert box.attrs == (("update_queue", "1"),) and box.inputs[0].attrs == (("key", "k"),)


@pytest.mark.parametrize(("text", "reason"), [
    ('<update version="3"><box name="f" type="filter"><parameter name="p" value="1"/>'
     '<parameter name="p" value="2"/></box></update>', "box 'f' sets parameter 'p' twice"),
    ('<update version="3"><box name="f g" type="filter"/></update>', "is not a name"),
    ('<update version="3"><box name="f" type="filter" node="#1"/></update>', "node position"),
    ('<update version="3"><box name="f" type="filter"><parameter name="p"/></box></update>', "has no value"),
    ('<update version="3"><box name="f" type="filter"><parameter name="p" value="1">2</parameter></box></update>',
     "has both value= and text"),
    ('<update version="3"><box name="f" type="filter"><parameter name="sql-file" value="/etc/passwd"/></box>'
     '</update>', "names a file"),
    ('<update version="3"><schema name="S"><field name="a" type="string"/></schema></update>', "needs a size"),
    ('<update version="3"><box name="f" type="filter"></update>', "malformed XML"),
    ('<borealis><box name="f" type="filter"/></borealis>', "expected update XML"),
    ('<update><node endpoint="a:1"/></update>', "needs version="),
])
def test_a_copy_that_does_not_decode_is_refused_saying_why(text, reason):
    for size in (1, len(text)):
        with pytest.raises(ValidationFailed) as failed:
            _streamed(text.encode(), size)
        assert reason in str(failed.value), str(failed.value)


@pytest.mark.parametrize("text", [
    '<!DOCTYPE update [<!ENTITY e SYSTEM "file:///etc/passwd">]><update version="3">'
    '<node endpoint="a:1" name="&e;"/></update>',
    '<!DOCTYPE update SYSTEM "http://127.0.0.1:9/update.dtd"><update version="3"/>',
    '<update version="3"><node endpoint="&e;"/></update>',
])
def test_a_copy_never_reads_a_dtd_or_an_entity(text):
    """Split anywhere (one byte a chunk too), a DTD is refused before anything is read, and an entity is never
    resolved."""
    for size in (1, 3, len(text)):
        with pytest.raises(ValidationFailed):
            _streamed(text.encode(), size)


@pytest.mark.parametrize(("limits", "what"), [
    (XmlLimits(max_bytes=100), "bytes"),
    (XmlLimits(max_elements=3), "limits"),
    (XmlLimits(max_depth=2), "limits"),
    (XmlLimits(max_attributes_per_element=1), "limits"),
])
def test_a_copy_over_the_limits_is_refused(limits, what):
    text = ('<update version="3"><box name="f" type="filter"><in stream="a"/><out stream="b"/></box>'
            '<node endpoint="a:1"/></update>').encode()
    with pytest.raises(ValidationFailed) as failed:
        _streamed(text, 16, limits)
    assert what in str(failed.value)


async def _component(**callbacks) -> tuple[GlobalComponent, str]:
    component = GlobalComponent("http://127.0.0.1:9", None, **callbacks)  # (not registered: the test feeds it)
    return component, await component.server.start("127.0.0.1", 0)


async def _close(component: GlobalComponent) -> None:
    await component.server.close()
    await component.peers.close()


async def test_the_component_refuses_a_broken_copy_and_keeps_its_catalog():
    component, endpoint = await _component()
    try:
        async with PeerClient(None) as peers:
            good = _whole(planned(3))
            assert (await peers.call("POST", f"http://{endpoint}/copy", data=good))["version"] == 3
            with pytest.raises(PeerRefused) as refused:
                await peers.call("POST", f"http://{endpoint}/copy", data=good[:-20])
            assert refused.value.status == 422
        assert component.catalog == planned(3) and component.counters["full_copies"] == 1
    finally:
        await _close(component)


async def test_a_feed_streams_the_copy_then_the_commits_made_while_it_was_sent():
    current = {"catalog": planned(20)}
    copies = CatalogCopies(lambda: current["catalog"], "head")
    changed = asyncio.Event()
    component, endpoint = await _component(on_copy=lambda catalog: changed.set(),
                                           on_change=lambda version, items, catalog: changed.set())
    async with PeerClient(None) as peers:
        feed = GlobalFeed(endpoint, peers, copies)
        try:
            feed.start()
            assert feed.held == []  # the copy is on its way: commits are held behind it
            for version, value in ((4, "99.5"), (5, "98.5")):
                before = current["catalog"]
                current["catalog"] = modify(before, "b5", f"value &gt; {value}")
                feed.changed(version, update_items(before, current["catalog"]))
                if version == 4:
                    await asyncio.wait_for(changed.wait(), 30)  # the copy (of version 3 or 4) is in
            while component.catalog.version != 5:
                changed.clear()
                await asyncio.wait_for(changed.wait(), 30)
            assert component.catalog == current["catalog"]
            assert component.counters["copies_streamed"] == 1 and component.counters["changes_applied"] >= 1
            assert feed.counters["copies_streamed"] == 1 and feed.held is None
        finally:
            feed.abort()
            await _close(component)


async def test_a_component_without_a_copy_endpoint_is_sent_the_parts(monkeypatch):
    """An older component (POST /update only) gets the copy in parts, then the changes, as before."""
    monkeypatch.setattr("boreas.head.catalog_copy.COPY_CHUNK", 7)
    current = {"catalog": planned(20)}
    copies = CatalogCopies(lambda: current["catalog"], "head")
    assembly, held = CopyAssembly(), {}
    updated = asyncio.Event()

    async def update(request: web.Request) -> web.Response:
        doc = read_head_update(await request.read())
        if doc.copy is not None:
            copy = assembly.take(doc)
            if copy is not None:
                held["catalog"] = copy
        else:
            held["catalog"] = apply_update(held["catalog"], doc.items, doc.version)
        updated.set()
        return web.json_response({"version": doc.version})

    app = web.Application()
    app.router.add_post("/update", update)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    endpoint = "127.0.0.1:%d" % runner.addresses[0][1]
    async with PeerClient(None) as peers:
        feed = GlobalFeed(endpoint, peers, copies)
        try:
            feed.start()
            before = current["catalog"]
            current["catalog"] = modify(before, "b5", "value &gt; 99.5")
            feed.changed(4, update_items(before, current["catalog"]))
            while held.get("catalog") is None or held["catalog"].version != 4:
                await asyncio.wait_for(updated.wait(), 30)
                updated.clear()
            assert held["catalog"] == current["catalog"]
            assert feed.counters["copies_streamed"] == 0 and feed.counters["full_copies"] == 1
        finally:
            feed.abort()
            await runner.cleanup()


def test_doc_reading_a_streamed_copy_matches_read_document_on_the_examples():
    """Every element kind the examples declare (queries, tables, views, regions, ...) decodes as in a whole
    read (the other elements go through the document reader, in document order)."""
    from pathlib import Path

    from boreas.catalog import plan_submission, read_file

    xml = Path(__file__).parents[1] / "examples" / "xml"
    docs = [read_file(xml / "sensor_chain.xml"), read_file(xml / "sensor_chain_deploy.xml"),
            read_file(xml / "sensor_chain_region_deploy.xml")]
    catalog = plan_submission(Catalog(), docs).catalog
    catalog.version = 5
    data = _whole(catalog)
    assert _streamed(data, 64) == catalog == apply_update(Catalog(), read_document(data, check_schema=False).items, 5)


async def test_a_feed_retries_the_copy_until_the_component_answers_then_sends_the_newest():
    """Nothing listens yet: the copy is retried (the commits meanwhile held), and the component that then starts
    at that endpoint gets a copy of the newest version and holds exactly the Head's catalog."""
    probe = web.AppRunner(web.Application())
    await probe.setup()
    site = web.TCPSite(probe, "127.0.0.1", 0)
    await site.start()
    port = probe.addresses[0][1]
    await probe.cleanup()  # (the port is free again: nothing answers there)
    current = {"catalog": planned(10)}
    copies = CatalogCopies(lambda: current["catalog"], "head")
    got = asyncio.Event()
    async with PeerClient(None) as peers:
        feed = GlobalFeed(f"127.0.0.1:{port}", peers, copies)
        component = GlobalComponent("http://127.0.0.1:9", None, on_copy=lambda catalog: got.set(),
                                    on_change=lambda version, items, catalog: got.set())
        try:
            feed.start()
            for _ in range(600):  # (at most 30 s) until the first attempt failed
                if feed.counters["failures"]:
                    break
                await asyncio.sleep(0.05)
            assert feed.counters["failures"] and feed.held is not None
            before = current["catalog"]
            current["catalog"] = modify(before, "b5", "value &gt; 97.5")
            feed.changed(4, update_items(before, current["catalog"]))
            await component.server.start("127.0.0.1", port)
            while component.catalog.version != 4:
                got.clear()
                await asyncio.wait_for(got.wait(), 30)
            assert component.catalog == current["catalog"] and feed.counters["copies_streamed"] == 1
        finally:
            feed.abort()
            await _close(component)


def test_an_exception_in_the_target_never_escapes_as_anything_but_a_refusal():
    """Whatever the Head's text holds, the stream answers with ValidationFailed or a catalog (a port without
    its stream decodes as the document reader decodes it)."""
    text = '<update version="3"><box name="f" type="filter"><in/><out/></box></update>'
    got = _streamed(text.encode(), 4)
    assert got == apply_update(Catalog(), read_head_update(text).items, 3)


@settings(max_examples=examples(60), **SETTINGS)
@given(st.data())
def test_a_damaged_copy_is_refused_or_read_never_anything_else(data):
    """Bytes cut, repeated or replaced anywhere in a copy: ValidationFailed or a catalog, no other exception."""
    text = _whole(planned(3))
    at = data.draw(st.integers(0, len(text) - 1))
    end = data.draw(st.integers(at, min(len(text), at + 40)))
    how = data.draw(st.sampled_from(["cut", "twice", "replace"]))
    junk = data.draw(st.binary(max_size=8)) if how == "replace" else b""
    damaged = {"cut": text[:at] + text[end:], "twice": text[:end] + text[at:],
               "replace": text[:at] + junk + text[end:]}[how]
    try:
        got = _streamed(damaged, data.draw(st.integers(1, 512)))
    except ValidationFailed:
        return
    assert isinstance(got, Catalog)


async def _slowly(data: bytes, pause: float, size: int = 4096):
    for start in range(0, len(data), size):
        await asyncio.sleep(pause)
        yield data[start:start + size]


async def test_a_copy_that_keeps_arriving_is_never_cut_off_by_the_body_timeout():
    """The whole body takes longer than the server's body timeout, each chunk well within it: the copy lands
    (before, the whole-body deadline answered 408 and the Head resent the copy forever)."""
    component, endpoint = await _component()
    component.server.table.body_timeout = 1.0
    data = _whole(planned(40))
    size = -(-len(data) // 60)  # (60 chunks 0.05 s apart: about 3 s in all, three times the timeout)
    try:
        async with PeerClient(None) as peers:
            answer = await peers.call("POST", f"http://{endpoint}/copy", data=_slowly(data, 0.05, size),
                                  timeout=60)
        assert answer["version"] == 3 and component.catalog == planned(40)
        assert component.server.counters["body_timeouts"] == 0
    finally:
        await _close(component)


async def test_a_stalled_copy_is_refused_and_leaves_the_collector_on_meanwhile(monkeypatch):
    """The collector is paused only while a chunk decodes: a copy stalled on the network leaves it on; a copy
    with no chunk for the body timeout is refused (408) and the catalog kept."""
    fed = asyncio.Event()

    class Watched(CopyStream):
        def feed(self, chunk: bytes) -> None:
            super().feed(chunk)
            fed.set()

    monkeypatch.setattr("boreas.regional.global_component.CopyStream", Watched)
    component, endpoint = await _component()
    component.server.table.body_timeout = 1.0
    data = _whole(planned(3))
    released = asyncio.Event()

    async def stalled():
        yield data[:100]
        await released.wait()
        yield data[100:]

    call = None
    try:
        async with PeerClient(None) as peers:
            call = asyncio.create_task(peers.call("POST", f"http://{endpoint}/copy", data=stalled(), timeout=60))
            await asyncio.wait_for(fed.wait(), 30)
            assert gc.isenabled()  # (the handler now waits for the next chunk)
            with pytest.raises(PeerRefused) as refused:
                await call
            assert refused.value.status == 408
        assert component.counters["copy_read_timeouts"] == 1 and not component.ready.is_set()
        assert (await metric_samples(endpoint))["boreas_global_copy_read_timeouts_total"] == 1
    finally:
        released.set()
        if call is not None and not call.done():  # (an assertion failed first: the request is the test's to end)
            call.cancel()
        await _close(component)


async def test_an_older_copy_is_not_installed_over_a_newer_one():
    component, endpoint = await _component()
    newer, older = planned(3), planned(5)
    newer.version, older.version = 5, 3
    try:
        async with PeerClient(None) as peers:
            assert (await peers.call("POST", f"http://{endpoint}/copy", data=_whole(newer)))["version"] == 5
            assert (await peers.call("POST", f"http://{endpoint}/copy", data=_whole(older)))["version"] == 5
        assert component.catalog == newer and component.catalog.version == 5
        assert component.counters["copies_stale"] == 1 and component.counters["full_copies"] == 1
        scraped = await metric_samples(endpoint)
        assert scraped["boreas_global_copies_stale_total"] == 1
        assert scraped["boreas_global_copies_streamed_total"] == 2
        assert scraped["boreas_global_copy_read_timeouts_total"] == 0
    finally:
        await _close(component)


async def metric_samples(endpoint: str) -> dict[str, float]:
    """The component's ``GET /metrics``, each sample by its name (none of these carry labels)."""
    async with PeerClient(None) as peers:
        status, body = await peers.request("GET", f"http://{endpoint}/metrics")
    assert status == 200, body
    return {s.name: s.value for f in text_string_to_metric_families(body.decode()) for s in f.samples}
