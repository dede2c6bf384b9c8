"""Arrow record batches on the data plane: a stream's schema as Arrow's, and batches that stay columns.

A batch of rows crosses a boundary either as msgpack rows (``Batch.fmt``
:data:`~boreas.wire.frames.ROWS`) or as one Arrow IPC stream message
(:data:`~boreas.wire.frames.ARROW`): a publisher that has columns (a pyarrow
``RecordBatch`` or ``Table``, a pandas or polars frame) sends them as they
are, the node checks them as columns (:func:`check`) and hands them on as a
:class:`Columns`, which an operator that works on columns (the ``m3`` box)
reads in place and every other one reads as rows (:meth:`Columns.rows`, once
per batch).  What leaves the node again is the same IPC bytes when nothing
changed them.

Each Borealis type has one Arrow type (:data:`ARROW_TYPES`; an array field
a list column, :mod:`.array_columns`); a ``string``
field's size and a ``timestamp``'s meaning (microseconds, as in rows) travel
in the field's metadata, so the Arrow schema says everything the Borealis one
does.  Checking a batch means: the columns the schema names, in any order
(extra ones refused, as for rows); each cast safely to its field's type (a
value out of an ``int``'s range is refused with its row); nulls refused
unless the field is ``nullable`` (then an Arrow null is SQL's NULL, None in
a row; the field's metadata says ``nullable``); strings no longer than their size.  Bad rows are dropped
and named, like the row path's.

A batch of a *changelog* stream also carries a weight per row
(:attr:`Columns.weights`, int64: +1 a row enters, -1 it leaves, -n n copies
leave); in IPC bytes (frames, the input log, snapshots) the weights are one
more column, :data:`WEIGHT`, after the schema's fields, so every carrier
moves them unchanged.  A plain stream's batch has none (every row +1).

pyarrow is imported by this module (and :mod:`.array_columns`, which only it
imports): commands that make no batches do not pay for it.

>>> from boreas.catalog.model import Field, FieldType, Schema
>>> s = Schema("P", (Field("time", FieldType.INT), Field("name", FieldType.STRING, 3)))
>>> arrow_schema(s).field("name").metadata[b"size"]
b'3'
>>> batch = pa.record_batch({"name": ["tcp", "http"], "time": pa.array([1, 2], pa.int64())})
>>> cols, errors = check(batch, s)
>>> cols.rows(), [(e.row, e.field) for e in errors]
([(1, 'tcp')], [(1, 'name')])
>>> decode(payload(cols), s)[0].rows()
[(1, 'tcp')]
>>> signed = Columns(cols.batch, weights=pa.array([-1], pa.int64()))
>>> back = decode(payload(signed), s)[0]
>>> back.rows(), back.weight_list()
([(1, 'tcp')], [-1])
"""

from __future__ import annotations

import functools

import msgspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc

from boreas.catalog.changelog import WEIGHT  # the weights' column (validation refuses a field of that name)
from boreas.catalog.model import FieldType, Schema

from . import array_columns
from .array_columns import ARROW_TYPES, arrow_type, holds_single, not_a, wrong_lengths
from .column_limits import cast, refused_nulls, too_long
from .prepared import bin_header
from .pyvalues import python_values
from .row_errors import RowError, SchemaMismatch



@functools.lru_cache(maxsize=4096)
def arrow_schema(schema: Schema) -> pa.Schema:
    """The Arrow schema of a Borealis schema (once per schema)."""
    fields = []
    for f in schema.fields:
        meta = {"borealis": f.declared_type}
        if f.type == FieldType.STRING:
            meta["size"] = str(f.size)
        if f.nullable:
            meta["nullable"] = "true"
        fields.append(pa.field(f.name, arrow_type(f), nullable=True, metadata=meta))
    return pa.schema(fields, metadata={"schema": schema.name})


