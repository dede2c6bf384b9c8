"""``publish``'s progress display: rows answered for, rows/s and the ETA, on stderr.

How progress is drawn (redrawn in place on a terminal, a line every few
seconds into a file) has nothing to do with reading or sending rows, so it
is kept out of the ``publish`` command (:mod:`.data`).
"""

from __future__ import annotations

from boreas.catalog.words import counted
import sys
import time
from collections.abc import Callable
from typing import Any


class Progress:
    """``publish``'s progress on stderr: rows the node has answered for, rows/s, and the ETA.

    On a terminal one line is redrawn in place every half second; otherwise
    (``--progress`` into a file or pipe) a line is added every five seconds.
    A streamed file's row count is not known until it has been read: then
    ``read_share`` (how much of the file has been read, 0 to 1) gives the ETA.
    """

    def __init__(self, stream: str, total: int | None, tty: bool,
                 read_share: Callable[[], float | None] | None = None):
        self.stream = stream
        self.total = total
        self.tty = tty
        self.read_share = read_share
        self.started = time.monotonic()

    def line(self, done: int, elapsed: float, share: float | None = None) -> str:
        """
        >>> Progress("Reading", 1000, tty=False).line(250, 5.0)
        'publishing to Reading: 250/1,000 rows (25%), 50 rows/s, ETA 15 s'
        >>> Progress("Reading", None, tty=False).line(250, 5.0)
        'publishing to Reading: 250 rows, 50 rows/s'
        >>> Progress("Reading", None, tty=False).line(250, 5.0, share=0.25)
        'publishing to Reading: 250 rows (25% of the file read), 50 rows/s, ETA 15 s'
        """
        rate = done / max(elapsed, 1e-9)
        text = f"publishing to {self.stream}: {done:,}"
        if self.total:
            text += f"/{counted(self.total, 'row', sep=',')} ({100 * done // self.total}%)"
        else:
            text += " row" if done == 1 else " rows"
            if share is not None:
                text += f" ({100 * share:.0f}% of the file read)"
        text += f", {rate:,.0f} rows/s"
        if self.total and done < self.total:
            text += f", ETA {_duration((self.total - done) / rate) if rate > 0 else '?'}"
        elif not self.total and share:
            text += f", ETA {_duration(elapsed * (1 - share) / share)}"
        return text

    def show(self, done: int) -> None:
        share = self.read_share() if self.read_share is not None and not self.total else None
        text = self.line(done, time.monotonic() - self.started, share)
        sys.stderr.write(f"\r{text}\x1b[K" if self.tty else text + "\n")
        sys.stderr.flush()

    async def follow(self, publisher: Any) -> None:
        import asyncio  # (a running publish has it already; `boreas publish --help` does not load it)

        while True:
            await asyncio.sleep(0.5 if self.tty else 5.0)
            self.show(acknowledged(publisher))

    def finish(self, publisher: Any, total: int | None = None) -> None:
        """The last count (``total``: the rows sent, now that the whole file has been read); on a terminal,
        end the redrawn line."""
        if total is not None:
            self.total = total
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
