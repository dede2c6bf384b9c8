"""boreas.spark against real processes: a Head, a node and a subscriber, with Spark ``local[2,4]``.

Each test publishes with Spark into an input stream that a subscriber (on
its own event-loop thread) follows, and checks that every row arrives
exactly once -- also when a task fails after sending part of its partition
and is retried (an RDD's rows, and a DataFrame's Arrow batches whose input
fails upstream), and when a streaming micro-batch is replayed.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
import time
from collections import Counter
from typing import Self

import pytest
from boreas.client.head_api import UnknownStream
from boreas.client.subscriber import Subscriber
from boreas.spark import RowsRefused, lookup_target, publish, publish_file, run_job, stream_sink
from boreas.spark.sender import RowShaper
from boreas.spark.target import StreamTarget, run_sync
from pyspark import TaskContext
from pyspark.sql import Row
from pyspark.sql import functions as F
from support.cluster import TOKEN, wait_until

APP = """<borealis>
  <schema name="S"><field name="id" type="int"/><field name="v" type="double"/></schema>
  <schema name="T"><field name="id" type="int"/><field name="name" type="string" size="5"/>
    <field name="at" type="timestamp"/></schema>
  <input stream="A" schema="S"/>
  <input stream="B" schema="T"/>
</borealis>"""
DEPLOY = """<deploy><node endpoint="{node}" query=""/>
  <publish stream="A" node="{node}"/><publish stream="B" node="{node}"/></deploy>"""


@pytest.fixture
def boreas(cluster_factory):
    """A Head and one node where input streams A (id, v) and B (id, name, at) enter."""
    cluster = cluster_factory()
    cluster.start_head()
    node = cluster.start_node()
    cluster.submit(cluster.write("app.xml", APP), cluster.write("deploy.xml", DEPLOY.format(node=node)))
    cluster.entry = node
    return cluster


class Collector:
    """A subscriber on its own event loop thread, collecting every row it receives."""

    def __init__(self, head: str, stream: str):
        self.rows: list[tuple] = []
        self._head, self._stream = head, stream
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        if not self._ready.wait(30) or self._error:
            raise AssertionError(f"subscriber to {self._stream} did not start: {self._error!r}")
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(15)

    async def _main(self) -> None:
        subscriber = Subscriber(self._head, self._stream, TOKEN)
        try:
            await subscriber.start()
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            raise
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        self._ready.set()

        async def read() -> None:
            async for batch in subscriber.batches():
                self.rows.extend(batch)

        reader = asyncio.create_task(read())
        await self._stop.wait()
        reader.cancel()
        await subscriber.close()

    def wait_for(self, count: int, settle: float = 0.5) -> list[tuple]:
        """The rows once ``count`` arrived and nothing more came for ``settle`` seconds."""
        wait_until(lambda: len(self.rows) >= count, timeout=30, what=f"{count} rows on {self._stream}")
        time.sleep(settle)
        return list(self.rows)


def duplicates_dropped(cluster) -> int:
    return cluster.node_status(cluster.entry)["data"]["in"].get("duplicate_batches", 0)


def exactly_once(rows: list[tuple], expected: list[tuple]) -> None:
    counts = Counter(rows)
    assert [r for r, n in counts.items() if n > 1] == [], "rows delivered twice"
    assert sorted(rows) == sorted(expected)


def frame(spark, n: int, partitions: int = 4):
    return spark.range(0, n, numPartitions=partitions).select(
        F.col("id").cast("int").alias("id"), (F.col("id") * 0.5).alias("v"))


@pytest.mark.slow
def test_a_dataframe_arrives_once_and_republishing_the_same_job_adds_nothing(boreas, spark):
    n = 3000
    with Collector(boreas.head, "A") as sub:
        assert publish(frame(spark, n), "A", head=boreas.head, token=TOKEN, batch_size=128, job_id="job-a") == n
        exactly_once(sub.wait_for(n), [(i, i * 0.5) for i in range(n)])
        before = duplicates_dropped(boreas)
        # The same job again (a driver that re-runs it): every batch is one the node already has.
        assert publish(frame(spark, n), "A", head=boreas.head, token=TOKEN, batch_size=128, job_id="job-a") == n
        assert duplicates_dropped(boreas) - before == 4 * 6  # 4 partitions of 750 rows in 6 batches each
        exactly_once(sub.wait_for(n), [(i, i * 0.5) for i in range(n)])


@pytest.mark.slow
def test_a_retried_task_resends_the_same_batches_and_the_node_drops_them(boreas, spark):
    def fail_first_attempt_midway(index, rows):
        """Partition 0's first attempt dies after 250 rows (two batches of 100 are already sent)."""
        for number, row in enumerate(rows):
            if index == 0 and number == 250 and TaskContext.get().attemptNumber() == 0:
                raise RuntimeError("injected failure of the first attempt")
            yield row

    n = 1000
    rows = [(i, float(i)) for i in range(n)]
    # A local function travels to the workers by value (this module is not importable there).
    flaky = spark.sparkContext.parallelize(rows, 2).mapPartitionsWithIndex(fail_first_attempt_midway)
    with Collector(boreas.head, "A") as sub:
        before = duplicates_dropped(boreas)
        assert publish(flaky, "A", head=boreas.head, token=TOKEN, batch_size=100) == n
        exactly_once(sub.wait_for(n), rows)
    assert duplicates_dropped(boreas) - before == 2  # the retry re-sent batches 0 and 1


