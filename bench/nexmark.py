"""Benchmark: Nexmark q0-q22 on Boreas (an ``m3`` box per query on one node's operator), DuckDB's check, Flink beside.

The events come from ``bench/nexmark_gen.py`` (the Nexmark model,
deterministic by seed).  Per query (``bench/nexmark_queries.py``):

* **Boreas**: the query is planned as ``boreas submit`` plans it; a query
  Boreas refuses prints the refusal it gives (``TUMBLE``, ``HOP`` and
  ``SESSION`` compile, and the window joins of q5, q7 and q8: docs/m3.md,
  "Window joins"; q12 is refused for processing time: docs/benchmarks.md, "Nexmark").
  An accepted one runs as an ``m3`` box fed the events' Arrow batches in
  event order (``bench/nexmark_boreas.py``): events/s of the kinds it reads.
* **DuckDB check** of every non-windowed query Boreas runs: the same SQL
  over the same events, compared row by row with what a subscriber of the
  box's out stream holds (its emitted changelog folded in order) and with
  the box's view (``nexmark_boreas.duckdb_check``).
* **Flink** (``bench/nexmark_flink.py``, a child process: PyFlink,
  parallelism 1, the suite's Flink SQL over the same events as CSV files):
  events/s of the kinds the query reads, job deployment included; or
  "unavailable: why".  And its CPU per event: the CPU seconds of the
  Flink driver and its JVM (``/proc`` of the process tree) around each
  job, over the events read.  The table puts Flink's CPU per event over
  Boreas's (``time.process_time`` around the feeding) beside the wall
  clock's ratio, each against the issue's 3x: on a shared machine wall
  time is 2-13x CPU time, so only the CPU ratio is comparable under load.
* **Memory** (``--memory``, instead of the table): each windowed query's
  box state and RSS at ``--events`` and five times as many, each in its own
  process, against the issue's "flat within 1.2x" (``bench/nexmark_memory.py``).
* **Flink check** (``--check-flink``, instead of Flink's events/s): every
  query both run, Boreas's result against the rows Flink collects
  (``bench/nexmark_flinkcheck.py``): the windowed ones (q5, q7, q8, q11)
  checked against Flink itself.  ``--rate`` (events per second of event
  time) sets how many windows a small run spans.

The machine's load (``/proc/loadavg``) is printed before and after: on a
shared machine the numbers are only comparable within one run.

Usage: ``python bench/nexmark.py [--events 1000000] [--seed 0] [--rate 10000] [--queries q0,q3] [--no-flink]
[--check-flink] [--flink-python PATH] [--memory] [--markdown]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import nexmark_gen  # noqa: E402
import pyarrow as pa  # noqa: E402
from nexmark_boreas import Planned, duckdb_check, feed, plan  # noqa: E402
from nexmark_flink import available  # noqa: E402
from nexmark_flinkcheck import check  # noqa: E402
from nexmark_memory import WINDOWED  # noqa: E402
from nexmark_memory import report as memory_report  # noqa: E402
from nexmark_queries import FLINK_SKIPS, QUERIES, Query  # noqa: E402

FLINK_BUDGET = 1800.0  # seconds for all the Flink jobs


@dataclass
class Row:
    """One query's line of the table."""

    query: Query
    events: int = 0
    boreas: str = ""
    check: str = ""
    flink: str = ""
    boreas_rate: float | None = None
    refusal: str | None = None
    boreas_cpu_us: float | None = None  # µs of CPU per event read (time.process_time around the feeding)
    flink_rate: float | None = None
    flink_cpu_us: float | None = None  # µs of CPU per event of Flink's driver and JVM (nexmark_flink.tree_cpu)

    def ratios(self) -> tuple[str, str]:
        """(CPU ratio, wall ratio): Flink's CPU per event over Boreas's, and Boreas's events/s over Flink's
        (wall clock), each against the issue's 3x; "-" where one side did not run."""
        cpu = (f"{self.flink_cpu_us / self.boreas_cpu_us:.2f}x" if self.flink_cpu_us and self.boreas_cpu_us
               else "-")
        wall = f"{self.boreas_rate / self.flink_rate:.2f}x" if self.flink_rate and self.boreas_rate else "-"
        return cpu, wall


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def run_boreas(q: Query, blocks: list[dict], tables: dict) -> Row:
    """Plan, feed and check one query on Boreas."""
    row = Row(q, events=sum(tables[k].num_rows for k in q.reads))
    planned = plan(q)
    if not isinstance(planned, Planned):
        row.refusal = " ".join(planned.split())
        row.boreas, row.check = f"refused: {row.refusal}", "-"
        return row
    seconds, cpu, fed = feed(planned, blocks)
    row.boreas_rate = fed / seconds if seconds else 0.0
    row.boreas_cpu_us = cpu / fed * 1e6 if fed else None
    per_event = f"{row.boreas_cpu_us:.2f} µs CPU/ev" if fed else "no events"
    row.boreas = f"{row.boreas_rate:,.0f} ev/s, {per_event} ({planned.operator.backend})"
    if q.windowed:
        row.check = "windowed: --check-flink checks it against Flink"
    else:
        row.check = duckdb_check(planned, tables)
    return row


