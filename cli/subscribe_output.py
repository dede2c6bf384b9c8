"""Where ``boreas subscribe`` writes a stream's tuples: JSON lines, CSV or Parquet, on stdout or into a file.

How tuples are written has nothing to do with subscribing (:mod:`.data`).
JSON lines and CSV are written row by row from the rows a subscriber gives
(:meth:`~boreas.client.subscriber.Subscriber.batches`); Parquet is written a
batch at a time from its Arrow batches
(:meth:`~boreas.client.subscriber.Subscriber.arrow`) with pyarrow's
``ParquetWriter``, so a batch that came as Arrow never becomes rows.  Every
format writes what ``boreas publish`` reads back (a timestamp as
microseconds since the epoch), so a subscription's file can be published
again as it is.

A changelog stream's rows carry weights (+1 a row enters, -1 it leaves:
docs/dataplane.md); every format shows them as one more, last field,
``_weight`` (a JSON key, a CSV column, a Parquet column).  A plain stream's
output is as it always was.  Which one a stream is shows in its first
batch, so CSV's header and Parquet's schema are written with it (or, with
no batch at all, at the end).

A named subscription (``--name``) written into a file resumes exactly
once: with each flush the output records, atomically (a file beside it,
``FILE.position``, replaced whole), the file's length and the subscriber's
positions (:meth:`~boreas.client.subscriber.Subscriber.positions`); started
again with the same stream and name, it cuts the file back to that length and
hands the positions to the subscriber, which drops what the file already has.
Written to stdout, nothing is recorded: a restart is at-least-once.

pyarrow is imported only for Parquet.
"""

from __future__ import annotations

import csv
import json
import os
import sys
from abc import ABC, abstractmethod
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # (the catalog model: imported where a row is written, not for `boreas subscribe --help`)
    from boreas.catalog.model import Schema

from .common import BadInput

FORMATS = ("jsonl", "csv", "parquet")


def open_output(fmt: str, path: str | None, schema: Schema, resume: tuple[str, str] | None = None) -> "Output":
    """The writer for ``fmt``, into ``path`` (stdout if None: Parquet needs a file).  ``BadInput`` (exit 2,
    before subscribing) when it cannot be.

    ``resume`` (stream, name): a named subscription, continued in ``path`` where the last one with that name
    recorded it stopped (:func:`recorded_positions` are its positions), and recorded at each
    :meth:`Output.checkpoint`.
    """
    if fmt == "parquet":
        if path is None:
            raise BadInput("--format parquet needs --output FILE (Parquet is not written to a terminal or pipe)")
        if resume is not None:
            raise BadInput("--name cannot resume into a Parquet file (it is readable only once closed): "
                           "use --format jsonl or csv")
        return ParquetOutput(path, schema)
    if path is None:
        file, continued = sys.stdout, False
    elif resume is not None:
        file, continued = _reopen(path, resume)
    else:
        file, continued = _open(path, "w"), False
    output: _TextOutput = (JsonLinesOutput(file, schema) if fmt == "jsonl"
                           else CsvOutput(file, schema, header=not continued))
    if resume is not None and path is not None:
        output.position = Position(f"{path}.position", *resume)
    return output


def _open(path: str, mode: str) -> IO[str]:
    try:
        return open(path, mode, newline="", encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"{path}: cannot write file: {exc.strerror or exc}") from None


def _reopen(path: str, resume: tuple[str, str]) -> tuple[IO[str], bool]:
    """``path`` cut back to what its position file records for (stream, name), and True; a new file (and False)
    when there is no record for them."""
    recorded = Position(f"{path}.position", *resume).read()
    if recorded is None or not os.path.exists(path):
        return _open(path, "w"), False
    file = _open(path, "r+")
    file.truncate(recorded[0])  # what was written after the last record comes again
    file.seek(0, os.SEEK_END)
    return file, True


def recorded_positions(path: str | None, stream: str, name: str | None) -> dict[str, int]:
    """The positions a named subscription into ``path`` recorded last time (none: it starts afresh)."""
    if path is None or name is None or not os.path.exists(path):
        return {}
    recorded = Position(f"{path}.position", stream, name).read()
    return recorded[1] if recorded else {}


