"""The executor side of :func:`~boreas.spark.load_view`: one Spark partition's entries sent to their owners in parts.

Each task computes every entry's owner with the layout
(:meth:`~boreas.m3.cumulus.Layout.owner`, the nodes' own hash) and POSTs
chunks of at most ``chunk`` entries straight to the owning member
(``POST /segments/{box}/load?job=J&part=K``, msgpack ``[[map, key, value],
...]``, DATE keys as day numbers since 1970-01-01).  Part numbers are fixed
per (Spark partition, chunk), and a partition's entries come sorted by key,
so a retried or speculative task sends the very same parts, and a member
ignores a ``(job, part)`` it already took: exactly once across retries.

The errors of a load live here too, since sending a part (:func:`post_part`,
which the driver also uses for each member's empty first part) is what
raises :class:`LoadRefused`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

import msgspec
from boreas.m3.cumulus import Layout
from boreas.wire.addressing import endpoint_url
from boreas.wire.client import PeerClient, PeerRefused, PeerUnreachable

from .target import run_sync

#: part numbers of one Spark partition: 1 + partition * PARTS_PER_TASK + n (part 0 is the empty first part)
PARTS_PER_TASK = 1_000_000
_EPOCH = dt.date(1970, 1, 1).toordinal()
MSGPACK = "application/msgpack"


class LoadError(RuntimeError):
    """The box cannot be loaded: unknown, not partitioned, not an m3 box, or a relation without a table."""


class LoadRefused(LoadError):
    """A member refused a part (``status`` 409: the box already holds data; 422: entries it does not own)."""

    def __init__(self, message: str, member: int, endpoint: str, status: int):
        super().__init__(message)
        self.member, self.endpoint, self.status = member, endpoint, status


async def post_part(peers: PeerClient, box: str, member: int, endpoint: str, job: str, part: int,
                    body: bytes, timeout: float) -> None:
    """One part to one member, retried while it cannot be reached (a part is taken once); LoadRefused if refused."""
    url = endpoint_url(endpoint, f"/segments/{box}/load?{urlencode({'job': job, 'part': part})}")
    deadline, pause = time.monotonic() + timeout, 0.1
    while True:
        try:
            await peers.call("POST", url, data=body, content_type=MSGPACK)
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


def _wire_key(key: tuple, kinds: tuple[str, ...]) -> list:
    return [v.toordinal() - _EPOCH if kind == "DATE" else v for v, kind in zip(key, kinds)]


def _value(value: Any, kind: str) -> int | float:
    if kind == "INT" and (isinstance(value, int) or (isinstance(value, (Decimal, float)) and float(value).is_integer())):
        return int(value)
    return float(value)


async def _send(target: LoadTarget, index: int, rows: Iterator[tuple[int, tuple]]) -> TaskReport:
    layout = Layout.from_dict(target.layout)
    report = TaskReport(index, {name: 0 for name, _, _ in target.maps})
    buffers: dict[int, list] = {}
    counts: dict[int, dict[str, int]] = {}
    encode = msgspec.msgpack.Encoder()
    async with PeerClient(target.token, timeout=max(target.timeout, 10.0)) as peers:

        async def flush(member: int) -> None:
            entries = buffers.pop(member, [])
            if not entries:
                return
            if report.parts + 1 >= PARTS_PER_TASK:
                raise ValueError(f"Spark partition {index} needs more than {PARTS_PER_TASK} parts; "
                                 f"use more partitions or a larger chunk")
            report.parts += 1
            part = 1 + index * PARTS_PER_TASK + report.parts
            await post_part(peers, target.box, member, layout.members[member], target.job, part,
                        encode.encode(entries), target.timeout)
            for name, n in counts.pop(member, {}).items():
                report.entries[name] += n

        try:
            for map_index, row in rows:
                name, kinds, value_type = target.maps[map_index]
                key = tuple(runtime_key(v, kind) for v, kind in zip(row[:-1], kinds))
                value = row[-1]
                if value is None:
                    continue
                if any(v is None for v in key):
                    report.null_keys += 1
                    continue
                holders = layout.holders(name, key)  # (a replicated map's entry goes to every member)
                entry = [name, _wire_key(key, kinds), _value(value, value_type)]
                for member in holders:
                    buffers.setdefault(member, []).append(entry)
                    if member == holders[0]:  # an entry counts once, however many members hold it
                        per_map = counts.setdefault(member, {})
                        per_map[name] = per_map.get(name, 0) + 1
                    if len(buffers[member]) >= target.chunk:
                        await flush(member)
            for member in sorted(buffers):
                await flush(member)
        except LoadRefused as exc:
            report.refused = (exc.member, exc.endpoint, exc.status, str(exc))
    return report


def load_partition(target: LoadTarget, index: int, rows: Iterator[tuple[int, tuple]]) -> Iterator[TaskReport]:
    """Runs in the executor: one report per partition."""
    yield run_sync(lambda: _send(target, index, rows))


