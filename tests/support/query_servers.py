"""Stand-ins for the query client's tests: a Head answering ``GET /boxes/{name}`` and members served with the
real query API on loopback ports (tests/test_partitioned_query_client.py, tests/test_query_arrow.py)."""

from __future__ import annotations

import asyncio
import threading

import pytest
from aiohttp import web
from boreas.m3.cumulus import Layout
from boreas.node.cumulus.api import SegmentsApi
from boreas.node.query import QueryApi

from support.partitioned_box import BOX, Dataflow, build, parts, segment_counter


class Servers:
    """aiohttp apps on loopback ports, served by an event loop of their own (the CLI runs asyncio.run)."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.runners: list[web.AppRunner] = []
        self.hits: dict[str, list[str]] = {}

    def serve(self, app: web.Application) -> str:
        async def start() -> str:
            runner = web.AppRunner(app)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            self.runners.append(runner)
            return f"127.0.0.1:{runner.addresses[0][1]}"
        return asyncio.run_coroutine_threadsafe(start(), self.loop).result(10)

    def member(self, op) -> str:
        """Serve ``op`` with the real query API; requests counted in ``hits[endpoint]``."""
        endpoint_box: dict[str, str] = {}

        @web.middleware
        async def count(request, handler):
            self.hits.setdefault(endpoint_box["endpoint"], []).append(request.path_qs)
            return await handler(request)

        app = web.Application(middlewares=[count])
        api = QueryApi(Dataflow(op), "")
        api.add_routes(app.router)
        segments = SegmentsApi(api.dataflow, "")
        segments.add_routes(app.router)
        endpoint = self.serve(app)
        endpoint_box["endpoint"] = api.endpoint = segments.endpoint = endpoint
        return endpoint

    def head(self, answers: list[dict]) -> str:
        """A Head answering ``GET /boxes/{name}`` with ``answers`` in turn (the last one from then on)."""
        calls = []

        async def box(request):
            if request.match_info["name"] != BOX:
                return web.json_response({"error": f"no box {request.match_info['name']!r} in the catalog "
                                                   "(version 3)"}, status=404)
            calls.append(1)
            return web.json_response(answers[min(len(calls), len(answers)) - 1])

        app = web.Application()
        app.router.add_get("/boxes/{name}", box)
        self.head_calls = calls
        return "http://" + self.serve(app)

    def close(self):
        async def stop():
            for runner in self.runners:
                await runner.cleanup()
        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def head_answer(layout: Layout) -> dict:
    """What the Head's ``GET /boxes/{name}`` answers for a partitioned box (extra keys included)."""
    return {"box": BOX, "type": "m3", "node": None, "version": 3,
            "partition": {**layout.to_dict(), "epoch_ms": 100, "id": 1, "key": "a"}}


def start_members(servers: Servers, layout_of, full) -> Layout:
    """Serve one stand-in member per endpoint; ``layout_of(endpoints)`` is the layout they hold."""
    ops = [build() for _ in range(3)]
    endpoints = [servers.member(op) for op in ops]
    layout = layout_of(endpoints)
    for op, filled in zip(ops, parts(layout, full)):
        op.runtime, op.layout, op.member, op.segment_entries = filled.runtime, layout, filled.member, segment_counter(op)
    return layout


@pytest.fixture
def servers():
    s = Servers()
    yield s
    s.close()
