"""A full copy's feed over HTTP (head/global_feed.py, regional/global_component.py): what a copy not taken
leaves counted and said (its metrics), and a component without a copy asking for one."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web
from boreas.catalog.replicate import update_items
from boreas.catalog.updates import update_document
from boreas.head.catalog_copy import CatalogCopies
from boreas.head.global_feed import GlobalFeed
from boreas.head.metrics import feed_view
from boreas.regional.full_copy import read_head_update
from boreas.regional.global_component import GlobalComponent
from boreas.wire.client import PeerClient
from boreas.wire.metrics import View, new_registry
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from test_catalog_reads import modify, planned


def _feed_samples(feed: GlobalFeed, endpoint: str) -> dict[str, float]:
    """The Head's samples of ``feed`` as ``/metrics`` writes them (head/metrics.py ``feed_view``)."""
    registry = new_registry()
    registry.register(View(lambda f: feed_view(f, feed, endpoint)))
    families = text_string_to_metric_families(generate_latest(registry).decode())
    return {s.name: s.value for f in families for s in f.samples if s.labels.get("component") == endpoint}


async def _fake(routes: dict[str, web.RequestHandler]) -> tuple[web.AppRunner, str]:
    app = web.Application()
    for path, handler in routes.items():
        app.router.add_post(path, handler)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, "127.0.0.1:%d" % runner.addresses[0][1]


@pytest.mark.parametrize("answer", ["refused", "older"])
async def test_a_copy_not_taken_is_not_counted_as_sent_and_the_feed_says_why(answer):
    """A component that refuses the copy (422) or answers a version older than the copy's does not hold it:
    the feed counts no full copy, its failure says why, and the commits held go to the component (which,
    without a copy, asks for one)."""
    current = {"catalog": planned(10)}
    copies = CatalogCopies(lambda: current["catalog"], "head")
    answered, updates = asyncio.Event(), []

    async def copy(request: web.Request) -> web.Response:
        await request.read()
        answered.set()
        if answer == "refused":
            return web.json_response({"error": "no"}, status=422)
        return web.json_response({"version": 2})

    async def update(request: web.Request) -> web.Response:
        updates.append(read_head_update(await request.read()).version)
        return web.json_response({"version": 0})

    runner, endpoint = await _fake({"/copy": copy, "/update": update})
    async with PeerClient(None) as peers:
        feed = GlobalFeed(endpoint, peers, copies)
        try:
            feed.start()
            before = current["catalog"]
            current["catalog"] = modify(before, "b5", "value &gt; 96.5")
            feed.changed(4, update_items(before, current["catalog"]))
            await asyncio.wait_for(answered.wait(), 30)
            for _ in range(600):  # (at most 30 s) until the feed has dealt with the answer
                if feed.counters["copies_refused"] and updates:
                    break
                await asyncio.sleep(0.05)
            assert feed.counters["copies_refused"] == 1 and feed.counters["full_copies"] == 0
            assert _feed_samples(feed, endpoint)["boreas_head_global_copies_refused_total"] == 1
            assert feed.failure is not None and "full copy of version" in feed.failure
            assert feed.held is None and updates == [4]
        finally:
            feed.abort()
            await runner.cleanup()


async def test_a_component_without_a_copy_asks_for_one_when_an_update_arrives():
    """Its copy was refused (or lost): the first update it receives makes it ask the Head (re-register)."""
    registrations = []
    asked = asyncio.Event()

    async def head_update(request: web.Request) -> web.Response:
        registrations.append(await request.read())
        if len(registrations) > 1:
            asked.set()
        return web.json_response({"version": 0})

    runner, head = await _fake({"/update": head_update})
    component = GlobalComponent(f"http://{head}", None)
    try:
        endpoint = await component.start("127.0.0.1", 0)
        assert len(registrations) == 1 and not component.ready.is_set()
        before = planned(10)
        after = modify(before, "b5", "value &gt; 95.5")
        text = update_document(update_items(before, after), version=4, origin="head")
        async with PeerClient(None) as peers:
            await peers.call("POST", f"http://{endpoint}/update", data=text)
        await asyncio.wait_for(asked.wait(), 30)
        assert b"<global" in registrations[1] and component.catalog.version == 0
    finally:
        await component.close(disconnect=False)
        await runner.cleanup()