class Columns:
    """One batch of a stream as Arrow columns; rows and IPC bytes made at most once, when asked for.

    It stands where a list of rows stands in the node (``len()`` is its row
    count), so the dataflow, the outbox and the links carry it unchanged;
    :meth:`rows` is the row path's thin adapter.

    ``weights`` (an int64 array as long as the batch, or None) makes it a
    changelog batch: row i counts ``weights[i]`` times (-1: it leaves).  The
    weights are beside the schema's columns, never among them, so an operator
    reads ``batch`` as before and carries the weights on (:meth:`with_batch`,
    :meth:`filter`).
    """

    __slots__ = ("batch", "weights", "_rows", "_ipc")

    def __init__(self, batch: pa.RecordBatch, ipc: bytes | memoryview | None = None, weights: pa.Array | None = None,
                 rows: list[tuple] | None = None):
        """``ipc``, ``rows``: the batch's IPC bytes and rows where they are at hand already (the same rows; the
        bytes may be a view of the frame they came in, copied only if :meth:`ipc` is asked for them)."""
        self.batch = batch
        if weights is not None and len(weights) != batch.num_rows:
            raise ValueError(f"{len(weights)} weights for {batch.num_rows} rows")
        self.weights = weights
        self._rows = rows
        self._ipc = ipc

    def __len__(self) -> int:
        return self.batch.num_rows

    def __bool__(self) -> bool:
        return self.batch.num_rows > 0

    def __iter__(self):
        """Its rows (a reader that iterates a batch of rows reads this one the same way)."""
        return iter(self.rows())

    def __repr__(self) -> str:
        return f"Columns({self.batch.num_rows} rows: {', '.join(self.batch.schema.names)})"

    def weight_list(self) -> list[int]:
        """Each row's weight (1 for every row of a plain batch)."""
        return [1] * self.batch.num_rows if self.weights is None else self.weights.to_pylist()

    def with_batch(self, batch: pa.RecordBatch) -> "Columns":
        """Other columns for the same rows (a map's out fields, a union's relabelling), the weights kept."""
        return Columns(batch, weights=self.weights)

    def filter(self, mask: pa.Array, schema: pa.Schema | None = None) -> "Columns":
        """The rows where ``mask`` holds, with their weights (under ``schema``'s names when given)."""
        part = self.batch.filter(mask)
        if schema is not None:
            part = pa.RecordBatch.from_arrays(part.columns, schema=schema)
        return Columns(part, weights=None if self.weights is None else self.weights.filter(mask))

    def rows(self) -> list[tuple]:
        """The batch as rows (tuples in field order), as every row operator takes them (without weights)."""
        if self._rows is None:
            columns = [python_values(c) for c in self.batch.columns]
            self._rows = list(zip(*columns)) if columns else [() for _ in range(self.batch.num_rows)]
        return self._rows

    def ipc(self) -> bytes:
        """The batch as one Arrow IPC stream (schema and batch); a frame or a log record carries it as one
        msgpack ``bin`` (:meth:`payload`)."""
        if isinstance(self._ipc, memoryview):  # a view of the frame it came in (:func:`unwrap`), or of framed()
            self._ipc = bytes(self._ipc)
        if self._ipc is None:
            batch = self._carried()
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, batch.schema) as writer:
                writer.write_batch(batch)
            self._ipc = sink.getvalue().to_pybytes()
        return self._ipc

    def framed(self) -> bytes | bytearray:
        """The batch as a frame's ``rows`` carry it: its IPC stream as one msgpack ``bin``, byte for byte
        :func:`payload`'s (so a digest of it is too).

        Where no IPC bytes are at hand (a publisher's batch, a box's output)
        the stream is written once, straight after the ``bin``'s header, into
        a buffer of its exact size (measured first by a pass that copies
        nothing): one copy of the columns, where :meth:`ipc` and then the
        ``bin``'s encoding made three (Arrow's growing buffer, its bytes, the
        ``bin``).  :meth:`ipc` then reads that stream back without writing it again.
        IPC bytes at hand (a view of the frame the batch came in) are copied once, after the header.
        """
        if self._ipc is not None:  # (the header and the bytes as they are: one copy, not bytes() and then the bin)
            data = memoryview(self._ipc)
            return b"".join((bin_header(data.nbytes), data))
        batch = self._carried()
        size = pa.MockOutputStream()
        with pa.ipc.new_stream(size, batch.schema) as writer:
            writer.write_batch(batch)
        head = bin_header(size.size())
        out = bytearray(len(head) + size.size())
        out[:len(head)] = head
        stream = memoryview(out)[len(head):]
        with pa.ipc.new_stream(pa.FixedSizeBufferWriter(pa.py_buffer(stream)), batch.schema) as writer:
            writer.write_batch(batch)
        self._ipc = stream
        return out

    def _carried(self) -> pa.RecordBatch:
        """The batch as IPC bytes carry it: the weights, if any, one more column (:data:`WEIGHT`)."""
        if self.weights is None:
            return self.batch
        return pa.RecordBatch.from_arrays([*self.batch.columns, self.weights.cast(pa.int64())],
                                          schema=self.batch.schema.append(pa.field(WEIGHT, pa.int64())))


