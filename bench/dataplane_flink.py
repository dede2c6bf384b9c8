"""The data plane benchmark's Flink peer: PyFlink on a local MiniCluster, the same pipeline and data.

Two variants, each in its own child process (``python bench/dataplane_flink.py
--variant sql|udf``: its own JVM, started by PyFlink's gateway):

* ``sql``, the JVM path: the filter and the map are Flink SQL built-in
  expressions (``celsius > -90.0 AND celsius < 60.0``, ``celsius * 9.0 / 5.0
  + 32.0``), run as generated Java code;
* ``udf``: the same filter and map as Python scalar UDFs (``@udf``, Flink's
  default process mode: Python workers fed over Apache Beam's Fn API).

Both: a socket text source (``socketTextStream``, the same CSV lines
``sensor,time,celsius`` as Boreas's publishers' values), parsed with SQL
built-ins; event time ``TO_TIMESTAMP_LTZ(time * 1000, 3)`` with a
watermark equal to it (no delay: the data is in order); an event-time
tumbling window of 60 s per sensor (``TUMBLE`` window TVF) with ``AVG`` and
``COUNT(*)``; each closed window as a line to a socket sink
(``writeToSocket``) read by this benchmark.  Windows close when the closing
tuple at time T arrives, as in Boreas.  Parallelism 2 (the machine's cores;
Flink's local default), the socket source itself has parallelism 1.

Throughput: after a warm-up job on a tenth of the data (JIT, class loading),
a job over all of it: from "go" (the source's connection accepted, then all
the bytes written at once) until the sink has the last window.  Job
submission is not counted (Boreas's deployment is not either).

For information, not as the peer: the SQL variant once more over the same
readings generated inside its JVM (``datagen``, a sequence of reading
numbers, the values computed in SQL by the same IEEE steps), a bounded job
timed by its net run time (task deployment included): Flink's engine
without the socket and the text parsing, where its JVM path is strongest.

Latency: filter -> map with the ``sent`` stamp passed through, the sink
writing ``sent`` per passing tuple; the source is bench/dataplane_workers.py's
``socket-feed`` at 10,000 tuples/s (as for Spark); receive time - send time
per tuple, the first second not counted.  Tuned for latency as a Flink user
would: parallelism 1, network buffers flushed after every record
(``setBufferTimeout(0)``; the default flushes every 100 ms) and, for the
Python UDFs, bundles of at most 1 ms (``python.fn-execution.bundle.time``;
the default, 1 s, holds tuples back up to a second).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from dataplane_data import (
    SENSORS,
    WINDOW,
    Windows,
    check_windows,
    freeze_harness,
    latency_figures,
    stamped_passing,
)
from dataplane_sockets import (
    BulkFeeder,
    LineReceiver,
    PacedFeeder,
    parse_window,
    readings_csv,
)
from dataplane_workers import sync_line
from procs import HOST, BenchError, Processes, pyflink_missing

VARIANTS = {"sql": "Flink SQL built-ins (the JVM path)", "udf": "Flink with Python UDFs"}


available = pyflink_missing  # (bench/procs.py: shared by the Flink peers)


# -- the benchmark's side ------------------------------------------------------------------


def measure_flink(procs: Processes, tmp: Path, args: argparse.Namespace, expected: Windows) -> dict[str, Any]:
    """Both variants, one child process each; {variant: {"throughput", "latency", ...} or {"unavailable"}}."""
    why = available()
    out: dict[str, Any] = {}
    for variant, label in VARIANTS.items():
        if why is not None:
            out[variant] = {"unavailable": why}
            continue
        name = f"flink-{variant}"
        proc = procs.spawn(name, [str(Path(__file__).resolve()), "--variant", variant, "--times", str(args.times),
                                  "--latency-seconds", str(args.latency_seconds),
                                  "--log", str(tmp / f"{name}-feeder.log")], pipes=True)
        budget = 600 + args.tuples / 2_000  # the Python UDF variant is slow: up to ~2,000 tuples/s allowed
        try:
            r: dict[str, Any] = json.loads(sync_line(proc, procs, "PyFlink's version", 120))
            start = time.perf_counter()
            r.update(json.loads(sync_line(proc, procs, "the warm-up job", budget)))
            r.update(json.loads(sync_line(proc, procs, "the throughput job", budget)))
            print(f"{label} {r['version']}: throughput {r['throughput']['rate']:>10,.0f} tuples/s "
                  f"(job submitted in {r['throughput']['submit']:.1f} s, not counted)", flush=True)
            if variant == "sql":
                r.update(json.loads(sync_line(proc, procs, "the generated-data job", budget)))
                print(f"{label}, information: readings generated in its JVM: {r['generated']['rate']:>10,.0f} "
                      f"tuples/s", flush=True)
            r.update(json.loads(sync_line(proc, procs, "the latency job", args.latency_seconds + 300)))
            print(f"{label}: latency p50 {r['latency']['p50']:.2f} ms, p99 {r['latency']['p99']:.2f} ms "
                  f"({time.perf_counter() - start:.0f} s in all)", flush=True)
        except BenchError as exc:
            if "exited" not in str(exc):
                raise
            out[variant] = {"unavailable": f"the PyFlink run failed here: {exc}"}
            continue
        finally:
            procs.stop([proc])
        check_windows(f"Flink ({variant})", r["throughput"]["windows"], expected)
        if "generated" in r:
            check_windows("Flink (sql, generated readings)", r["generated"]["windows"], expected)
        out[variant] = r
    return out


# -- the child: one variant ---------------------------------------------------------------


class Flink:
    def __init__(self, variant: str, parallelism: int, latency: bool):
        from pyflink.datastream import StreamExecutionEnvironment
        from pyflink.table import StreamTableEnvironment

        self.variant = variant
        self.env = StreamExecutionEnvironment.get_execution_environment()
        self.env.set_parallelism(parallelism)
        if latency:
            self.env.set_buffer_timeout(0)  # flush network buffers after every record (default: every 100 ms)
        self.tenv = StreamTableEnvironment.create(self.env)
        config = self.tenv.get_config()
        config.set("table.local-time-zone", "UTC")
        config.set("pipeline.name", f"boreas-bench-{variant}")
        config.set("python.executable", sys.executable)  # the UDF workers: this venv's interpreter
        config.set("python.client.executable", sys.executable)
        if latency:
            config.set("python.fn-execution.bundle.time", "1")
        if variant == "udf":
            from pyflink.table import DataTypes
            from pyflink.table.udf import udf

            self.tenv.create_temporary_function(
                "valid", udf(lambda c: -90.0 < c < 60.0, result_type=DataTypes.BOOLEAN()))
            self.tenv.create_temporary_function(
                "to_fahrenheit", udf(lambda c: c * 9.0 / 5.0 + 32.0, result_type=DataTypes.DOUBLE()))

    def filter_map(self) -> tuple[str, str]:
        if self.variant == "udf":
            return "valid(celsius)", "to_fahrenheit(celsius)"
        return "celsius > -90.0 AND celsius < 60.0", "celsius * 9.0 / 5.0 + 32.0"

    def source(self, port: int, stamped: bool) -> str:
        """A table over socket lines, parsed and (unless ``stamped``) with event time; its name."""
        from pyflink.datastream.data_stream import DataStream
        from pyflink.table import DataTypes, Schema

        lines = DataStream(self.env._j_stream_execution_environment.socketTextStream(HOST, port))
        field = "SPLIT_INDEX(f0, ',', {})"
        schema = (Schema.new_builder().column("f0", DataTypes.STRING())
                  .column_by_expression("sensor", f"CAST({field.format(0)} AS INT)")
                  .column_by_expression("t", f"CAST({field.format(1)} AS INT)")
                  .column_by_expression("celsius", f"CAST({field.format(2)} AS DOUBLE)"))
        if stamped:
            schema = schema.column_by_expression("sent", f"CAST({field.format(3)} AS BIGINT)")
        else:
            schema = (schema.column_by_expression("ts", f"TO_TIMESTAMP_LTZ(CAST({field.format(1)} AS BIGINT) * 1000, 3)")
                      .watermark("ts", "ts"))
        name = f"readings_{port}"
        self.tenv.create_temporary_view(name, self.tenv.from_data_stream(lines, schema.build()))
        return name

    def sink(self, table: Any, port: int) -> None:
        """Each row of a one-STRING-column table (ending in a newline) to the socket ``port``."""
        from pyflink.java_gateway import get_gateway

        gateway = get_gateway()
        strings = self.tenv._j_tenv.toDataStream(table._j_table, gateway.jvm.java.lang.Class.forName("java.lang.String"))
        strings.writeToSocket(HOST, port, gateway.jvm.org.apache.flink.api.common.serialization.SimpleStringSchema())

    @staticmethod
    def windows_sql(converted: str) -> str:
        """Per sensor, 60 s event-time tumbling windows over ``converted``: one CSV line per window."""
        return f"""
            SELECT CONCAT_WS(',', CAST(sensor AS STRING),
                             CAST(UNIX_TIMESTAMP(CAST(window_start AS STRING), 'yyyy-MM-dd HH:mm:ss.SSS') AS STRING),
                             CAST(AVG(fahrenheit) AS STRING), CAST(COUNT(*) AS STRING)) || CHR(10) AS line
            FROM TABLE(TUMBLE(TABLE {converted}, DESCRIPTOR(ts), INTERVAL '{WINDOW}' SECOND))
            GROUP BY sensor, window_start, window_end"""

    def windows_job(self, source_port: int, sink_port: int) -> Any:
        where, fahrenheit = self.filter_map()
        readings = self.source(source_port, stamped=False)
        converted = f"converted_{source_port}"
        self.tenv.create_temporary_view(converted, self.tenv.sql_query(
            f"SELECT sensor, ts, {fahrenheit} AS fahrenheit FROM {readings} WHERE {where}"))
        self.sink(self.tenv.sql_query(self.windows_sql(converted)), sink_port)
        return self.env.execute_async(f"boreas-bench-{self.variant}-windows")

    def generated_job(self, times: int, sink_port: int) -> Any:
        """The windows job over the same readings generated inside the JVM (``datagen``, a sequence of
        reading numbers, the values computed in SQL by the same IEEE steps): no socket, no parsing.
        Bounded: at its end every window closes, so no closing tuples are needed."""
        where, fahrenheit = self.filter_map()
        name = f"generated_{sink_port}"
        self.tenv.execute_sql(f"""
            CREATE TEMPORARY TABLE {name} (
                id BIGINT,
                sensor AS CAST(id % {SENSORS} AS INT),
                celsius AS CAST((id * 37) % 1100 AS DOUBLE) / 1.0E1 - 4.5E1,
                ts AS TO_TIMESTAMP_LTZ(id / {SENSORS} * 1000, 3),
                WATERMARK FOR ts AS ts
            ) WITH ('connector' = 'datagen', 'fields.id.kind' = 'sequence', 'fields.id.start' = '0',
                    'fields.id.end' = '{SENSORS * times - 1}', 'rows-per-second' = '1000000000')""")
        converted = f"converted_{sink_port}"
        self.tenv.create_temporary_view(converted, self.tenv.sql_query(
            f"SELECT sensor, ts, {fahrenheit} AS fahrenheit FROM {name} WHERE {where}"))
        self.sink(self.tenv.sql_query(self.windows_sql(converted)), sink_port)
        return self.env.execute_async(f"boreas-bench-{self.variant}-generated")

    def latency_job(self, source_port: int, sink_port: int) -> Any:
        where, fahrenheit = self.filter_map()
        readings = self.source(source_port, stamped=True)
        out = self.tenv.sql_query(f"SELECT CAST(sent AS STRING) || ',' || CAST({fahrenheit} AS STRING) || CHR(10) "
                                  f"AS line FROM {readings} WHERE {where}")
        self.sink(out, sink_port)
        return self.env.execute_async(f"boreas-bench-{self.variant}-latency")


def wait_for(what: str, ready: Any, timeout: float, job: Any = None) -> None:
    deadline = time.time() + timeout
    while not ready():
        if job is not None and job.get_job_status().result().is_terminal_state():
            raise RuntimeError(f"the Flink job ended ({job.get_job_status().result()}) before {what}")
        if time.time() > deadline:
            raise RuntimeError(f"no {what} after {timeout:g} s")
        time.sleep(0.005)


def run_windows(variant: str, parallelism: int, times: int, timeout: float) -> dict[str, Any]:
    """One windows job over ``times`` times: go -> last window; its windows."""
    flink = Flink(variant, parallelism, latency=False)
    feeder, receiver = BulkFeeder(readings_csv(times)), LineReceiver()
    expected = SENSORS * times // WINDOW
    try:
        submitted = time.time()
        job = flink.windows_job(feeder.port, receiver.port)
        wait_for("source connection", feeder.connected.is_set, 300, job)
        started = time.time()
        go = feeder.go()
        wait_for(f"{expected:,} windows", lambda: receiver.count() >= expected, timeout, job)
        lines = receiver.take()
        last = max(t for _, t in lines) / 1_000_000
        job.cancel().result()
    finally:
        feeder.close()
        receiver.close()
    tuples = SENSORS * (times + 1)
    return {"tuples": tuples, "elapsed": last - go, "rate": tuples / (last - go), "submit": started - submitted,
            "windows": [parse_window(line) for line, _ in lines]}


def run_generated(parallelism: int, times: int) -> dict[str, Any]:
    """The SQL windows job over readings generated in the JVM: its net run time (from the job's start,
    task deployment included, until it finished) and its windows."""
    flink = Flink("sql", parallelism, latency=False)
    receiver = LineReceiver()
    try:
        job = flink.generated_job(times, receiver.port)
        result = job.get_job_execution_result().result()
        seconds = result.get_net_runtime() / 1000
        expected = SENSORS * times // WINDOW
        wait_for(f"{expected:,} windows", lambda: receiver.count() >= expected, 30)
        lines = receiver.take()
    finally:
        receiver.close()
    tuples = SENSORS * times
    return {"tuples": tuples, "elapsed": seconds, "rate": tuples / seconds,
            "windows": [parse_window(line) for line, _ in lines]}


def run_latency(variant: str, seconds: float, log: Path) -> dict[str, Any]:
    flink = Flink(variant, 1, latency=True)
    feeder, receiver = PacedFeeder(seconds, log), LineReceiver()
    try:
        job = flink.latency_job(feeder.port, receiver.port)
        feeder.wait_connected()
        time.sleep(2.0)  # the job's tasks running (the source connects as it starts)
        freeze_harness()  # the receiver stamps in this process
        result = feeder.go()
        expected = stamped_passing(result["rows"])
        wait_for(f"{expected:,} stamped tuples", lambda: receiver.count() >= expected, 60, job)
        job.cancel().result()
        samples = [(int(line.split(",")[0]), t) for line, t in receiver.take()]
    finally:
        feeder.stop()
        receiver.close()
    return latency_figures(samples, result)


def child(args: argparse.Namespace) -> None:
    from pyflink.version import __version__

    def say(payload: dict[str, Any]) -> None:
        print(json.dumps(payload), flush=True)

    say({"version": __version__})
    warm = run_windows(args.variant, args.parallelism, max(WINDOW * 20, args.times // 10 // WINDOW * WINDOW),
                       args.timeout)
    say({"warmup": {k: v for k, v in warm.items() if k != "windows"}})
    say({"throughput": run_windows(args.variant, args.parallelism, args.times, args.timeout)})
    if args.variant == "sql":  # information: Flink's engine alone, the readings made inside its JVM
        run_generated(args.parallelism, max(WINDOW * 20, args.times // 10 // WINDOW * WINDOW))
        say({"generated": run_generated(args.parallelism, args.times)})
    say({"latency": run_latency(args.variant, args.latency_seconds, Path(args.log))})


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", choices=sorted(VARIANTS), required=True)
    parser.add_argument("--times", type=int, required=True)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--latency-seconds", type=float, default=8.0)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--log", default=os.devnull)
    child(parser.parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