@pytest.mark.slow
def test_a_dataframe_whose_input_fails_upstream_is_published_once_by_the_retry(boreas, spark):
    def fail_first_attempt_midway(batches):
        """Partition 0's first attempt fails after 40,000 of its 50,000 rows: the publishing function downstream
        sees its input end normally after the record batches the JVM wrote to it (all but its last ~64 KiB
        buffer of them), and the task fails after it."""
        seen = 0
        for batch in batches:
            seen += batch.num_rows
            context = TaskContext.get()
            if seen > 40_000 and context.partitionId() == 0 and context.attemptNumber() == 0:
                raise RuntimeError("injected failure of the first attempt")
            yield batch

    n = 100_000
    df = frame(spark, n, partitions=2)
    # Record batches of 100 rows cut into batches of 64: a batch spanning two record batches would differ
    # between the cut-short attempt and the retry (and be refused by its digest).
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    try:
        flaky = df.mapInArrow(fail_first_attempt_midway, df.schema)
        with Collector(boreas.head, "A") as sub:
            before = duplicates_dropped(boreas)
            result = run_job(flaky, lookup_target(boreas.head, "A", TOKEN), "spark:flaky", batch_size=64)
            assert (result.published, result.refused_count) == (n, 0)
            assert result.arrow_batches == result.batches == 1000 * 2  # 1,000 record batches of 100: 64 + 36 rows
            exactly_once(sub.wait_for(n), [(i, i * 0.5) for i in range(n)])
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    # The first attempt's batches, sent again by the retry (tens of thousands of rows reach it before the failure).
    assert duplicates_dropped(boreas) > before, result


@pytest.mark.slow
def test_the_arrow_path_delivers_the_dataframe_rows_with_strings_timestamps_and_dates(boreas, spark):
    """What the subscriber sees equals the DataFrame's rows: strings as they are (non-ASCII, empty, at the
    size), timestamps and dates as microseconds since the epoch (a date: its midnight in the session's time
    zone, here the local one, as the row path made it), as the row path (an RDD of the same rows) sends them."""
    names = ["", "a", "ünï", "12345", "x y", "€"]
    start = dt.datetime(2024, 2, 29, 23, 59, 58, tzinfo=dt.UTC)
    stamps = [(i, names[i % len(names)], start + dt.timedelta(microseconds=1001 * i)) for i in range(300)]
    days = [(1000 + i, names[i % len(names)], dt.date(1969, 12, 1) + dt.timedelta(days=i)) for i in range(90)]

    def micros(value: dt.datetime | dt.date) -> int:
        if not isinstance(value, dt.datetime):
            value = dt.datetime.combine(value, dt.time())  # local midnight
        return int(value.replace(microsecond=0).timestamp()) * 1_000_000 + value.microsecond

    expected = [(i, name, micros(at)) for i, name, at in stamps + days]
    with Collector(boreas.head, "B") as sub:
        timestamps = spark.createDataFrame(stamps, "id int, name string, at timestamp")
        dates = spark.createDataFrame(days, "id long, name string, at date").select("at", "name", "id")  # by name
        target = lookup_target(boreas.head, "B", TOKEN)
        for df, prefix in ((timestamps, "spark:stamps"), (dates, "spark:dates")):
            result = run_job(df, target, prefix, batch_size=50)
            assert (result.published, result.refused_count) == (df.count(), 0)
            assert result.arrow_batches == result.batches > 0  # as Arrow batches
        exactly_once(sub.wait_for(len(expected)), expected)
    with Collector(boreas.head, "B") as rows:  # the row path: the same rows as Spark Rows
        result = run_job(timestamps.rdd, target, "spark:stamps-as-rows")
        assert (result.published, result.arrow_batches) == (300, 0)
        exactly_once(rows.wait_for(300), expected[:300])


@pytest.mark.slow
def test_publish_file_reads_parquet_and_csv_by_column_name(boreas, spark, tmp_path):
    base = 1_700_000_000_000_000
    parquet = tmp_path / "in.parquet"
    rows = [(f"n{i}", i, base + i, "x") for i in range(20)]
    (spark.createDataFrame(rows, "name string, id long, us long, extra string")
     .select("name", "id", F.timestamp_micros("us").alias("at"), "extra").write.parquet(str(parquet)))
    csv = tmp_path / "in.csv"
    csv.write_text("at,name,id\n" + "".join(f"2023-11-14T22:13:20.{i:06d}Z,c{i},{100 + i}\n" for i in range(10))
                   + f"{base},dig,110\n")
    with Collector(boreas.head, "B") as sub:
        assert publish_file(parquet, "B", head=boreas.head, token=TOKEN) == 20
        assert publish_file(str(csv), "B", head=boreas.head, token=TOKEN) == 11
        expected = ([(i, f"n{i}", base + i) for i in range(20)] + [(100 + i, f"c{i}", base + i) for i in range(10)]
                    + [(110, "dig", base)])
        exactly_once(sub.wait_for(len(expected)), expected)