def flink_missing(python: str) -> str | None:
    """None if ``python`` (the Flink side's interpreter) has PyFlink and Java is here, else why not."""
    if python == sys.executable:
        return available()
    try:
        probe = subprocess.run([python, "-c", "import pyflink"], capture_output=True, text=True)
    except OSError as exc:
        return f"{python}: {exc}"
    if probe.returncode != 0:
        return f"{python} has no PyFlink; `make bench-setup` installs it"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java runtime (PyFlink needs java on PATH or JAVA_HOME)"
    return None


def run_flink(rows: list[Row], cfg: nexmark_gen.GeneratorConfig, python: str = sys.executable) -> None:
    """Every query Flink runs, in one child process of ``python`` (``--flink-python``) over CSV files of the
    same events."""
    why = flink_missing(python)
    for row in rows:
        skip = FLINK_SKIPS.get(row.query.name)
        row.flink = f"not run: {skip}" if skip else (f"unavailable: {why}" if why else "")
    todo = [r for r in rows if not r.flink]
    if not todo:
        return
    with tempfile.TemporaryDirectory(prefix="nexmark-") as tmp:
        began = time.perf_counter()
        nexmark_gen.write(cfg, Path(tmp), "csv")
        print(f"CSV files for Flink written in {time.perf_counter() - began:.1f} s", flush=True)
        by_name = {r.query.name: r for r in todo}
        cmd = [python, str(Path(__file__).with_name("nexmark_flink.py")), "--dir", tmp, *by_name]
        with open(Path(tmp) / "flink.log", "w+") as log:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
            watchdog = threading.Timer(FLINK_BUDGET, proc.kill)  # what finished by then is kept
            watchdog.start()
            try:
                for line in proc.stdout:
                    _flink_line(line, by_name)
                proc.wait()
            finally:
                watchdog.cancel()
                if proc.poll() is None:  # the bench itself failed: its child goes with it
                    proc.kill()
                    proc.wait()
            log.seek(0)
            tail = (log.read().strip().splitlines() or ["no output"])[-1][:200]
        for r in todo:
            if not r.flink:
                r.flink = (f"unavailable: the PyFlink run exceeded {FLINK_BUDGET:.0f} s" if proc.returncode == -9
                           else f"unavailable: the PyFlink run ended (exit {proc.returncode}): {tail}")


def run_flink_check(rows: list[Row], cfg: nexmark_gen.GeneratorConfig, blocks: list[dict], python: str) -> None:
    """Every query both run: Flink's collected result (one child process) against Boreas's, in the Flink column."""
    for row in rows:
        skip = FLINK_SKIPS.get(row.query.name)
        row.flink = f"not run: {skip}" if skip else ("-" if row.refusal else "")
    todo = {r.query.name: r for r in rows if not r.flink}
    if not todo:
        return
    with tempfile.TemporaryDirectory(prefix="nexmark-") as tmp:
        nexmark_gen.write(cfg, Path(tmp), "csv")
        cmd = [python, str(Path(__file__).with_name("nexmark_flink.py")), "--collect", "--dir", tmp, *todo]
        with open(Path(tmp) / "flink.log", "w+") as log:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
            watchdog = threading.Timer(FLINK_BUDGET, proc.kill)  # what was checked by then is kept
            watchdog.start()
            try:
                for line in proc.stdout:  # each query checked as soon as Flink has collected it
                    got = json.loads(line) if line.startswith("{") else {}
                    r = todo.get(got.get("query", ""))
                    if r is not None and "error" in got:
                        r.flink = f"failed: {got['error']}"
                    elif r is not None:
                        planned = plan(r.query)  # a fresh box: the timed one's state is its view of the events
                        r.flink = check(planned, blocks, Path(got["rows_file"]))
                        print(f"{r.query.name:<4} {r.flink}", flush=True)
                proc.wait()
            finally:
                watchdog.cancel()
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            log.seek(0)
            tail = (log.read().strip().splitlines() or ["no output"])[-1][:200]
        for r in todo.values():
            r.flink = r.flink or f"unavailable: the PyFlink run ended (exit {proc.returncode}): {tail}"


