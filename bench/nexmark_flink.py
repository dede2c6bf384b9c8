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

The CPU seconds of the job (``cpu``) are this driver's and the JVM's
(``/proc/<pid>/stat`` utime + stime of the process tree) sampled before
and after each job: JVM start-up is excluded as for the net run time (the
warm-up job runs first, and only the time between the samples counts);
the job's submission (planning in the JVM) is included, since the JVM's
CPU cannot be split at the job's start.

Prints one JSON line per query: ``{"query", "seconds", "wall", "cpu"}`` or
``{"query", "error"}``; first a line with PyFlink's version.

With ``--collect`` each query's result is collected instead
(``execute().collect()``, the same job without the blackhole) to check
Boreas's against (``bench/nexmark_flinkcheck.py``): its changelog applied
(``+I``/``+U`` add a row, ``-U``/``-D`` take one away; a top-N's,
which Flink may send as upserts, by its key: ``UPSERT_KEYS``), so a query
whose result updates (q4, q15, ...) ends as its final rows, and written to
``DIR/flink_qN.json`` as ``{"columns", "rows"}``, each row its values then
its multiplicity; TIMESTAMP values as milliseconds since the epoch (UTC, as
Boreas reads event time) and DECIMAL as float.  The JSON line is then
``{"query", "rows_file", "rows", "wall"}``.
"""

from __future__ import annotations

import argparse
import calendar
import datetime
import decimal
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from nexmark_queries import BY_NAME  # noqa: E402
from procs import cpu_seconds, pyflink_missing  # noqa: E402

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


def tree_cpu(root: int) -> float:
    """CPU seconds of ``root`` and every live descendant: this driver and the JVM PyFlink's gateway starts.

    Why: on a shared machine Flink's wall time counts the time its threads waited for a core (2-13x its CPU
    time at a load of 8-20), so only CPU per event compares with Boreas's ``time.process_time``.  A
    descendant that ended has its time in its parent's (``cutime``) only once waited for; none ends
    between two samples here (the JVM lives as long as the driver).
    """
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        total += cpu_seconds(pid)
        todo.extend(children.get(pid, ()))
    return total


def run(tenv, name: str, sql: str) -> dict:
    """One query into a blackhole sink: the job's net run time (from its start, task deployment included,
    until it finished; submission not counted, as Boreas's planning is not), the wall time around it, and
    the CPU seconds of this process tree (driver and JVM) around it (its submission included: the CPU of
    the JVM cannot be split at the job's start; JVM start-up and class loading are excluded as for the net
    run time, by the warm-up job before the first query and by sampling around each job only)."""
    from pyflink.table import Schema, TableDescriptor

    table = tenv.sql_query(sql)
    sink = f"sink_{name}"
    schema = Schema.new_builder().from_row_data_type(table.get_schema().to_row_data_type()).build()
    tenv.create_temporary_table(sink, TableDescriptor.for_connector("blackhole").schema(schema).build())
    cpu, began = tree_cpu(os.getpid()), time.perf_counter()
    result = table.execute_insert(sink).get_job_client().get_job_execution_result().result()
    return {"query": name, "seconds": result.get_net_runtime() / 1000, "wall": time.perf_counter() - began,
            "cpu": tree_cpu(os.getpid()) - cpu}


def _plain(v):
    """A collected value as JSON and Boreas hold it: a TIMESTAMP as ms since the epoch (UTC), a DECIMAL a float."""
    if isinstance(v, datetime.datetime):
        return calendar.timegm(v.timetuple()) * 1000.0 + v.microsecond // 1000
    if isinstance(v, decimal.Decimal):
        return float(v)
    return v


#: a changelog row's effect on the result's multiset (Flink's RowKind short strings)
_SIGN = {"+I": 1, "+U": 1, "-U": -1, "-D": -1}
#: the result's unique key (column positions) of the queries whose changelog Flink may send as upserts (a top-N:
#: ``+U`` rows with no ``-U`` before them, each replacing the row of its key): q9 the auction, q18 (auction,
#: bidder), q19 (auction, rank_number)
UPSERT_KEYS = {"q9": (0,), "q18": (0, 1), "q19": (0, 7)}


def _apply(rows: Counter, latest: dict, key: tuple[int, ...] | None, kind: str, row: tuple) -> None:
    """One changelog row into the result: by its sign, or for a keyed (upsert) result by replacing its key's row."""
    if key is None:
        rows[row] += _SIGN[kind]
        return
    k = tuple(row[i] for i in key)
    old = latest.pop(k, None)
    if old is not None:
        rows[old] -= 1
    if _SIGN[kind] > 0:
        latest[k] = row
        rows[row] += 1


def collect(tenv, name: str, sql: str, directory: Path) -> dict:
    """One query's final result (its changelog applied), written to ``DIR/flink_<name>.json``."""
    table = tenv.sql_query(sql)
    columns = list(table.get_schema().get_field_names())
    rows: Counter = Counter()
    latest: dict = {}
    began = time.perf_counter()
    with table.execute().collect() as results:
        for r in results:
            _apply(rows, latest, UPSERT_KEYS.get(name), str(r.get_row_kind()), tuple(_plain(v) for v in r))
    out = directory / f"flink_{name}.json"
    out.write_text(json.dumps({"columns": columns, "rows": [[*k, n] for k, n in rows.items() if n]}))
    return {"query": name, "rows_file": str(out), "rows": sum(n for n in rows.values() if n > 0),
            "wall": time.perf_counter() - began}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--collect", action="store_true", help="collect each result (to check), not a blackhole")
    parser.add_argument("queries", nargs="+")
    args = parser.parse_args(argv)
    import pyflink

    print(json.dumps({"version": getattr(pyflink, "__version__", "?")}), flush=True)
    tenv = table_env(args.dir)
    if not args.collect:
        run(tenv, "warmup", "SELECT id, name FROM person")  # class loading and JIT, not counted
    for name in args.queries:
        try:
            line = (collect(tenv, name, BY_NAME[name].flink(), args.dir) if args.collect
                    else run(tenv, name, BY_NAME[name].flink()))
        except Exception as exc:  # noqa: BLE001 - one query's failure is reported, the others still run
            line = {"query": name, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
