"""Where a stream enters, looked up once on the driver and shipped to every task.

A Spark job must not ask the Head once per partition (thousands of tasks
would hammer it, and tasks could see different answers mid-job if the
topology changes), so the driver resolves the stream to a
:class:`StreamTarget` -- entry endpoints plus schema as plain values that
pickle cheaply -- and every task sends to exactly those nodes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from boreas.catalog.model import Field, FieldType, Schema
from boreas.client.head_api import UnknownStream, stream_route
from boreas.wire.client import PeerClient

T = TypeVar("T")


@dataclass(frozen=True)
class StreamTarget:
    """An input stream's entry nodes and schema (``fields`` are ``(name, type, size)``)."""

    stream: str
    schema_name: str
    fields: tuple[tuple[str, str, int | None], ...]
    entries: tuple[str, ...]
    token: str | None

    def schema(self) -> Schema:
        return Schema(self.schema_name, tuple(Field(n, FieldType(t), s) for n, t, s in self.fields))


def run_sync(factory: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to completion from synchronous code, even under a running loop.

    ``publish`` is a blocking call, but it may be made from a notebook or an
    async application whose loop is running in this thread; there the
    coroutine runs on a private loop in a helper thread instead.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(factory())  # type: ignore[arg-type]
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="boreas-spark") as pool:
        return pool.submit(lambda: asyncio.run(factory())).result()  # type: ignore[arg-type]


def lookup_target(head: str, stream: str, token: str | None) -> StreamTarget:
    """Ask the Head where ``stream`` enters; ``UnknownStream`` unless it is a deployed input stream."""

    async def ask() -> dict[str, Any]:
        async with PeerClient(token) as peers:
            return await stream_route(peers, head.rstrip("/"), stream)

    route = run_sync(ask)
    if not route["input"]:
        raise UnknownStream(f"stream {stream!r} is not an input stream: it is produced by a box "
                            f"on {route['producer']}")
    if not route["entries"]:
        raise UnknownStream(f"input stream {stream!r} is not deployed: no node takes it yet")
    schema = route["schema"]
    return StreamTarget(stream, schema["name"], tuple((n, t, s) for n, t, s in schema["fields"]),
                        tuple(route["entries"]), token)
