"""bench/publish_file.py's files: the same random rows as Parquet, CSV and JSON lines, written without Python per row.

Rows of ``R(time long, sensor int, value double)`` are made a million at a
time by a seeded numpy generator and written by pyarrow (JSON lines by
Arrow's string kernels); :func:`passing` is pyarrow's own count of the
bench's filter, the figure the subscriber's count must equal; :func:`read_alone`
is the ceiling, the file read by pyarrow alone.
"""

from __future__ import annotations

import time
from pathlib import Path

CHUNK = 1_000_000  # rows generated and written at a time
SENSORS = 1000
PASSING = 100  # the filter: sensor < PASSING


def chunks(rows: int, seed: int):
    """Random rows as pyarrow tables of CHUNK rows (seeded: the same arguments give the same files)."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    start = 1_700_000_000_000_000
    for first in range(0, rows, CHUNK):
        n = min(CHUNK, rows - first)
        yield pa.table({"time": pa.array(start + np.sort(rng.integers(0, 10**12, n)), pa.int64()),
                        "sensor": pa.array(rng.integers(0, SENSORS, n, dtype=np.int32), pa.int32()),
                        "value": pa.array(rng.standard_normal(n) * 100.0, pa.float64())})


def passing(table) -> int:
    """pyarrow's count of the filter's predicate over ``table``."""
    import pyarrow.compute as pc

    return pc.sum(pc.less(table.column("sensor"), PASSING)).as_py() or 0


def jsonl_lines(table):
    """``table``'s rows as JSON objects, one a line, made by Arrow's string kernels (no Python per row): the
    bytes to write."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    parts = []
    for i, name in enumerate(table.column_names):
        parts += [("{" if i == 0 else ",") + f'"{name}":', table.column(name).cast(pa.string())]
    parts.append("}\n")
    lines = pc.binary_join_element_wise(*parts, "").combine_chunks()
    _, offsets, data = lines.buffers()
    ends = np.frombuffer(offsets, dtype=np.int32)
    return memoryview(data)[int(ends[lines.offset]):int(ends[lines.offset + len(lines)])]


def write_files(tmp: Path, rows: int, seed: int, formats: list[str]) -> tuple[dict[str, Path], int]:
    """The same rows as Parquet, CSV and JSON lines (those asked for); and how many pass the filter."""
    import pyarrow.csv as pa_csv
    import pyarrow.parquet as pq

    paths = {f: tmp / f"rows.{f}" for f in formats}
    parquet = csv = jsonl = None
    expected = 0
    try:
        for table in chunks(rows, seed):
            expected += passing(table)
            if "parquet" in paths:
                parquet = parquet or pq.ParquetWriter(paths["parquet"], table.schema)
                parquet.write_table(table)
            if "csv" in paths:
                csv = csv or pa_csv.CSVWriter(paths["csv"], table.schema)
                csv.write_table(table)
            if "jsonl" in paths:
                jsonl = jsonl or open(paths["jsonl"], "wb")
                jsonl.write(jsonl_lines(table))
    finally:
        for writer in (parquet, csv, jsonl):
            if writer is not None:
                writer.close()
    return paths, expected


def write_big_csv(path: Path, gigabytes: float, seed: int) -> tuple[int, int]:
    """A CSV file of about ``gigabytes``: (rows, rows passing the filter)."""
    import pyarrow.csv as pa_csv

    want = int(gigabytes * (1 << 30))
    rows = expected = 0
    writer = None
    try:
        for table in chunks(1 << 62, seed + 1):
            writer = writer or pa_csv.CSVWriter(path, table.schema)
            writer.write_table(table)
            rows += table.num_rows
            expected += passing(table)
            if path.stat().st_size >= want:
                break
    finally:
        if writer is not None:
            writer.close()
    return rows, expected


def read_alone(path: Path, kind: str) -> tuple[int, float]:
    """(rows, seconds) of pyarrow reading the file alone, a batch at a time: the ceiling."""
    import pyarrow.csv as pa_csv
    import pyarrow.json as pa_json
    import pyarrow.parquet as pq

    began = time.perf_counter()
    if kind == "parquet":
        batches = pq.ParquetFile(path).iter_batches(batch_size=65_536)
    elif kind == "jsonl":
        batches = pa_json.open_json(path)
    else:
        batches = pa_csv.open_csv(path)
    rows = sum(b.num_rows for b in batches)
    return rows, time.perf_counter() - began