class Position:
    """``FILE.position``: the output's length and the subscriber's positions, recorded together at each flush."""

    def __init__(self, path: str, stream: str, name: str):
        self.path, self.stream, self.name = path, stream, name

    def read(self) -> tuple[int, dict[str, int]] | None:
        """(length, positions) recorded for this stream and name, or None."""
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise BadInput(f"{self.path}: cannot read the recorded position: {exc}") from None
        if data.get("stream") != self.stream or data.get("name") != self.name:
            return None
        return int(data["length"]), {str(k): int(v) for k, v in data["positions"].items()}

    def write(self, length: int, positions: dict[str, int]) -> None:
        """Replace the record whole (a crash leaves the old one or the new one, never half)."""
        data = {"stream": self.stream, "name": self.name, "length": length, "positions": positions}
        temporary = f"{self.path}.tmp"
        with open(temporary, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(temporary, self.path)


class Output(ABC):
    """Writes a stream's batches; :attr:`arrow` says which form it takes (Arrow batches, else lists of rows)."""

    arrow = False

    def __init__(self, schema: Schema):
        from boreas.catalog.changelog import WEIGHT  # (the catalog: when a subscription starts, not for --help)

        self.names = [f.name for f in schema.fields]
        self.weight = WEIGHT  # the field a changelog's rows carry their weights in
        self.position: Position | None = None  # where :meth:`checkpoint` records them (None: not resumable)

    def checkpoint(self, positions: dict[str, int]) -> None:
        """:meth:`flush`, and record how far the output got with the subscriber's ``positions`` (if resumable)."""
        self.flush()

    @abstractmethod
    def write(self, batch: Any, limit: int | None = None) -> int:
        """Write ``batch`` (at most ``limit`` of its rows); how many rows were written."""

    @abstractmethod
    def flush(self) -> None:
        """Make what was written visible now (stdout is read while the subscription runs)."""

    @abstractmethod
    def close(self) -> None:
        """Finish the output (a Parquet file is readable only once closed)."""


class _TextOutput(Output):
    def __init__(self, file: IO[str], schema: Schema):
        super().__init__(schema)
        self.file = file

    def write(self, batch: Any, limit: int | None = None) -> int:
        rows = batch if limit is None else batch[:limit]
        weights = getattr(batch, "weights", None)  # a changelog's (client.subscriber.WeightedRows)
        self._start(weights is not None)
        if weights is None:
            for row in rows:
                self._row(row)
        else:
            for row, weight in zip(rows, weights):
                self._row((*row, weight))
        return len(rows)

    def _start(self, weighted: bool) -> None:
        """Before the first row: a changelog's rows get the ``_weight`` field."""
        if weighted and self.weight not in self.names:
            self.names = [*self.names, self.weight]

    @abstractmethod
    def _row(self, row: tuple) -> None: ...

    def flush(self) -> None:
        self.file.flush()

    def checkpoint(self, positions: dict[str, int]) -> None:
        self.file.flush()
        if self.position is not None:
            self.position.write(os.fstat(self.file.fileno()).st_size, positions)

    def close(self) -> None:
        if self.file is not sys.stdout:
            self.file.close()
        else:
            self.file.flush()


class JsonLinesOutput(_TextOutput):
    """One JSON object per tuple, by field name (what ``boreas subscribe`` always printed)."""

    def _row(self, row: tuple) -> None:
        self.file.write(json.dumps(dict(zip(self.names, row))) + "\n")


class CsvOutput(_TextOutput):
    """A header naming the fields, then one line per tuple."""

    def __init__(self, file: IO[str], schema: Schema, header: bool = True):
        super().__init__(file, schema)
        self.writer = csv.writer(file, lineterminator="\n")
        self.header = False
        self.has_header = not header  # a file a named subscription continues has one already
        # A nullable string's NULL is written \N, as `boreas publish` reads it (an empty value is the empty string).
        from boreas.catalog.model import FieldType

        self._null_texts = [i for i, f in enumerate(schema.fields) if f.nullable and f.type == FieldType.STRING]

    def _start(self, weighted: bool) -> None:
        if not self.header:  # (once: a stream is a changelog or not from its first batch)
            super()._start(weighted)
            if not self.has_header:
                self.writer.writerow(self.names)
            self.header = True

    def _row(self, row: tuple) -> None:
        if self._null_texts and any(row[i] is None for i in self._null_texts):
            row = tuple("\\N" if v is None and i in self._null_texts else v for i, v in enumerate(row))
        self.writer.writerow(row)

    def close(self) -> None:
        self._start(False)  # no batch came: the header alone, as before
        super().close()


class ParquetOutput(Output):
    """A Parquet file of the stream's Arrow schema, written a batch at a time (a row group every so often)."""

    arrow = True

    def __init__(self, path: str, schema: Schema):
        super().__init__(schema)
        import pyarrow.parquet as pq

        from boreas.wire.columns import arrow_schema

        self.path = path
        self.schema = arrow_schema(schema)
        self.writer: Any = None
        try:  # refused now, before subscribing, if it cannot be written; written once the first batch says how
            open(path, "wb").close()
        except OSError as exc:
            raise BadInput(f"{path}: cannot write file: {exc.strerror or exc}") from None

    def _open(self, weighted: bool) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if weighted:
            self.schema = self.schema.append(pa.field(self.weight, pa.int64(), nullable=False))
        try:
            self.writer = pq.ParquetWriter(self.path, self.schema)
        except OSError as exc:
            raise BadInput(f"{self.path}: cannot write file: {exc}") from None

    def write(self, batch: Any, limit: int | None = None) -> int:
        if self.writer is None:
            self._open(self.weight in batch.schema.names)
        if limit is not None and limit < batch.num_rows:
            batch = batch.slice(0, limit)
        # The same columns and types; the writer wants its own schema, metadata and all (no copy is made).
        batch = type(batch).from_arrays(batch.columns, schema=self.schema)
        self.writer.write_batch(batch)
        return batch.num_rows

    def flush(self) -> None:
        pass  # a Parquet file is written whole at close

    def close(self) -> None:
        if self.writer is None:
            self._open(False)
        self.writer.close()
