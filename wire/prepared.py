"""A batch encoded for the wire before it is sent: its payload and digest made off the event loop.

``boreas publish`` reads, types and encodes a file's batches in a reader
thread (:mod:`boreas.cli.read_ahead`); what the event loop would otherwise
do per batch (encode the Arrow IPC bytes as the frame's msgpack ``bin``,
hash them for the batch's digest: wire/digests.py) is done there too, once,
and the loop only wraps the payload in a frame and writes it
(:func:`~boreas.wire.frames.make_batch` takes a :class:`Prepared` as it is).
pyarrow is not imported here: the payload is made where the columns are.

>>> import msgspec
>>> from boreas.wire.digests import rows_digest
>>> p = Prepared.of(b"arrow ipc", 3)
>>> msgspec.msgpack.decode(p.payload), len(p), p.digest == rows_digest(p.payload)
(b'arrow ipc', 3, True)
>>> all(bin_header(n) + bytes(n) == msgspec.msgpack.encode(bytes(n)) for n in (0, 255, 256, 65535, 65536))
True
"""

from __future__ import annotations

from dataclasses import dataclass

from .digests import rows_digest


def bin_header(size: int) -> bytes:
    """The msgpack ``bin`` header of ``size`` bytes, as msgspec writes it (the smallest that holds the size), so a
    prepared payload and its digest are byte for byte those of the same batch encoded on the loop."""
    if size < 1 << 8:
        return b"\xc4" + size.to_bytes(1, "big")
    if size < 1 << 16:
        return b"\xc5" + size.to_bytes(2, "big")
    return b"\xc6" + size.to_bytes(4, "big")


@dataclass(frozen=True, slots=True)
class Prepared:
    """One batch of Arrow columns as a frame carries it: ``payload`` (its IPC bytes as one msgpack ``bin``,
    what :class:`~boreas.wire.frames.Batch` ``rows`` holds), its ``digest`` and its row count (``len()``).

    The digest is the payload's (:meth:`of`), except for rows a publisher was given and made columns
    (client/row_batches.py): there it is the rows' as msgpack, what a publisher sending those rows as rows
    gave the same batch, so a re-run drops what was taken whichever encoding carried it."""

    payload: bytes | bytearray  # (a bytearray where the IPC stream was written into it: Columns.framed)
    digest: int
    count: int

    def __len__(self) -> int:
        return self.count

    @classmethod
    def of(cls, ipc: bytes | memoryview, count: int, digest: int | None = None) -> "Prepared":
        """``ipc`` (any buffer: an Arrow buffer is copied once, into the payload) prepared for ``count`` rows;
        ``digest``: the batch's where it is not the payload's (a row publisher's: that of its rows)."""
        view = memoryview(ipc)
        payload = b"".join((bin_header(view.nbytes), view))
        return cls(payload, rows_digest(payload) if digest is None else digest, count)
