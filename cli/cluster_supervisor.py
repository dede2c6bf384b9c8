"""Keeping ``boreas cluster up``'s Head and nodes running: restart what dies, back off what keeps dying.

A :class:`Child` owns one child's process: its command line (the same at
every start, so a node comes back on its endpoint with its data directory),
the process running it now, and how often it was restarted.  The
:class:`Supervisor` owns the children: one task per child waits for its
process to exit (a daemon thread blocked in ``wait()``, no polling), says so
on stderr and starts it again, until the cluster is stopped.

A child that dies *right away* (within :attr:`Backoff.quick` seconds of its
start) again and again is restarted after growing delays
(:attr:`Backoff.delays`); after one more such exit than there are delays it
is given up with a clear message (its port is taken, say) and the rest of
the cluster keeps running.  One that ran longer starts the count afresh.

Usage::

    supervisor = Supervisor(spawn=lambda argv: subprocess.Popen(argv), say=print)
    supervisor.add("node localhost:15000", ["boreas", "node", ...], hint="is port 15000 taken?")
    supervisor.start_all()
    await supervisor.run(stop)      # until ``stop`` is set: no restart after that
    supervisor.stop_all()           # SIGTERM to each child's process group, SIGKILL after a grace
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

#: Seconds a child has to stop after SIGTERM before its process group is killed.
STOP_GRACE = 10.0


@dataclass(frozen=True)
class Backoff:
    """When to restart a child that died: at once, unless it keeps dying right away.

    >>> b = Backoff(quick=10.0, delays=(0.0, 0.5, 2.0))
    >>> [b.delay(n) for n in range(1, 5)]   # the n-th exit in a row within 10 s of its start
    [0.0, 0.5, 2.0, None]
    """

    #: An exit within this many seconds of the start counts as dying right away.
    quick: float = 10.0
    #: The delay before the 1st, 2nd, ... restart in a row after such exits; one more and it is given up.
    delays: tuple[float, ...] = (0.0, 0.5, 1.0, 2.0, 4.0)

    def delay(self, quick_exits: int) -> float | None:
        """Seconds to wait before restarting after ``quick_exits`` quick exits in a row; None: give up."""
        return self.delays[quick_exits - 1] if quick_exits <= len(self.delays) else None


def ordinal(n: int) -> str:
    """``n`` as an English ordinal.

    >>> [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101)]
    ['1st', '2nd', '3rd', '4th', '11th', '12th', '13th', '21st', '22nd', '101st']
    """
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


class Child:
    """One child process of the cluster (the Head or a node); the only holder of its ``Popen``.

    ``name`` is what messages call it (``node localhost:15001``); ``hint`` is
    said when it is given up (what may keep it from starting).
    """

    def __init__(self, name: str, argv: list[str], spawn: Callable[[list[str]], subprocess.Popen],
                 hint: str = ""):
        self.name = name
        self.argv = argv
        self.hint = hint
        self._spawn = spawn
        self.proc: subprocess.Popen | None = None
        self.started = 0.0
        self.restarts = 0
        self.quick_exits = 0  # exits in a row, each within Backoff.quick of its start
        self.given_up = False

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        self.proc = self._spawn(self.argv)
        self.started = time.monotonic()

    async def exited(self) -> int:
        """Its current process's exit status, once it has exited."""
        assert self.proc is not None
        proc, loop = self.proc, asyncio.get_running_loop()
        status: asyncio.Future[int] = loop.create_future()

        def settle(code: int) -> None:
            if not status.done():
                status.set_result(code)

        def wait() -> None:
            code = proc.wait()
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting any more
                loop.call_soon_threadsafe(settle, code)

        threading.Thread(target=wait, name=f"wait-{proc.pid}", daemon=True).start()
        return await status

    def send(self, sig: int) -> None:
        """Send ``sig`` to its process group (it runs in a session of its own), if it still runs."""
        if self.running():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)  # type: ignore[union-attr]


class Supervisor:
    """The cluster's children, kept running until :meth:`run`'s ``stop`` is set.

    ``say`` prints a line for people (stderr); ``changed`` is called with the
    children's pids after each restart (``cluster up`` records them for
    ``cluster down``).
    """

    def __init__(self, spawn: Callable[[list[str]], subprocess.Popen], say: Callable[[str], None],
                 changed: Callable[[list[int]], None] = lambda pids: None, backoff: Backoff = Backoff()):
        self._spawn = spawn
        self.say = say
        self.changed = changed
        self.backoff = backoff
        self.children: list[Child] = []

    def add(self, name: str, argv: list[str], hint: str = "") -> Child:
        child = Child(name, argv, self._spawn, hint)
        self.children.append(child)
        return child

    def start_all(self) -> None:
        for child in self.children:
            child.start()

    def pids(self) -> list[int]:
        return [c.pid for c in self.children if c.pid is not None]

    def exited_early(self) -> Child | None:
        """A child whose first process has already exited (``cluster up`` fails while starting)."""
        return next((c for c in self.children if c.proc is not None and c.proc.poll() is not None), None)

    async def run(self, stop: asyncio.Event) -> None:
        """Restart each child that exits, until ``stop`` is set (then none is restarted)."""
        tasks = [asyncio.create_task(self._keep(child), name=f"keep {child.name}") for child in self.children]
        waiting = asyncio.create_task(stop.wait())
        try:
            # a keeper ends only by giving its child up; one that fails is a bug: let it surface
            pending = {waiting, *tasks}
            while waiting in pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done - {waiting}:
                    task.result()
        finally:
            for task in (waiting, *tasks):
                task.cancel()
            await asyncio.gather(waiting, *tasks, return_exceptions=True)

    async def _keep(self, child: Child) -> None:
        while True:
            code = await child.exited()
            lived = time.monotonic() - child.started
            quick = lived < self.backoff.quick
            child.quick_exits = child.quick_exits + 1 if quick else 0
            delay = self.backoff.delay(child.quick_exits) if quick else 0.0
            if delay is None:
                child.given_up = True
                self.say(f"error: {child.name} exited with {code} within {self.backoff.quick:g} s of its start "
                         f"{child.quick_exits} times in a row: not restarting it again"
                         + (f" ({child.hint})" if child.hint else "")
                         + "; the rest of the cluster keeps running")
                return
            child.restarts += 1
            when = f"in {delay:g} s " if delay else ""
            after = f" {lived:.1f} s after it started" if quick and child.quick_exits > 1 else ""
            self.say(f"{child.name} exited with {code}{after}; restarting it {when}"
                     f"({ordinal(child.restarts)} restart)")
            if delay:
                await asyncio.sleep(delay)
            child.start()
            self.changed(self.pids())

    def stop_all(self, grace: float = STOP_GRACE) -> None:
        """SIGTERM every child's process group; SIGKILL what has not exited ``grace`` seconds later."""
        for child in self.children:
            child.send(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for child in self.children:
            if child.proc is None:
                continue
            try:
                child.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.send(signal.SIGKILL)
                child.proc.wait()
