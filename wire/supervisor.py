"""Supervisor: the owner of a component's named background tasks

:Status: used by the Head, the reflector and every :class:`~boreas.wire.sender.ReliableSender`

A bare ``asyncio.create_task`` that raises dies silently: its exception is
only printed, if at all, when the task is garbage collected, and the work it
did (following commits, feeding a component) just stops.  A
:class:`Supervisor` owns each background task of one component by name, so
that a task that dies is never silent:

- a task that raises is logged with its traceback and, with
  ``restart=True``, started again from a fresh coroutine after a growing
  delay (:class:`~boreas.wire.backoff.Backoff`; reset once a run was healthy
  for a while);
- with ``restart=False`` the failure is logged and is fatal: ``on_fatal(name,
  exc)`` is called, and is expected to stop the component (if it returns an
  awaitable, that runs in a task of its own, so it may close the
  supervisor); a supervisor without ``on_fatal`` only logs it (for one-shot
  tasks whose failure the component survives);
- a task that returns normally is finished and forgotten;
- ``close()`` cancels every task and waits for them; ``status()`` lists the
  tasks with their restart counts for status pages.  A task still running
  :data:`CLOSE_GRACE` seconds after its cancel is logged and cancelled again:
  a cancel can be lost (Python 3.11's ``asyncio.wait_for`` returns normally
  when the awaited event is set in the same step as the cancel), and a lost
  cancel must not hang the component's close for good.

Example usage:

.. code-block:: python

    tasks = Supervisor("head", on_fatal=lambda name, exc: stop.set())
    tasks.spawn("commits", head.follow_commits)       # a factory, not a coroutine
    tasks.spawn("load", load_once, restart=False)      # its failure stops the Head
    ...
    await tasks.close()

A task that crashes twice is restarted twice:

>>> import asyncio, logging
>>> logging.disable(logging.CRITICAL)
>>> runs = []
>>> async def flaky():
...     runs.append(len(runs))
...     if len(runs) < 3:
...         raise ValueError("boom")
...     await asyncio.sleep(3600)
>>> async def demo():
...     tasks = Supervisor("demo", first_delay=0.001)
...     tasks.spawn("flaky", flaky)
...     while len(runs) < 3:
...         await asyncio.sleep(0.01)
...     status = tasks.status()
...     await tasks.close()
...     return status, tasks.status()
>>> asyncio.run(demo())
({'flaky': {'state': 'running', 'restarts': 2, 'last_error': "ValueError('boom')"}}, {})
>>> logging.disable(logging.NOTSET)
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from .backoff import Backoff

log = logging.getLogger(__name__)

#: Seconds ``close()`` waits for a cancelled task before it says so and cancels it again (long enough for a
#: task's own clean-up, a thread's close included, on a loaded machine).
CLOSE_GRACE = 10.0

#: on_fatal(task name, exception): a task that may not be restarted failed.
FatalCallback = Callable[[str, BaseException], Any]


@dataclass
class _Entry:
    name: str
    factory: Callable[[], Awaitable[Any]]
    restart: bool
    backoff: Backoff
    task: asyncio.Task | None = None
    state: str = "running"  # running | restarting | failed
    restarts: int = 0
    last_error: str | None = None
    started: float = field(default_factory=time.monotonic)


class Supervisor:
    """Named background tasks of one component; see the module docstring."""

    def __init__(self, name: str, on_fatal: FatalCallback | None = None, first_delay: float = 0.1,
                 max_delay: float = 5.0, healthy_after: float = 10.0):
        self.name = name
        self.on_fatal = on_fatal
        self.first_delay = first_delay
        self.max_delay = max_delay
        self.healthy_after = healthy_after  # a run this long resets the restart delay
        self._entries: dict[str, _Entry] = {}
        self._closing = False
        self._fatal_tasks: set[asyncio.Task] = set()  # on_fatal coroutines, referenced until done

    @property
    def closed(self) -> bool:
        return self._closing

    def __contains__(self, name: str) -> bool:
        return name in self._entries and self._entries[name].state != "failed"

    def spawn(self, name: str, factory: Callable[[], Awaitable[Any]], restart: bool = True) -> None:
        """Run ``factory()`` as task ``name`` (a running task of that name is cancelled first).

        ``factory`` makes a fresh coroutine for every (re)start: pass
        ``obj.run``, not ``obj.run()``.
        """
        if self._closing:
            raise RuntimeError(f"{self.name}: supervisor is closed; cannot start {name!r}")
        self.cancel(name)
        entry = _Entry(name, factory, restart, Backoff(self.first_delay, self.max_delay))
        entry.task = asyncio.get_running_loop().create_task(self._supervise(entry), name=f"{self.name}: {name}")
        self._entries[name] = entry

    def cancel(self, name: str) -> bool:
        """Cancel task ``name`` without waiting for it; False if there was none."""
        entry = self._entries.pop(name, None)
        if entry is None:
            return False
        if entry.task is not None:
            entry.task.cancel()
        return True

    async def stop(self, name: str) -> None:
        """Cancel task ``name`` and wait until it has finished."""
        entry = self._entries.get(name)
        self.cancel(name)
        if entry is not None and entry.task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await entry.task

    async def close(self) -> None:
        """Cancel every task and wait for all of them."""
        self._closing = True
        tasks = [e.task for e in self._entries.values() if e.task is not None]
        self._entries.clear()
        for task in tasks:
            task.cancel()
        current = asyncio.current_task()
        for task in tasks:
            if task is not current:
                await self._finished(task)

    async def _finished(self, task: asyncio.Task) -> None:
        """Wait for cancelled ``task`` to end, cancelling it again each :data:`CLOSE_GRACE` it does not."""
        while not (await asyncio.wait({task}, timeout=CLOSE_GRACE))[0]:
            log.warning("%s: task %r still runs %.0f s after its cancel (a cancel lost?); cancelling it again",
                        self.name, task.get_name(), CLOSE_GRACE)
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    def status(self) -> dict[str, dict[str, Any]]:
        return {e.name: {"state": e.state, "restarts": e.restarts, "last_error": e.last_error}
                for e in self._entries.values()}

    # -- internals ------------------------------------------------------------

    async def _supervise(self, entry: _Entry) -> None:
        while True:
            entry.state, entry.started = "running", time.monotonic()
            try:
                await entry.factory()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                entry.last_error = repr(exc)
                if not entry.restart:
                    entry.state = "failed"
                    log.error("%s: task %r failed%s", self.name, entry.name,
                              "; stopping the component" if self.on_fatal else "", exc_info=exc)
                    self._fatal(entry.name, exc)
                    return
                if time.monotonic() - entry.started >= self.healthy_after:
                    entry.backoff.reset()
                delay = entry.backoff.next_delay()
                entry.state = "restarting"
                log.error("%s: task %r crashed; restarting it in %.1fs", self.name, entry.name, delay,
                          exc_info=exc)
                await asyncio.sleep(delay)
                entry.restarts += 1
                continue
            if self._entries.get(entry.name) is entry:  # finished: forget it
                del self._entries[entry.name]
            return

    def _fatal(self, name: str, exc: BaseException) -> None:
        if self.on_fatal is None:
            return
        try:
            result = self.on_fatal(name, exc)
        except Exception:
            log.exception("%s: on_fatal for %r raised", self.name, name)
            return
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            self._fatal_tasks.add(task)
            task.add_done_callback(self._fatal_done)

    def _fatal_done(self, task: asyncio.Future) -> None:
        self._fatal_tasks.discard(task)  # type: ignore[arg-type]
        if not task.cancelled() and task.exception() is not None:
            log.error("%s: stopping after a fatal failure raised", self.name, exc_info=task.exception())