@pytest.mark.slow
def test_schema_violations_name_row_and_field_and_the_good_rows_still_arrive(boreas, spark, tmp_path):
    bad = spark.createDataFrame([(1, 1.0), (None, 2.0), (3, 3.0), (3_000_000_000, 4.0), (5, None)],
                                "id long, v double").coalesce(1)
    csv = tmp_path / "bad.csv"
    csv.write_text("id,name,at\n1,ok,5\n2,toolong,6\nthree,ok,7\n4,ok,8\n5,,9\n")  # an empty cell is ""
    with Collector(boreas.head, "A") as a, Collector(boreas.head, "B") as b:
        with pytest.raises(RowsRefused) as refused:
            publish(bad, "A", head=boreas.head, token=TOKEN)
        result = refused.value.result
        assert (result.rows, result.published, result.refused_count) == (5, 2, 3)
        assert [(r.row, r.field) for r in result.refused] == [(1, "id"), (3, "id"), (4, "v")]
        assert "got null" in result.refused[0].reason and "out of range" in result.refused[1].reason
        assert "row 1" in str(refused.value) and "3 of 5 rows refused" in str(refused.value)
        exactly_once(a.wait_for(2), [(1, 1.0), (3, 3.0)])

        with pytest.raises(RowsRefused) as refused:
            publish_file(csv, "B", head=boreas.head, token=TOKEN)
        result = refused.value.result
        assert [(r.row, r.field) for r in result.refused] == [(1, "name"), (2, "id")]
        assert "longer than 5" in result.refused[0].reason and "'three' is not an int" in result.refused[1].reason
        exactly_once(b.wait_for(3), [(1, "ok", 5), (4, "ok", 8), (5, "", 9)])

    with pytest.raises(UnknownStream):
        publish(bad, "Nope", head=boreas.head, token=TOKEN)
    with pytest.raises(ValueError, match="no column for field"):
        publish(bad.select("id"), "A", head=boreas.head, token=TOKEN)


@pytest.mark.slow
def test_a_replayed_micro_batch_is_not_delivered_twice(boreas, spark, tmp_path):
    inbox, checkpoint = tmp_path / "inbox", tmp_path / "checkpoint"
    inbox.mkdir()
    (inbox / "1.json").write_text("".join(f'{{"id": {i}, "v": {i}.5}}\n' for i in range(300)))
    sink = stream_sink("A", head=boreas.head, token=TOKEN, batch_size=50)

    def fail_after_publishing(df, batch_id):
        sink(df, batch_id)
        raise RuntimeError("crash before the micro-batch is committed")

    def run(function) -> None:
        query = (spark.readStream.schema("id int, v double").json(str(inbox)).writeStream
                 .foreachBatch(function).option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        try:
            query.awaitTermination(60)
        finally:
            query.stop()

    expected = [(i, i + 0.5) for i in range(300)]
    with Collector(boreas.head, "A") as sub:
        with pytest.raises(Exception, match="crash before"):
            run(fail_after_publishing)
        exactly_once(sub.wait_for(300), expected)
        before = duplicates_dropped(boreas)
        run(sink)  # restarted from the checkpoint: micro-batch 0 runs again, then a new file as batch 1
        assert duplicates_dropped(boreas) - before == 6
        (inbox / "2.json").write_text("".join(f'{{"id": {i}, "v": {i}.5}}\n' for i in range(300, 400)))
        run(sink)
        exactly_once(sub.wait_for(400), expected + [(i, i + 0.5) for i in range(300, 400)])


def test_rows_are_put_in_field_order_by_name_and_checked_as_the_node_checks_them():
    target = StreamTarget("B", "T", (("id", "int", None), ("name", "string", 5), ("at", "timestamp", None)), (), None)
    shaper = RowShaper(target.schema(), text_fields=frozenset({0, 2}))
    utc = dt.datetime(2023, 11, 14, 22, 13, 20, 7, tzinfo=dt.UTC)
    rows = [Row(at=5, name="a", id=1),                                           # a Row: by name
            {"name": "b", "id": "2", "at": "2023-11-14T22:13:20Z", "extra": 0},  # text parsed, extras ignored
            (3, "c", utc),                                                       # a tuple: in field order
            {"name": "d"},                                                       # missing fields
            ("x", "e", 1),                                                       # bad text
            (6, "toolong", 1)]                                                   # too long
    good, numbers, bad = shaper.check(rows, first=10)
    assert good == [(1, "a", 5), (2, "b", 1_700_000_000_000_000), (3, "c", 1_700_000_000_000_007)]
    assert numbers == [10, 11, 12]
    assert [(n, f) for n, f, _, _ in bad] == [(13, "id"), (14, "id"), (15, "name")]
    # The driver's blocking calls work from inside a running event loop too (a notebook, an async app).
    assert asyncio.run(_in_a_loop()) == 42


async def _in_a_loop() -> int:
    async def answer() -> int:
        return 42

    return run_sync(answer)
