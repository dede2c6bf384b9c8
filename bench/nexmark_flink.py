"""Nexmark's Flink peer: the queries' own Flink SQL in PyFlink, parallelism 1, over the generated CSV files.

Run as a child of ``bench/nexmark.py`` (its own JVM, started by PyFlink's
gateway): ``python bench/nexmark_flink.py --dir DIR q0 q1 ...`` with DIR
holding ``person.csv``, ``auction.csv`` and ``bid.csv`` from
``nexmark_gen.write``.  Each kind is a table of the filesystem connector
(CSV format, the suite's columns, ``WATERMARK FOR dateTime AS dateTime -
INTERVAL '4' SECOND`` as the suite declares), read in streaming mode: the
bounded file ends, the watermark goes to +infinity and every window closes.
Each query's ``SELECT`` is inserted into a ``blackhole`` sink, as the suite
does; the time is the job's net run time (Flink's ``getNetRuntime``: from
the job's start, task deployment included, until it ends; submission not
counted), after a warm-up job over the persons (class loading, JIT).

Prints one JSON line per query: ``{"query", "seconds", "wall"}`` or
``{"query", "error"}``; first a line with PyFlink's version.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from nexmark_queries import BY_NAME  # noqa: E402
from procs import pyflink_missing  # noqa: E402

DDL = {
    "person": "id BIGINT, name STRING, emailAddress STRING, creditCard STRING, city STRING, state STRING, "
              "`dateTime` TIMESTAMP(3), extra STRING",
    "auction": "id BIGINT, itemName STRING, description STRING, initialBid BIGINT, reserve BIGINT, "
               "`dateTime` TIMESTAMP(3), expires TIMESTAMP(3), seller BIGINT, category BIGINT, extra STRING",
    "bid": "auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING, `dateTime` TIMESTAMP(3), "
           "extra STRING",
}


available = pyflink_missing  # (bench/procs.py: shared by the Flink peers)


def table_env(directory: Path):
    """A streaming TableEnvironment at parallelism 1 with the three kinds as CSV file tables."""
    from pyflink.table import EnvironmentSettings, TableEnvironment

    tenv = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    config = tenv.get_config()
    config.set("parallelism.default", "1")
    config.set("table.local-time-zone", "UTC")
    for kind, columns in DDL.items():
        path = (directory / f"{kind}.csv").resolve()
        tenv.execute_sql(f"CREATE TABLE {kind} ({columns}, WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' "
                         f"SECOND) WITH ('connector' = 'filesystem', 'path' = 'file://{path}', 'format' = 'csv')")
    return tenv


def run(tenv, name: str, sql: str) -> dict:
    """One query into a blackhole sink: the job's net run time (from its start, task deployment included,
    until it finished; submission not counted, as Boreas's planning is not) and the wall time around it."""
    from pyflink.table import Schema, TableDescriptor

    table = tenv.sql_query(sql)
    sink = f"sink_{name}"
    schema = Schema.new_builder().from_row_data_type(table.get_schema().to_row_data_type()).build()
    tenv.create_temporary_table(sink, TableDescriptor.for_connector("blackhole").schema(schema).build())
    began = time.perf_counter()
    result = table.execute_insert(sink).get_job_client().get_job_execution_result().result()
    return {"query": name, "seconds": result.get_net_runtime() / 1000, "wall": time.perf_counter() - began}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("queries", nargs="+")
    args = parser.parse_args(argv)
    import pyflink

    print(json.dumps({"version": getattr(pyflink, "__version__", "?")}), flush=True)
    tenv = table_env(args.dir)
    run(tenv, "warmup", "SELECT id, name FROM person")  # class loading and JIT, not counted
    for name in args.queries:
        try:
            line = run(tenv, name, BY_NAME[name].flink())
        except Exception as exc:  # noqa: BLE001 - one query's failure is reported, the others still run
            line = {"query": name, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