def payload(columns: Columns) -> bytes:
    """What a frame's ``rows`` or a log record holds of a batch of columns: its IPC bytes as a msgpack ``bin``
    (:meth:`Columns.framed`, as ``bytes``)."""
    data = columns.framed()
    return data if isinstance(data, bytes) else bytes(data)



def weighted(rows: list[tuple], weights: list[int] | None, schema: Schema) -> list[tuple] | Columns:
    """Rows an operator computed, as the batch it emits: the rows themselves when plain (``weights`` None),
    else a changelog :class:`Columns` of ``schema`` with those weights.  A value its field cannot hold (a map's
    huge int) becomes null, as a failing map field is None."""
    if weights is None:
        return rows
    target = arrow_schema(schema)
    columns = [_column([r[i] for r in rows], f.type) for i, f in enumerate(target)]
    return Columns(pa.RecordBatch.from_arrays(columns, schema=target), weights=pa.array(weights, pa.int64()))


def _column(values: list, kind: pa.DataType) -> pa.Array:
    try:
        return pa.array(values, kind)
    except (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError):
        pass
    out = []
    for v in values:
        try:
            out.append(pa.scalar(v, kind).as_py())
        except (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError):
            out.append(None)
    return pa.array(out, kind)


def from_rows(rows: list[tuple], schema: Schema | None) -> Columns | None:
    """Checked rows (tuples a :class:`~boreas.wire.tuples.RowType` made) as columns of the stream's schema,
    the tuples kept as :meth:`Columns.rows` (a row operator reads them as they came, none made again); None
    where the columns would not hold exactly what the rows do (a ``single`` field: float32 would round the
    double a row keeps) or a value does not convert.

    One conversion at the node's edge, in C (the rows read as one Arrow struct array), so what comes after
    is columnar whatever the publisher sent.

    >>> from boreas.catalog.model import Field, FieldType, Schema
    >>> s = Schema("P", (Field("time", FieldType.INT), Field("name", FieldType.STRING, 3)))
    >>> cols = from_rows([(1, "tcp"), (2, "udp")], s)
    >>> cols.batch.column(0).to_pylist(), cols.rows()
    ([1, 2], [(1, 'tcp'), (2, 'udp')])
    """
    if not rows or schema is None or any(holds_single(f) for f in schema.fields):
        return None  # (None: a stream without a catalog schema, as a partition's member messages)
    target = arrow_schema(schema)
    try:
        whole = pa.array(rows, pa.struct(list(target)))
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
        return None
    return Columns(pa.RecordBatch.from_arrays(whole.flatten(), schema=target), rows=rows)


def as_rows(rows: list[tuple] | Columns) -> list[tuple]:
    """Rows, whichever form a batch is in (the row path's adapter)."""
    return rows.rows() if isinstance(rows, Columns) else rows


def read_ipc(data: bytes) -> pa.RecordBatch:
    """The record batch of an IPC stream (zero-copy over ``data`` when it holds one, as frames do)."""
    reader = pa.ipc.open_stream(pa.py_buffer(data))
    batches = list(reader)
    if len(batches) == 1:
        return batches[0]
    if not batches:
        return pa.RecordBatch.from_pylist([], reader.schema)
    return pa.Table.from_batches(batches, reader.schema).combine_chunks().to_batches()[0]


#: A msgpack ``bin``'s first byte and the width of the length after it (bin 8, bin 16, bin 32).
_BIN_HEADS = {0xC4: 1, 0xC5: 2, 0xC6: 4}


def unwrap(payload: bytes | memoryview) -> bytes | memoryview:
    """The IPC bytes of a batch's payload: in a frame (and a log record) they are one msgpack ``bin``, read
    here from its header as a view of ``payload`` (no copy of a frame's some hundreds of kB; msgpack's decode
    copies the bytes out).

    >>> bytes(unwrap(msgspec.msgpack.encode(b"ipc"))), len(unwrap(msgspec.msgpack.encode(bytes(70_000))))
    (b'ipc', 70000)
    """
    view = memoryview(payload)
    width = _BIN_HEADS.get(view[0]) if len(view) else None
    if width is not None and len(view) > width:
        size = int.from_bytes(view[1:1 + width], "big")
        if len(view) == 1 + width + size:
            return view[1 + width:]
    data = msgspec.msgpack.decode(payload)  # (not one bin alone: says what it is)
    if not isinstance(data, bytes):
        raise ValueError("an Arrow batch's payload is not a msgpack bin")
    return data


def read_columns(data: bytes) -> Columns:
    """A batch's IPC bytes (:meth:`Columns.ipc`) as :class:`Columns` again, unchecked, its weights split off
    (a batch this cluster produced and kept: a snapshot's held batch, an output not yet acknowledged)."""
    return _split_weights(read_ipc(data), data)[0]


