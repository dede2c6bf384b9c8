"""Slow and idle clients cannot hold a Boreas HTTP listener (issue 15, item 3).

A raw socket that dribbles a header byte now and then, or sends a header and
then a body it never finishes, is closed after the server's timeouts; while
they are open a normal request is served at once; connections beyond the
limit are refused with 503 rather than piling up; an upgraded WebSocket is
not a slow body and stays open.
"""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import web

from boreas.wire.server import HttpServer

HEADER_TIMEOUT = 0.4
BODY_TIMEOUT = 0.4


async def started(**limits) -> HttpServer:
    server = HttpServer("test", token="s3cret", header_timeout=limits.pop("header_timeout", HEADER_TIMEOUT),
                        body_timeout=limits.pop("body_timeout", BODY_TIMEOUT), **limits)

    async def hello(request: web.Request) -> web.Response:
        return web.json_response({"hello": True})

    async def echo(request: web.Request) -> web.Response:
        return web.json_response({"bytes": len(await request.read())})

    async def data(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for msg in ws:
            await ws.send_str(msg.data)
        return ws

    server.app.router.add_get("/hello", hello)
    server.app.router.add_post("/echo", echo)
    server.app.router.add_get("/data", data)
    await server.start("127.0.0.1", 0)
    return server


async def closed_by_server(reader: asyncio.StreamReader, limit: float = 10.0) -> bytes:
    """Everything the server sent until it closed the connection (fails if it never does)."""
    return await asyncio.wait_for(reader.read(), limit)


async def dribble(writer: asyncio.StreamWriter, data: bytes, every: float) -> None:
    try:
        for i in range(len(data)):
            writer.write(data[i:i + 1])
            await writer.drain()
            await asyncio.sleep(every)
    except (ConnectionError, OSError):
        pass


async def test_dribbling_headers_are_closed_and_others_are_served():
    server = await started()
    try:
        host, port = "127.0.0.1", server.port
        slow = [await asyncio.open_connection(host, port) for _ in range(100)]
        header = b"GET /hello HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200 + b"\r\n\r\n"
        dribblers = [asyncio.create_task(dribble(w, header, 0.1)) for _, w in slow]
        await asyncio.sleep(0.05)
        assert server.connections >= 100
        async with aiohttp.ClientSession() as session:
            # served while the slow ones hang on (well before the header timeout fires)
            async with session.get(f"http://{server.endpoint}/hello",
                                   timeout=aiohttp.ClientTimeout(total=5)) as resp:
                assert resp.status == 200
                assert await resp.json() == {"hello": True}
        answers = await asyncio.gather(*(closed_by_server(r) for r, _ in slow))
        assert all(a.startswith(b"HTTP/1.1 408") for a in answers), answers[0]
        assert b"request header not received" in answers[0]
        assert server.counters["header_timeouts"] == 100
        for task in dribblers:
            task.cancel()
        for _, w in slow:
            w.close()
    finally:
        await server.close()


async def test_a_connection_that_sends_nothing_is_closed():
    server = await started()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        assert await closed_by_server(reader) == b""
        writer.close()
    finally:
        await server.close()


async def test_a_body_that_never_finishes_is_closed_with_408():
    server = await started()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret\r\n"
                     b"Content-Length: 1000\r\n\r\n" + b"x" * 10)
        await writer.drain()
        answer = await closed_by_server(reader)
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert b"request body not received" in answer
        assert server.counters["body_timeouts"] == 1
        writer.close()
        async with aiohttp.ClientSession() as session:  # and the server is fine
            async with session.post(f"http://{server.endpoint}/echo", data=b"y" * 5000,
                                    headers={"Authorization": "Bearer s3cret"}) as resp:
                assert (await resp.json()) == {"bytes": 5000}
    finally:
        await server.close()


async def test_connections_beyond_the_limit_are_refused_then_served_again():
    server = await started(max_connections=5)
    try:
        held = [await asyncio.open_connection("127.0.0.1", server.port) for _ in range(5)]
        for _, w in held:
            w.write(b"GET /hel")  # a header that never ends
        await asyncio.sleep(0.05)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        answer = await closed_by_server(reader)
        assert answer.startswith(b"HTTP/1.1 503"), answer  # at once, not a 408 after the timeout
        assert b"too many connections" in answer
        assert server.counters["refused_connections"] >= 1
        writer.close()
        await asyncio.gather(*(closed_by_server(r) for r, _ in held))  # the holders time out...
        async with aiohttp.ClientSession() as session:  # ...and the slots are free again
            async with session.get(f"http://{server.endpoint}/hello") as resp:
                assert resp.status == 200
        for _, w in held:
            w.close()
    finally:
        await server.close()


async def test_keep_alive_requests_and_an_upgraded_websocket_outlive_the_timeouts():
    server = await started(idle_timeout=5.0)
    try:
        async with aiohttp.ClientSession() as session:
            async with session.ws_connect(f"http://{server.endpoint}/data") as ws:
                await ws.send_str("ping")
                assert (await ws.receive(timeout=5)).data == "ping"
                await asyncio.sleep(HEADER_TIMEOUT + BODY_TIMEOUT)  # quiet for longer than both
                await ws.send_str("pong")
                assert (await ws.receive(timeout=5)).data == "pong"
            # a keep-alive connection reused after a pause longer than the header timeout
            async with session.get(f"http://{server.endpoint}/hello") as resp:
                assert resp.status == 200
            await asyncio.sleep(HEADER_TIMEOUT * 1.5)
            async with session.get(f"http://{server.endpoint}/hello") as resp:
                assert resp.status == 200
            assert server.counters["idle_closed"] == 0
        assert server.counters["header_timeouts"] == 0
        assert server.counters["body_timeouts"] == 0
    finally:
        await server.close()


def test_defaults_are_documented_values():
    server = HttpServer("x", token=None)
    assert server.header_timeout == 10.0 and server.body_timeout == 60.0 and server.idle_timeout == 75.0
    assert 16 <= server.max_connections <= 1024

