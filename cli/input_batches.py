"""An input file (CSV, JSON lines or Parquet) read as batches of a stream's schema, in bounded memory.

``boreas publish`` used to read a CSV file whole and type its rows in
Python (a 27 MB file took 430 MB); now each format is streamed through
pyarrow's readers, a block at a time, and typed in Arrow:

* CSV: :func:`pyarrow.csv.open_csv` with every column as text, typed a batch
  at a time by :mod:`.text_columns` (a value Arrow cannot read refuses its
  row, not the file).  The header is checked first, by :mod:`.input_rows`'
  rules, before anything is sent.
* JSON lines: a block of whole lines at a time (:data:`JSON_BLOCK` bytes)
  through :func:`pyarrow.json.read_json`, no Python per line; a block Arrow
  cannot read as objects of the stream's types (a blank line, an array in
  field order, a bad line, a value of another type) goes ``batch_size``
  lines at a time, and a chunk Arrow cannot read either goes as rows, mapped
  by :func:`~.input_rows.json_values`, and the node types them, naming any
  it refuses.
* Parquet: :meth:`pyarrow.parquet.ParquetFile.iter_batches`, the stream's
  columns only; the row count is in the file's metadata.

Batches are cut by rows, ``batch_size`` each (:mod:`.file_batches`), never by
the reader's blocks or by time: the same file gives the same batches, so a
re-run with the same producer continues exactly where the last one stopped.
Which file row each sent row is (for the node's refusals) is kept by
:class:`~.file_rows.FileRows`.

pyarrow is imported here, where batches are made: ``boreas --help`` does not
import this module.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from boreas.catalog.diagnostics import Diagnostic, ValidationFailed
from boreas.catalog.model import Schema
from boreas.wire.columns import arrow_schema
from boreas.wire.publish_columns import conform, with_micros
from boreas.wire.row_errors import RowError
from boreas.wire.time_columns import Unconvertible

from .file_batches import cut, cut_columns, one_batch
from .file_rows import FileRows
from .input_rows import BadRow, RowProblems, csv_header, is_json_lines, is_parquet, json_values, read_rows
from .text_columns import typed

#: Bytes the CSV reader parses at a time: what bounds its memory (with the batches in flight).
CSV_BLOCK = 1 << 20

#: Bytes of a JSON lines file read at a time (then cut after its last whole line): what Arrow's JSON reader parses
#: in one call.
JSON_BLOCK = 4 << 20

#: Bytes a Parquet column chunk is read through at a time.
PARQUET_BUFFER = 1 << 20

#: What a batch is sent as: Arrow columns, or rows the node types (JSON lines Arrow cannot read).
Piece = pa.RecordBatch | list


def open_input(path: str, schema: Schema, batch_size: int, *, header: bool = True,
               ignore_unknown: bool = False) -> "InputFile":
    """The reader for ``path``'s format (by its name: ``.jsonl``/``.json``/``.ndjson``, ``.parquet``/``.pq``,
    else CSV); a CSV header or Parquet columns that do not fit the stream are refused here
    (``ValidationFailed``), before anything is sent."""
    if is_json_lines(path):
        return JsonLinesFile(path, schema, batch_size, ignore_unknown)
    if is_parquet(path):
        return ParquetInput(path, schema, batch_size, ignore_unknown)
    return CsvFile(path, schema, batch_size, header, ignore_unknown)


class InputFile(ABC):
    """One input file read as batches of a stream's schema; :attr:`rows` says which file row each sent row is."""

    def __init__(self, path: str, schema: Schema, batch_size: int):
        self.path = path
        self.schema = schema
        self.fields = [f.name for f in schema.fields]
        self.batch_size = batch_size
        self.rows = FileRows()
        self.total: int | None = None  # rows in the file, when it says (Parquet)
        self.size = os.path.getsize(path)
        self.given = 0  # rows in the batches given so far

    def batches(self) -> Iterator[Piece]:
        """The file's batches, in order, ``batch_size`` rows each (the last may be smaller)."""
        for piece in self._pieces():
            self.given += len(piece)
            yield piece

    @abstractmethod
    def _pieces(self) -> Iterator[Piece]:
        """What :meth:`batches` gives."""

    @abstractmethod
    def read_share(self) -> float | None:
        """How much of the file has been read, 0 to 1 (for the ETA while the row count is unknown)."""

    def file_rows(self, records: set[int]) -> dict[int, int]:
        """The file row (from 1) of each record (from 0)."""
        return {r: r + 1 for r in records}

    def more_problems(self) -> list[tuple[int, str]]:
        """Rows the reader skipped as malformed, by file row (CSV: a row of the wrong width)."""
        return []

    def refused(self, by_node: Iterable[RowError]) -> list[tuple[int, str]]:
        """Every refused row this run kept a reason for, ``(file row, reason)``, by file row: the ones the
        reader refused and the ones the node did (``by_node``: numbered by the rows sent)."""
        named = [(record, reason) for record, reason in self.rows.problems]
        named += [(self.rows.record(e.row) if e.row >= 0 else -1, f"field {e.field!r}: {e.reason}")
                  for e in by_node]
        rows = self.file_rows({record for record, _ in named if record >= 0})
        found = [(rows.get(record, 0), reason) for record, reason in named]
        return sorted(found + self.more_problems())

    @property
    def refused_here(self) -> int:
        """Rows refused while reading (never sent)."""
        return len(self.rows)


