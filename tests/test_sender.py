"""ReliableSender against a real HTTP listener: order, retries, refusals, bounded queue, close."""

from __future__ import annotations

import asyncio
import doctest
import socket

import boreas.wire.sender
import pytest
from aiohttp import web
from boreas.wire.backoff import Backoff
from boreas.wire.client import PeerClient
from boreas.wire.sender import QueueFull, ReliableSender, SenderClosed
from boreas.wire.server import HttpServer
from boreas.wire.supervisor import Supervisor

TOKEN = "s3cret"


class Destination:
    """A component's ``/update``: fails the first ``fail_first`` requests with 503, refuses "bad"."""

    def __init__(self, fail_first: int = 0, delay: float = 0.0):
        self.fail_first = fail_first
        self.delay = delay
        self.got: list[str] = []
        self.requests = 0
        self.server = HttpServer("destination", TOKEN)
        self.server.app.router.add_post("/update", self.handle)

    async def handle(self, request: web.Request) -> web.Response:
        text = (await request.read()).decode()
        self.requests += 1
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.requests <= self.fail_first:
            return web.json_response({"error": "busy"}, status=503)
        if text.startswith("bad"):
            return web.json_response({"error": f"cannot apply {text}"}, status=422)
        self.got.append(text)
        return web.json_response({"applied": text})

    async def start(self, port: int = 0) -> str:
        return await self.server.start("127.0.0.1", port)

    async def close(self) -> None:
        await self.server.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fast() -> Backoff:
    return Backoff(first=0.01, cap=0.05)


@pytest.fixture
async def peers():
    async with PeerClient(TOKEN, timeout=2.0) as client:
        yield client


async def test_documents_arrive_in_order_through_transient_failures(peers):
    dest = Destination(fail_first=3)
    endpoint = await dest.start()
    sender = ReliableSender(endpoint, peers, backoff=fast())
    sender.start()
    texts = [f"<update n='{n}'/>" for n in range(20)]
    for text in texts:
        sender.send(text)
    assert await sender.flush(timeout=10)
    assert dest.got == texts
    assert (sender.sent, sender.retries, sender.refused, sender.queued) == (20, 3, 0, 0)
    assert sender.failure is None
    await sender.close()
    await dest.close()


async def test_a_destination_that_is_down_gets_everything_once_it_is_up(peers):
    port = free_port()
    sender = ReliableSender(f"127.0.0.1:{port}", peers, backoff=fast())
    sender.start()
    for n in range(5):
        sender.send(f"doc {n}")
    await asyncio.sleep(0.2)
    assert sender.retries > 0 and "unreachable" in (sender.failure or "")
    assert not await sender.flush(timeout=0.05)
    dest = Destination()
    await dest.start(port)
    assert await sender.flush(timeout=10)
    assert dest.got == [f"doc {n}" for n in range(5)] and sender.failure is None
    await sender.close()
    await dest.close()


async def test_a_refused_document_is_counted_and_skipped_never_retried(peers):
    dest = Destination()
    endpoint = await dest.start()
    refused = []
    sender = ReliableSender(endpoint, peers, backoff=fast(), on_refused=lambda text, exc: refused.append(
        (text, exc.status)))
    sender.start()
    for text in ["one", "bad two", "three", "bad four", "five"]:
        sender.send(text)
    assert await sender.flush(timeout=10)
    assert dest.got == ["one", "three", "five"]
    assert refused == [("bad two", 422), ("bad four", 422)]
    assert (sender.sent, sender.refused, sender.retries) == (3, 2, 0)
    assert dest.requests == 5
    await sender.close()
    await dest.close()


async def test_close_delivers_what_is_queued_then_refuses_more(peers):
    dest = Destination(delay=0.01)
    endpoint = await dest.start()
    sender = ReliableSender(endpoint, peers, backoff=fast())
    sender.start()
    for n in range(10):
        sender.send(f"doc {n}")
    assert await sender.close(timeout=10)
    assert dest.got == [f"doc {n}" for n in range(10)]
    with pytest.raises(SenderClosed):
        sender.send("late")
    await dest.close()


async def test_close_gives_up_after_its_timeout_when_nobody_answers(peers):
    sender = ReliableSender(f"127.0.0.1:{free_port()}", peers, backoff=fast())
    sender.start()
    sender.send("lost")
    started = asyncio.get_running_loop().time()
    assert not await sender.close(timeout=0.3)
    assert asyncio.get_running_loop().time() - started < 3
    assert sender.queued == 0


async def test_close_does_not_hold_a_stopping_component_for_a_target_that_is_down(peers):
    """A node stopping with reflections queued for a region that is gone waits DOWN_GRACE, not its timeout."""
    sender = ReliableSender(f"127.0.0.1:{free_port()}", peers, backoff=fast())
    sender.start()
    sender.send("lost")
    while sender.failure is None:  # the first attempt has failed: the target is known to be down
        await asyncio.sleep(0.01)
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert not await sender.close(timeout=60)
    assert loop.time() - started < 30  # DOWN_GRACE (0.5 s), far from the 60 s asked for
    assert sender.queued == 0


async def test_a_full_queue_raises_and_reset_replaces_it(peers):
    dest = Destination()
    endpoint = await dest.start()
    sender = ReliableSender(endpoint, peers, capacity=3, backoff=fast())
    for n in range(3):
        sender.send(f"change {n}")
    with pytest.raises(QueueFull):
        sender.send("change 3")
    assert sender.queued == 3
    sender.reset(["full copy"])  # what a user sends instead of a backlog it cannot keep
    sender.send("change 4")
    sender.start()  # documents queued before start are kept
    assert await sender.flush(timeout=10)
    assert dest.got == ["full copy", "change 4"]
    await sender.close()
    await dest.close()


async def test_on_failure_can_replace_the_queue_with_a_fresh_copy(peers):
    """GlobalFeed's pattern: after a failure the receiver may have restarted, so it starts afresh."""
    dest = Destination(fail_first=1)
    endpoint = await dest.start()
    copies = []

    def failed(exc) -> None:
        copies.append(str(exc))
        sender.reset([f"copy {len(copies)}"])

    sender = ReliableSender(endpoint, peers, backoff=fast(), on_failure=failed)
    sender.start()
    sender.send("change a")
    sender.send("change b")
    assert await sender.flush(timeout=10)
    sender.send("change c")
    assert await sender.flush(timeout=10)
    assert dest.got == ["copy 1", "change c"]
    assert len(copies) == 1 and "503" in copies[0]
    await sender.close()
    await dest.close()


async def test_abort_drops_the_queue_at_once(peers):
    sender = ReliableSender(f"127.0.0.1:{free_port()}", peers, backoff=fast())
    sender.start()
    for n in range(5):
        sender.send(f"doc {n}")
    flushing = asyncio.create_task(sender.flush(timeout=10))
    sender.abort()
    assert await flushing  # dropped documents count as done: nobody waits for them
    assert sender.queued == 0 and sender.closed
    with pytest.raises(SenderClosed):
        sender.send("late")


async def test_the_worker_runs_under_the_callers_supervisor(peers):
    dest = Destination()
    endpoint = await dest.start()
    tasks = Supervisor("component")
    sender = ReliableSender(endpoint, peers, name="feed", backoff=fast())
    sender.start(tasks)
    assert tasks.status()["feed"]["state"] == "running"
    sender.send("x")
    assert await sender.close(timeout=10)
    assert "feed" not in tasks.status() and dest.got == ["x"]
    await tasks.close()
    await dest.close()


def test_doctests():
    result = doctest.testmod(boreas.wire.sender, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
