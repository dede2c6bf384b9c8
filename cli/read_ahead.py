"""A file's batches made ready in a thread while the event loop sends the ones before them.

Reading a batch of a file (Parquet decoding, CSV parsing and typing, JSON
parsing) and encoding it as Arrow IPC is work in pyarrow's C++, which
releases the GIL; sending it (a frame, its digest, the socket) is the event
loop's.  :func:`read_ahead` overlaps the two: while batch *n* is sent, batch
*n + 1* is read and encoded in a worker thread, so on two cores ``boreas
publish`` runs at the slower of the two, not their sum.  One batch is read
ahead, no more: the memory it holds is one batch (besides the ones in flight).

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
from typing import Any

import pyarrow as pa

from boreas.wire.columns import Columns


def ready(piece: Any) -> Any:
    """A batch as it is sent: Arrow columns with their IPC bytes made (rows: as they are)."""
    if isinstance(piece, pa.RecordBatch):
        columns = Columns(piece)
        columns.ipc()  # (made here, in the worker thread: the frame takes them as they are)
        return columns
    return piece


def _next(pieces: Iterator[Any]) -> tuple[bool, Any]:
    for piece in pieces:
        return True, ready(piece)
    return False, None


async def read_ahead(pieces: Iterator[Any]) -> AsyncIterator[Any]:
    """``pieces`` (record batches or lists of rows), each made :func:`ready` in a worker thread, one ahead."""
    pending = asyncio.ensure_future(asyncio.to_thread(_next, pieces))
    try:
        while True:
            more, piece = await pending
            if not more:
                return
            pending = asyncio.ensure_future(asyncio.to_thread(_next, pieces))
            yield piece
    finally:
        if not pending.done():  # (interrupted: the thread finishes its batch; the reader is not used again)
            await asyncio.shield(pending)
