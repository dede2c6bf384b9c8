"""Publishing tuples into an input stream.

The publisher asks the Head once where the stream enters (its ``<publish>``
node, else the nodes that consume it) and then sends batches straight to
those nodes over persistent connections (:class:`~boreas.wire.links.OutboundLink`):
ordered, acknowledged, at most ``capacity`` batches outstanding, so a node
that falls behind makes ``send`` wait.  Rows may be sequences in field order
or mappings by field name; each batch of them becomes an Arrow record batch
here (:mod:`.row_batches`; one with a bad row goes as rows).  The node checks
every row against the schema; refused rows come back with their field and
reason in :attr:`Publisher.refused` (numbered from the first row this
publisher sent; the first 1,000 are kept, :attr:`Publisher.refused_count`
counts all), and the rest of the batch is taken.  A batch refused whole (it
does not decode: :attr:`Publisher.refusals` says why) counts each of its
rows there too, with the field ``""``.

A publisher with a fixed ``producer`` id and deterministic batches can be
re-run (a retried Spark task, a publisher that crashed): the node drops the
batches it already has (counted in :attr:`Publisher.duplicates`), and a
durable node (``--data-dir``) remembers them across its own restarts.  An
acknowledgement from a durable node means the batch is on its disk.

A partitioned box's coordinator may hand this producer to another member
(a node grown into the partition, a coordinator retiring: docs/cumulus.md
§6.5); its node's acknowledgements then name the new one (``Ack.moved``)
and the publisher redirects its link there, handing it what was not
acknowledged yet (the new coordinator takes each batch once, in order).

A node that refuses the connection (a missing or wrong ``token``, or a node
of another cluster: 401 at the WebSocket handshake) fails the publisher at
once: ``send``, ``flush`` and ``close`` raise
:class:`~boreas.wire.link_connection.LinkRefused` saying so, instead of waiting.

Usage::

    async with Publisher("http://localhost:14000", "Packet", token) as pub:
        await pub.send([(1, "tcp"), {"time": 2, "protocol": "udp"}])
    print(pub.accepted, pub.refused)
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from boreas.catalog.arrays import route_fields
from boreas.catalog.model import Schema
from boreas.wire.client import PeerClient
from boreas.wire.frames import Ack, Batch, Frame, Refused
from boreas.wire.link_connection import LinkRefused
from boreas.wire.links import OutboundLink
from boreas.wire.prepared import Prepared
from boreas.wire.tuples import RowError

from .entries import pick_entries
from .head_api import UnknownStream, stream_route
from .route import Route


log = logging.getLogger(__name__)

#: Batches a publisher keeps unacknowledged per node (all may be in flight).  A durable node
#: acknowledges a batch once it is on disk, so this must cover that latency: bench/recovery.py
#: measured durable ingest at 0.67x of memory-only with 16, 0.78x with 64, 0.87x with 256.
CAPACITY = 256

#: The sequence number of a producer's end sent on its own, in a later run (:meth:`Publisher.end`): after any
#: batch it can have sent.
END_SEQ = 1 << 62

#: Refused rows kept with their reasons (the rest are only counted): a long publish of bad data
#: must not grow the publisher's memory without bound.
MAX_REFUSED_KEPT = 1000


__all__ = ["LinkRefused", "PublishRefused", "Publisher"]


class PublishRefused(RuntimeError):
    """A node refused a whole batch (the stream does not enter there any more)."""


class Publisher:
    """Publishes rows into one input stream, straight to the nodes where it enters.

    ``head`` is the Head's URL, ``token`` the cluster token (nodes refuse data
    without it).  ``producer`` names this publisher for exactly-once re-runs
    (default: a fresh random id); rows go in batches of ``batch_size``, at
    most ``capacity`` batches unacknowledged per node; ``member`` pins a
    publisher into a partitioned box to that member.  After :meth:`start`,
    :attr:`schema` and :attr:`fields` describe the stream; :attr:`accepted`,
    :attr:`refused` and :attr:`duplicates` count the nodes' answers.
    """

    def __init__(self, head: str, stream: str, token: str | None, producer: str | None = None,
                 batch_size: int = 1000, capacity: int = CAPACITY, member: int | None = None):
        self.head = head
        self.member = member  # a partitioned box's member to feed (pick_entries), if this publisher is pinned
        self.stream = stream
        self.token = token
        self.producer = producer or f"publisher-{uuid.uuid4().hex[:16]}"
        self.batch_size = batch_size
        self.capacity = capacity
        self.schema: Schema | None = None
        self.fields: list[str] = []
        # where the stream enters: the links, followed as the entry moves (client/route.py)
        self.route = Route(head, stream, token, self.producer, member, self._link, self._replied)
        self.accepted = 0
        self.refused: list[RowError] = []  # the first MAX_REFUSED_KEPT refused rows, with the reason
        self.refused_count = 0  # all of them
        self.refusals: list[str] = []
        self.duplicates = 0  # batches the node already had from this producer (a re-run): dropped
        self._sent_rows = 0
        self._first_row: dict[int, tuple[int, int]] = {}  # seq -> number of the batch's first row, its rows
        self._entries: list[str] = []  # where the Head said the stream enters (locate), until start connects
        self._row_batches: Any = None  # a RowBatches once rows are sent (client/row_batches.py: imports pyarrow)

    async def __aenter__(self) -> "Publisher":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def entries(self) -> list[str]:
        """The nodes where the stream enters (the first takes the ordered batches)."""
        return self.route.entries if self.route.links else self._entries

    @entries.setter
    def entries(self, endpoints: list[str]) -> None:
        """Where to connect at :meth:`start` instead of where the Head said (before it only)."""
        self._entries = list(endpoints)

    @property
    def links(self) -> list[OutboundLink]:
        return self.route.links

    async def start(self) -> None:
        """Ask the Head where the stream enters (``UnknownStream`` if it is not a deployed input) and
        connect to those nodes."""
        if self.schema is None:
            await self.locate()
        await self.route.start(self._entries)

    async def locate(self) -> None:
        """Ask the Head where the stream enters and what its schema is (``UnknownStream`` if it is not a deployed
        input), without connecting yet: :meth:`start` does that (a caller that sizes its batches and ``capacity``
        by the schema, as ``boreas publish`` does, asks first)."""
        async with PeerClient(self.token) as peers:
            route = await stream_route(peers, self.head, self.stream)
        if not route["input"]:
            raise UnknownStream(f"stream {self.stream!r} is not an input stream: it is produced by a box "
                                f"on {route['producer']}")
        if not route["entries"]:
            raise UnknownStream(f"input stream {self.stream!r} is not deployed: no node takes it yet")
        self.schema = Schema(route["schema"]["name"], route_fields(route["schema"]))
        self.fields = [f.name for f in self.schema.fields]
        self._entries = pick_entries(route, self.producer, self.member)

    async def _link(self, endpoint: str, first: bool) -> OutboundLink:
        # All of ``capacity`` may be in flight: a durable node acknowledges a batch only once it is
        # on disk, so the window must cover that latency (bandwidth times delay), not just queueing.
        link = OutboundLink(endpoint, self.token, self.producer, capacity=self.capacity,
                            window=self.capacity, on_reply=self._replied if first else None,
                            refusal_is_final=True, digests=True)
        await link.start()
        return link

    @property
    def sent_rows(self) -> int:
        """Rows handed to the nodes so far (acknowledged or not)."""
        return self._sent_rows

    @property
    def acknowledged_rows(self) -> int:
        """Rows the entry node has answered for so far: taken or refused."""
        return self.accepted + self.refused_count

    async def send(self, rows: Iterable[Sequence[Any] | Mapping[str, Any]] | Any) -> None:
        """Queue rows in batches of ``batch_size``; waits while the nodes are behind.

        ``rows`` may be rows (sequences in field order, or mappings by field
        name), or columns: a pyarrow ``RecordBatch`` or ``Table``, a pandas or
        polars ``DataFrame``, cut into batches of ``batch_size`` rows and sent
        as Arrow (no row is made here or at the node; a date or time column of
        a ``timestamp`` field becomes its microseconds, and one that cannot
        raises :class:`~boreas.wire.time_columns.Unconvertible` naming it:
        :mod:`boreas.wire.time_columns`); rows become Arrow
        batches here (:mod:`.row_batches`).  Batches are cut by
        rows, never by time, so a re-run sends the same batches.  A
        :class:`~boreas.wire.columns.Columns` of the stream's Arrow schema is
        sent as it is, one batch, however long, and so is a
        :class:`~boreas.wire.prepared.Prepared` one (``boreas publish`` cuts a
        file's batches, encodes and hashes them in its reader thread, so the
        event loop only sends them).

        Raises :class:`~boreas.wire.link_connection.LinkRefused` once a node has refused the connection.
        """
        if isinstance(rows, Prepared) or type(rows).__module__.endswith("wire.columns"):  # one batch, cut already
            await self._send_batch(rows)
            return
        if type(rows).__module__.split(".")[0] in ("pyarrow", "pandas", "polars"):  # columns (no pyarrow import)
            await self._send_columns(rows)
            return
        if self._row_batches is None:
            from .row_batches import RowBatches  # (pyarrow: only once a publisher has rows to send)

            assert self.schema is not None, "start() first"
            self._row_batches = RowBatches(self.schema)
        for batch in self._row_batches.cut(rows, self.batch_size):
            await self._send_batch(batch)

    async def _send_columns(self, data: Any) -> None:
        from boreas.wire.columns import Columns
        from boreas.wire.publish_columns import conform, record_batches

        assert self.schema is not None, "start() first"
        for batch in record_batches(data, self.batch_size):
            await self._send_batch(Columns(conform(batch, self.schema)))

    async def _send_batch(self, rows: Any) -> None:
        first = self._sent_rows
        self._sent_rows += len(rows)
        # the numbering is the first link's, taken before any send waits: a reroute meanwhile replaces that link
        # (its batches and numbering go on at the replacement, which answers to _replied), so asking
        # ``link is self.links[0]`` after the send would record nothing and count the reply's rows as 0
        for index, link in enumerate(list(self.links)):
            seq = await link.send(self.stream, rows)
            if index == 0 and seq is not None:
                self._first_row[seq] = (first, len(rows))

    def _replied(self, batch: Batch, reply: Frame) -> None:
        if isinstance(reply, Refused) and reply.retry and len(self.links) == 1 and self.route.following:
            self.route.hold(batch, reply.reason)  # (not taken there: the stream may enter elsewhere now)
            return
        first, count = self._first_row.pop(batch.seq, (0, 0))
        if isinstance(reply, Refused):  # every row of it is refused, numbered and counted as rows are
            self.refusals.append(reply.reason)
            self._count_refused(first, [(row, "", reply.reason) for row in range(count)])
        elif isinstance(reply, Ack) and reply.duplicate:
            self.duplicates += 1
        elif isinstance(reply, Ack):
            if reply.moved:  # handed to another coordinator: redirect there
                self.route.moved(reply.moved)
            self.accepted += reply.accepted
            errors = reply.errors
            whole = [(field, reason) for row, field, reason in errors if row < 0]
            if whole:  # row -1: the whole batch (an Arrow batch of a schema replaced meanwhile): each of its rows
                errors = [(row, *whole[0]) for row in range(count)]
            self._count_refused(first, errors)

    def _count_refused(self, first: int, errors: list[tuple[int, str, str]]) -> None:
        """Count refused rows (row, field, reason) of a batch whose first row is number ``first``; keep the
        first ``MAX_REFUSED_KEPT``."""
        self.refused_count += len(errors)
        room = MAX_REFUSED_KEPT - len(self.refused)
        if room > 0:
            self.refused += [RowError(first + row, field, reason) for row, field, reason in errors[:room]]

    async def flush(self, timeout: float | None = None) -> None:
        """Wait until every batch sent so far is acknowledged (``PublishRefused``: a node refused a
        batch; ``LinkRefused``: a node refused the connection; ``TimeoutError`` after ``timeout``)."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:  # again if a link was replaced meanwhile (the entry node failed over) or batches were held
            links = list(self.links)
            for link in links:
                await link.flush(None if deadline is None else max(0.0, deadline - loop.time()))
            if self.route.held:
                async with asyncio.timeout(None if deadline is None else max(0.0, deadline - loop.time())):
                    await self.route.held.empty.wait()
                continue
            if links == self.links:
                break
        if self.refusals:
            raise PublishRefused(self.refusals[0])

    async def abort(self) -> None:
        """Disconnect now, without waiting for acknowledgements (what was not acknowledged may be lost;
        publishing again with the same ``producer`` and batches delivers it once)."""
        await self.route.stop()
        for link in self.links:
            await link.abort()

    async def end(self) -> None:
        """End this producer of the stream in a later run than the one that published its rows (``boreas publish
        STREAM --end --producer X``), then disconnect.

        That run's sequence numbers are not known here, so the final mark
        is numbered :data:`END_SEQ`, past any of them, and marked
        ``restart`` (wire/frames.py): the entry node takes it at once, after
        whatever it took of this producer, and drops anything later sent
        under this producer id as already taken.  Sent again, it is a
        duplicate.  It goes on the stream's one ordered link, behind what
        that link still holds: after a redirect (``Ack.moved``) the link to
        the new coordinator of a partitioned box, behind the batches handed
        to it, so that node takes it last and drops what is later sent
        under this producer (docs/cumulus.md §6.5).
        """
        try:
            for link in self.links:
                await link.send(self.stream, [], self.producer, END_SEQ, restart=True, final=True)
            await self.flush(timeout=30)
        finally:
            await self.abort()

    async def close(self, final: bool = False) -> None:
        """Wait (up to 30 s) until every batch is acknowledged, then disconnect.

        The stream's route is still followed meanwhile: if its entry node
        fails over while we wait, what it never acknowledged goes to the new one.

        ``final``: this producer has published all it ever will.  A last,
        empty batch marked final goes after the rest, numbered like them (so
        a re-run sends it again and it is dropped as a duplicate); once every
        producer that published to the stream has ended, the stream ends and
        the aggregates it feeds emit their open windows.
        """
        try:
            if final:
                for link in self.links:
                    await link.send(self.stream, [], final=True)
            await self.flush(timeout=30)
        finally:
            await self.route.stop()
            for link in self.links:
                await link.abort()