def _flink_line(line: str, by_name: dict[str, Row]) -> None:
    """One JSON line of the Flink child into its query's row."""
    if not line.startswith("{"):
        return
    got = json.loads(line)
    if "version" in got:
        print(f"PyFlink {got['version']}, parallelism 1", flush=True)
    elif "error" in got:
        by_name[got["query"]].flink = f"failed: {got['error']}"
    else:
        r = by_name[got["query"]]
        r.flink_rate = r.events / got["seconds"]
        r.flink_cpu_us = got["cpu"] / r.events * 1e6 if r.events else None
        r.flink = f"{r.flink_rate:,.0f} ev/s, {r.flink_cpu_us or 0:.2f} µs CPU/ev"
        print(f"{r.query.name:<4} Flink: {r.flink} (net run time {got['seconds']:.1f} s, {got['wall']:.1f} s "
              f"with submission, {got['cpu']:.1f} s CPU); CPU ratio, wall ratio: {', '.join(r.ratios())}",
              flush=True)


def table(rows: list[Row], markdown: bool) -> str:
    head = ("query", "events read", "Boreas", "DuckDB check", "Flink", "CPU/ev Flink / Boreas (target 3x)",
            "ev/s Boreas / Flink, wall")
    lines = []
    for r in rows:
        cells = (f"{r.query.name} {r.query.title}", f"{r.events:,}", r.boreas, r.check, r.flink, *r.ratios())
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |" if markdown
                     else "  ".join(cells))
    if markdown:
        return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + lines)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--queries", default="", help="comma-separated names (default: q0-q22)")
    parser.add_argument("--rate", type=int, default=10_000, help="events per second of event time")
    parser.add_argument("--no-flink", action="store_true")
    parser.add_argument("--check-flink", action="store_true", help="check results against Flink's, not its speed")
    parser.add_argument("--flink-python", default=sys.executable, help="the Python with PyFlink (for Flink's side)")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--memory", action="store_true",
                        help="the windowed queries' state and RSS at --events and 5x as many (flat within 1.2x?)")
    args = parser.parse_args(argv)
    if args.memory:
        names = args.queries.split(",") if args.queries else list(WINDOWED)
        print(f"load average before: {load()} ({os.cpu_count()} cores, shared)", flush=True)
        for line in memory_report(names, args.events, args.seed, args.rate):
            print(line, flush=True)
        print(f"load average after: {load()}")
        return 0
    wanted = [q for q in QUERIES if not args.queries or q.name in args.queries.split(",")]
    print(f"load average before: {load()} ({os.cpu_count()} cores, shared)", flush=True)
    cfg = nexmark_gen.GeneratorConfig(args.events, seed=args.seed, rate=args.rate)
    began = time.perf_counter()
    blocks = list(nexmark_gen.blocks(cfg))
    seconds = time.perf_counter() - began
    tables = {k: pa.Table.from_batches([b[k] for b in blocks], schema=nexmark_gen.SCHEMAS[k])
              for k in nexmark_gen.KINDS}
    print(f"{args.events:,} events generated in {seconds:.2f} s ({args.events / seconds:,.0f} events/s): "
          + ", ".join(f"{t.num_rows:,} {k}s" for k, t in tables.items()), flush=True)
    rows = []
    for q in wanted:
        row = run_boreas(q, blocks, tables)
        print(f"{q.name:<4} Boreas: {row.boreas}; check: {row.check}", flush=True)
        rows.append(row)
    if args.no_flink:
        for r in rows:
            r.flink = "not run (--no-flink)"
    elif args.check_flink:
        run_flink_check(rows, cfg, blocks, args.flink_python)
    else:
        run_flink(rows, cfg, args.flink_python)
    print(f"load average after: {load()}")
    print(table(rows, args.markdown))
    return 1 if any(r.check.startswith("DIFFERS") or r.flink.startswith("DIFFERS") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
