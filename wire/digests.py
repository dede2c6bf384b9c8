"""Telling a true re-send from other content under the same (producer, sequence).

A receiver drops a batch whose (stream, producer, seq) it already took: that
is what makes a re-run publisher, a retried Spark task or a reconnecting
link deliver each batch once.  The same rule would silently drop *other*
rows sent under a reused producer id (``boreas publish --producer X`` with
another file): the publisher would report "0 rows" and succeed.  So a
publisher's batch carries a digest of its encoded rows
(:func:`rows_digest`, in :class:`~boreas.wire.frames.Batch`; of the rows
as msgpack when the publisher was given rows, even though it sends them as
Arrow columns: client/row_batches.py), and the
receiver remembers the digests of what it took (:class:`DigestBook`): a
duplicate whose digest differs is refused, and so is everything that
producer sends after it, so nothing of the conflicting publish is half
taken.

What is remembered is bounded: per producer the digests of its first
:data:`FIRST` batches (a re-run starts at 0, so its first batch is where a
conflict shows) and of its last :data:`RECENT` (a re-send after a reconnect,
or a file that grew: the last, partial batch differs), for at most
``max_producers`` producers, least recently used first out.  A duplicate
whose digest is not remembered is dropped as before.  Batches without a
digest (0: node to node, where a replay after recovery reproduces outputs
exactly) are never checked.

>>> book = DigestBook()
>>> book.record("S", "p", 0, 11)
>>> book.screen("S", "p", 0, 11) is None, book.screen("S", "p", 1, 99) is None
(True, True)
>>> print(book.screen("S", "p", 0, 12))
producer 'p' already published batch 0 of S with other rows (a reused --producer id with other content?); nothing more from it is taken
>>> book.screen("S", "p", 5, 55) is not None  # everything after a conflict, until a true re-run
True
>>> book.screen("S", "p", 0, 11) is None
True
>>> again = DigestBook(); again.restore(book.state()); again.screen("S", "p", 0, 12) is not None
True
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field

#: Digests kept of a producer's first batches, and of its most recent ones.
FIRST = 8
RECENT = 32


def rows_digest(encoded_rows: bytes) -> int:
    """A 64-bit digest of a batch's encoded rows (never 0, which means "none").

    >>> rows_digest(b"\\x91\\x91\\x01") == rows_digest(b"\\x91\\x91\\x01") != rows_digest(b"\\x91\\x91\\x02")
    True
    """
    return int.from_bytes(hashlib.blake2b(encoded_rows, digest_size=8).digest(), "big") or 1


@dataclass
class _Producer:
    first: dict[int, int] = field(default_factory=dict)
    recent: OrderedDict[int, int] = field(default_factory=OrderedDict)
    refusal: str | None = None  # set once a conflict was found: everything after it is refused


class DigestBook:
    """The digests of the batches a receiver took, per (stream, producer); see the module's docstring."""

    def __init__(self, max_producers: int = 10_000):
        self.max_producers = max_producers
        self._producers: OrderedDict[tuple[str, str], _Producer] = OrderedDict()
        self.conflicts = 0

    def _get(self, key: tuple[str, str]) -> _Producer:
        entry = self._producers.get(key)
        if entry is None:
            entry = self._producers[key] = _Producer()
            if len(self._producers) > self.max_producers:
                self._producers.popitem(last=False)
        else:
            self._producers.move_to_end(key)
        return entry

    def state(self) -> list[list]:
        """What :meth:`restore` takes: ``[[stream, producer, [[seq, digest], ...]], ...]`` (plain data)."""
        return [[s, p, sorted({**entry.first, **entry.recent}.items())] for (s, p), entry in self._producers.items()]

    def restore(self, state: list[list]) -> None:
        """Remember what a snapshot remembered (a restart; batches replayed after it are recorded again)."""
        for stream, producer, digests in state:
            for seq, digest in digests:
                self.record(stream, producer, int(seq), int(digest))

    def record(self, stream: str, producer: str, seq: int, digest: int) -> None:
        """Batch ``seq`` of the producer was taken with ``digest`` (0: none, nothing recorded)."""
        if not digest:
            return
        entry = self._get((stream, producer))
        if seq < FIRST:
            entry.first[seq] = digest
        entry.recent[seq] = digest
        if len(entry.recent) > RECENT:
            entry.recent.popitem(last=False)

    def screen(self, stream: str, producer: str, seq: int, digest: int) -> str | None:
        """Why batch ``seq`` (with ``digest``) must be refused, or None to go on as usual.

        A batch whose digest differs from the one taken under the same
        sequence number is a conflict: it is refused, and so is every later
        batch of that producer, so nothing of the conflicting publish is
        taken.  A first batch that matches what was taken (a true re-run)
        lifts that refusal.
        """
        entry = self._producers.get((stream, producer))
        if not digest or entry is None:
            return None
        taken = entry.first.get(seq) or entry.recent.get(seq)
        if taken is not None and taken != digest:
            self.conflicts += 1
            entry.refusal = (f"producer {producer!r} already published batch {seq} of {stream} with other rows "
                             "(a reused --producer id with other content?); nothing more from it is taken")
        elif taken is not None and seq == 0:
            entry.refusal = None
        return entry.refusal
