"""The benchmarks' processes: a Head and nodes on loopback, their logs, and one run's lifetime.

Shared by ``bench/deploy.py`` and ``bench/dataplane.py`` (and the data plane's
worker processes).  The bench scripts are run as ``.venv/bin/python
bench/X.py``, so Python puts ``bench/`` first on ``sys.path`` and they import
this module as plain ``procs``.

* :class:`Processes`: child processes, each in its own session (so a Ctrl-C
  in the terminal reaches only this script) and logging to a file in the
  run's temporary directory; stopped with SIGTERM, then SIGKILL after 10 s.
* :func:`start_head`, :func:`start_node`, :func:`wait_ready`: a Head with
  its catalog store and nodes, and the wait until the Head reports every
  node alive (and, if asked, synchronised); optional extra command-line
  flags for either (``--snapshot-interval``, ``--data-dir``, ...).
* :meth:`Processes.restart`: kill one child hard (SIGKILL, as a crash) or
  stop it, and start it again with the same command line, its log appended to.
* :func:`run_bench`: one run -- a temporary directory, a token, the
  processes' environment -- around the benchmark's body, turning errors,
  Ctrl-C and SIGTERM into an exit status and always stopping every process
  and removing the directory (or keeping it with ``--keep-logs``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
READY_TIMEOUT = 60.0  # seconds for every process to come up


class BenchError(Exception):
    """Something went wrong (not slow: wrong); the run exits 1."""


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process, from /proc (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def free_ports(n: int) -> list[int]:
    """``n`` distinct free ports on HOST (held open together so none repeats)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(n)]
        for s in socks:
            s.bind((HOST, 0))
        return [s.getsockname()[1] for s in socks]


def pyflink_missing() -> str | None:
    """None if PyFlink and a Java runtime are here, else why not: the Flink peers (data plane, Nexmark) say it."""
    import importlib.util

    if importlib.util.find_spec("pyflink") is None:
        return "apache-flink (PyFlink) is not installed; `make bench-setup` installs it"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java runtime (PyFlink needs java on PATH or JAVA_HOME)"
    return None


def loopback_endpoints(n: int) -> list[str]:
    """``n`` distinct ``host:port`` endpoints on HOST that are free now."""
    return [f"{HOST}:{p}" for p in free_ports(n)]


def tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass(eq=False)
class _Child:
    name: str
    proc: subprocess.Popen
    log: Path
    daemon: bool  # runs until stopped: any exit before that is an error
    argv: list[str] = field(default_factory=list)  # as given to spawn (without the interpreter)
    pipes: bool = False


