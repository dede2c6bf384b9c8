"""A file's batches made ready in a reader thread while the event loop sends the ones before them.

Reading a batch of a file (Parquet decoding, CSV parsing and typing, JSON
parsing), encoding it as Arrow IPC and hashing it for its digest is work in
C (pyarrow, hashlib) that releases the GIL; sending it (a frame, the socket)
is the event loop's.  :func:`read_ahead` overlaps the two: while batch *n*
is sent, batch *n + 1* is read and :func:`ready` in the reader thread, so on
two cores ``boreas publish`` runs at the slower of the two, not their sum.

The reader is one thread of its own, the same for every batch (not asyncio's
shared pool, whose threads each grow a malloc arena of their own: RSS a
publish never gives back).  One batch is read ahead, no more: the memory it
holds is one batch (besides the ones in flight, which the publish's window
bounds: :func:`~.file_batches.file_window`).

A batch leaves the thread :class:`~boreas.wire.prepared.Prepared`: its IPC
bytes written by Arrow and copied once, into the frame's payload, and its
digest taken over that payload, so the loop neither copies nor hashes it.

The order of the batches and where they are cut are the reader's: nothing
here looks at a clock, so a re-run sends the same batches.

>>> import asyncio, pyarrow as pa
>>> async def sent():
...     return [len(b) async for b in read_ahead(iter([pa.record_batch({"n": [1, 2]}), [[3]]]))]
>>> asyncio.run(sent())
[2, 1]
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.ipc

from boreas.wire.prepared import Prepared


def ready(piece: Any) -> Any:
    """A batch as it is sent: a record batch :class:`~boreas.wire.prepared.Prepared` (rows: as they are).

    >>> from boreas.wire.columns import read_ipc, unwrap
    >>> p = ready(pa.record_batch({"n": [1, 2]}))
    >>> len(p), read_ipc(unwrap(p.payload)).to_pydict()
    (2, {'n': [1, 2]})
    """
    if isinstance(piece, pa.RecordBatch):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, piece.schema) as writer:
            writer.write_batch(piece)
        return Prepared.of(sink.getvalue(), piece.num_rows)  # (the Arrow buffer freed once copied)
    return piece


def _next(pieces: Iterator[Any]) -> tuple[bool, Any]:
    for piece in pieces:
        return True, ready(piece)
    return False, None


async def read_ahead(pieces: Iterator[Any]) -> AsyncIterator[Any]:
    """``pieces`` (record batches or lists of rows), each made :func:`ready` in the reader thread, one ahead."""
    loop = asyncio.get_running_loop()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="boreas-read-ahead") as reader:
        pending = loop.run_in_executor(reader, _next, pieces)
        try:
            while True:
                more, piece = await pending
                if not more:
                    return
                pending = loop.run_in_executor(reader, _next, pieces)
                yield piece
        finally:
            if not pending.done():  # (interrupted: the thread finishes its batch; the reader is not used again)
                await asyncio.shield(pending)