def read_rows(payload: bytes) -> list[tuple]:
    """A batch payload's rows, unchecked (a batch this cluster produced and checked before; weights left out)."""
    return _split_weights(read_ipc(unwrap(payload)))[0].rows()


def _split_weights(batch: pa.RecordBatch, data: bytes | None = None) -> tuple[Columns, bool]:
    """The batch as :class:`Columns`, its :data:`WEIGHT` column (if any) taken out as the weights; whether
    the weights are exact (int64 without nulls: else the batch must be checked)."""
    at = batch.schema.get_field_index(WEIGHT)
    if at < 0:
        return Columns(batch, data), True
    weights = batch.column(at)
    exact = weights.type == pa.int64() and not weights.null_count
    return Columns(batch.remove_column(at), data, weights if exact else None), exact


def decode(payload: bytes, schema: Schema) -> tuple[Columns, list[RowError]]:
    """A received batch's payload (its IPC bytes), checked against the stream's schema (see :func:`check`)."""
    try:
        data = unwrap(payload)
        batch = read_ipc(data)
    except (pa.ArrowInvalid, OSError, ValueError, msgspec.DecodeError) as exc:
        return Columns(pa.RecordBatch.from_pylist([], arrow_schema(schema))), [
            RowError(-1, "", f"batch is not an Arrow IPC stream: {exc}")]
    columns, exact = _split_weights(batch, data)
    if (exact and columns.batch.schema.equals(arrow_schema(schema))
            and not any(array_columns.nulls(c) and not f.nullable for c, f in zip(columns.batch.columns, schema.fields))
            and not too_long(columns.batch, schema)):
        return columns, []  # as sent: the same bytes go on
    return check(batch, schema)


def check(batch: pa.RecordBatch | pa.Table, schema: Schema) -> tuple[Columns, list[RowError]]:
    """The good rows of ``batch`` as columns of the stream's schema, and one error per bad row.

    A column the schema lacks, or a field with no column, refuses the whole
    batch (:class:`SchemaMismatch`), as a row of the wrong width does.
    """
    if isinstance(batch, pa.Table):
        batch = batch.combine_chunks().to_batches()[0] if batch.num_rows else pa.RecordBatch.from_pylist(
            [], batch.schema)
    names = set(batch.schema.names)
    extra = sorted(names - {f.name for f in schema.fields} - {WEIGHT})
    if extra:
        raise SchemaMismatch(extra[0], f"not a field of schema {schema.name}")
    target = arrow_schema(schema)
    columns, bad = [], pa.array([False] * batch.num_rows, pa.bool_())
    reasons: dict[int, tuple[str, str]] = {}
    weights = None
    if WEIGHT in names:
        weights, wrong = cast(batch.column(WEIGHT), pa.int64())
        for row in wrong:
            reasons.setdefault(row, (WEIGHT, "not a whole number (a weight)"))
        if weights.null_count:
            for row in pc.indices_nonzero(weights.is_null()).to_pylist():
                reasons.setdefault(row, (WEIGHT, "missing"))
            bad = pc.or_(bad, weights.is_null())
    for f, want in zip(schema.fields, target):
        if f.name not in names:
            raise SchemaMismatch(f.name, "missing")
        column = batch.column(f.name)
        column, wrong = cast(column, want.type)
        misfit = wrong_lengths(column, f) if f.array is not None else []
        for row in sorted({*wrong, *misfit}):
            reasons.setdefault(row, (f.name, not_a(f)))
        nulls = refused_nulls(column, f.nullable)
        if misfit:
            nulls = pc.or_(nulls, pc.is_in(pa.array(range(batch.num_rows), pa.int64()), pa.array(misfit, pa.int64())))
        if f.type == FieldType.STRING:
            nulls = pc.or_kleene(nulls, pc.fill_null(pc.greater(pc.utf8_length(column), f.size), False))
        if pc.any(nulls).as_py():
            for row in pc.indices_nonzero(nulls).to_pylist():
                value = column[row].as_py()
                reasons.setdefault(row, (f.name, "missing" if value is None else "an array holding a null"
                                         if f.array is not None else f"string longer than {f.size}"))
            bad = pc.or_(bad, nulls)
        columns.append(column)
    good = Columns(pa.RecordBatch.from_arrays(columns, schema=target), weights=weights)
    if not reasons:
        return good, []
    errors = [RowError(row, field, reason) for row, (field, reason) in sorted(reasons.items())]
    return good.filter(pc.invert(bad)), errors
