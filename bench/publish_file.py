"""Benchmark: ``boreas publish`` of a file into one memory-only node running a filter (issue 30).

The issue's figure: ``boreas publish`` of a 10M-row Parquet file into one
memory-only node running a filter, at least 5M rows/s, with the publisher's
memory bounded (RSS under 300 MB, whatever the file's size).

One run writes ``--rows`` random rows (seeded numpy, written a million at a
time by pyarrow: no Python per row) of ``R(time long, sensor int, value
double)`` three ways -- Parquet, CSV and JSON lines -- starts a Head and one
memory-only node (bench/procs.py) running a filter ``sensor < 100`` per
format (about 10% pass), subscribes to each filter's output, and runs the
real CLI, ``boreas publish STREAM --file F --progress``, as a subprocess on
each file in turn.  Measured for each:

* rows/s from the CLI's start until the node has taken every row (its
  ``/status`` ``rows_in``);
* the rows that passed the filter, counted at the subscriber: they must equal
  pyarrow's own count of ``sensor < 100`` over the file, exactly (else the
  run fails);
* the peak RSS of the publish process (``/proc/PID/status`` VmHWM, the
  kernel's high-water mark, read every 10 ms until it exits) and of the node
  (VmHWM, cumulative over the run).

The ceiling beside them: the same file read alone by pyarrow in this process
(Parquet ``iter_batches``, CSV ``open_csv``, JSON lines ``open_json``), rows/s.
Timing never fails the run; each figure is printed beside its target, with
the ratios.

``--csv-gb G`` also writes a CSV file of about G GB (e.g. 5) and publishes it
the same way: the RSS bound at a size no buffer holds.  ``--profile-cli`` and
``--profile-node`` write CPU profiles of the Parquet run (cProfile; read them
with ``pstats``).

Usage: ``python bench/publish_file.py [--rows 10000000] [--csv-gb 5] [--only parquet] [--batch-size N]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from procs import (  # noqa: E402
    BenchError,
    Run,
    cpu_seconds,
    loopback_endpoints,
    progress,
    run_bench,
    sqlite_catalog,
    start_head,
    start_node,
    wait_ready,
)
from publish_file_data import PASSING, SENSORS, read_alone, write_big_csv, write_files  # noqa: E402
from recovery_common import deploy  # noqa: E402

TARGET_RATE = 5_000_000
TARGET_RSS = 300 << 20
FORMATS = ("parquet", "csv", "jsonl")
STREAMS = {"parquet": "InParquet", "csv": "InCsv", "jsonl": "InJsonl", "big": "InBig"}
SETTLE = 60.0  # seconds to wait for the last rows after the CLI has exited

APP_SCHEMA = ('<schema name="R"> <field name="time" type="long"/> <field name="sensor" type="int"/>'
              ' <field name="value" type="double"/> </schema>')


def application() -> str:
    """Stream ``In<F>`` -> filter ``f<F>`` (sensor < PASSING) -> ``Out<F>`` per format."""
    parts = ["<borealis>", APP_SCHEMA]
    for stream in STREAMS.values():
        key = stream[2:]
        parts.append(f'<input stream="{stream}" schema="R"/> <output stream="Out{key}" schema="R"/>'
                     f'<box name="f{key}" type="filter"> <in stream="{stream}"/> <out stream="Out{key}"/>'
                     f' <parameter name="expression.0" value="sensor &lt; {PASSING}"/> </box>')
    parts.append("</borealis>")
    return "\n".join(parts)


def deployment(node: str) -> str:
    boxes = " ".join(f"f{s[2:]}" for s in STREAMS.values())
    return ("<deploy>" + "".join(f'<publish stream="{s}" node="{node}"/>' for s in STREAMS.values())
            + f'<node endpoint="{node}" query="{boxes}"/></deploy>')


# -- one publish -----------------------------------------------------------------------------


@dataclass
class Result:
    label: str
    rows: int
    size: int
    seconds: float  # CLI start to the node having taken every row
    cli_seconds: float  # CLI start to its exit
    cli_rss: int  # bytes, the publish process's peak
    node_rss: int  # bytes, the node's peak so far
    passed: int
    expected: int
    cli_cpu: float = 0.0  # CPU seconds of the publish process, start-up included
    node_cpu: float = 0.0  # CPU seconds of the node while it took the rows
    ceiling: float | None = None  # rows/s of pyarrow reading the file alone
    # the CLI's CPU after its start-up (from the node's first rows on), split by thread: the event loop's (the main
    # thread: frames, the socket) and the others' (the reader thread: reading, IPC, the digest; pyarrow's own)
    cli_loop_cpu: float = 0.0
    cli_reader_cpu: float = 0.0

    @property
    def rate(self) -> float:
        return self.rows / self.seconds


def vm_hwm(pid: int) -> int:
    """A live process's peak RSS in bytes (/proc/PID/status VmHWM; 0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def thread_cpu(pid: int) -> tuple[float, float]:
    """(the main thread's CPU seconds, all other threads'), of a live process, from /proc/PID/task (0s once gone)."""
    main = others = 0.0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0.0, 0.0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        seconds = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        if int(tid) == pid:
            main = seconds
        else:
            others += seconds
    return main, others


