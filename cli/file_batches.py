"""How a published file's batches are sized and cut: by rows, never by the reader's blocks or by time.

A publisher's batches must be deterministic (issue 30): a re-run of the same
``boreas publish`` sends the same batches, numbered alike, so the node drops
the ones it took already and every row counts once.  So a file's batches are
cut at fixed row counts (:func:`cut`), whatever blocks the reader gave, and
their default size is a function of the stream's schema alone
(:func:`file_batch_rows`: about 2 MB of its columns, big enough that what
the CLI and the node do per batch costs little per row).  How many are in
flight at once (:func:`file_window`) is bounded by their bytes, whatever
their size: that and the reader's block bound the memory a publish holds,
not the file.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from boreas.catalog.model import FieldType, Schema
from boreas.wire.columns import arrow_schema

#: A file's batches, when ``--batch-size`` is not given, hold about this many bytes of Arrow columns: big enough
#: that what the CLI and the node do per batch (a frame, an acknowledgement, a task switch) costs little per row,
#: small enough that the copies of a batch on its way (Arrow's, the payload, the frame, the masked frame) stay
#: small beside the interpreter.
FILE_BATCH_BYTES = 2 << 20

#: Bytes of a file's batches in flight (sent, not acknowledged) at once, by the stream's declared widths: the
#: window of a file's publish is as many batches as make this, however big they are (``--batch-size``), at least
#: :data:`FILE_WINDOW_LEAST` and at most the publisher's own cap.  A node that keeps up acknowledges within a batch
#: or two; this binds when it does not, and then it is what the publish holds.
FILE_WINDOW_BYTES = 16 << 20
FILE_WINDOW_LEAST = 2

#: The bytes a string value is taken to hold when its field declares no size.
STRING_GUESS = 32


def file_batch_rows(schema: Schema) -> int:
    """Rows per batch of a file published without ``--batch-size``: about :data:`FILE_BATCH_BYTES` of the stream's
    columns, by its declared types (a string by its size), so the batches are the same whenever the same file is
    published to the same stream (a re-run continues where the last stopped).

    >>> from boreas.catalog.model import Field
    >>> file_batch_rows(Schema("R", (Field("t", FieldType.LONG), Field("n", FieldType.INT),
    ...                              Field("v", FieldType.DOUBLE))))
    104857
    >>> file_batch_rows(Schema("S", (Field("s", FieldType.STRING, 2000),)))
    1046
    """
    return max(1000, min(1 << 20, FILE_BATCH_BYTES // row_bytes(schema)))


def row_bytes(schema: Schema) -> int:
    """Bytes of Arrow columns a row of the stream takes, by its declared types (a string by its size, or
    :data:`STRING_GUESS`, and its offset).

    >>> from boreas.catalog.model import Field
    >>> row_bytes(Schema("S", (Field("s", FieldType.STRING, 8), Field("n", FieldType.INT))))
    16
    """
    width = 0
    for field, kind in zip(schema.fields, arrow_schema(schema).types):
        if field.type == FieldType.STRING:
            width += (field.size or STRING_GUESS) + 4  # (the value, its offset)
        else:
            width += _fixed_bytes(kind)
    return max(width, 1)


def _fixed_bytes(kind: pa.DataType) -> int:
    if pa.types.is_fixed_size_list(kind):
        return kind.list_size * _fixed_bytes(kind.value_type)
    try:
        return max(1, kind.bit_width // 8)
    except ValueError:  # (no fixed width: a list of variable length)
        return STRING_GUESS


def file_window(batch_rows: int, schema: Schema, most: int) -> int:
    """Batches of a file in flight at once: as many ``batch_rows``-row batches of ``schema`` as make
    :data:`FILE_WINDOW_BYTES`, between :data:`FILE_WINDOW_LEAST` and ``most``.

    >>> from boreas.catalog.model import Field
    >>> s = Schema("R", (Field("t", FieldType.LONG), Field("n", FieldType.INT), Field("v", FieldType.DOUBLE)))
    >>> file_window(file_batch_rows(s), s, 256), file_window(1000, s, 256), file_window(1 << 20, s, 256)
    (8, 256, 2)
    """
    return max(FILE_WINDOW_LEAST, min(most, FILE_WINDOW_BYTES // (max(batch_rows, 1) * row_bytes(schema))))


def cut(batches: Iterable[pa.RecordBatch], size: int) -> Iterator[pa.RecordBatch]:
    """``batches`` again, cut into batches of exactly ``size`` rows (the last may be smaller): the reader's
    blocks do not decide where a batch ends.

    >>> b = pa.record_batch({"n": [1, 2, 3]})
    >>> [x.num_rows for x in cut([b, b, b.slice(0, 1)], 4)]
    [4, 3]
    """
    pending: list[pa.RecordBatch] = []
    held = 0
    for batch in batches:
        if not batch.num_rows:
            continue
        pending.append(batch)
        held += batch.num_rows
        while held >= size:
            table = pa.Table.from_batches(pending)
            yield one_batch(table.slice(0, size))
            rest = table.slice(size)
            pending, held = rest.to_batches(), rest.num_rows
    if held:
        yield one_batch(pa.Table.from_batches(pending))


def cut_columns(pieces: Iterable[Any], size: int) -> Iterator[Any]:
    """Record batches cut into batches of ``size`` rows (:func:`cut`), and lists of rows passed on as they are:
    the columns before a list of rows go first (the last of them a shorter batch), so the order stays the file's.

    >>> b = pa.record_batch({"n": [1, 2, 3]})
    >>> [len(x) for x in cut_columns([b, b, [[7]], b], 4)]
    [4, 2, 1, 3]
    """
    pending: list[pa.RecordBatch] = []
    for piece in pieces:
        if isinstance(piece, pa.RecordBatch):
            pending.append(piece)
            if sum(b.num_rows for b in pending) >= size:
                *whole, last = list(cut(pending, size))
                yield from whole
                pending = [last]
            continue
        yield from cut(pending, size)
        pending = []
        yield piece
    yield from cut(pending, size)


def one_batch(table: pa.Table) -> pa.RecordBatch:
    return table.combine_chunks().to_batches()[0]
