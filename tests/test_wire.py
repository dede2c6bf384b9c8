"""The HTTP listener every component uses: token on mutating calls, body limits, JSON errors."""

from __future__ import annotations

import aiohttp
import pytest
from aiohttp import web

from boreas.wire.addressing import head_url
from boreas.wire.client import PeerClient, PeerRefused, PeerUnreachable
from boreas.wire.server import HttpServer


@pytest.fixture
async def server():
    srv = HttpServer("test", token="s3cret", max_body=1024)
    seen = []

    async def mutate(request: web.Request) -> web.Response:
        seen.append(await request.read())
        return web.json_response({"ok": True})

    async def read(request: web.Request) -> web.Response:
        return web.json_response({"seen": len(seen)})

    srv.app.router.add_post("/x", mutate)
    srv.app.router.add_get("/x", read)
    await srv.start("127.0.0.1", 0)
    srv.seen = seen
    yield srv
    await srv.close()


async def test_mutating_calls_need_the_token(server):
    url = f"http://{server.endpoint}/x"
    for token in (None, "guess", "s3cret2"):
        async with PeerClient(token) as peers:
            with pytest.raises(PeerRefused) as refused:
                await peers.call("POST", url, data=b"hello")
            assert refused.value.status == 401
            assert "token" in refused.value.payload["error"]
            assert await peers.call("GET", url) == {"seen": 0}  # reads stay open
    assert server.seen == [] and server.counters["unauthenticated"] == 3
    async with PeerClient("s3cret") as peers:
        assert await peers.call("POST", url, data=b"hello") == {"ok": True}
    assert server.seen == [b"hello"]


async def test_bodies_over_the_limit_are_refused(server):
    async with PeerClient("s3cret") as peers:
        with pytest.raises(PeerRefused) as refused:
            await peers.call("POST", f"http://{server.endpoint}/x", data=b"x" * 2048)
    assert refused.value.status == 413 and "1024 bytes" in refused.value.payload["error"]
    assert server.seen == []


async def test_unknown_routes_and_methods_answer_json(server):
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://{server.endpoint}/nothing") as resp:
            assert resp.status == 404 and (await resp.json())["error"]


async def test_unreachable_peer_is_told_apart_from_a_refusal():
    async with PeerClient("s3cret", timeout=2) as peers:
        with pytest.raises(PeerUnreachable) as exc:
            await peers.post_update("127.0.0.1:9", "<update/>")
    assert "cannot connect" in str(exc.value)


def test_head_url_spellings(monkeypatch):
    monkeypatch.delenv("BOREAS_HEAD", raising=False)
    assert head_url(":14001") == "http://localhost:14001"
    assert head_url("http://h:1/") == "http://h:1"
    with pytest.raises(ValueError, match="--head"):
        head_url(None)
    monkeypatch.setenv("BOREAS_HEAD", "http://env:2")
    assert head_url(None) == "http://env:2"
    with pytest.raises(ValueError, match="http://"):
        head_url("ftp://x:1")