def wait_child(proc: subprocess.Popen) -> tuple[int, float]:
    """(exit status, CPU seconds: user + system) of ``proc`` once it exits (waited for in a thread).  Its
    ``ru_maxrss`` is no use here: Linux keeps the forking process's peak in it across ``exec``."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_utime + usage.ru_stime


class Counter:
    """Rows that passed a filter, counted at a subscriber to its output (batches as Arrow: no rows made)."""

    def __init__(self, head: str, stream: str, token: str):
        from boreas.client.subscriber import Subscriber

        self.subscriber = Subscriber(head, stream, token)
        self.count = 0
        self.grew = asyncio.Event()
        self.task: asyncio.Task | None = None

    async def start(self) -> None:
        await self.subscriber.start()
        self.task = asyncio.create_task(self._read(), name=f"count {self.subscriber.stream}")

    async def _read(self) -> None:
        async for batch in self.subscriber.arrow():
            self.count += batch.num_rows
            self.grew.set()

    async def until(self, expected: int, timeout: float) -> None:
        """Until ``expected`` rows have come (or ``timeout`` has passed since the last came)."""
        while self.count < expected:
            self.grew.clear()
            try:
                await asyncio.wait_for(self.grew.wait(), timeout)
            except TimeoutError:
                return
            if self.task is not None and self.task.done():
                self.task.result()  # (raises what ended it)
                return

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        await self.subscriber.close()


async def rows_in(peers, node: str) -> int:
    return (await peers.call("GET", f"http://{node}/status"))["data"]["flow"].get("rows_in", 0)


async def publish(run: Run, head: str, node: str, node_pid: int, label: str, stream: str, path: Path,
                  rows: int, expected: int, extra: list[str], profile: Path | None = None) -> Result:
    """Run ``boreas publish stream --file path`` and measure it (see the module's docstring)."""
    from boreas.wire.client import PeerClient

    counter = Counter(head, "Out" + stream[2:], run.token)
    await counter.start()
    prefix = ["-m", "cProfile", "-o", str(profile)] if profile is not None else []
    argv = [sys.executable, *prefix, "-m", "boreas.cli.main", "publish", stream, "--file", str(path),
            "--head", head, "--progress", *extra]
    log = run.tmp / f"publish-{label}.log"
    async with PeerClient(run.token, timeout=30.0) as peers:
        before = await rows_in(peers, node)
        node_cpu = cpu_seconds(node_pid)
        with open(log, "wb") as out:
            began = time.perf_counter()
            proc = subprocess.Popen(argv, env=run.procs.env, cwd=run.tmp, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=out, start_new_session=True)
        exited = asyncio.ensure_future(asyncio.to_thread(wait_child, proc))
        taken_at = None
        cli_rss = 0
        started: tuple[float, float] | None = None  # the CLI's threads' CPU when the node took its first rows
        threads = (0.0, 0.0)
        try:
            while taken_at is None:
                cli_rss = max(cli_rss, vm_hwm(proc.pid))
                threads = max(threads, thread_cpu(proc.pid))  # (its last figures once it is gone: 0s then)
                taken = await rows_in(peers, node) - before
                if started is None and taken > 0:
                    started = threads
                if taken >= rows:
                    taken_at = time.perf_counter()
                    node_cpu = cpu_seconds(node_pid) - node_cpu
                elif exited.done():
                    code, _ = exited.result()
                    if code != 0:
                        raise BenchError(f"boreas publish of {path.name} exited with status {code}:\n"
                                         f"{log.read_text(errors='replace')[-2000:]}")
                    if await rows_in(peers, node) - before < rows:  # all acknowledged: every row is taken
                        await asyncio.sleep(0.2)
                        if await rows_in(peers, node) - before < rows:
                            raise BenchError(f"{label}: the node took {await rows_in(peers, node) - before:,} "
                                             f"of {rows:,} rows")
                else:
                    await asyncio.sleep(0.01)
            while not exited.done():  # its peak until it exits (VmHWM only grows)
                cli_rss = max(cli_rss, vm_hwm(proc.pid))
                threads = max(threads, thread_cpu(proc.pid))  # (its last figures once it is gone: 0s then)
                await asyncio.sleep(0.01)
            code, cli_cpu = await exited
        except BaseException:
            if proc.returncode is None:
                os.killpg(proc.pid, signal.SIGKILL)
                await exited
            raise
        cli_seconds = time.perf_counter() - began
    if code != 0:
        raise BenchError(f"boreas publish of {path.name} exited with status {code}:\n"
                         f"{log.read_text(errors='replace')[-2000:]}")
    await counter.until(expected, SETTLE)
    await asyncio.sleep(0.3)  # (one more batch would show here)
    passed = counter.count
    await counter.close()
    if passed != expected:
        raise BenchError(f"{label}: {passed:,} rows passed the filter at the subscriber; pyarrow counts {expected:,}")
    progress(f"  {label}: {rows / (taken_at - began):,.0f} rows/s; CLI peak RSS {cli_rss / 2**20:,.0f} MB; "
             f"its output: {log.read_text(errors='replace').strip().splitlines()[-1]}")
    return Result(label, rows, path.stat().st_size, taken_at - began, cli_seconds, cli_rss, vm_hwm(node_pid),
                  passed, expected, cli_cpu, node_cpu, cli_loop_cpu=threads[0] - (started or threads)[0],
                  cli_reader_cpu=threads[1] - (started or threads)[1])


# -- the run ---------------------------------------------------------------------------------


def report(results: list[Result], rows: int) -> None:
    mb = 2**20
    print(f"\nboreas publish of {rows:,} rows (time long, sensor int, value double) into one memory-only node "
          f"running a filter (about {PASSING / SENSORS:.0%} pass)")
    print(f"{'file':<10}{'MB':>8}{'rows/s':>13}{'CLI s':>8}{'ceiling rows/s':>16}{'of ceiling':>12}"
          f"{'CLI RSS MB':>12}{'node RSS MB':>13}{'CLI CPU us/row':>16}{'node CPU us/row':>17}{'passed':>12}")
    for r in results:
        ceiling = f"{r.ceiling:>16,.0f}" if r.ceiling else f"{'-':>16}"
        share = f"{r.rate / r.ceiling:>12.1%}" if r.ceiling else f"{'-':>12}"
        print(f"{r.label:<10}{r.size / mb:>8,.0f}{r.rate:>13,.0f}{r.cli_seconds:>8.1f}{ceiling}{share}"
              f"{r.cli_rss / mb:>12,.0f}{r.node_rss / mb:>13,.0f}{r.cli_cpu / r.rows * 1e6:>16.3f}"
              f"{r.node_cpu / r.rows * 1e6:>17.3f}{r.passed:>12,}")
    by = {r.label: r for r in results}
    if "parquet" in by:
        p = by["parquet"]
        met = "met" if p.rate >= TARGET_RATE else "NOT met"
        print(f"\ntarget: Parquet >= {TARGET_RATE:,} rows/s: {p.rate:,.0f} ({met}; {p.rate / TARGET_RATE:.2f}x the "
              "target)")
        for other in ("csv", "jsonl"):
            if other in by:
                print(f"Parquet / {other.upper() if other == 'csv' else 'JSON lines'}: {p.rate / by[other].rate:.2f}x")
    for r in results:
        met = "met" if r.cli_rss < TARGET_RSS else "NOT met"
        print(f"target: RSS bounded, < {TARGET_RSS >> 20} MB: {r.label} publish peaked at {r.cli_rss / mb:,.0f} MB "
              f"({met}; file {r.size / mb:,.0f} MB)")
    for r in results:
        print(f"{r.label} CLI CPU us/row after start-up (from the node's first rows): event loop "
              f"{r.cli_loop_cpu / r.rows * 1e6:.3f}, reader and pyarrow threads {r.cli_reader_cpu / r.rows * 1e6:.3f}")
    print("(CPU per row is what a loaded machine leaves comparable; the CLI's includes its start-up, about "
          "1 s of CPU on a quiet machine)")
    print(f"machine load (1, 5, 15 min): {', '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--seed", type=int, default=30)
    parser.add_argument("--only", choices=FORMATS, action="append",
                        help="publish only this format (repeatable; default: all three)")
    parser.add_argument("--csv-gb", type=float, default=0.0,
                        help="also publish a CSV file of about this many GB (the RSS bound; 5 as the issue says)")
    parser.add_argument("--batch-size", type=int, help="give the CLI this --batch-size (default: its own)")
    parser.add_argument("--profile-cli", type=Path, help="cProfile the Parquet publish's CLI into this file")
    parser.add_argument("--profile-node", type=Path,
                        help="profile the node by CPU time during the Parquet publish into this file")
    parser.add_argument("--keep-logs", action="store_true")
    args = parser.parse_args(argv)
    formats = args.only or list(FORMATS)
    extra = ["--batch-size", str(args.batch_size)] if args.batch_size else []

    def body(run: Run) -> None:
        progress(f"writing {args.rows:,} rows as {', '.join(formats)}")
        paths, expected = write_files(run.tmp, args.rows, args.seed, formats)
        ceilings = {}
        for kind, path in paths.items():
            n, seconds = read_alone(path, kind)
            if n != args.rows:
                raise BenchError(f"pyarrow read {n:,} rows of {path.name}, not {args.rows:,}")
            ceilings[kind] = n / seconds
            progress(f"  {path.name}: {path.stat().st_size / 2**20:,.0f} MB, read alone by pyarrow at "
                     f"{ceilings[kind]:,.0f} rows/s")
        big = None
        if args.csv_gb:
            progress(f"writing a CSV file of about {args.csv_gb:g} GB")
            big_path = run.tmp / "big.csv"
            big = (big_path, *write_big_csv(big_path, args.csv_gb, args.seed))
        results = asyncio.run(measure(run, args, paths, expected, ceilings, big, extra))
        report(results, args.rows)

    return run_bench("publish_file", body, keep_logs=args.keep_logs)


async def measure(run: Run, args: argparse.Namespace, paths: dict[str, Path], expected: int,
                  ceilings: dict[str, float], big: tuple[Path, int, int] | None, extra: list[str]) -> list[Result]:
    head_ep, node_ep = loopback_endpoints(2)
    head = start_head(run.procs, sqlite_catalog(run.tmp / "catalog.db"), head_ep, extra=["--snapshot-interval", "0"])
    if args.profile_node is None:
        node = start_node(run.procs, node_ep, head, name="node")
    else:  # profiled by CPU time while the Parquet file flows (bench/cpu_profile.py)
        node = run.procs.spawn("node", [str(Path(__file__).with_name("cpu_profile.py")), str(args.profile_node),
                                        "node", "--endpoint", node_ep, "--head", head], daemon=True)
    await wait_ready(run.procs, head, [node_ep])
    await deploy(run, head, application(), deployment(node_ep), "publish_file")
    results = []
    for kind, path in paths.items():
        profiled = kind == "parquet" and args.profile_node is not None
        if profiled:
            node.send_signal(signal.SIGUSR1)
        result = await publish(run, head, node_ep, node.pid, kind, STREAMS[kind], path, args.rows, expected, extra,
                               args.profile_cli if kind == "parquet" else None)
        if profiled:
            node.send_signal(signal.SIGUSR2)
        result.ceiling = ceilings[kind]
        results.append(result)
        run.procs.check()
    if big is not None:
        path, rows, passed = big
        results.append(await publish(run, head, node_ep, node.pid, "big csv", STREAMS["big"], path, rows, passed,
                                     extra))
    return results


if __name__ == "__main__":
    sys.exit(main())
