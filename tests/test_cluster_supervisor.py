"""``boreas cluster up``'s supervisor (cli/cluster_supervisor.py) with real processes: a child that cannot
start (its port is taken) is restarted with backoff, then given up with a clear message, while the other
children keep running; stopping the supervisor restarts nothing and stops them all.

The cluster itself -- a node and the Head killed with ``kill -9`` and restarted with their state -- is
tests/test_cluster_cli.py.
"""

from __future__ import annotations

import asyncio
import re
import signal
import socket
import subprocess
import sys

from boreas.cli.cluster_supervisor import Backoff, Supervisor


def spawn(argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", *argv], start_new_session=True, stderr=subprocess.DEVNULL)


async def test_a_child_whose_port_is_taken_is_given_up_and_the_rest_keeps_running():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        said: list[str] = []
        pids: list[list[int]] = []
        gave_up = asyncio.Event()

        def say(text: str) -> None:
            said.append(text)
            if "not restarting it" in text:
                gave_up.set()

        supervisor = Supervisor(spawn, say, changed=pids.append, backoff=Backoff(quick=60.0, delays=(0.0, 0.1)))
        server = supervisor.add("node localhost:1", [f"import socket; socket.socket().bind(('127.0.0.1', {port}))"],
                                hint=f"is port {port} taken?")
        other = supervisor.add("head localhost:2", ["import time; time.sleep(600)"])
        stop = asyncio.Event()
        supervisor.start_all()
        try:
            running = asyncio.create_task(supervisor.run(stop))
            await gave_up.wait()
            assert other.running() and server.given_up and not server.running()
            stop.set()
            await running
        finally:
            supervisor.stop_all()
    assert [re.sub(r" \d+\.\d s after", " N s after", line) for line in said] == [
        "node localhost:1 exited with 1; restarting it (1st restart)",
        "node localhost:1 exited with 1 N s after it started; restarting it in 0.1 s (2nd restart)",
        f"error: node localhost:1 exited with 1 within 60 s of its start 3 times in a row: not restarting it "
        f"again (is port {port} taken?); the rest of the cluster keeps running",
    ]
    assert len(pids) == 2 and pids[-1][1] == other.pid  # recorded after each restart: cluster down waits for them
    assert other.proc.returncode == -15  # SIGTERM; and no restart once stopped
    assert len(said) == 3


async def test_a_child_that_ran_a_while_is_restarted_at_once_every_time():
    said: list[str] = []
    restarted = asyncio.Event()
    supervisor = Supervisor(spawn, lambda text: (said.append(text), restarted.set()),
                            backoff=Backoff(quick=0.0, delays=()))  # no exit counts as "right away"
    child = supervisor.add("node localhost:3", ["import time; time.sleep(600)"])
    stop = asyncio.Event()
    supervisor.start_all()
    try:
        running = asyncio.create_task(supervisor.run(stop))
        for _ in range(3):
            first = child.pid
            restarted.clear()
            child.send(signal.SIGKILL)
            await restarted.wait()
            assert child.pid != first and not child.given_up
        stop.set()
        await running
    finally:
        supervisor.stop_all()
    assert said == [f"node localhost:3 exited with -9; restarting it ({n} restart)" for n in ("1st", "2nd", "3rd")]
