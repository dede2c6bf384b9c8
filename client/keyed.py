"""Publishing into a partitioned ``m3`` box with each row sent to the member that owns its key.

A :class:`~boreas.client.publisher.Publisher` feeds one member of a
partitioned box, which coordinates its batches: it stamps them as versions
and sends every row, as ``Work``, to the members owning the entries the row
writes (docs/cumulus.md §3.5).  When a row's owner is another member, the
row crosses the network twice (publisher to coordinator, coordinator to
owner) and costs both nodes an encoding and a decoding.  Input that is
already partitioned by key (a Kafka topic keyed by order, one reader per
partition) can skip that hop: :class:`KeyedPublisher` routes each row by
the value of one column, hashed as the box hashes its maps' partition
columns (:func:`~boreas.m3.cumulus.hashing.slot`), to the member owning that
slot, so a row whose entries all live on that member never leaves it.

Consistency: it is one producer per member (``{producer}.{member}``), each
with its own order.  Rows with the same key value always go through the
same one: the layout is read once, at :meth:`KeyedPublisher.start`, and
routing stays pinned to it.  So a stable read includes a prefix of each
sub-producer (a prefix per key), not necessarily a prefix of the rows in
the order they were handed to :meth:`~KeyedPublisher.send`, as with
independent producers.  After a layout change (``boreas move``,
``rebalance``) rows still land correctly, because any member coordinates any
row; only the saved hop is lost for the keys that moved, until the next
publisher starts.

Usage (``examples/xml/tpch_q3.xml`` partitioned; line items keyed by order)::

    async with KeyedPublisher(head, "Lineitem", token, box="q3", key="l_orderkey", producer="li") as pub:
        await pub.send(rows)

>>> from boreas.m3.cumulus import even_layout
>>> lay = even_layout("q3", ["n1:1", "n2:1"], 4, maps=[("m", 0)])
>>> by = route_rows(lay, 0, [[7, "a"], [5, "b"], [7, "c"]], members=2)
>>> sorted(by.items())
[(0, [[5, 'b']]), (1, [[7, 'a'], [7, 'c']])]
>>> route_rows(lay, 0, [[7, "a"], [5, "b"]], members=1)  # member 1 does not coordinate
{0: [[7, 'a'], [5, 'b']]}
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from boreas.catalog.model import FieldType
from boreas.m3.cumulus import Layout, slot
from boreas.wire.client import PeerClient

from .head_api import UnknownStream, stream_route
from .publisher import CAPACITY, Publisher
from .query import QueryClient

_EPOCH = dt.datetime(1970, 1, 1)


def route_rows(layout: Layout, column: int, rows: Iterable[Sequence[Any]], members: int) -> dict[int, list]:
    """``rows`` by the member owning ``slot(row[column])`` under ``layout``; an owner that does not coordinate
    (one of the first ``members`` it is not: a node added later) gives its rows to ``owner % members``."""
    owner = layout.owner_of_slot
    out: dict[int, list] = {}
    for row in rows:
        m = owner(slot(row[column]))
        out.setdefault(m if m < members else m % members, []).append(row)
    return out


def _as_key(kind: FieldType):
    """How a stream field's value is hashed as the map key it becomes: a timestamp as its day (a DATE)."""
    if kind is FieldType.TIMESTAMP:
        return lambda micros: (_EPOCH + dt.timedelta(microseconds=micros)).date()
    return None


class KeyedPublisher:
    """Rows into one input stream of partitioned box ``box``, each to the member owning ``row[key]``.

    Counters (:attr:`accepted`, :attr:`refused_count`, :attr:`duplicates`)
    add up the per-member publishers'; errors are theirs
    (:class:`~boreas.client.publisher.PublishRefused`, ``LinkRefused``).
    """

    def __init__(self, head: str, stream: str, token: str | None, box: str, key: str, producer: str | None = None,
                 batch_size: int = 1000, capacity: int = CAPACITY):
        self.head, self.stream, self.token, self.box, self.key = head, stream, token, box, key
        self.producer = producer
        self.batch_size, self.capacity = batch_size, capacity
        self.layout: Layout | None = None
        self.publishers: list[Publisher] = []
        self._column = -1
        self._convert = None

    async def __aenter__(self) -> KeyedPublisher:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Read the box's layout and the stream's members from the Head, and connect one publisher per member."""
        async with QueryClient(self.head, self.token) as client:
            layout = await client.layout_of(self.box, fresh=True)
        if layout is None:
            raise UnknownStream(f"box {self.box!r} is not partitioned: publish into {self.stream!r} with a Publisher")
        async with PeerClient(self.token) as peers:
            route = await stream_route(peers, self.head, self.stream)
        fields = [name for name, _, _ in route.get("schema", {}).get("fields", [])]
        if route.get("pick") != "member" or not route.get("entries"):
            raise UnknownStream(f"stream {self.stream!r} does not enter partitioned box {self.box!r}'s members")
        if self.key not in fields:
            raise ValueError(f"stream {self.stream!r} has no field {self.key!r} to route by (fields: {', '.join(fields)})")
        self._column = fields.index(self.key)
        self._convert = _as_key(FieldType(route["schema"]["fields"][self._column][1]))
        self.layout = layout
        base = self.producer or f"keyed-{self.stream}"
        self.publishers = [Publisher(self.head, self.stream, self.token, producer=f"{base}.{m}",
                                     batch_size=self.batch_size, capacity=self.capacity, member=m)
                           for m in range(len(route["entries"]))]
        try:
            for publisher in self.publishers:
                await publisher.start()
        except BaseException:
            await self.abort()
            raise

    def route(self, rows: Iterable[Sequence[Any] | Mapping[str, Any]]) -> dict[int, list]:
        """``rows`` (in field order, or by field name) by the member each goes to."""
        if self.layout is None:
            raise RuntimeError("KeyedPublisher.start() first")
        fields = self.publishers[0].fields
        listed = [[row.get(f) for f in fields] if isinstance(row, Mapping) else row for row in rows]
        if self._convert is None:
            return route_rows(self.layout, self._column, listed, len(self.publishers))
        convert, i = self._convert, self._column
        keyed = [(convert(row[i]), row) for row in listed]
        by = route_rows(self.layout, 0, keyed, len(self.publishers))
        return {m: [row for _, row in pairs] for m, pairs in by.items()}

    async def send(self, rows: Iterable[Sequence[Any] | Mapping[str, Any]]) -> None:
        """Send each row to its member's publisher (concurrently); waits while those nodes are behind."""
        await asyncio.gather(*(self.publishers[m].send(part) for m, part in self.route(rows).items()))

    async def flush(self, timeout: float | None = None) -> None:
        await asyncio.gather(*(p.flush(timeout) for p in self.publishers))

    async def close(self) -> None:
        """Wait until every member's publisher is acknowledged (each up to 30 s), then disconnect."""
        results = await asyncio.gather(*(p.close() for p in self.publishers), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def abort(self) -> None:
        for publisher in self.publishers:
            await publisher.abort()

    @property
    def accepted(self) -> int:
        return sum(p.accepted for p in self.publishers)

    @property
    def refused_count(self) -> int:
        return sum(p.refused_count for p in self.publishers)

    @property
    def duplicates(self) -> int:
        return sum(p.duplicates for p in self.publishers)
