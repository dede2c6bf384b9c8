"""What both sides of :func:`~boreas.spark.load_view` share: its errors, a task's target and report, and sending a part.

Each Spark task sends its map's entries to their owners in parts
(:mod:`.load_arrow`); :func:`post_part` sends one, retried while the member
cannot be reached, and raises :class:`LoadRefused` when it is refused (the
driver also uses it for each member's empty first part).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from boreas.wire.addressing import endpoint_url
from boreas.wire.client import PeerClient, PeerRefused, PeerUnreachable

#: part numbers a Spark task may use (part 0 is each member's empty first part; see :mod:`.load_arrow`)
PARTS_PER_TASK = 1_000_000
MSGPACK = "application/msgpack"


class LoadError(RuntimeError):
    """The box cannot be loaded: unknown, not partitioned, not an m3 box, or a relation without a table."""


class LoadRefused(LoadError):
    """A member refused a part (``status`` 409: the box already holds data; 422: entries it does not own)."""

    def __init__(self, message: str, member: int, endpoint: str, status: int):
        super().__init__(message)
        self.member, self.endpoint, self.status = member, endpoint, status


async def post_part(peers: PeerClient, box: str, member: int, endpoint: str, job: str, part: int,
                    body: bytes, timeout: float, content_type: str = MSGPACK) -> None:
    """One part to one member, retried while it cannot be reached (a part is taken once); LoadRefused if refused.

    The body is an Arrow IPC stream (:data:`~boreas.spark.load_arrow.ARROW`) or msgpack ``[[map, key, value],
    ...]`` (DATE keys as day numbers since 1970-01-01), as ``content_type`` says."""
    url = endpoint_url(endpoint, f"/segments/{box}/load?{urlencode({'job': job, 'part': part})}")
    deadline, pause = time.monotonic() + timeout, 0.1
    while True:
        try:
            await peers.call("POST", url, data=body, content_type=content_type)
            return
        except PeerRefused as exc:
            if exc.status < 500 or time.monotonic() > deadline:
                message = exc.payload.get("error") or str(exc)
                raise LoadRefused(f"member {member} ({endpoint}) of box {box!r} refused part {part} of load "
                                  f"{job!r}: {message}", member, endpoint, exc.status) from None
        except PeerUnreachable as exc:
            if time.monotonic() > deadline:
                raise LoadRefused(f"member {member} ({endpoint}) of box {box!r} is unreachable: {exc.reason}",
                                  member, endpoint, 503) from None
        await asyncio.sleep(pause)
        pause = min(pause * 2, 2.0)


@dataclass(frozen=True)
class LoadTarget:
    """What every task needs, as plain values that pickle cheaply."""

    box: str
    layout: dict[str, Any]  # Layout.to_dict()
    maps: tuple[tuple[str, tuple[str, ...], str], ...]  # (name, key column types, value type), by map index
    job: str
    token: str | None
    chunk: int
    timeout: float


@dataclass
class TaskReport:
    """What one task sent; returned to the driver by ``collect``."""

    partition: int
    entries: dict[str, int] = field(default_factory=dict)
    parts: int = 0
    null_keys: int = 0  # entries with a NULL key column (NULLs in the tables): not sent
    refused: tuple[int, str, int, str] | None = None  # (member, endpoint, status, message)


def runtime_key(value: Any, kind: str) -> Any:
    """A key value as the runtime holds it (DATE: ``datetime.date``), or None."""
    if value is None:
        return None
    if kind == "DATE":
        if isinstance(value, dt.datetime):
            return value.date()
        return value if isinstance(value, dt.date) else dt.date.fromisoformat(str(value)[:10])
    if kind == "INT":
        return int(value)
    if kind == "FLOAT":
        return float(value)
    return str(value)
