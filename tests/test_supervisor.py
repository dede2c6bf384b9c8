"""Supervisor: a background task that dies is logged and restarted, or stops its component."""

from __future__ import annotations

import asyncio
import doctest
import itertools
import logging

import boreas.wire.supervisor
import pytest
from boreas.wire.supervisor import Supervisor


async def wait_for(predicate, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)


async def test_a_crashing_task_is_logged_with_its_traceback_and_restarted(caplog):
    runs = []

    async def follow() -> None:
        runs.append(1)
        if len(runs) <= 2:
            raise KeyError("lost the thread")
        await asyncio.sleep(3600)

    tasks = Supervisor("head", first_delay=0.01)
    with caplog.at_level(logging.ERROR, logger="boreas.wire.supervisor"):
        tasks.spawn("commits", follow)
        await wait_for(lambda: len(runs) == 3)
    crashes = [r for r in caplog.records if "crashed" in r.getMessage()]
    assert len(crashes) == 2
    assert all(r.levelno == logging.ERROR and r.exc_info and r.exc_info[0] is KeyError for r in crashes)
    assert "'commits'" in crashes[0].getMessage() and "head" in crashes[0].getMessage()
    assert tasks.status() == {"commits": {"state": "running", "restarts": 2,
                                          "last_error": "KeyError('lost the thread')"}}
    await tasks.close()
    assert tasks.status() == {}


async def test_a_task_that_may_not_restart_calls_on_fatal(caplog):
    fatal = []
    stopped = asyncio.Event()

    async def stop_component(name: str, exc: BaseException) -> None:
        fatal.append((name, repr(exc)))
        await tasks.close()  # runs in a task of its own, so it may close the supervisor
        stopped.set()

    async def load() -> None:
        raise RuntimeError("store is corrupt")

    runs = []

    async def bystander() -> None:
        runs.append(1)
        await asyncio.sleep(3600)

    tasks = Supervisor("node", on_fatal=stop_component, first_delay=0.01)
    tasks.spawn("bystander", bystander)
    with caplog.at_level(logging.ERROR, logger="boreas.wire.supervisor"):
        tasks.spawn("load", load, restart=False)
        await asyncio.wait_for(stopped.wait(), 5)
    assert fatal == [("load", "RuntimeError('store is corrupt')")]
    assert runs == [1] and tasks.status() == {}
    record = next(r for r in caplog.records if "'load' failed" in r.getMessage())
    assert "stopping the component" in record.getMessage() and record.exc_info[0] is RuntimeError


async def test_without_on_fatal_a_one_shot_failure_is_logged_and_kept_in_status(caplog):
    async def cleanup() -> None:
        raise OSError("socket gone")

    tasks = Supervisor("node")
    with caplog.at_level(logging.ERROR, logger="boreas.wire.supervisor"):
        tasks.spawn("retire", cleanup, restart=False)
        await wait_for(lambda: tasks.status().get("retire", {}).get("state") == "failed")
    assert any(r.exc_info and r.exc_info[0] is OSError for r in caplog.records)
    assert "retire" not in tasks  # not running
    await tasks.close()


async def test_a_task_that_returns_is_forgotten_and_close_cancels_the_rest():
    cancelled = []

    async def once() -> None:
        return None

    async def forever(name: str) -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append(name)
            raise

    tasks = Supervisor("head")
    tasks.spawn("once", once)
    tasks.spawn("a", lambda: forever("a"))
    tasks.spawn("b", lambda: forever("b"))
    await wait_for(lambda: "once" not in tasks.status())
    assert sorted(tasks.status()) == ["a", "b"]
    await tasks.close()
    assert sorted(cancelled) == ["a", "b"] and tasks.status() == {}
    with pytest.raises(RuntimeError):
        tasks.spawn("late", once)


async def test_close_cancels_again_a_task_that_lost_its_cancel(monkeypatch, caplog):
    """A cancel can be lost (Python 3.11's wait_for returns normally when its event is set in the cancel's step):
    close() must not then wait forever for the task."""
    monkeypatch.setattr(boreas.wire.supervisor, "CLOSE_GRACE", 0.05)
    cancels = []

    async def swallows_one_cancel() -> None:
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancels.append(len(cancels))
                if len(cancels) > 1:
                    raise

    tasks = Supervisor("head")
    tasks.spawn("commits", swallows_one_cancel)
    await asyncio.sleep(0)
    with caplog.at_level(logging.WARNING, logger="boreas.wire.supervisor"):
        await asyncio.wait_for(tasks.close(), 5)
    assert cancels == [0, 1]
    assert "'head: commits' still runs" in caplog.text and "cancelling it again" in caplog.text


async def test_spawning_a_name_again_replaces_the_task_and_stop_waits_for_it():
    cancelled = []

    async def worker(n: int) -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append(n)
            raise

    tasks = Supervisor("head")
    tasks.spawn("global x", lambda: worker(1))
    await asyncio.sleep(0)
    tasks.spawn("global x", lambda: worker(2))
    await asyncio.sleep(0.01)
    assert cancelled == [1] and list(tasks.status()) == ["global x"]
    await tasks.stop("global x")
    assert cancelled == [1, 2] and tasks.status() == {}
    await tasks.close()


async def test_a_long_healthy_run_resets_the_restart_delay():
    runs = []

    async def flaky() -> None:
        runs.append(asyncio.get_running_loop().time())
        await asyncio.sleep(0.03)  # longer than healthy_after: each crash is a first one again
        raise ValueError("again")

    tasks = Supervisor("x", first_delay=0.05, max_delay=10.0, healthy_after=0.02)
    tasks.spawn("flaky", flaky)
    await wait_for(lambda: len(runs) >= 5)
    await tasks.close()
    gaps = [b - a for a, b in itertools.pairwise(runs)]
    # Without the reset the delays would grow 0.05, 0.1, 0.2, 0.4: the last gap would be 0.43 s.
    assert max(gaps) < 0.3, gaps


def test_doctests():
    result = doctest.testmod(boreas.wire.supervisor,
                             optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