class Processes:
    """Child processes started by this run, each in its own session, logging to a file.

    ``boreas`` components (:meth:`boreas`) run until stopped; other Python
    children (:meth:`spawn`) may exit on their own with status 0, and with
    ``pipes`` talk to this process over stdin/stdout lines.
    """

    def __init__(self, workdir: Path, env: dict[str, str], dump_nodes: int | None = None):
        self.workdir = workdir
        self.env = env
        self.dump_nodes = dump_nodes  # how many Head/node logs dump_logs shows (None: all)
        self.children: list[_Child] = []

    def spawn(self, name: str, argv: list[str], pipes: bool = False, daemon: bool = False,
              append: bool = False) -> subprocess.Popen:
        """``python argv...``; its stderr (and its stdout unless ``pipes``) to ``<name>.log``
        (appended to, with ``append``)."""
        log = self.workdir / f"{re.sub(r'[^A-Za-z0-9.-]', '_', name)}.log"
        with open(log, "ab" if append else "wb") as out:
            proc = subprocess.Popen([sys.executable, *argv], env=self.env, cwd=self.workdir,
                                    stdin=subprocess.PIPE if pipes else subprocess.DEVNULL,
                                    stdout=subprocess.PIPE if pipes else out, stderr=out,
                                    start_new_session=True, text=pipes, bufsize=1 if pipes else -1)
        self.children.append(_Child(name, proc, log, daemon, list(argv), pipes))
        return proc

    def boreas(self, name: str, argv: list[str], profile: Path | None = None) -> subprocess.Popen:
        """``boreas argv...``; under cProfile writing ``profile`` (when it exits on SIGTERM) if given."""
        prefix = ["-m", "cProfile", "-o", str(profile)] if profile is not None else []
        return self.spawn(name, [*prefix, "-m", "boreas.cli.main", *argv], daemon=True)

    def check(self) -> None:
        """Raise if a ``boreas`` process has exited, or any other with a non-zero status."""
        for c in self.children:
            if c.proc.poll() is not None and (c.daemon or c.proc.returncode != 0):
                early = " early" if c.daemon else ""
                raise BenchError(f"{c.name} exited{early} with status {c.proc.returncode}:\n{tail(c.log)}")

    def restart(self, proc: subprocess.Popen, kill: bool = True) -> subprocess.Popen:
        """Kill ``proc``'s process group with SIGKILL (a crash; with ``kill=False``: stop it as
        :meth:`stop` does), then start it again with the same command line, under the same name,
        its output appended to the same log (after a marker line); the new process."""
        child = next((c for c in self.children if c.proc is proc), None)
        if child is None:
            raise BenchError(f"process {proc.pid} is not one of this run's children")
        if kill:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
            self.children.remove(child)
        else:
            self.stop([proc])
        with open(child.log, "ab") as out:
            how = "killed with SIGKILL" if kill else "stopped"
            out.write(f"\n=== {child.name} {how} (exit status {proc.returncode}); started again ===\n".encode())
        return self.spawn(child.name, child.argv, pipes=child.pipes, daemon=child.daemon, append=True)

    def log_path(self, proc: subprocess.Popen) -> Path | None:
        for c in self.children:
            if c.proc is proc:
                return c.log
        return None

    def log_of(self, proc: subprocess.Popen) -> str:
        for c in self.children:
            if c.proc is proc:
                return tail(c.log)
        return "(no log)"

    def dump_logs(self, lines: int = 15) -> None:
        """The ends of the Head's and the nodes' logs (the first ``dump_nodes``), and of any that failed."""
        nodes = 0
        for c in self.children:
            show = c.proc.returncode not in (None, 0) or c.name.startswith("head")
            if c.name.startswith("node"):
                nodes += 1
                show = show or self.dump_nodes is None or nodes <= self.dump_nodes
            if show:
                print(f"--- last lines of {c.name}'s log ---\n{tail(c.log, lines)}", file=sys.stderr)

    def stop(self, procs: list[subprocess.Popen] | None = None) -> None:
        """SIGTERM the process groups (all, or those given), then SIGKILL what is left after 10 s."""
        chosen = [c for c in self.children if procs is None or c.proc in procs]
        for c in chosen:
            if c.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(c.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for c in chosen:
            try:
                c.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(c.proc.pid, signal.SIGKILL)
                c.proc.wait()
            for stream in (c.proc.stdin, c.proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
        self.children = [c for c in self.children if c not in chosen]


# -- a Head and its nodes ----------------------------------------------------------


def sqlite_catalog(path: Path) -> str:
    """The catalog URL of an embedded store in the file ``path``."""
    return f"sqlite:///{str(path).lstrip('/')}"


def start_head(procs: Processes, catalog_url: str, endpoint: str, extra: list[str] | None = None,
               name: str = "head") -> str:
    """A Head listening on ``endpoint`` with its catalog at ``catalog_url`` (and ``extra`` flags, e.g.
    ``["--snapshot-interval", "0"]``; ``name`` its log's, starting with "head"); returns its URL."""
    from boreas.wire.addressing import endpoint_url

    procs.boreas(name, ["head", "--catalog", catalog_url, "--listen", endpoint, *(extra or [])])
    return endpoint_url(endpoint)


def start_node(procs: Processes, endpoint: str, head: str | None, name: str | None = None,
               profile: Path | None = None, extra: list[str] | None = None) -> subprocess.Popen:
    """A node on ``endpoint`` that registers with ``head`` (with no Head: one that only listens), with
    ``extra`` flags (e.g. ``["--data-dir", DIR]``: a durable node)."""
    argv = ["node", "--endpoint", endpoint] + (["--head", head] if head is not None else []) + list(extra or [])
    return procs.boreas(name or f"node {endpoint}", argv, profile)


async def wait_ready(procs: Processes, head: str, nodes: list[str], in_sync: bool = False,
                     others: Callable[[], Awaitable[list[str]]] | None = None) -> None:
    """Until the Head reports every node alive (and synchronised, with ``in_sync``), and ``others()``,
    which says what else is not ready yet, says nothing; a BenchError after READY_TIMEOUT."""
    from boreas.wire.client import PeerClient, PeerError

    deadline = time.monotonic() + READY_TIMEOUT
    async with PeerClient(None, timeout=2.0) as peers:
        while True:
            procs.check()
            try:
                rows = {r["endpoint"]: r for r in (await peers.call("GET", f"{head}/nodes"))["nodes"]}
                waiting = [n for n in nodes
                           if not (rows.get(n, {}).get("alive") and (not in_sync or rows[n].get("in_sync")))]
            except PeerError:
                waiting = ["the Head"]
            if others is not None:
                waiting += await others()
            if not waiting:
                return
            if time.monotonic() > deadline:
                raise BenchError(f"not ready after {READY_TIMEOUT:g} s: {', '.join(waiting[:5])}"
                                 f"{' ...' if len(waiting) > 5 else ''}")
            await asyncio.sleep(0.1)


# -- one run -------------------------------------------------------------------------


@dataclass
class Run:
    """What a benchmark's body gets: its temporary directory, the token and the processes."""

    tmp: Path
    token: str
    procs: Processes
    cleanups: list[Callable[[], None]] = field(default_factory=list)  # after the processes are stopped


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def run_bench(name: str, body: Callable[[Run], None], keep_logs: bool = False,
              errors: tuple[type[BaseException], ...] = (BenchError,), dump_nodes: int | None = None) -> int:
    """Run ``body`` in a fresh temporary directory and return the exit status: 0, 1 on an error (one of
    ``errors`` said in a line, anything else with its traceback), 130 on Ctrl-C or SIGTERM."""
    from boreas.wire.auth import TOKEN_ENV, new_token

    began = time.perf_counter()
    signal.signal(signal.SIGTERM, _interrupt)
    tmp = Path(tempfile.mkdtemp(prefix=f"boreas-bench-{name}-"))
    token = new_token()
    env = {k: v for k, v in os.environ.items() if k not in ("BOREAS_HEAD", "BOREAS_CATALOG")}
    env[TOKEN_ENV] = token
    run = Run(tmp, token, Processes(tmp, env, dump_nodes))
    code = 1
    try:
        body(run)
        code = 0
    except errors as exc:
        print(f"error: {exc}", file=sys.stderr)
        run.procs.dump_logs()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        code = 130
    except Exception:  # noqa: BLE001 -- a library error: show it, then still clean up
        traceback.print_exc()
        run.procs.dump_logs()
    finally:
        previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            run.procs.stop()
            for cleanup in run.cleanups:
                cleanup()
        finally:
            if keep_logs:
                print(f"logs kept in {tmp}", file=sys.stderr)
            else:
                shutil.rmtree(tmp, ignore_errors=True)
            for s, handler in previous.items():
                signal.signal(s, handler)
    print(f"whole run: {time.perf_counter() - began:.1f} s")
    return code
