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

An unknown box or map, or a key that is not of its column's type, raises
:class:`QueryFailed` naming it (an unknown map's message lists the box's
maps, views and out streams).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import difflib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Self
from urllib.parse import urlencode

from boreas.wire.addressing import endpoint_url
from boreas.wire.client import PeerClient, PeerRefused


class QueryFailed(RuntimeError):
    """The box or map is unknown (``status`` 404) or the keys are wrong (422); the message says which."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class QueryResult:
    """One read: ``rows`` as ``(key tuple, value)``; ``value`` is the single row's value (aggregates)."""

    box: str
    node: str
    map: str
    version: int
    agg: str
    keys: tuple[tuple[str, str], ...]
    rows: list[tuple[tuple, Any]]

    @property
    def value(self) -> Any:
        return self.rows[0][1] if self.rows else None

    def as_dict(self) -> dict[tuple, Any]:
        return dict(self.rows)


def key_text(value: Any) -> str:
    """A key as the query API reads it: ``_`` for a wildcard, ISO for a date."""
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
    """The error for a map name the box does not have, listing what it has (and the closest)."""
    names = readable_names(described)
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    listing = "; ".join(f"{what}: {', '.join(described.get(key) or {}) or '(none)'}"
                        for what, key in (("out streams", "streams"), ("views", "views"), ("maps", "maps")))
    return QueryFailed(f"box {box!r} has no map, view or out stream {name!r}"
                       + (f" (did you mean {close[0]!r}?)" if close else "") + f"; {listing}", 404)


def split_words(box: str, described: dict[str, Any], words: Sequence[str]) -> tuple[str | None, list[str]]:
    """``boreas query BOX [MAP] [KEY|_ ...]``: the map the first word names (or None) and the keys.

    The first word is the map when the box has a map, view or out stream of
    that name.  Otherwise it is the first key of the box's default view,
    unless it cannot be one (not ``_`` and not a value of the first key
    column's type, like a misspelt map name where an INT goes): then
    :class:`QueryFailed` names it and lists the box's maps.
    """
    if not words:
        return None, []
    if words[0] in readable_names(described):
        return words[0], list(words[1:])
    default = described.get("default")
    view = described.get("streams", {}).get(default) if default else None
    keys = described.get("views", {}).get(view, {}).get("keys") or []
    if keys and not _is_key_of(words[0], keys[0][1]):
        raise unknown_map(box, words[0], described)
    return None, list(words)


class QueryClient:
    """Reads ``m3`` boxes' maps through the Head's box directory.

    ``head`` is the Head's URL; reads need no ``token`` unless the cluster
    requires one.  ``moved_wait`` bounds the retries while a box moves.  Use
    it as an async context manager, or call :meth:`close`.
    """

    def __init__(self, head: str, token: str | None = None, moved_wait: float = 10.0):
        self.head = head.rstrip("/")
        self.peers = PeerClient(token)
        self.moved_wait = moved_wait
        self._where: dict[str, str] = {}

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connections to the Head and the nodes."""
        await self.peers.close()

    async def node_of(self, box: str, fresh: bool = False) -> str:
        """The endpoint of the node running ``box`` (the Head's answer, cached until it is wrong)."""
        if fresh or box not in self._where:
            try:
                where = await self.peers.call("GET", f"{self.head}/boxes/{box}")
            except PeerRefused as exc:
                raise QueryFailed(exc.payload.get("error") or str(exc), exc.status) from None
            if not where.get("node"):
                raise QueryFailed(f"box {box!r} is not deployed on any node", 404)
            self._where[box] = where["node"]
        return self._where[box]

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
            fresh = True
            await asyncio.sleep(0.05)

    async def maps(self, box: str) -> dict[str, Any]:
        """The box's maps and views (key columns, value types) and the view each out stream carries."""
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
        reply = await self._get(box, f"/query/{box}?{urlencode(params)}")
        columns = tuple((name, kind) for name, kind in reply["keys"])
        rows = [(_typed_key(row["key"], columns), _typed_value(row["value"])) for row in reply["rows"]]
        return QueryResult(reply["box"], reply["node"], reply["map"], reply["version"], reply["agg"],
                           columns, rows)


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