class CsvFile(InputFile):
    """A CSV file: a header naming the columns in any order (or ``header=False``: the fields in order)."""

    def __init__(self, path: str, schema: Schema, batch_size: int, header: bool, ignore_unknown: bool):
        super().__init__(path, schema, batch_size)
        self.header = header
        self.ignore_unknown = ignore_unknown
        if header:
            self.positions, self.width = csv_header(path, self.fields, ignore_unknown)
        else:
            self.positions, self.width = list(range(len(self.fields))), len(self.fields)
        self.malformed = 0  # rows of the wrong width the reader skipped (named by a second read, if any)
        self._source: pa.NativeFile | None = None

    def _pieces(self) -> Iterator[Piece]:
        return cut(self._typed(), self.batch_size)

    def _typed(self) -> Iterator[pa.RecordBatch]:
        names = [f"c{i}" for i in range(self.width)]
        wanted = [names[p] for p in self.positions]
        with pa.OSFile(self.path) as source:
            self._source = source
            reader = pa_csv.open_csv(
                source,
                read_options=pa_csv.ReadOptions(skip_rows=1 if self.header else 0, column_names=names,
                                                block_size=CSV_BLOCK, use_threads=False),
                parse_options=pa_csv.ParseOptions(newlines_in_values=True, invalid_row_handler=self._malformed),
                convert_options=pa_csv.ConvertOptions(column_types={n: pa.string() for n in wanted},
                                                      include_columns=wanted, strings_can_be_null=False,
                                                      quoted_strings_can_be_null=False))
            record = 0
            for text in reader:
                if self.width == 1:  # a blank line is not a row (a wider file's blank lines are malformed rows)
                    text = text.filter(pc.not_equal(pc.utf8_trim_whitespace(text.column(0)), ""))
                batch, problems = typed(text, self.schema)
                for index, reason in problems:
                    self.rows.refuse(record + index, reason)
                record += text.num_rows
                yield batch
        self._source = None

    def _malformed(self, row: Any) -> str:
        if row.text.strip():  # blank lines are skipped quietly, as the row path does
            self.malformed += 1
        return "skip"

    def read_share(self) -> float | None:
        source = self._source
        return source.tell() / self.size if source is not None and self.size else None

    @property
    def refused_here(self) -> int:
        return len(self.rows) + self.malformed

    def file_rows(self, records: set[int]) -> dict[int, int]:
        found = self._second_read(records)[0]
        return found

    def more_problems(self) -> list[tuple[int, str]]:
        return self._second_read(set())[1] if self.malformed else []

    def _second_read(self, records: set[int]) -> tuple[dict[int, int], list[tuple[int, str]]]:
        """Read the file again the row path's way (only when a row is to be named): the line of each record,
        and the rows of the wrong width with their lines."""
        if not records and not self.malformed:
            return {}, []
        problems = RowProblems(self.path)
        last = max(records, default=-1)
        found: dict[int, int] = {}
        for record, (line, _) in enumerate(read_rows(self.path, self.fields, header=self.header,
                                                      ignore_unknown=self.ignore_unknown, problems=problems)):
            if record in records:
                found[record] = line
            if record >= last and len(problems) >= self.malformed:
                break
        return found, problems.found


