"""Reading the maps of ``m3`` boxes from Python: the node's query API (``GET /query/{box}``).

A box runs on one node and may move, so the client asks the Head where it
is (``GET /boxes/{name}``), reads from that node, and when the node answers
that the box is not there (it moved between the two calls) asks the Head
again, for a bounded time.  Keys are typed values (``datetime.date`` for DATE
columns) or ``None`` for a wildcard; results come back typed the same way.

Usage::

    async with QueryClient("http://localhost:14000") as client:
        result = await client.query("q3")                       # the whole view, READ_SLICE
        total = (await client.query("q3", agg="sum")).value     # READ_SUM over every row
        rows = (await client.query("q3", keys=[7, None], stable=True)).rows
        table = await client.arrow("q3")                        # the same read as a pyarrow Table

An unknown box or map, or a key that is not of its column's type, raises
:class:`QueryFailed` naming it (an unknown map's message lists the box's
maps, views and out streams).

**Partitioned boxes** (docs/cumulus.md §5) are read from the members that
hold the part read, concurrently, and their answers merged into one
(``members`` says which members answered, ``segments`` the segments their
answers covered); ``stable=True`` reads one consistent cut of the whole
box.  :mod:`boreas.client.partitioned` says how, and how a read follows a
layout change.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import difflib
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Self
from urllib.parse import urlencode

from boreas.catalog.words import close_matches
from boreas.m3.cumulus import Layout
from boreas.wire.addressing import endpoint_url
from boreas.wire.client import PeerClient, PeerRefused, PeerUnreachable

from .errors import QueryFailed
from .head_api import with_suggestions
from .partitioned import (  # re-exported: they were defined here, and are imported from here
    PartitionedReads,
    combine,
    cover_problem,
    layout_of_answer,
    members_to_ask,
    merge,
    partition_target,
    segments_needed,
    typed_keys,
)

__all__ = ["QueryClient", "QueryFailed", "QueryResult", "combine", "cover_problem", "key_text",
           "layout_of_answer", "members_to_ask", "merge", "partition_target", "query", "readable_names",
           "segments_needed", "split_words", "typed_keys", "unknown_map"]


@dataclass(frozen=True)
class QueryResult:
    """One read: ``rows`` as ``(key tuple, value)``; ``value`` is the single row's value (aggregates).

    For a partitioned box, ``node`` lists the endpoints that answered (comma
    separated), ``members`` their member numbers, ``segments`` the segment
    ids their answers covered, and ``version`` is the sum of their versions;
    for a box on one node ``members`` and ``segments`` are empty.
    """

    box: str
    node: str
    map: str
    version: int
    agg: str
    keys: tuple[tuple[str, str], ...]
    rows: list[tuple[tuple, Any]]
    segments: tuple[int, ...] = ()
    members: tuple[int, ...] = ()
    epoch: int | None = None  # READ_STABLE of a partitioned box: the stable epoch read
    age: float | None = None  # seconds since that epoch ended
    positions: tuple[tuple[str, str, int], ...] = ()  # (stream, producer, last seq) it includes

    @property
    def value(self) -> Any:
        return self.rows[0][1] if self.rows else None

    def as_dict(self) -> dict[tuple, Any]:
        return dict(self.rows)


def key_text(value: Any) -> str:
    """A key as the query API reads it: ``_`` for a wildcard, ISO for a date.

    >>> key_text(None), key_text(dt.date(1995, 3, 1)), key_text(7)
    ('_', '1995-03-01', '7')
    """
    if value is None:
        return "_"
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


def _is_key_of(text: str, kind: str) -> bool:
    """Whether ``text`` can be a key of a column of type ``kind`` (as the node parses keys)."""
    if text == "_" or kind not in ("INT", "FLOAT", "DATE"):
        return True
    try:
        if kind == "INT":
            int(text)
        elif kind == "FLOAT":
            float(text)
        elif not text.lstrip("-").isdigit():
            dt.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def readable_names(described: dict[str, Any]) -> list[str]:
    """Every name a query's ``map`` may be, from :meth:`QueryClient.maps`: out streams, views, maps."""
    return list(dict.fromkeys([*described.get("streams", {}), *described.get("views", {}),
                               *described.get("maps", {})]))


def unknown_map(box: str, name: str, described: dict[str, Any]) -> QueryFailed:
    """The error for a map name the box does not have, listing what it has (and the closest).

    >>> d = {"streams": {"G": "Q1"}, "views": {"Q1": {}}, "maps": {"Q1_total": {}}}
    >>> print(unknown_map("v", "Q1_totl", d))
    box 'v' has no map, view or out stream 'Q1_totl' (did you mean 'Q1_total'?); out streams: G; views: Q1; maps: ...
    """
    names = readable_names(described)
    close = close_matches(name, names, n=1)
    listing = "; ".join(f"{what}: {', '.join(described.get(key) or {}) or '(none)'}"
                        for what, key in (("out streams", "streams"), ("views", "views"), ("maps", "maps")))
    return QueryFailed(f"box {box!r} has no map, view or out stream {name!r}"
                       + (f" (did you mean {close[0]!r}?)" if close else "") + f"; {listing}", 404)


