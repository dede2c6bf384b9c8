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
Tick(now=3.0)
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
    """Timers fired at flow-clock time ``now`` (aggregate timeouts, delay boxes)."""

    now: float


class Marker(msgspec.Struct, tag="m", array_like=True):
    """Snapshot ``snapshot`` was captured here: the state covers every record before this one."""

    snapshot: int
    now: float


Record = Taken | Tick | Marker

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Record)


def encode(record: Record) -> bytes:
    return _encoder.encode(record)


def decode(data: bytes) -> Record:
    return _decoder.decode(data)
