"""The data plane benchmark's peer: Spark Structured Streaming in local[2] on the same pipeline and data.

Throughput: the same rows as parquet files read by the file source, filter
-> select -> event-time tumbling window with a 0 s watermark, append mode,
into ``foreachBatch``.  It runs twice: as a stream (``maxFilesPerTrigger``
1, one file of ``--spark-file-rows`` rows per micro-batch: the peer), and,
for information, with every file in one micro-batch (Spark's default for
files already there: one batch job over the whole data set).  Latency: a
socket source fed at the same rate as Boreas's paced publisher.  See
bench/dataplane.py for the details.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from dataplane_data import (
    CELSIUS_SQL,
    LATENCY_BATCH,
    LATENCY_RATE,
    SENSORS,
    WINDOW,
    Windows,
    check_windows,
    freeze_harness,
    latency_figures,
    stamped_passing,
)
from dataplane_workers import start_worker, sync_line, tell
from procs import HOST, BenchError, Processes

#: The throughput runs: name -> maxFilesPerTrigger (None: Spark's default, every new file at once).
STREAM, ONE_BATCH = "stream", "one_batch"
RUNS = {STREAM: 1, ONE_BATCH: None}


class Spark:
    """A local[2] SparkSession whose JVM and files live under the run's temporary directory."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.session = None
        self.gateway_pid: int | None = None

    def start(self) -> Any:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        from pyspark.sql import SparkSession

        local = self.tmp / "spark-local"
        local.mkdir(exist_ok=True)
        os.environ["SPARK_LOCAL_IP"] = HOST
        # The JVM inherits stderr when it is launched: give it a log file instead of the terminal.
        saved = os.dup(2)
        with open(self.tmp / "spark-jvm.log", "ab") as log:
            os.dup2(log.fileno(), 2)
        try:
            self.session = (SparkSession.builder.master("local[2]").appName("boreas-bench-dataplane")
                            .config("spark.ui.enabled", "false")
                            .config("spark.ui.showConsoleProgress", "false")
                            .config("spark.sql.shuffle.partitions", "2")
                            .config("spark.driver.host", HOST)
                            .config("spark.driver.bindAddress", HOST)
                            .config("spark.local.dir", str(local))
                            .config("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={local}")
                            .getOrCreate())
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        self.session.sparkContext.setLogLevel("ERROR")
        with contextlib.suppress(Exception):
            self.gateway_pid = self.session.sparkContext._gateway.proc.pid
        # pyspark's SIGINT handler calls into the JVM from inside whatever call was interrupted; plain
        # KeyboardInterrupt instead (the cleanup stops the JVM), and no py4j traceback for it on stderr.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        logging.getLogger().addFilter(lambda r: "while sending command" not in r.getMessage())
        return self.session

    def stop(self, graceful: bool = True) -> None:
        if self.session is not None and graceful:
            with contextlib.suppress(Exception):
                for q in self.session.streams.active:
                    q.stop()
            with contextlib.suppress(Exception):
                self.session.stop()
        self.session = None
        if self.gateway_pid is not None:  # the JVM: make sure it is gone
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.gateway_pid, signal.SIGTERM)
            for _ in range(100):
                try:
                    os.kill(self.gateway_pid, 0)
                except ProcessLookupError:
                    break
                with contextlib.suppress(ChildProcessError):
                    if os.waitpid(self.gateway_pid, os.WNOHANG)[0]:
                        break
                time.sleep(0.1)
            else:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.gateway_pid, signal.SIGKILL)
            self.gateway_pid = None


# -- throughput ------------------------------------------------------------------------