def split_words(box: str, described: dict[str, Any], words: Sequence[str]) -> tuple[str | None, list[str]]:
    """``boreas query BOX [MAP] [KEY|_ ...]``: the map the first word names (or None) and the keys.

    The first word is the map when the box has a map, view or out stream of
    that name.  Otherwise it is the first key of the box's default view,
    unless it cannot be one: then :class:`QueryFailed` says the box has no
    map of that name (with the closest, "did you mean") and lists the box's
    maps.  It cannot be a key when it is not ``_`` and not a value of the
    first key column's type (a misspelt map name where an INT goes), when
    it is a name and there are more words than the view has key columns (so
    it named a map: ``nosuchmap west`` of a view keyed by region alone), or
    when it is a close misspelling of one of the box's names.

    >>> d = {"default": "G", "streams": {"G": "Q1"}, "views": {"Q1": {"keys": [["a", "INT"]]}},
    ...      "maps": {"Q1_total": {}}}
    >>> split_words("v", d, ["Q1_total", "7"]), split_words("v", d, ["7", "_"]), split_words("v", d, [])
    (('Q1_total', ['7']), (None, ['7', '_']), (None, []))
    >>> r = {"default": "R", "streams": {"R": "by_region"}, "views": {"by_region": {"keys": [["region", "STRING"]]}},
    ...      "maps": {"by_region_n": {}}}
    >>> split_words("v", r, ["west"])
    (None, ['west'])
    >>> split_words("v", r, ["nosuchmap", "west"])
    Traceback (most recent call last):
    ...
    boreas.client.errors.QueryFailed: box 'v' has no map, view or out stream 'nosuchmap'; out streams: R; ...
    >>> split_words("v", r, ["by_regon"])
    Traceback (most recent call last):
    ...
    boreas.client.errors.QueryFailed: box 'v' has no map, view or out stream 'by_regon' (did you mean 'by_region'?); ...
    """
    if not words:
        return None, []
    names = readable_names(described)
    if words[0] in names:
        return words[0], list(words[1:])
    default = described.get("default")
    view = described.get("streams", {}).get(default) if default else None
    keys = described.get("views", {}).get(view, {}).get("keys") or []
    too_many = len(words) > len(keys) and words[0].isidentifier()  # (too many keys: the node says so)
    if keys and not _is_key_of(words[0], keys[0][1]) or too_many \
            or difflib.get_close_matches(words[0], names, n=1, cutoff=0.8):
        raise unknown_map(box, words[0], described)
    return None, list(words)


