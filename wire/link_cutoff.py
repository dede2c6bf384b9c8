"""When a link to a subscriber stops sending to it, and how the subscriber is told why.

A link to a client subscriber may give up on it, so that one client never
holds the node back:

* a subscriber with ``on_slow="disconnect"`` that reads too slowly (its
  buffer full, past ``retain_bytes``, or no acknowledgement for
  ``slow_after`` seconds while batches waited) is cut off;
* a **named** subscriber is never cut off for being down or slow, only when
  what waits for it passes ``retain_bytes`` or ``retain_for`` seconds
  without an acknowledgement.

Either way every batch waiting for it is dropped, nothing more of the
stream is sent, and the subscriber gets a ``Goodbye`` saying how much it
missed: at once if it is connected, else (a named one) when it comes back.
:class:`CutOff` owns that decision and its state (why, and whether the
subscriber was told); the link asks it before sending, the connection asks
it when it connects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter

import aiohttp

from .frames import Goodbye, encode, rows_in
from .link_queue import LinkQueue

log = logging.getLogger("boreas.wire.links")  # the link's records keep their logger

#: What a link to a client does when its buffer is full because the client reads too slowly:
#: wait (back-pressure on everything the node sends), drop the batch, or say goodbye and drop
#: what was buffered (the client sees why).  Links between nodes always wait.
ON_SLOW = ("block", "drop", "disconnect")
SLOW_CLOSE = 4008  # WebSocket close code after a Goodbye for slowness


class CutOff:
    """Whether a link's subscriber was cut off, why, and telling it (the module docstring says when)."""

    def __init__(self, queue: LinkQueue, counters: Counter[str], label: str, *, on_slow: str = "block",
                 name: str | None = None, retain_bytes: int = 0, retain_for: float = 0.0,
                 slow_after: float = 0.0) -> None:
        if on_slow not in ON_SLOW:
            raise ValueError(f"on_slow must be one of {', '.join(ON_SLOW)}, not {on_slow!r}")
        self.queue = queue
        self.counters = counters
        self.label = label  # "sender -> endpoint", for the log
        self.on_slow = on_slow
        self.name = name
        self.retain_bytes = retain_bytes
        self.retain_for = retain_for
        self.slow_after = slow_after
        self.reason: str | None = None  # why this subscriber was cut off: nothing more is sent to it
        self.told = False  # the subscriber was sent ``reason`` (a named one is told when it comes back)
        self._goodbyes: set[asyncio.Task] = set()

    def past_retention(self) -> bool:
        return bool(self.retain_bytes) and self.queue.buffered_bytes > self.retain_bytes

    def past_keeping(self) -> str:
        """Why a named subscriber's batches can no longer be kept for it ("" while they can)."""
        if self.past_retention():
            return f"more than {self.retain_bytes / 1048576:g} MiB waited for it"
        waited = self.queue.waited()
        if self.retain_for and waited > self.retain_for:
            return f"batches waited {waited:.0f} s for an acknowledgement, more than {self.retain_for:g} s"
        return ""

    def _drop_pending(self) -> tuple[int, int]:
        """Drop every batch not acknowledged, sent or not: (batches, rows) dropped."""
        dropped = self.queue.drop_all()
        rows = sum(rows_in(batch) for batch in dropped)
        self.counters["dropped_batches"] += len(dropped)
        self.counters["dropped_rows"] += rows
        return len(dropped), rows

    def fall_behind(self, why: str, sender: str, ws: aiohttp.ClientWebSocketResponse | None) -> None:
        """A named subscriber fell past what is kept for it: drop it all, and tell it (now on ``ws``, or when it is back)."""
        batches, rows = self._drop_pending()
        self.reason = (f"subscriber {self.name!r} fell past what {sender} keeps for it ({why}): {batches} "
                       f"batches ({rows} rows) it had not acknowledged were dropped")
        self.counters["retention_drops"] += 1
        log.warning("link %s: %s", self.label, self.reason)
        if ws is not None and not ws.closed:
            self._say_goodbye(ws)

    def too_slow(self, sender: str, ws: aiohttp.ClientWebSocketResponse | None, why: str = "") -> None:
        """The subscriber on ``ws`` reads too slowly: counted, and cut off if its policy is to disconnect."""
        self.counters["slow_drops"] += 1
        if self.on_slow != "disconnect" or ws is None or ws.closed or self.reason is not None:
            return
        count, rows = self._drop_pending()
        why = why or (f"{count} batches waiting, past the buffer's limit of "
                      f"{self.retain_bytes / 1048576:.0f} MiB" if self.retain_bytes else
                      f"{count} batches waiting, the buffer's limit")
        self.reason = (f"{sender} cut this subscriber off: it read too slowly ({why}); {count} batches "
                       f"({rows} rows) that waited for it are dropped, and nothing more of the stream is sent here")
        self.counters["slow_disconnects"] += 1
        log.warning("link %s: the subscriber reads too slowly (%s); cutting it off, %d batches (%d rows) "
                    "dropped", self.label, why, count, rows)
        self._say_goodbye(ws)

    def inherit(self, other: CutOff) -> None:
        """A named subscriber that fell behind while down (``other``, its old link) hears it here, where it is now."""
        if self.name is not None and other.name is not None and other.reason is not None and not other.told:
            self.reason = other.reason
            other.told = True

    async def tell(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        """Tell the subscriber why it was cut off, and close the connection."""
        self.told = True
        with contextlib.suppress(Exception):
            await ws.send_bytes(encode(Goodbye(self.reason or "")))
            await ws.close(code=SLOW_CLOSE, message=b"cut off")

    def _say_goodbye(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        """:meth:`tell` from a task of its own (the caller may not wait)."""
        self.told = True
        task = asyncio.get_running_loop().create_task(self.tell(ws))
        self._goodbyes.add(task)
        task.add_done_callback(self._goodbyes.discard)

    async def abort(self) -> None:
        """Stop telling (the link is aborted)."""
        for goodbye in list(self._goodbyes):
            goodbye.cancel()
        await asyncio.gather(*self._goodbyes, return_exceptions=True)
