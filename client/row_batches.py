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
  exactly as it always has.  A batch whose rows are all good loses nothing
  by becoming columns.
* **Streams with a ``single`` field** go as rows: float32 would round the
  double a row carries (the node keeps such rows as rows too).
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
>>> decode(p.payload, s)[0].rows(), p.digest == rows_digest(msgspec.msgpack.encode([[1, "tcp"], [2, "udp"]]))
([(1, 'tcp'), (2, 'udp')], True)
>>> batches.prepare([[1, "tcp"], [2, "toolong"]])  # a bad row: the node names it
[[1, 'tcp'], [2, 'toolong']]
"""

from __future__ import annotations

from typing import Any

import msgspec

from boreas.catalog.model import Schema
from boreas.wire.columns import from_rows
from boreas.wire.digests import rows_digest
from boreas.wire.prepared import Prepared, bin_header
from boreas.wire.tuples import RowType

_encoder = msgspec.msgpack.Encoder()


class RowBatches:
    """Turns a publisher's batches of rows (lists in field order) into Arrow batches of one stream's schema."""

    def __init__(self, schema: Schema):
        self.schema = schema
        self.row_type = RowType(schema)

    def prepare(self, rows: list[list[Any]]) -> Prepared | list[list[Any]]:
        """``rows`` as one Arrow batch ready for the wire (payload and digest made here), or the rows as
        they are where they must travel as rows: a bad row among them (the node names it), a ``single``
        field, or a value a column cannot hold that the row check let through."""
        good, errors = self.row_type.check(rows)
        columns = None if errors or not self.schema.fields else from_rows(good, self.schema)
        if columns is None:
            return rows
        ipc = columns.ipc()
        return Prepared(bin_header(len(ipc)) + ipc, rows_digest(_encoder.encode(rows)), len(rows))
