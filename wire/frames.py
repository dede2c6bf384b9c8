"""Frames on a data connection: batches of tuples and their acknowledgements.

Data travels over a WebSocket (``/data`` on every node and subscriber) as
binary msgpack frames (msgspec).  A batch names its stream, its *producer*
(who sent it: a publisher's id, a Spark ``job/partition``, or an upstream
node's endpoint) and a per-(stream, producer) sequence number starting at 0.
The rows stay encoded (``msgspec.Raw``) until the receiver decodes them with
the stream's row type, so the envelope is read without knowing the schema.

The receiver answers every batch in order: :class:`Ack` (with the rows it
refused, if any; a duplicate is acknowledged again and dropped), or
:class:`Refused` when the whole batch cannot be taken (unknown stream; or,
for good, ``retry=False``: a publisher's batch that does not decode).
Answers that are ready together go as one :class:`Replies` frame: a busy
node reads the frames waiting on a connection in one go, and one socket
write for all their answers instead of one each is what keeps
acknowledging from costing the node (and waking the sender) per batch.

>>> frame = encode(make_batch("Packet", "pub-1", 0, [[1, "tcp"]]))
>>> batch = decode(frame)
>>> batch.stream, batch.seq, msgspec.msgpack.decode(batch.rows)
('Packet', 0, [[1, 'tcp']])
>>> [r.seq for r in decode(encode(Replies([Ack("P", "pub-1", 0, 1), Refused("P", "pub-1", 1, "no")]))).replies]
[0, 1]
"""

from __future__ import annotations

from typing import Any

import msgspec

from .digests import rows_digest
from .prepared import Prepared


class Batch(msgspec.Struct, tag="b", array_like=True):
    stream: str
    producer: str
    seq: int
    rows: msgspec.Raw
    box: str = ""  # set when forwarded to a box that moved: for that box only, ordered by it
    # The producer's batches before this one that were meant for this receiver all came
    # before it on this connection: take it even if sequence numbers were skipped (the
    # stream went elsewhere for a while, e.g. into a filter inserted upstream).
    restart: bool = False
    # A digest of ``rows`` (wire/digests.py), set by publishers: a re-sent sequence number with
    # other rows is refused instead of dropped as a duplicate.  0: none (node to node).
    digest: int = 0
    fmt: int = 0  # how ``rows`` is encoded: ROWS (msgpack rows) or ARROW (an Arrow IPC stream, wire/columns.py)
    # The producer's last batch on this stream (``Publisher.close(final=True)``): numbered like data, so it
    # is logged, replayed and deduplicated like data; the stream ends once every producer's has been taken.
    final: bool = False


#: ``Batch.fmt``: the rows as a msgpack array of arrays, or the batch as Arrow columns (one IPC stream).
ROWS, ARROW = 0, 1


class Ack(msgspec.Struct, tag="a", array_like=True):
    stream: str
    producer: str
    seq: int
    accepted: int
    errors: list[tuple[int, str, str]] = []  # (row, field, reason) of refused rows
    duplicate: bool = False  # already taken: dropped
    held: bool = False  # ahead of its producer's sequence: taken once the gap fills
    # The node the producer's batches go to from now on (a partitioned box's coordinator handed the producer
    # over, docs/cumulus.md §6.5): the publisher redirects its link there.  "": stay.
    moved: str = ""


class Refused(msgspec.Struct, tag="r", array_like=True):
    stream: str
    producer: str
    seq: int
    reason: str
    # False: the same batch would be refused again (it does not decode, or carries weights into a plain stream),
    # so its sequence number is consumed and the producer's next batch is taken at once, not held as a gap.
    # True: the receiver un-takes it (the stream may enter here later), so a re-send of it is taken.
    retry: bool = True


class Hello(msgspec.Struct, tag="h", array_like=True):
    """First frame from a sender: who it is (for logs and counters)."""

    sender: str


class Goodbye(msgspec.Struct, tag="g", array_like=True):
    """Last frame from a sender that is closing the connection on purpose, and why
    (a subscriber that read too slowly: what it missed is gone)."""

    reason: str


class Replies(msgspec.Struct, tag="R", array_like=True):
    """Several answers, in the order of the batches they answer (one frame, one write)."""

    replies: list[Ack | Refused]


Frame = Batch | Ack | Refused | Replies | Hello | Goodbye

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Frame)


def encode(frame: Frame) -> bytes:
    return _encoder.encode(frame)


def decode(data: bytes) -> Frame:
    """One frame; raises ``msgspec.DecodeError`` / ``ValidationError`` on garbage."""
    return _decoder.decode(data)


def encode_rows(rows: list[Any]) -> bytes:
    """A list of rows as a batch of rows carries them (msgpack), and what its digest hashes."""
    return _encoder.encode(rows)


def rows_in(batch: Batch) -> int:
    """How many rows a batch holds, read from its encoding's header (no row is decoded).

    >>> rows_in(make_batch("S", "p", 0, [[1]] * 3)), rows_in(make_batch("S", "p", 0, [[1]] * 300))
    (3, 300)
    """
    if batch.fmt == ARROW:
        from .columns import read_ipc, unwrap  # (pyarrow: only where batches are columns)

        return read_ipc(unwrap(bytes(batch.rows))).num_rows
    data = bytes(memoryview(batch.rows)[:5])
    if 0x90 <= data[0] <= 0x9F:
        return data[0] & 0x0F
    if data[0] == 0xDC:
        return int.from_bytes(data[1:3], "big")
    if data[0] == 0xDD:
        return int.from_bytes(data[1:5], "big")
    return len(msgspec.msgpack.decode(batch.rows))


def digest_of_rows(rows: Any) -> int:
    """The digest of a batch of ``rows`` sent as rows: a row publisher's Arrow batch of the same rows carries this
    one too (client/row_batches.py), so a re-run drops what was taken whichever encoding carried it."""
    return rows_digest(encode_rows(rows))


def make_batch(stream: str, producer: str, seq: int, rows: Any, box: str = "",
               restart: bool = False, digest: bool = False, final: bool = False) -> Batch:
    """A batch of ``rows`` (a list of rows, or :class:`~boreas.wire.columns.Columns`, sent as Arrow); with
    ``digest``, carrying the digest of their encoding (a publisher's); ``final``: the producer's last.  A
    :class:`~boreas.wire.prepared.Prepared` batch is taken as it is: its payload and digest were made already."""
    if isinstance(rows, Prepared):  # (boreas publish: encoded and hashed in its reader thread, not on the loop)
        return Batch(stream, producer, seq, msgspec.Raw(rows.payload), box, restart, rows.digest if digest else 0,
                     ARROW, final)
    framed = getattr(rows, "framed", None)  # Arrow columns: their IPC bytes as one msgpack bin (wire/columns.py)
    data = framed() if framed is not None else encode_rows(rows)
    return Batch(stream, producer, seq, msgspec.Raw(data), box, restart, rows_digest(data) if digest else 0,
                 ARROW if framed is not None else ROWS, final)
