"""Subscribing to a stream: the node that produces it sends its tuples to us.

As in Borealis, a subscriber is an endpoint: the subscriber listens (on a
free port unless told otherwise), registers ``<subscribe stream endpoint>``
with the Head like any deployment change, and the node that produces the
stream connects and sends batches in order.  Rows are yielded as tuples in
the schema's field order, in the order they were produced; :meth:`Subscriber.arrow`
yields each batch as a pyarrow ``RecordBatch`` instead.  A batch is kept in
the form it arrived in (msgpack rows, or Arrow columns) until the reader
asks for it, so a batch that came as Arrow and is read with ``arrow()`` never
becomes rows, and one that came as rows read with ``batches()`` never becomes
columns (:attr:`Subscriber.conversions` counts the batches that had to).  The queue
between the listener and the reader is bounded, so a slow reader slows the
node instead of growing memory.  ``close()`` unsubscribes.

A **named** subscriber (``Subscriber(name="audit")``, ``<subscribe name=>``)
resumes: the node keeps its batches until it acknowledges them, while it is
down too, and one started again with the same name (in this process or
another, on any port) gets what the last one had not acknowledged.  It
acknowledges a batch only once its reader asks for the next one, so an
acknowledged batch was consumed; for exactly once, the reader keeps
:meth:`Subscriber.positions` with what it wrote (atomically) and hands
them back as ``resume_from``: the batches it already has are then dropped
(``boreas subscribe --name N --output FILE`` does so).  Without them a
restart is at-least-once: the batch being read when it stopped comes again.
``close()`` leaves a named subscription in place (the node keeps its
batches, up to its bounds); :meth:`Subscriber.unsubscribe` ends it.  One that
fell past what the node keeps is told when it is back: the iterators raise
:class:`SubscriberTooSlow` naming how much it missed.

When the stream **ends** (its producing box's inputs all ended:
``Publisher.close(final=True)`` upstream, node/stream_ends.py), the node sends
a final mark after everything else; once every producer that sent to this
subscriber has sent its own and the reader has had all before them, the
iterators stop and :attr:`Subscriber.ended` is True.  (A producer that had
sent nothing here yet by then is not waited for.)

The Head refuses to register a subscriber without the cluster token
(:class:`~boreas.wire.client.PeerRefused`, status 401); when the node that
produces the stream cannot connect (it presents another cluster's token, or
none arrives in time), :meth:`Subscriber.start` raises
:class:`SubscribeFailed` saying why.

Usage::

    async with Subscriber("http://localhost:14000", "Aggregate", token) as sub:
        async for row in sub:
            print(row)

    async with Subscriber("http://localhost:14000", "Aggregate", token) as sub:
        async for batch in sub.arrow():   # pyarrow.RecordBatch, the stream's Arrow schema
            print(batch.num_rows)

    async with Subscriber(head, "Aggregate", token, name="audit", resume_from=saved) as sub:
        async for rows in sub.batches():
            saved = sub.positions()       # store with what was written, in one step

A *changelog* stream (an ``m3`` box's view, and what filter, map, union and
aggregate make of one: docs/dataplane.md) revises rows: each row has a
weight, +1 it enters, -1 it leaves, so a changed row comes as its old row
at -1 and its new row at +1.  :meth:`Subscriber.changes` yields
``(row, weight)`` for every row (a plain stream's weigh 1);
:meth:`Subscriber.arrow` adds the weights as a last ``_weight`` column; a
changelog batch from :meth:`Subscriber.batches` is a :class:`WeightedRows`,
the rows with their weights beside them (``.weights``)::

    async with Subscriber("http://localhost:14000", "Revenue", token) as sub:
        view = {}
        async for row, weight in sub.changes():   # the view, kept up to date
            view.pop(row[:3]) if weight < 0 else view.__setitem__(row[:3], row[3:])
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from xml.sax.saxutils import escape as xml_escape
from typing import Any

from boreas.catalog.endpoints import split_endpoint
from boreas.wire.addressing import advertised
from boreas.catalog.arrays import route_fields
from boreas.catalog.model import Schema
from boreas.wire.client import PeerClient, PeerError
from boreas.wire.frames import Ack, Batch, Refused
from boreas.wire.receiver import DataReceiver, Deferred
from boreas.wire.server import HttpServer
from boreas.wire.tuples import RowType

from .head_api import deploy_and_wait, stream_route

log = logging.getLogger(__name__)

__all__ = ["SubscribeFailed", "SubscribeTimeout", "Subscriber", "SubscriberLost", "SubscriberTooSlow"]

#: Seconds between the subscriber's WebSocket pings to the node sending to it: a node that died without
#: closing (a host down, a partition) is noticed within two of them.
HEARTBEAT = 2.0
#: How long a subscriber waits for the producing node to come back before it gives up (a restart, a Head
#: failover and the adoption of the node's boxes elsewhere take less).
RETRY_FOR = 30.0


class WeightedRows(list):
    """A changelog batch's rows (a list, as a plain batch's), with each row's weight in ``weights``.

    >>> batch = WeightedRows([(1, 15), (1, 18)], [-1, 1])
    >>> batch, batch.weights
    ([(1, 15), (1, 18)], [-1, 1])
    """

    def __init__(self, rows: list[tuple], weights: list[int]):
        super().__init__(rows)
        self.weights = weights


class SubscribeFailed(RuntimeError):
    """The subscription was registered but the producing node could not connect; the message says why."""


class SubscriberTooSlow(SubscribeFailed):
    """The producing node cut this subscriber off: it read too slowly, or (a named one) fell past what the node
    keeps for it (the message says how much it missed).

    Raised by the iterators once every row received before the cut has been read, so a reader never
    goes on silently past a gap."""


class SubscriberLost(SubscribeFailed):
    """No node sent to this subscriber for ``retry_for`` seconds: the producing node, and the cluster with it, is
    gone (the message says since when).  Raised by the iterators once what came before has been read."""


class SubscribeTimeout(SubscribeFailed, TimeoutError):
    """No node connected to the subscriber in time."""


class Subscriber:
    """Receives one stream: an async iterator of rows (tuples in field order), in production order.

    ``head`` is the Head's URL, ``token`` the cluster token; the subscriber
    listens at ``listen`` (``host:port``, port 0 for a free one), registers as
    ``advertise`` when given (``host:port``, or a host given the port bound) and buffers
    at most ``queue_batches`` batches.  After :meth:`start`, :attr:`schema`
    describes the rows and :attr:`endpoint` is where the node sends them.
    """

    def __init__(self, head: str, stream: str, token: str | None, listen: str = "localhost:0",
                 queue_batches: int = 64, on_slow: str | None = None, retry_for: float = RETRY_FOR,
                 name: str | None = None, resume_from: dict[str, int] | None = None, advertise: str | None = None):
        self.head = head
        self.stream = stream
        self.name = name  # resumes where the last subscriber of this name stopped (None: from now on)
        # producer -> next sequence the reader has not consumed (what resume_from gave, and what it read since)
        self._positions: dict[str, int] = dict(resume_from or {})
        self._consumed: set[asyncio.Future] = set()  # a named subscriber's acknowledgements, waiting for its reader
        self._finished: set[str] = set()  # producers whose final mark the reader has reached
        #: the stream ended: every producer that sent it here sent its final mark, and the reader has had all
        #: before it (the iterators then stop)
        self.ended = False
        self.token = token
        self.listen = listen
        # where the node sends to, when ``listen`` is not reachable as it is (a wildcard, NAT): HOST:PORT, or a HOST
        # that gets the port bound
        self.advertise = advertise
        self.on_slow = on_slow  # what the node does when we fall a buffer behind (None: disconnect us)
        self.endpoint: str | None = None
        self.schema: Schema | None = None
        self.server = HttpServer(f"subscriber {stream}", token)
        self.receiver = DataReceiver(self._accept, token, on_goodbye=self._goodbye, heartbeat=HEARTBEAT)
        self.retry_for = retry_for
        self._end: type[SubscribeFailed] = SubscriberTooSlow  # what the iterators raise once the queue ends
        self._watch: asyncio.Task | None = None  # notices a producing node that went away (owned: close() ends it)
        self.server.app.router.add_get("/data", self.receiver.handle)
        # Each batch as it arrived: a list of rows, or a Columns (Arrow); None once the node cut us off.
        self._rows: asyncio.Queue[Any] = asyncio.Queue(queue_batches)
        self.conversions = 0  # batches read in the other form than they arrived in (rows <-> Arrow)
        self.failure: str | None = None  # why the producing node disconnected us
        self._ending: asyncio.Task | None = None
        self._row_type: RowType | None = None

    async def __aenter__(self) -> "Subscriber":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self, timeout: float = 30.0) -> None:
        """Register with the Head and wait until the producing node has connected."""
        async with PeerClient(self.token) as peers:
            route = await stream_route(peers, self.head, self.stream)
            fields = route_fields(route["schema"])  # a nullable field's NULL arrives as None
            self.schema = Schema(route["schema"]["name"], fields)
            self._row_type = RowType(self.schema)
            host, port = split_endpoint(self.listen)
            bound = await self.server.start(host, port)
            self.endpoint = advertised(self.advertise, bound)
            policy = f' on-slow="{self.on_slow}"' if self.on_slow else ""
            if self.name:
                policy += f' name="{xml_escape(self.name, {chr(34): "&quot;"})}"'
                for producer, seq in self._positions.items():  # what the reader already has is dropped
                    self.receiver.sequencer.expect(self.stream, producer, seq)
            xml = f'<deploy><subscribe stream="{self.stream}" endpoint="{self.endpoint}"{policy}/></deploy>'
            try:
                await deploy_and_wait(peers, self.head, xml, f"subscribe {self.stream}", timeout)
            except BaseException:  # not registered (refused, say): stop listening
                await self.server.close()
                self.endpoint = None
                raise
        # The producing node connects once it applied the subscription; until then it would
        # drop the stream's batches (nothing listening), so wait for it.
        deadline = asyncio.get_running_loop().time() + timeout
        while not self.receiver.counters["connections"]:
            if self.receiver.counters["unauthenticated"]:
                await self._close_quietly()
                raise SubscribeFailed(f"the node that produces {self.stream} was refused at {self.endpoint}: "
                                      "it presented another cluster token than this subscriber's")
            if asyncio.get_running_loop().time() > deadline:
                endpoint = self.endpoint
                await self._close_quietly()
                raise SubscribeTimeout(f"no node connected to subscriber {endpoint} within {timeout:g}s")
            await asyncio.sleep(0.01)
        self._watch = asyncio.get_running_loop().create_task(self._watch_sender(), name=f"subscriber {self.stream}")

    async def _watch_sender(self) -> None:
        """Say when the producing node's connection goes, and give up after ``retry_for`` s without one.

        A node that restarts, or whose boxes fail over to another node,
        connects again on its own; until then this subscriber hears nothing,
        which must never look like a quiet stream for ever.
        """
        lost_since: float | None = None
        loop = asyncio.get_running_loop()
        while self.failure is None:
            await asyncio.sleep(0.5)
            if self.receiver.sockets:
                if lost_since is not None:
                    log.warning("subscriber %s: the node producing %s is connected again", self.endpoint, self.stream)
                lost_since = None
                continue
            if lost_since is None:
                lost_since = loop.time()
                log.warning("subscriber %s: lost the connection from the node producing %s; waiting up to %gs for "
                            "it to come back", self.endpoint, self.stream, self.retry_for)
            elif loop.time() - lost_since > self.retry_for:
                self._stop(SubscriberLost, f"no node has sent {self.stream} to {self.endpoint} for "
                                           f"{self.retry_for:g}s: its producing node (or the cluster) is gone")

    def positions(self) -> dict[str, int]:
        """producer -> the next sequence number not yet given to the reader: for ``resume_from`` (exactly once)."""
        return dict(self._positions)

    async def unsubscribe(self) -> None:
        """End the subscription (a named one's too: the node drops what it kept for it) and stop listening."""
        await self._close(unsubscribe=True)

    async def close(self) -> None:
        """Stop listening; unsubscribe, unless named (the node keeps its batches until it resumes)."""
        await self._close(unsubscribe=not self.name)

    async def _close(self, unsubscribe: bool) -> None:
        for consumed in list(self._consumed):  # never acknowledged: the node keeps them for the next subscriber
            consumed.cancel()
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
            self._watch = None
        if self._ending is not None:
            self._ending.cancel()
            await asyncio.gather(self._ending, return_exceptions=True)
        if self.endpoint is not None and not unsubscribe:
            log.info("subscriber %r of %s stops; its subscription stays (start it again to resume)", self.name,
                     self.stream)
            await self.server.close()
            self.endpoint = None
        if self.endpoint is not None:
            xml = f'<deploy><unsubscribe stream="{self.stream}" endpoint="{self.endpoint}"/></deploy>'
            try:
                async with PeerClient(self.token) as peers:
                    await deploy_and_wait(peers, self.head, xml, f"unsubscribe {self.stream}", 10.0)
            except RuntimeError as exc:  # committed, not yet delivered (the producing node is down or restarting)
                log.warning("%s; the Head delivers it when the node is back", exc)
            except PeerError as exc:  # the Head is gone too (the cluster is down): nothing to undo there
                log.warning("cannot unsubscribe %s from %s: %s", self.endpoint, self.stream, exc)
            finally:
                await self.server.close()
                self.endpoint = None

    async def _close_quietly(self) -> None:
        """Close after a failed start: the start's error is the one to report."""
        with contextlib.suppress(Exception):
            await self.close()

    async def _accept(self, batch: Batch) -> Ack | Refused | Deferred:
        if self.failure is not None:  # cut off: what comes now would follow a gap
            return Refused(batch.stream, batch.producer, batch.seq, f"this subscriber was cut off: {self.failure}")
        if batch.stream != self.stream or self._row_type is None:
            return Refused(batch.stream, batch.producer, batch.seq, f"this endpoint subscribes to {self.stream!r}")
        if self.name and self.receiver.sequencer.skipped:  # exactly once, or said why not: never past a gap silently
            self._stop(SubscriberTooSlow, f"{self.receiver.sequencer.skipped} batches of {self.stream} never reached "
                                          f"subscriber {self.name!r} (lost on the way: a node that produced it "
                                          "failed without a durable copy, say); it stops before the gap")
            return Refused(batch.stream, batch.producer, batch.seq, f"this subscriber was cut off: {self.failure}")
        rows, errors = self._row_type.decode_payload(bytes(batch.rows), batch.fmt)
        ack = Ack(batch.stream, batch.producer, batch.seq, len(rows), [(e.row, e.field, e.reason) for e in errors])
        if not self.name:
            await self._rows.put((rows, batch.producer, batch.seq, None, batch.final))  # as it came: the reader converts it
            return ack
        consumed = asyncio.get_running_loop().create_future()  # done once the reader asks for the next batch
        self._consumed.add(consumed)
        consumed.add_done_callback(self._consumed.discard)
        await self._rows.put((rows, batch.producer, batch.seq, consumed, batch.final))
        return Deferred(ack, consumed)

    def _goodbye(self, reason: str) -> None:
        """The node disconnected us: what is queued is still read, then the reader learns why."""
        self._stop(SubscriberTooSlow, reason)

    def _stop(self, end: type[SubscribeFailed], reason: str) -> None:
        """No more batches are taken; the reader gets what came before, then ``end(reason)``."""
        if self.failure is not None:
            return
        self.failure, self._end = reason, end
        if self._ending is None:  # (the queue may be full: the reader makes room)
            self._ending = asyncio.get_running_loop().create_task(self._rows.put(None))

    async def _received(self) -> AsyncIterator[Any]:
        consumed: asyncio.Future | None = None
        while True:
            if consumed is not None and not consumed.done():  # the reader asks for the next: it has this one
                consumed.set_result(None)
            item = await self._rows.get()
            if item is None:
                raise self._end(self.failure or "the producing node disconnected")
            rows, producer, seq, consumed, final = item
            self._positions[producer] = seq + 1
            if not final:
                yield rows
                continue
            self._finished.add(producer)
            if self._finished.issuperset(self._positions):  # every producer that sent to us has ended
                self.ended = True
                if consumed is not None:
                    consumed.set_result(None)
                return

    async def batches(self) -> AsyncIterator[list[tuple]]:
        """Each received batch as a list of rows (tuples in field order); a changelog's as :class:`WeightedRows`."""
        async for rows in self._received():
            if not isinstance(rows, list):  # Arrow columns: rows for the row API (once per batch)
                self.conversions += 1
                rows = rows.rows() if rows.weights is None else WeightedRows(rows.rows(), rows.weight_list())
            yield rows

    async def changes(self) -> AsyncIterator[tuple[tuple, int]]:
        """Each received row with its weight: ``(row, -1)`` a row that left, ``(row, 1)`` one that entered (every
        row of a plain stream)."""
        async for rows in self.batches():
            weights = getattr(rows, "weights", None)
            if weights is None:
                for row in rows:
                    yield row, 1
            else:
                for row, weight in zip(rows, weights):
                    yield row, weight

    async def arrow(self) -> AsyncIterator[Any]:
        """Each received batch as a pyarrow ``RecordBatch`` of the stream's Arrow schema
        (:func:`~boreas.wire.columns.arrow_schema`: a timestamp is microseconds in an ``int64``); a changelog's
        with its weights as one more, last, int64 column ``_weight``.

        A batch that came as Arrow is yielded as it was decoded, without making rows; one that came as
        rows is made columns here.  Use one of :meth:`batches`, :meth:`arrow` or iteration per subscriber:
        each batch is given once."""
        import pyarrow as pa  # (only for Arrow readers)

        from boreas.wire.columns import WEIGHT, Columns, arrow_schema

        assert self.schema is not None, "start() first"
        target = arrow_schema(self.schema)
        async for rows in self._received():
            if isinstance(rows, Columns):
                if rows.weights is None:
                    yield rows.batch
                else:
                    yield rows.batch.append_column(pa.field(WEIGHT, pa.int64(), nullable=False), rows.weights)
                continue
            self.conversions += 1
            columns = [pa.array([row[i] for row in rows], f.type) for i, f in enumerate(target)]
            yield pa.RecordBatch.from_arrays(columns, schema=target)

    async def __aiter__(self) -> AsyncIterator[tuple]:
        async for rows in self.batches():
            for row in rows:
                yield row