class JsonLinesFile(InputFile):
    """JSON lines: objects by field name (through Arrow), or arrays in field order (as rows)."""

    def __init__(self, path: str, schema: Schema, batch_size: int, ignore_unknown: bool):
        super().__init__(path, schema, batch_size)
        self.ignore_unknown = ignore_unknown
        self.arrow = arrow_schema(schema)
        self._options = pa_json.ParseOptions(explicit_schema=self.arrow,
                                             unexpected_field_behavior="ignore" if ignore_unknown else "error")
        self._file: Any = None

    def _pieces(self) -> Iterator[Piece]:
        return cut_columns(self._blocks(), self.batch_size)

    def _blocks(self) -> Iterator[Piece]:
        """The file a block of whole lines at a time (:data:`JSON_BLOCK` bytes, cut after its last line): a block
        Arrow reads whole as objects of the stream's types is one record batch, read in C++; any other (a blank
        line, an array in field order, a bad line) goes line by line (:meth:`_lines`)."""
        with open(self.path, "rb") as fh:
            self._file = fh
            record = 0  # lines before the block (records are lines, from 0)
            rest = b""
            while True:
                block = fh.read(JSON_BLOCK)
                data = rest + block
                if not data:
                    break
                end = len(data) if not block else data.rfind(b"\n") + 1  # (at the end: a last line without \n)
                if end == 0:  # (no line ends in it yet: read on)
                    rest = data
                    continue
                whole, rest = data[:end], data[end:]
                if record == 0 and whole.startswith(b"\xef\xbb\xbf"):
                    whole = whole[3:]  # a byte-order mark
                lines = whole.count(b"\n") + (not whole.endswith(b"\n"))
                batch = self._arrow(whole, lines)
                if batch is not None:
                    yield batch
                else:
                    parts = whole.split(b"\n")
                    yield from self._lines(parts[:-1] if parts[-1] == b"" else parts, record)
                record += lines
                if not block:
                    break
        self._file = None

    def _arrow(self, data: bytes, lines: int) -> pa.RecordBatch | None:
        """``data`` (``lines`` lines) read by Arrow as the stream's columns, when every line is an object of the
        stream's types; else None."""
        try:
            table = pa_json.read_json(pa.BufferReader(data), parse_options=self._options,
                                      read_options=pa_json.ReadOptions(use_threads=False, block_size=len(data) + 1))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return None
        if table.num_rows != lines or any(c.null_count for c in table.columns):
            return None
        return one_batch(table.select(self.fields))

    def _lines(self, block: list[bytes], first: int) -> Iterator[Piece]:
        """A block's lines, ``batch_size`` at a time, each chunk through Arrow if it can, else as rows."""
        lines: list[bytes] = []
        records: list[int] = []  # the record (line, from 0) of each of the chunk's lines
        for record, line in enumerate(block, first):
            if not line.strip():
                self.rows.skip(record)
                continue
            lines.append(line)
            records.append(record)
            if len(lines) == self.batch_size:
                yield self._chunk(lines, records)
                lines, records = [], []
        if lines:
            yield self._chunk(lines, records)

    def _chunk(self, lines: list[bytes], records: list[int]) -> Piece:
        data = b"".join(line if line.endswith(b"\n") else line + b"\n" for line in lines)
        try:
            table = pa_json.read_json(pa.BufferReader(data), parse_options=self._options,
                                      read_options=pa_json.ReadOptions(use_threads=False, block_size=len(data) + 1))
            if table.num_rows == len(lines) and not any(c.null_count for c in table.columns):
                return one_batch(table.select(self.fields))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            pass
        return self._as_rows(lines, records)

    def _as_rows(self, lines: list[bytes], records: list[int]) -> list:
        """The row path for a chunk Arrow cannot read whole: each line mapped on its own; bad ones refused."""
        rows = []
        for line, record in zip(lines, records):
            try:
                rows.append(json_values(line, self.fields, self.ignore_unknown))
            except BadRow as exc:
                self.rows.refuse(record, str(exc))
        return rows

    def read_share(self) -> float | None:
        return self._file.tell() / self.size if self._file is not None and self.size else None


class ParquetInput(InputFile):
    """A Parquet file: the stream's columns, by name; others refused unless ``ignore_unknown``."""

    def __init__(self, path: str, schema: Schema, batch_size: int, ignore_unknown: bool):
        super().__init__(path, schema, batch_size)
        try:
            # Column chunks read through a buffer, none cached ahead: pyarrow's default reader keeps what it read
            # of every row group until the end (RSS grew by 3 MB a batch, past 300 MB on 10M rows), and a file of
            # one huge row group is then not read whole either.
            self.file = pq.ParquetFile(path, buffer_size=PARQUET_BUFFER, pre_buffer=False)
        except (pa.ArrowInvalid, OSError) as exc:
            raise ValidationFailed([Diagnostic(path, None, "", f"not a Parquet file: {exc}")]) from None
        names = self.file.schema_arrow.names
        fields_text = ", ".join(self.fields)
        reasons = [f"missing column {f!r}: the stream's fields are {fields_text}" for f in self.fields
                   if f not in names]
        if not ignore_unknown:
            reasons += [f"unknown column {n!r}: the stream's fields are {fields_text} (--ignore-unknown skips "
                        "other columns)" for n in names if n not in self.fields]
        if not reasons:
            try:  # a date or time column its field cannot take (wire/time_columns.py), refused before any row
                arrow = self.file.schema_arrow
                with_micros(pa.RecordBatch.from_pylist([], pa.schema([arrow.field(n) for n in self.fields])), schema)
            except Unconvertible as exc:
                reasons.append(str(exc))
        if reasons:
            raise ValidationFailed([Diagnostic(path, None, "", r) for r in reasons])
        self.total = self.file.metadata.num_rows
        self.done = 0

    def _pieces(self) -> Iterator[Piece]:
        return cut(self._read(), self.batch_size)

    def _read(self) -> Iterator[pa.RecordBatch]:
        for batch in self.file.iter_batches(batch_size=self.batch_size, columns=self.fields):
            self.done += batch.num_rows
            # (conform: dates and times to microseconds by wire/time_columns.py's rule, as a client's columns)
            yield conform(pa.RecordBatch.from_arrays([batch.column(n) for n in self.fields], names=self.fields),
                          self.schema)

    def read_share(self) -> float | None:
        return self.done / self.total if self.total else None
