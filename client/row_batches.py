"""Rows a publisher is given, as the Arrow batch it sends: rows become batches in the client (issue 30).

:class:`~boreas.client.publisher.Publisher` takes rows (sequences in field
order, mappings by name) as well as columns; before this module it sent
rows as msgpack rows, which every entry node decoded, checked and turned
into columns itself (``wire/columns.from_rows``), and a partition's
coordinator then routed them.  Now each batch of rows is checked here with
the node's own row check (:class:`~boreas.wire.tuples.RowType`, one msgspec
call in C for a good batch) and made an Arrow record batch of the stream's
Arrow schema by the node's own conversion (:func:`~boreas.wire.columns.from_rows`:
string sizes, nullable fields, Borealis arrays as list columns), so the
node takes it as it came (``wire/columns.decode``'s fast path) and its input
log keeps those bytes.

What stays as it was, on purpose:

* **Bad rows.**  A batch with any bad row goes as msgpack rows, as
  before: the node refuses each bad row with its field and reason
  (``Publisher.refused``), counts it (``refused_rows``) and takes the rest,
  exactly as it always has.  The client only tries the one conversion in C
  (:meth:`~boreas.wire.tuples.RowType.convert`); it never checks a bad batch
  row by row, which the node does once.  A batch whose rows are all good
  loses nothing by becoming columns.
* **Streams with a ``single`` field** (or none) go as rows: float32 would
  round the double a row carries (the node keeps such rows as rows too).
  That is decided once per stream, not per batch.
* **The digest** (wire/digests.py) is that of the batch's rows encoded as
  msgpack, what a publisher before this module sent and hashed, not of the
  Arrow bytes: the same rows cut the same way give the same digest whichever
  encoding carries them, so a publish interrupted under an older Boreas and
  run again under this one (or the reverse, or a Spark task retried on a
  mixed cluster) drops what the node already took instead of being refused
  as "other rows" under a reused producer id.  The sequence numbers are the
  same too: batches are still cut by rows, never by time.

pyarrow is imported with :mod:`boreas.wire.columns`, and this module only
where a publisher first sends rows: a command that publishes nothing does
not pay for it.

>>> from boreas.catalog.model import Field, FieldType, Schema
>>> s = Schema("P", (Field("time", FieldType.INT), Field("name", FieldType.STRING, 3)))
>>> batches = RowBatches(s)
>>> p = batches.prepare([[1, "tcp"], [2, "udp"]])
>>> from boreas.wire.columns import decode
>>> decode(p.payload, s)[0].rows(), p.digest == digest_of_rows([[1, "tcp"], [2, "udp"]])
([(1, 'tcp'), (2, 'udp')], True)
>>> batches.prepare([[1, "tcp"], [2, "toolong"]])  # a bad row: the node names it
[[1, 'tcp'], [2, 'toolong']]
>>> [len(b) for b in batches.cut([(1, "a"), {"time": 2, "name": "b"}, (3, "c")], 2)]
[2, 1]
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from boreas.catalog.model import Schema
from boreas.wire.array_columns import holds_single
from boreas.wire.columns import from_rows
from boreas.wire.frames import digest_of_rows
from boreas.wire.prepared import Prepared
from boreas.wire.tuples import RowType


class RowBatches:
    """Turns a publisher's rows into the batches it sends for one stream: cut by rows, each an Arrow batch of
    the stream's schema where it can be (:meth:`prepare`)."""

    def __init__(self, schema: Schema):
        self.schema = schema
        self.fields = [f.name for f in schema.fields]
        self.row_type = RowType(schema)
        # decided once per stream: a ``single`` field (float32 would round a row's double) or no field sends rows
        self.as_rows = not schema.fields or any(holds_single(f) for f in schema.fields)

    def cut(self, rows: Iterable[Any], size: int) -> Iterator[Prepared | list[list[Any]]]:
        """``rows`` (sequences in field order, mappings by name) in batches of ``size``, each prepared to send.

        Cut by rows, never by time, so a re-run sends the same batches (and digests)."""
        batch: list[list[Any]] = []
        fields = self.fields
        for row in rows:
            kind = type(row)
            if kind is list or kind is tuple:  # the common case, without the ABC check (3x the copy's cost)
                batch.append(list(row))
            else:
                batch.append([row.get(f) for f in fields] if isinstance(row, Mapping) else list(row))
            if len(batch) >= size:
                yield self.prepare(batch)
                batch = []
        if batch:
            yield self.prepare(batch)

    def prepare(self, rows: list[list[Any]]) -> Prepared | list[list[Any]]:
        """``rows`` as one Arrow batch ready for the wire (payload and digest made here), or the rows as
        they are where they must travel as rows: a bad row among them (the node names it), a ``single``
        field, or a value a column cannot hold that the row check let through."""
        good = None if self.as_rows else self.row_type.convert(rows)
        columns = None if good is None else from_rows(good, self.schema)
        if columns is None:
            return rows
        return Prepared(columns.framed(), digest_of_rows(rows), len(rows))  # (the IPC written once, as its bin)