def write_parquet(spark: Any, directory: Path, staging: Path, times: int, file_rows: int) -> int:
    """Reading i = sensor + SENSORS * time for time < ``times``, then the closing tuples, as parquet
    files whose modification times follow the data (the file source reads oldest first)."""
    directory.mkdir(parents=True)
    total = SENSORS * times
    step = max(SENSORS, file_rows // SENSORS * SENSORS)
    ranges = [(lo, min(lo + step, total)) for lo in range(0, total, step)]
    frames = [spark.range(lo, hi, 1, 1).selectExpr(f"cast(id % {SENSORS} as int) as sensor",
                                                   f"cast(id div {SENSORS} as int) as time",
                                                   f"{CELSIUS_SQL} as celsius") for lo, hi in ranges]
    frames.append(spark.range(0, SENSORS, 1, 1).selectExpr("cast(id as int) as sensor", f"{times} as time",
                                                            "0.0D as celsius"))
    now = time.time() - len(frames) - 10
    for k, frame in enumerate(frames):
        out = staging / f"f{k}"
        frame.write.parquet(str(out))
        (part,) = out.glob("part-*.parquet")
        target = directory / f"readings-{k:05d}.parquet"
        shutil.move(str(part), target)
        os.utime(target, (now + k, now + k))
        shutil.rmtree(out)
    return len(frames)


def spark_pipeline(source: Any) -> Any:
    from pyspark.sql import functions as F

    return (source.filter((F.col("celsius") > -90.0) & (F.col("celsius") < 60.0))
            .select("sensor", "time", (F.col("celsius") * 9.0 / 5.0 + 32.0).alias("fahrenheit"))
            .withColumn("ts", F.timestamp_seconds("time"))
            .withWatermark("ts", "0 seconds")
            .groupBy("sensor", F.window("ts", f"{WINDOW} seconds"))
            .agg(F.avg("fahrenheit").alias("fahrenheit"), F.count(F.lit(1)).alias("readings"))
            .select("sensor", F.col("window.start").cast("long").cast("int").alias("time"), "fahrenheit",
                    "readings"))


def spark_run_files(spark: Any, data: Path, checkpoint: Path, windows: int, timeout: float,
                    files_per_trigger: int | None) -> dict[str, Any]:
    """Stream the parquet files through the pipeline until ``windows`` windows came out."""
    got: list[tuple] = []
    done = threading.Event()
    state = {"last": 0.0}

    def sink(df: Any, batch_id: int) -> None:
        rows = [tuple(r) for r in df.collect()]
        if rows:
            got.extend(rows)
            state["last"] = time.time()
        if len(got) >= windows:
            done.set()

    source = spark.readStream.schema("sensor INT, time INT, celsius DOUBLE")
    if files_per_trigger is not None:
        source = source.option("maxFilesPerTrigger", files_per_trigger)
    start = time.time()
    query = (spark_pipeline(source.parquet(str(data))).writeStream.outputMode("append")
             .foreachBatch(sink).option("checkpointLocation", str(checkpoint)).start())
    try:
        while not done.wait(0.05):
            if query.exception() is not None:
                raise BenchError(f"Spark query failed: {query.exception()}")
            if time.time() - start > timeout:
                raise BenchError(f"Spark: {len(got)} of {windows} windows after {timeout:g} s")
        progress = list(query.recentProgress)
    finally:
        query.stop()
    input_rows = sum(p["numInputRows"] for p in progress)
    busy_ms = sum(p["durationMs"].get("triggerExecution", 0) for p in progress if p["numInputRows"])
    return {"elapsed": state["last"] - start, "windows": got, "input_rows": input_rows,
            "busy": busy_ms / 1000, "batches": sum(1 for p in progress if p["numInputRows"]),
            "progress_complete": len(progress) < 100}


def spark_throughput(spark: Any, tmp: Path, args: argparse.Namespace, expected: Windows) -> dict[str, Any]:
    """Both runs (RUNS) on the same files, after a warm-up query; each output checked."""
    staging = tmp / "spark-staging"
    warm_times = WINDOW * 20
    write_parquet(spark, tmp / "spark-warm", staging, warm_times, args.spark_file_rows // 4)
    spark_run_files(spark, tmp / "spark-warm", tmp / "ckpt-warm", SENSORS * warm_times // WINDOW, 120, 1)
    files = write_parquet(spark, tmp / "spark-data", staging, args.times, args.spark_file_rows)
    total = SENSORS * (args.times + 1)
    out = {}
    for name, per_trigger in RUNS.items():
        r = spark_run_files(spark, tmp / "spark-data", tmp / f"ckpt-{name}", len(expected),
                            max(300.0, args.tuples / 5000), per_trigger)
        check_windows("Spark", r["windows"], expected)
        r.update(tuples=total, rate=total / r["elapsed"], files=files,
                 engine_rate=r["input_rows"] / r["busy"] if r["busy"] else math.nan)
        out[name] = r
    return out


# -- latency ---------------------------------------------------------------------------


def spark_latency(spark: Any, procs: Processes, tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    from pyspark.sql import functions as F

    feeder = start_worker(procs, "socket feeder", ["socket-feed", "--batch", str(LATENCY_BATCH), "--rate",
                                                   str(LATENCY_RATE), "--seconds", str(args.latency_seconds)])
    port = json.loads(sync_line(feeder, procs, "port"))["port"]
    samples: list[tuple[int, int]] = []
    lock = threading.Lock()

    def sink(df: Any, batch_id: int) -> None:
        sent = df.select("sent").collect()
        now = int(time.time() * 1_000_000)
        with lock:
            samples.extend((r[0], now) for r in sent)

    parts = F.split(F.col("value"), ",")
    lines = spark.readStream.format("socket").option("host", HOST).option("port", port).load()
    stamped = lines.select(parts[0].cast("int").alias("sensor"), parts[1].cast("int").alias("time"),
                           parts[2].cast("double").alias("celsius"), parts[3].cast("long").alias("sent"))
    query = (stamped.filter((F.col("celsius") > -90.0) & (F.col("celsius") < 60.0))
             .select("sensor", "time", (F.col("celsius") * 9.0 / 5.0 + 32.0).alias("fahrenheit"), "sent")
             .writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp / "ckpt-latency")).start())
    try:
        sync_line(feeder, procs, "connection")
        time.sleep(1.0)  # let the query settle into its loop of empty triggers
        freeze_harness()  # foreachBatch stamps in this process
        tell(feeder, "go")
        result = json.loads(sync_line(feeder, procs, "result", args.latency_seconds + 60))
        expected = stamped_passing(result["rows"])
        deadline = time.time() + 60
        while True:
            if query.exception() is not None:
                raise BenchError(f"Spark latency query failed: {query.exception()}")
            with lock:
                n = len(samples)
            if n >= expected:
                break
            if time.time() > deadline:
                raise BenchError(f"Spark: {n} of {expected} stamped tuples arrived")
            time.sleep(0.05)
        progress = list(query.recentProgress)
    finally:
        query.stop()
        procs.stop([feeder])
    figures = latency_figures(samples, result)
    batches = [p for p in progress if p["numInputRows"]]
    figures["batch_ms"] = (sum(p["durationMs"].get("triggerExecution", 0) for p in batches) / len(batches)
                           if batches else math.nan)
    return figures


def measure_spark(procs: Processes, tmp: Path, args: argparse.Namespace, expected: Windows) -> dict[str, Any]:
    spark_home = Spark(tmp)
    try:
        start = time.perf_counter()
        spark = spark_home.start()
        print(f"Spark {spark.version} local[2] up in {time.perf_counter() - start:.1f} s", flush=True)
        out = {"version": spark.version}
        out["throughput"] = t = spark_throughput(spark, tmp, args, expected)
        print(f"  throughput:             {t[STREAM]['rate']:>10,.0f} tuples/s in {t[STREAM]['batches']} "
              f"micro-batches (the peer), {t[ONE_BATCH]['rate']:,.0f} tuples/s in {t[ONE_BATCH]['batches']} "
              f"(information)", flush=True)
        out["latency"] = spark_latency(spark, procs, tmp, args)
        print(f"  latency:                p50 {out['latency']['p50']:.2f} ms, p99 {out['latency']['p99']:.2f} ms",
              flush=True)
        return out
    except BaseException:
        spark_home.stop(graceful=False)  # interrupted or failed: the JVM may be mid-call; just end it
        raise
    finally:
        spark_home.stop()
