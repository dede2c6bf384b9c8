"""Crash-recovery storage: the input log (group commit, torn tails, positions) and the snapshot store."""

from __future__ import annotations

import asyncio
import doctest
import logging
import os
from pathlib import Path

import pytest
from boreas.node.recovery import log as log_module
from boreas.node.recovery import snapshots as snapshots_module
from boreas.node.recovery.log import InputLog, LogFailed
from boreas.node.recovery.snapshots import CorruptSnapshot, SnapshotStore, write_atomic


def payloads(n: int, start: int = 0) -> list[bytes]:
    """Distinct payloads of varied sizes (including empty), so record boundaries are exercised."""
    return [f"record-{i}".encode() * (i % 5) for i in range(start, start + n)]


def segment_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


async def write_log(directory: Path, data: list[bytes], group: int = 4, **options) -> None:
    """Append ``data`` to a fresh or existing log in flushes of ``group`` records, then close it.

    Segments roll between flushes, so flushing in small groups is what makes several segments.
    """
    log = InputLog(directory, **options)
    log.open()
    await log.start()
    for i, payload in enumerate(data):
        log.append(payload)
        if i % group == group - 1:
            await log.flush()
    await log.close()


@pytest.mark.parametrize("module", [log_module, snapshots_module])
def test_doctests(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0


# -- input log ----------------------------------------------------------------------


async def test_round_trip_across_segments(tmp_path):
    data = payloads(60)
    log = InputLog(tmp_path / "log", segment_bytes=200, flush_every=8)
    log.open()
    await log.start()
    positions = []
    for i, p in enumerate(data):
        positions.append(log.append(p))
        if i % 5 == 4:  # segments roll between groups: make several groups
            await log.durable(i)
    assert positions == list(range(60))
    await log.durable(59)
    assert log.durable_position == 60
    assert list(log.read()) == list(enumerate(data))
    assert list(log.read(37)) == [(i, data[i]) for i in range(37, 60)]
    await log.close()

    files = segment_files(tmp_path / "log")
    assert len(files) > 3, "small segment_bytes must roll to new segments"
    assert files[0].name == f"{0:020d}.log"
    assert log.size_bytes() == sum(f.stat().st_size for f in files)

    reopened = InputLog(tmp_path / "log", segment_bytes=200)
    reopened.open()
    assert reopened.next_position == 60 and reopened.first_position == 0
    assert list(reopened.read()) == list(enumerate(data))
    assert reopened.counters["torn_tail_cut"] == 0


async def test_read_sees_only_durable_records(tmp_path):
    log = InputLog(tmp_path, flush_every=1000, flush_ms=10_000)
    log.open()
    await log.start()
    log.append(b"a")
    await log.flush()
    log.append(b"b")  # buffered, not yet written
    assert list(log.read()) == [(0, b"a")]
    await log.flush()
    assert list(log.read()) == [(0, b"a"), (1, b"b")]
    await log.close()


async def test_positions_continue_after_reopen_and_full_truncation(tmp_path):
    directory = tmp_path / "log"
    await write_log(directory, payloads(30), segment_bytes=100)
    await write_log(directory, payloads(5, 30), segment_bytes=100)

    log = InputLog(directory, segment_bytes=100)
    log.open()
    assert log.next_position == 35
    assert [p for p, _ in log.read()] == list(range(35))
    old = segment_files(directory)
    assert log.truncate_before(35) == len(old)  # nothing is being written: every segment may go
    assert segment_files(directory) == []
    assert log.first_position == 35 and log.size_bytes() == 0
    assert (directory / "start").read_text().strip() == "35"

    reopened = InputLog(directory)
    reopened.open()
    assert (reopened.first_position, reopened.next_position) == (35, 35)
    assert list(reopened.read()) == []
    await reopened.start()
    assert reopened.append(b"after") == 35
    await reopened.flush()
    assert list(reopened.read()) == [(35, b"after")]
    await reopened.close()


async def test_truncate_keeps_later_and_current_segments(tmp_path):
    log = InputLog(tmp_path, segment_bytes=100, flush_every=4)
    log.open()
    await log.start()
    for i, p in enumerate(payloads(40)):
        log.append(p)
        if i % 4 == 3:
            await log.flush()
    before = len(segment_files(tmp_path))
    deleted = log.truncate_before(20)
    assert 0 < deleted < before
    assert log.first_position <= 20 < log.first_position + 20
    assert [p for p, _ in log.read(20)] == list(range(20, 40))
    # The current segment is never deleted, even when every record in it is below the cut.
    log.append(b"x" * 10)
    await log.flush()
    log.truncate_before(10**6)
    assert segment_files(tmp_path), "the segment being written must survive"
    assert log.append(b"y") == 41
    await log.close()


async def test_group_commit_groups_appends(tmp_path):
    log = InputLog(tmp_path, flush_every=64, flush_ms=50.0)
    log.open()
    await log.start()
    for i in range(2000):
        position = log.append(b"%d" % i)
        if i % 100 == 99:
            await asyncio.sleep(0)  # let the writer run while appends keep coming
    await log.durable(position)
    assert log.counters["appends"] == 2000
    assert log.counters["flushes"] <= 2000 // 64 + 5
    assert [p for p, _ in log.read()] == list(range(2000))
    await log.close()


async def test_appends_during_a_write_go_into_the_next_group(tmp_path, monkeypatch):
    log = InputLog(tmp_path, flush_every=1000, flush_ms=1.0)
    log.open()
    await log.start()
    writing, release = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()
    real_write = log._write_group
    groups: list[int] = []

    def slow_write(path, data):
        groups.append(len(data))
        loop.call_soon_threadsafe(writing.set)
        asyncio.run_coroutine_threadsafe(release.wait(), loop).result()
        real_write(path, data)

    monkeypatch.setattr(log, "_write_group", slow_write)
    first = log.append(b"a")
    await writing.wait()  # the first group (one record) is being written
    later = [log.append(b"b"), log.append(b"c")]
    assert log.durable_position == 0
    release.set()
    await log.durable(later[-1])
    assert groups == [8 + 1, 2 * (8 + 1)]  # {a}, then {b, c}
    assert log.counters["flushes"] == 2 and first == 0
    await log.close()


async def test_flush_ms_bounds_the_wait_for_a_small_group(tmp_path):
    log = InputLog(tmp_path, flush_every=10_000, flush_ms=5.0)
    log.open()
    await log.start()
    position = log.append(b"lonely")
    await asyncio.wait_for(log.durable(position), timeout=2.0)
    assert log.counters["flushes"] == 1
    await log.close()


async def test_torn_tail_is_cut_and_appends_continue(tmp_path, caplog):
    data = payloads(10)
    await write_log(tmp_path, data)
    (last,) = segment_files(tmp_path)
    size = last.stat().st_size
    os.truncate(last, size - 3)  # a crash in the middle of the last record
    torn_record = 8 + len(data[-1])

    log = InputLog(tmp_path)
    with caplog.at_level(logging.WARNING, logger="boreas.node.recovery.log"):
        log.open()
    assert log.counters["torn_tail_cut"] == torn_record - 3
    assert any("cutting" in r.getMessage() and str(torn_record - 3) in r.getMessage() for r in caplog.records)
    assert last.stat().st_size == size - torn_record
    assert list(log.read()) == list(enumerate(data[:9]))
    assert log.next_position == 9
    await log.start()
    assert log.append(b"replacement") == 9
    await log.close()

    again = InputLog(tmp_path)
    again.open()
    assert list(again.read()) == [*enumerate(data[:9]), (9, b"replacement")]
    assert again.counters["torn_tail_cut"] == 0


async def test_corrupt_tail_is_cut(tmp_path, caplog):
    data = [b"payload-%d" % i for i in range(10)]
    await write_log(tmp_path, data)
    (last,) = segment_files(tmp_path)
    raw = bytearray(last.read_bytes())
    raw[-2] ^= 0xFF  # flip a byte in the last record's payload
    last.write_bytes(raw)

    log = InputLog(tmp_path)
    with caplog.at_level(logging.WARNING):
        log.open()
    assert "CRC mismatch" in caplog.text
    assert log.counters["torn_tail_cut"] == 8 + len(data[-1])
    assert list(log.read()) == list(enumerate(data[:9]))
    await log.start()
    assert log.append(b"next") == 9
    await log.close()


async def test_bad_record_in_an_early_segment_drops_the_later_ones(tmp_path):
    data = payloads(40)
    await write_log(tmp_path, data, segment_bytes=100)
    files = segment_files(tmp_path)
    assert len(files) >= 3
    second_first = int(files[1].stem)
    cut_bytes = sum(f.stat().st_size for f in files[1:])
    with files[1].open("r+b") as f:  # absurd length in the second segment's first record
        f.write(b"\xff\xff\xff\xff")

    log = InputLog(tmp_path)
    log.open()
    assert segment_files(tmp_path) == files[:1]  # the second is cut to nothing; later ones go too
    assert log.counters["torn_tail_cut"] == cut_bytes
    assert log.next_position == second_first
    assert list(log.read()) == list(enumerate(data[:second_first]))


async def test_truncation_interrupted_by_a_crash_is_completed_on_open(tmp_path):
    await write_log(tmp_path, payloads(20), segment_bytes=50)
    files = segment_files(tmp_path)
    keep_from = int(files[2].stem)
    (tmp_path / "start").write_text(f"{keep_from}\n")  # start persisted, segments not yet deleted
    log = InputLog(tmp_path)
    log.open()
    assert segment_files(tmp_path) == files[2:]
    assert (log.first_position, log.next_position) == (keep_from, 20)
    assert [p for p, _ in log.read()] == list(range(keep_from, 20))


async def test_write_failure_fails_waiters_and_later_calls(tmp_path, monkeypatch, caplog):
    log = InputLog(tmp_path)
    log.open()
    await log.start()
    first = log.append(b"ok")
    await log.durable(first)

    def broken_disk(path, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(log, "_write_group", broken_disk)
    position = log.append(b"lost")
    with caplog.at_level(logging.ERROR), pytest.raises(LogFailed) as failed:
        await log.durable(position)
    assert isinstance(failed.value.__cause__, OSError)
    assert "No space left" in caplog.text
    with pytest.raises(LogFailed):
        log.append(b"more")
    with pytest.raises(LogFailed):
        await log.durable(position)
    with pytest.raises(LogFailed):
        await log.flush()
    await log.durable(first)  # what was durable stays durable
    with pytest.raises(LogFailed):
        await log.close()


async def test_misuse_is_reported(tmp_path):
    log = InputLog(tmp_path)
    with pytest.raises(RuntimeError, match="not open"):
        log.append(b"x")
    log.open()
    position = log.append(b"x")
    with pytest.raises(RuntimeError, match="start"):
        await log.durable(position)
    await log.start()
    with pytest.raises(ValueError, match="not been appended"):
        await log.durable(position + 1)
    await log.durable(-1)  # "everything before position 0": trivially durable
    await log.close()
    with pytest.raises(RuntimeError, match="closed"):
        log.append(b"y")
    assert list(log.read()) == [(0, b"x")]


# -- snapshots ----------------------------------------------------------------------


def test_snapshot_round_trip_and_listing(tmp_path):
    store = SnapshotStore(tmp_path / "snaps")
    for snapshot_id in (3, 1, 12):
        path = store.write(snapshot_id, b"state %d" % snapshot_id)
        assert path.name == f"snap-{snapshot_id:012d}.bin"
    assert store.ids() == [1, 3, 12]
    assert store.read(3) == b"state 3"
    assert store.latest_valid() == (12, b"state 12")
    assert store.latest_valid(at_most=11) == (3, b"state 3")
    assert store.latest_valid(at_most=0) is None
    assert store.delete_before(12) == 2
    assert store.ids() == [12]
    assert store.write(12, b"") and store.read(12) == b""  # rewriting an id replaces it
    assert SnapshotStore(tmp_path / "empty").latest_valid() is None


def test_half_written_snapshot_is_ignored_and_cleaned(tmp_path):
    store = SnapshotStore(tmp_path)
    store.write(1, b"good")
    stale = tmp_path / ".snap-000000000002.bin.abc123.tmp"
    stale.write_bytes(b"BOREASS1\x00")  # a crash in the middle of writing snapshot 2
    assert store.ids() == [1]
    assert store.latest_valid() == (1, b"good")
    SnapshotStore(tmp_path)  # a restart
    assert not stale.exists()


@pytest.mark.parametrize("damage, reason", [
    (lambda raw: raw[:-1], "holds"),
    (lambda raw: b"NOTBOREA" + raw[8:], "bad magic"),
    (lambda raw: raw[:-1] + bytes([raw[-1] ^ 1]), "CRC32 mismatch"),
    (lambda raw: raw[:5], "truncated header"),
])
def test_corrupt_snapshot_falls_back_to_the_previous_one(tmp_path, caplog, damage, reason):
    store = SnapshotStore(tmp_path)
    store.write(1, b"older state")
    newest = store.write(2, b"newer state")
    newest.write_bytes(damage(newest.read_bytes()))
    with pytest.raises(CorruptSnapshot, match=reason) as corrupt:
        store.read(2)
    assert newest.name in str(corrupt.value)
    with caplog.at_level(logging.WARNING):
        assert store.latest_valid() == (1, b"older state")
    assert newest.name in caplog.text
    assert not newest.exists() and newest.with_name(newest.name + ".corrupt").exists()
    assert store.ids() == [1]


def test_from_url(tmp_path):
    store = SnapshotStore.from_url(tmp_path.as_uri() + "/a%20b")
    assert store.directory == tmp_path / "a b" and store.directory.is_dir()
    assert SnapshotStore.from_url(store.url).directory == store.directory
    assert SnapshotStore.from_url(str(tmp_path / "plain")).url == (tmp_path / "plain").as_uri()
    for bad in ("s3://bucket/snaps", "file://relative/dir", "file:relative", "http://host/x", ""):
        with pytest.raises(ValueError) as error:
            SnapshotStore.from_url(bad)
        assert repr(bad) in str(error.value) and "file:///" in str(error.value)


def test_write_atomic_replaces_without_leftovers(tmp_path):
    target = tmp_path / "state.json"
    write_atomic(target, b"one")
    write_atomic(target, b"two")
    assert target.read_bytes() == b"two"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]
