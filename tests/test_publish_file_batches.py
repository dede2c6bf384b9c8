"""``boreas publish`` reads a file as a stream of batches, never whole (issue 30: RSS bounded for a 5 GB file).

Behaviour a user relies on without seeing it: a file bigger than the reader's
buffer is read a block at a time (how much of it has been read when the first
batch is given is a fraction of it), the batches are cut by rows only (the
same file gives the same batches, so a re-run continues), the default batch
is big (about 2 MB of the stream's columns) and the rows arrive whole and in
order, for CSV, JSON lines and Parquet alike.  The processes' side (a node,
a subscriber, memory measured) is test_publish_file_stream.py.
"""

from __future__ import annotations

import asyncio
import json

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest

from boreas.catalog.model import Field, FieldType, Schema
from boreas.cli import input_batches
from boreas.cli.file_batches import file_batch_rows, file_window
from boreas.cli.input_batches import open_input
from boreas.cli.read_ahead import read_ahead
from boreas.wire.columns import Columns, read_ipc, unwrap
from boreas.wire.frames import make_batch
from boreas.wire.prepared import Prepared

SCHEMA = Schema("R", (Field("time", FieldType.LONG), Field("sensor", FieldType.INT), Field("value", FieldType.DOUBLE)))
ROWS = 120_000


def table(rows: int = ROWS) -> pa.Table:
    return pa.table({"time": pa.array(range(rows), pa.int64()),
                     "sensor": pa.array([i % 997 for i in range(rows)], pa.int32()),
                     "value": pa.array([i / 8 for i in range(rows)], pa.float64())})


def write(tmp_path, kind: str) -> str:
    data = table()
    path = tmp_path / f"rows.{kind}"
    if kind == "parquet":
        pq.write_table(data, path, row_group_size=25_000)
    elif kind == "csv":
        pa_csv.write_csv(data, path)
    else:
        path.write_text("".join(json.dumps(row) + "\n" for row in data.to_pylist()))
    return str(path)


@pytest.mark.parametrize("kind", ["csv", "jsonl", "parquet"])
def test_a_file_bigger_than_the_read_buffer_is_read_in_many_batches_never_whole(tmp_path, kind, monkeypatch):
    # (the CSV reader parses a block at a time and reads a few dozen blocks ahead: 8 KB blocks, 2 MB of file)
    monkeypatch.setattr(input_batches, "CSV_BLOCK", 8 << 10)
    monkeypatch.setattr(input_batches, "JSON_BLOCK", 256 << 10)  # (JSON lines: a block of lines at a time)
    path = write(tmp_path, kind)
    source = open_input(path, SCHEMA, 10_000)
    shares, sizes, got = [], [], []
    for piece in source.batches():
        shares.append(source.read_share())
        sizes.append(len(piece))
        got.append(piece)
    assert sizes == [10_000] * 12
    assert shares[0] is not None and shares[0] < 0.5, shares  # the first batch came before half the file was read
    known = [share for share in shares if share is not None]  # (None: the file has been read and closed)
    assert known == sorted(known) and known[-1] > known[0]
    assert pa.Table.from_batches(got).equals(table().cast(pa.Table.from_batches(got).schema))
    assert source.given == ROWS


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_the_same_file_gives_the_same_batches_cut_by_rows(tmp_path, kind):
    path = write(tmp_path, kind)
    first = [b for b in open_input(path, SCHEMA, 7_000).batches()]
    again = [b for b in open_input(path, SCHEMA, 7_000).batches()]
    assert [len(b) for b in first] == [7_000] * 17 + [1_000]
    assert all(a.equals(b) for a, b in zip(first, again))


def test_the_default_batch_is_about_two_megabytes_of_the_streams_columns_and_the_window_bounds_bytes():
    assert file_batch_rows(SCHEMA) == (2 << 20) // 20  # a long, an int, a double
    wide = Schema("W", (Field("name", FieldType.STRING, 100), Field("n", FieldType.INT)))
    assert file_batch_rows(wide) == (2 << 20) // (100 + 4 + 4)
    huge = Schema("H", (Field("text", FieldType.STRING, 100_000),))
    assert file_batch_rows(huge) == 1000  # (never fewer rows than this)
    # in flight: about 16 MB of batches, however big they are
    assert file_window(file_batch_rows(SCHEMA), SCHEMA, 256) == 8
    assert file_window(20_000, SCHEMA, 256) == (16 << 20) // (20_000 * 20)
    assert file_window(10, SCHEMA, 256) == 256  # (the publisher's own cap)
    assert file_window(1000, huge, 256) == 2  # (one in flight while the next is acknowledged)


async def test_batches_are_read_ahead_in_order_their_frames_payload_and_digest_made(tmp_path):
    path = write(tmp_path, "parquet")
    source = open_input(path, SCHEMA, 50_000)
    sent = [piece async for piece in read_ahead(source.batches())]
    assert [len(p) for p in sent] == [50_000, 50_000, 20_000]
    assert all(isinstance(p, Prepared) for p in sent)
    # the payload a frame carries was made in the reader thread, and read back it is the batch; its digest is the
    # one the event loop would have computed from the same batch (a re-run of an older publish still matches)
    batches = [read_ipc(unwrap(p.payload)) for p in sent]
    assert [b.num_rows for b in batches] == [50_000, 50_000, 20_000]
    assert pa.Table.from_batches(batches)["time"].to_pylist() == list(range(ROWS))
    assert [make_batch("S", "p", i, p, digest=True).digest for i, p in enumerate(sent)] == [
        make_batch("S", "p", i, Columns(b), digest=True).digest for i, b in enumerate(batches)]


async def test_a_reader_that_fails_stops_the_publish_with_its_error(tmp_path):
    def pieces():
        yield pa.record_batch({"n": [1]})
        raise ValueError("row 2: broken")

    got = []
    with pytest.raises(ValueError, match="row 2: broken"):
        async for piece in read_ahead(pieces()):
            got.append(len(piece))
    assert got == [1]
    await asyncio.sleep(0)


def test_json_lines_read_by_blocks_keep_their_order_and_name_bad_lines_by_their_line(tmp_path, monkeypatch):
    monkeypatch.setattr(input_batches, "JSON_BLOCK", 1 << 10)  # (many blocks, their ends inside lines)
    lines = [json.dumps({"time": i, "sensor": i % 7, "value": i / 2}) for i in range(400)]
    lines[150] = ""  # a blank line: skipped
    lines[220] = json.dumps([220, 3, 110.0])  # an array in field order: read as a row
    lines[300] = json.dumps({"time": 300, "value": 1.0})  # a missing field: refused, named by its line
    path = tmp_path / "r.jsonl"
    path.write_text("\ufeff" + "\n".join(lines))  # (a byte-order mark; no newline after the last line)
    source = open_input(str(path), SCHEMA, 64)
    got = []
    for piece in source.batches():
        got += piece.batch.to_pylist() if hasattr(piece, "batch") else (
            piece.to_pylist() if isinstance(piece, pa.RecordBatch) else [dict(zip(source.fields, r)) for r in piece])
    assert [r["time"] for r in got] == [i for i in range(400) if i not in (150, 300)]
    assert got[219] == {"time": 220, "sensor": 3, "value": 110.0}
    assert [(row, reason.split(" (")[0]) for row, reason in source.refused([])] == [(301, "missing field 'sensor'")]