class QueryClient:
    """Reads ``m3`` boxes' maps through the Head's box directory.

    ``head`` is the Head's URL; reads need no ``token`` unless the cluster
    requires one.  ``moved_wait`` bounds the retries while a box moves (or
    its layout changes).  Use it as an async context manager, or call
    :meth:`close`.
    """

    def __init__(self, head: str, token: str | None = None, moved_wait: float = 10.0):
        self.head = head.rstrip("/")
        self.peers = PeerClient(token)
        self.moved_wait = moved_wait
        self._where: dict[str, dict[str, Any]] = {}  # the Head's answers, per box
        self._partitions = PartitionedReads(self.peers, self.layout_of)  # what is known of partitioned boxes

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connections to the Head and the nodes."""
        await self.peers.close()

    async def box_info(self, box: str, fresh: bool = False) -> dict[str, Any]:
        """The Head's ``GET /boxes/{box}`` answer (cached while it names a node or a partition)."""
        if fresh or box not in self._where:
            try:
                where = await self.peers.call("GET", f"{self.head}/boxes/{box}")
            except PeerRefused as exc:
                message = exc.payload.get("error") or str(exc)
                if exc.status == 404:
                    message = await with_suggestions(self.peers, self.head, message, "box", box)
                raise QueryFailed(message, exc.status) from None
            partition = where.get("partition")
            self._partitions.head_answered(box, partition)
            if not where.get("node") and not partition:
                self._where.pop(box, None)
                return where
            self._where[box] = where
        return self._where[box]

    async def layout_of(self, box: str, fresh: bool = False) -> Layout | None:
        """The layout of a partitioned box (the Head's, or a newer one a member answered); None if not partitioned."""
        await self.box_info(box, fresh)
        return self._partitions.layout(box)

    async def node_of(self, box: str, fresh: bool = False) -> str:
        """The endpoint of the node running ``box`` (the Head's answer, cached until it is wrong).

        For a partitioned box, its home member's (which answers ``maps`` like any member).
        """
        where = await self.box_info(box, fresh)
        layout = self._partitions.layout(box)
        if layout is not None:
            return layout.members[layout.home]
        if not where.get("node"):
            raise QueryFailed(f"box {box!r} is not deployed on any node", 404)
        return where["node"]

    async def _get(self, box: str, path: str) -> dict[str, Any]:
        deadline = time.monotonic() + self.moved_wait
        fresh = False
        while True:
            node = await self.node_of(box, fresh)
            try:
                return await self.peers.call("GET", endpoint_url(node, path))
            except PeerRefused as exc:
                message = exc.payload.get("error") or str(exc)
                moved = exc.status == 404 and message.startswith("no box ")
                if not moved or time.monotonic() > deadline:
                    raise QueryFailed(message, exc.status) from None
            except PeerUnreachable:  # a partitioned box's home member may be gone: the Head knows
                if self._partitions.layout(box) is None or time.monotonic() > deadline:
                    raise
            fresh = True
            await asyncio.sleep(0.05)

    async def maps(self, box: str) -> dict[str, Any]:
        """The box's maps and views (key columns, value types) and the view each out stream carries.

        For a partitioned box a member's answer: ``entries`` counts that member's only.
        """
        return await self._get(box, f"/query/{box}/maps")

    async def query(self, box: str, map: str | None = None, keys: Sequence[Any] = (),
                    agg: str = "slice", stable: bool = False) -> QueryResult:
        """READ_SLICE (``agg="slice"``), READ_SUM/MIN/MAX; ``stable`` makes it READ_STABLE."""
        params: list[tuple[str, str]] = [("agg", agg)]
        if map:
            params.append(("map", map))
        params += [("key", key_text(k)) for k in keys]
        if stable:
            params.append(("stable", "1"))
        if await self.layout_of(box) is None:
            reply = await self._get(box, f"/query/{box}?{urlencode(params)}")
            if "member" not in reply:
                return _result(reply)
            # it became partitioned meanwhile: that was one member's part
        merged = await self._partitions.read(box, map, keys, agg, stable, params, self.moved_wait)
        if merged is None:  # not partitioned any more
            return await self.query(box, map, keys, agg, stable)
        return _result(merged)

    async def arrow(self, box: str, map: str | None = None, keys: Sequence[Any] = (), agg: str = "slice",
                    stable: bool = False) -> Any:
        """:meth:`query`'s read as a pyarrow ``Table`` with the view's schema: key columns, then value columns
        (client/query_arrow.py says how they are named and typed).  Rows stay :meth:`query`'s."""
        from .query_arrow import result_table  # (pyarrow: only for Arrow readers)

        result = await self.query(box, map, keys, agg, stable)
        return result_table(result, await self.maps(box))

    async def batches(self, box: str, map: str | None = None, keys: Sequence[Any] = (), agg: str = "slice",
                      stable: bool = False) -> AsyncIterator[Any]:
        """:meth:`arrow`'s read as pyarrow ``RecordBatch`` es as they arrive: the query API answers a read whole
        (a partitioned box's parts merged), so one batch, none for an empty read."""
        table = await self.arrow(box, map, keys, agg, stable)
        for batch in table.to_batches():
            yield batch

    async def segments(self, box: str) -> tuple[Layout, list[dict[str, Any]]]:
        """A partitioned box's layout (the Head's) and every member's ``GET /segments/{box}`` answer, in member order.

        :class:`QueryFailed` when the box is unknown, not partitioned (naming
        its node) or a member cannot answer (naming the member).
        """
        where = await self.box_info(box, fresh=True)
        layout = self._partitions.layout(box)
        if layout is None:
            node = where.get("node")
            raise QueryFailed(f"box {box!r} is not partitioned (it runs on node {node})" if node
                              else f"box {box!r} is not deployed on any node", 409)

        async def ask(member: int, endpoint: str) -> dict[str, Any]:
            try:
                # (by member: after a failover one node hosts two members of the box)
                return await self.peers.call("GET", endpoint_url(endpoint, f"/segments/{box}?member={member}"))
            except PeerRefused as exc:
                raise QueryFailed(f"member {member} ({endpoint}) of box {box!r} refused: "
                                  f"{exc.payload.get('error') or exc}", exc.status) from None
            except PeerUnreachable as exc:
                raise QueryFailed(f"member {member} ({endpoint}) of box {box!r} is unreachable: {exc.reason}",
                                  503) from None

        answers = await asyncio.gather(*(ask(i, e) for i, e in enumerate(layout.members)))
        return layout, list(answers)


def _result(reply: dict[str, Any]) -> QueryResult:
    columns = tuple((name, kind) for name, kind in reply["keys"])
    rows = [(_typed_key(row["key"], columns), _typed_value(row["value"])) for row in reply["rows"]]
    return QueryResult(reply["box"], reply["node"], reply["map"], reply["version"], reply["agg"], columns, rows,
                       tuple(reply.get("segments", ())), tuple(reply.get("members", ())), reply.get("epoch"),
                       reply.get("age"), tuple(tuple(p) for p in reply.get("positions", ())))


def _typed_key(key: list, columns: tuple[tuple[str, str], ...]) -> tuple:
    return tuple(dt.date.fromisoformat(v) if kind == "DATE" and v is not None else v
                 for v, (_, kind) in zip(key, columns))


def _typed_value(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def query(head: str, box: str, map: str | None = None, keys: Sequence[Any] = (), agg: str = "slice",
          stable: bool = False, token: str | None = None) -> QueryResult:
    """One read, for scripts without an event loop."""

    async def run() -> QueryResult:
        async with QueryClient(head, token) as client:
            return await client.query(box, map, keys, agg, stable)

    return asyncio.run(run())
