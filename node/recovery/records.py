"""What a node's input log holds: the batches it processed, timer ticks and snapshot markers.

The log is the node's processing order made durable.  A node appends a
record when its dataflow task takes a batch (or fires timers), under the
dataflow lock, so the order of the log *is* the order in which boxes saw
their inputs.  Replaying the records after a snapshot's position, with the
clock values they carry, therefore reproduces every output exactly: the same
rows in the same batches under the same (producer, sequence) numbers, which
downstream receivers then drop as duplicates.  That is what lets one node
recover alone, without rolling the rest of the network back (seed 004's log
replay, applied per node, with upstream backup for what was not yet logged).

>>> record = decode(encode(Taken("Packet", "pub-1", 4, "", b"\\x91\\x91\\x01", 12.5)))
>>> record.stream, record.seq, record.now
('Packet', 4, 12.5)
>>> decode(encode(Tick(3.0)))
Tick(now=3.0, close=[])
>>> decode(encode(Tick(3.0, ["Out"]))).close, decode(encode(Batching(1024, 1.0)))
(['Out'], Batching(rows=1024, ms=1.0))
"""

from __future__ import annotations

import msgspec


class Taken(msgspec.Struct, tag="t", array_like=True):
    """A batch the dataflow processed: its identity, its good rows (msgpack) and the flow clock."""

    stream: str
    producer: str
    seq: int
    box: str  # set for a batch marked for a box that arrived by a move
    rows: bytes
    now: float
    fmt: int = 0  # how ``rows`` is encoded (wire/frames.py: ROWS, ARROW)
    digest: int = 0  # the publisher's digest of the batch as sent (wire/digests.py), 0: none
    final: bool = False  # the producer's last batch (node/stream_ends.py)


class Tick(msgspec.Struct, tag="k", array_like=True):
    """Timers fired at flow-clock time ``now`` (aggregate timeouts, delay boxes, output batches due); with
    ``close``, instead: the output batches of those streams closed then (a move's detach), nothing fired.
    A log written before ``close`` existed has none: it reads as before."""

    now: float
    close: list[str] = []


class Batching(msgspec.Struct, tag="b", array_like=True):
    """From here on, boxes' output batches closed at ``rows`` rows or ``ms`` ms (node/coalescer.py).

    Written when the log is attached and at the head of every segment, so a
    replay from any start batches as the node did; a log without one was
    written before batching existed (every emit a batch)."""

    rows: int
    ms: float


class Marker(msgspec.Struct, tag="m", array_like=True):
    """Snapshot ``snapshot`` was captured here: the state covers every record before this one."""

    snapshot: int
    now: float


Record = Taken | Tick | Marker | Batching

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Record)


def encode(record: Record) -> bytes:
    return _encoder.encode(record)


def decode(data: bytes) -> Record:
    return _decoder.decode(data)
