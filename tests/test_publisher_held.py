"""A publisher whose entry node stops taking the stream while batches are in flight (client/held.py).

Seen in ``test_cumulus_handover``: a grown coordinator was emptied and retired while publishers streamed; a
publisher's batch reached it just after, was refused ("stream 'R' does not enter node ..."), and the publisher
dropped it and failed with ``PublishRefused``.  The refused batches are now held, the Head asked where the stream
enters, and they are re-sent there in order ahead of the rest; only if the Head names no other node are they
refused for good.  Here the nodes are two in-process receivers and the Head a stand-in answering the route.
"""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web
from boreas.catalog.model import Field, FieldType, Schema
from boreas.client.publisher import Publisher, PublishRefused
from boreas.wire.columns import read_rows
from boreas.wire.frames import Ack, Batch, Refused
from boreas.wire.receiver import DataReceiver
from boreas.wire.server import HttpServer
from boreas.wire.tuples import RowType

TOKEN = "tok"


class Entry:
    """A node the stream enters until :attr:`retired` is set; then it refuses the stream's batches before ordering
    them, not taking them, as a node whose catalog no longer routes the stream there does (node/intake.py
    ``screen``)."""

    def __init__(self) -> None:
        self.rows: list[tuple] = []
        self.retired = False
        self.row_type = RowType(Schema("T", (Field("n", FieldType.INT),)))
        self.receiver = DataReceiver(self.accept, TOKEN, screen=self.screen)
        self.server = HttpServer("entry", TOKEN)
        self.server.app.router.add_get("/data", self.receiver.handle)

    def screen(self, batch: Batch) -> Refused | None:
        if not self.retired:
            return None
        return Refused(batch.stream, batch.producer, batch.seq,
                       f"stream {batch.stream!r} does not enter node {self.server.endpoint}")

    async def accept(self, batch: Batch) -> Ack | Refused:
        rows = read_rows(bytes(batch.rows)) if batch.fmt else self.row_type.decode(bytes(batch.rows))[0]
        self.rows += rows
        return Ack(batch.stream, batch.producer, batch.seq, len(rows))


class Head:
    """Answers ``GET /streams/S`` with :attr:`entries`."""

    def __init__(self) -> None:
        self.entries: list[str] = []
        self.asked = 0
        self.server = HttpServer("head", TOKEN)
        self.server.app.router.add_get("/streams/{name}", self.route)

    async def route(self, request: web.Request) -> web.Response:
        self.asked += 1
        return web.json_response({"stream": "S", "input": True, "entries": self.entries, "producer": None,
                                  "schema": {"name": "T", "fields": [["n", "int", None]]}})


@pytest.fixture
async def parts():
    head, a, b = Head(), Entry(), Entry()
    for part in (head, a, b):
        await part.server.start("127.0.0.1", 0)
    head.entries = [a.server.endpoint]
    yield head, a, b
    for part in (head, a, b):
        await part.server.close()


async def publish_while_retiring(head: Head, a: Entry, moved_to: list[str]) -> Publisher:
    """Publish rows 0..1999 in batches of 10; once ``a`` took 300 rows, with more in flight to it, it retires and
    the Head's route says ``moved_to``; returns the closed publisher."""
    publisher = Publisher(f"http://{head.server.endpoint}", "S", TOKEN, producer="p", batch_size=10, capacity=64)
    await publisher.start()
    try:
        for start in range(0, 2000, 10):
            if start == 600:
                while len(a.rows) < 300:
                    await asyncio.sleep(0.001)
                a.retired, head.entries = True, moved_to
            await publisher.send([(n,) for n in range(start, start + 10)])
            await asyncio.sleep(0)
    finally:
        await publisher.close()
    return publisher


async def test_batches_refused_by_a_retired_entry_go_where_the_stream_enters_now_in_order(parts):
    head, a, b = parts
    publisher = await publish_while_retiring(head, a, [b.server.endpoint])
    assert [n for (n,) in a.rows + b.rows] == list(range(2000))  # each row once, in order, none dropped
    assert a.rows and b.rows and publisher.refusals == [] and publisher.refused_count == 0
    assert publisher.accepted == 2000 and publisher.entries == [b.server.endpoint]


async def test_with_nowhere_else_to_go_the_batches_are_refused_with_the_nodes_reason(parts):
    head, a, _ = parts
    with pytest.raises(PublishRefused, match="does not enter node"):
        await publish_while_retiring(head, a, [a.server.endpoint])
    assert [n for (n,) in a.rows] == list(range(len(a.rows))) and len(a.rows) >= 300 and head.asked >= 2
