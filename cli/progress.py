"""``publish``'s progress display: rows answered for, rows/s and the ETA, on stderr.

How progress is drawn (redrawn in place on a terminal, a line every few
seconds into a file) has nothing to do with reading or sending rows, so it
is kept out of the ``publish`` command (:mod:`.data`).
"""

from __future__ import annotations

from boreas.catalog.words import counted
import asyncio
import sys
import time
from typing import Any


class Progress:
    """``publish``'s progress on stderr: rows the node has answered for, rows/s, and the ETA.

    On a terminal one line is redrawn in place every half second; otherwise
    (``--progress`` into a file or pipe) a line is added every five seconds.
    """

    def __init__(self, stream: str, total: int | None, tty: bool):
        self.stream = stream
        self.total = total
        self.tty = tty
        self.started = time.monotonic()

    def line(self, done: int, elapsed: float) -> str:
        """
        >>> Progress("Reading", 1000, tty=False).line(250, 5.0)
        'publishing to Reading: 250/1,000 rows (25%), 50 rows/s, ETA 15 s'
        >>> Progress("Reading", None, tty=False).line(250, 5.0)
        'publishing to Reading: 250 rows, 50 rows/s'
        """
        rate = done / max(elapsed, 1e-9)
        text = f"publishing to {self.stream}: {done:,}"
        text += f"/{counted(self.total, 'row', sep=',')} ({100 * done // self.total}%)" if self.total \
            else (" row" if done == 1 else " rows")
        text += f", {rate:,.0f} rows/s"
        if self.total and done < self.total:
            text += f", ETA {_duration((self.total - done) / rate) if rate > 0 else '?'}"
        return text

    def show(self, done: int) -> None:
        text = self.line(done, time.monotonic() - self.started)
        sys.stderr.write(f"\r{text}\x1b[K" if self.tty else text + "\n")
        sys.stderr.flush()

    async def follow(self, publisher: Any) -> None:
        while True:
            await asyncio.sleep(0.5 if self.tty else 5.0)
            self.show(acknowledged(publisher))

    def finish(self, publisher: Any) -> None:
        """The last count; on a terminal, end the redrawn line."""
        self.show(acknowledged(publisher))
        if self.tty:
            sys.stderr.write("\n")
            sys.stderr.flush()


def acknowledged(publisher: Any) -> int:
    """Rows the entry node has answered for (taken or refused)."""
    return getattr(publisher, "acknowledged_rows", publisher.accepted)


def _duration(seconds: float) -> str:
    """
    >>> _duration(5.2), _duration(75), _duration(3720)
    ('5 s', '1 min 15 s', '1 h 2 min')
    """
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"
