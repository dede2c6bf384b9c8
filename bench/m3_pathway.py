"""The M3 benchmark's incremental-view peer: Pathway maintaining the same Q3 view under the same events.

Pathway (an incremental dataflow engine: a Python API over a Rust core built
on differential dataflow) keeps the query of bench/m3.py as a live table:

    customer (BUILDING) |><| orders (before 1995-03-15) on custkey
                        |><| lineitem (shipped after 1995-03-15) on orderkey
    GROUP BY orderkey, orderdate, shippriority: SUM(extendedprice * (1 - discount))

The events are bench/m3.py's :class:`Stream` (bench/m3_workload.py),
regenerated here from the same seed, so they are the same events in the
same order.  They enter through
Pathway's Python connector (``pw.io.python.ConnectorSubject``), as a Python
application hands rows to Pathway: one ``next(...)`` per insert, one
``delete(...)`` per delete, a ``commit()`` after every batch of ``--batch``
events.  Each commit is one Pathway timestamp, so the view is fresh after
every batch (checked: one ``on_time_end`` per commit).  ``pw.io.subscribe``
keeps the view in a dict, as an application reading the view's changes
would.  Pathway identifies rows by key: each insert gets the next integer
id, a delete names the id of an equal live row (bookkeeping done before the
timed phases, as the DuckDB strategy's row ids are).  Dates go in as day
numbers (``date.toordinal()``), converted before timing too.

Revenue is summed as exact integers (price in cents x (100 - discount in
hundredths), divided by 10,000 when read): the DECIMAL(15,2) arithmetic the
query declares.  With floats, Pathway 0.33.0's ``sum`` gives wrong views
under this stream: when, in one timestamp, a group loses one row and gains
another (its count unchanged), the float sum emits no update.  Three
events show it: commit ``+(id 1, g 7, 10.0)``, then in one commit
``-(id 1, g 7, 10.0)`` and ``+(id 2, g 7, 3.0)``; ``groupby(g).reduce(
sum(v))`` stays at 10.0 (with ``int`` values it goes to 3, as it should,
and ``count``/``max`` beside it update too).  The same events in one
commit, or with the insert and the delete in different commits, are right.

Timing: from the first event handed to Pathway until ``on_time_end`` of the
phase's last commit (the engine has applied it and the subscriber has seen
its changes).  The connector thread and the engine's worker thread run
concurrently (``PATHWAY_THREADS=1``: one worker), so the CPU seconds of the
process are reported beside the wall clock.

It runs in a child process of bench/m3.py (``python bench/m3_pathway.py
...``): one ``pw.run`` per process, its memory returned when it ends.  It
prints one JSON line: the phases' figures and, for the 1x run, the view
right after the first ``--events`` events, which bench/m3.py checks against
DuckDB's result.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

CUT = datetime.date(1995, 3, 15).toordinal()
PRELOAD_CHUNK = 50_000  # events per commit while preloading (untimed), as bench/m3.py's preload


def available() -> str | None:
    """None if Pathway can be imported here, else why not."""
    try:
        import pathway  # noqa: F401
    except Exception as exc:  # noqa: BLE001 -- any import failure means: not available
        return f"pathway cannot be imported ({type(exc).__name__}: {exc}); install it with `make bench-setup`"
    return None


# -- the parent's side (bench/m3.py) -----------------------------------------------------------


def run_child(argv: list[str], log: Path, timeout: float) -> dict[str, Any]:
    """Run this file with ``argv`` in a child process; its JSON result (stderr to ``log``)."""
    env = dict(os.environ, PATHWAY_THREADS="1")
    with open(log, "ab") as err:
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), *argv], stdout=subprocess.PIPE,
                              stderr=err, env=env, timeout=timeout, check=False)
    lines = proc.stdout.decode().strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise RuntimeError(f"the Pathway run exited with status {proc.returncode}:\n{tail}")
    return json.loads(lines[-1])


def view_differences(got: list[list], expected: dict[tuple, float]) -> int:
    """How many groups differ between Pathway's view rows [orderkey, day number, priority, revenue] and
    DuckDB's result {(orderkey, date, priority): revenue} (groups of revenue ~0 count as absent)."""
    mine = {(k, datetime.date.fromordinal(d), p): r for k, d, p, r, *_ in got}
    wrong = sum(1 for k, v in expected.items()
                if abs(v) > 1e-6 and abs(mine.get(k, 0.0) - v) > 1e-6 * max(1.0, abs(v)))
    wrong += sum(1 for k, v in mine.items() if k not in expected and abs(v) > 1e-6)
    return wrong


def measure(n: int, batch: int, rounds: int, size: int, scale: int, naive_batches: int, expected: dict[tuple, float],
            keep_log: bool = False) -> dict[str, Any]:
    """The three runs (each a child process), or {"unavailable": why}: empty -> 1x then the 1x rounds, fresh
    after every batch; ``scale`` x preloaded then the rounds; and, for information, every batch at once."""
    why = available()
    if why is not None:
        return {"unavailable": why}
    log = Path(tempfile.gettempdir()) / f"boreas-bench-m3-pathway-{os.getpid()}.log"
    common = ["--batch", str(batch), "--rounds", str(rounds), "--size", str(size)]
    timeout = 600 + scale * n / 5_000
    print(f"Pathway: empty -> 1x ({n:,} events), then {rounds} rounds of {size:,} ...", flush=True)
    try:
        one = run_child(["--seed", "1", "--events", str(n), "--extra", str(batch * naive_batches), "--closed",
                         *common], log, timeout)
        print(f"Pathway: {scale}x ({scale * n:,} events) preloaded, then {rounds} rounds ...", flush=True)
        ten = run_child(["--seed", "2", "--preload", str(scale * n), "--closed", *common], log, timeout)
        print("Pathway: every batch at once (information) ...", flush=True)
        open_ = run_child(["--seed", "1", "--events", str(n), "--batch", str(batch), "--rounds", "0"], log, timeout)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        return {"unavailable": f"the Pathway run failed here: {exc}"}
    finally:
        if keep_log:
            print(f"Pathway's log: {log}")
        else:
            log.unlink(missing_ok=True)
    return {"version": one["version"], "1x": one, "10x": ten, "open": open_,
            "cost_1x": statistics.median(one["rounds"]), "cost_10x": statistics.median(ten["rounds"]),
            "wrong": view_differences(one["view"], expected)}


def print_rows(p: dict[str, Any], scale: int, rounds: int, size: int) -> None:
    """Pathway's rows of bench/m3.py's measurement table."""
    if "unavailable" in p:
        print(f"| peer: Pathway: not available: {p['unavailable']} | - | - | - | - |")
        return
    pe, ps = p["1x"]["from_empty"]["events"], p["1x"]["from_empty"]["seconds"]
    print(f"| peer: Pathway {p['version']}, fresh after every batch, empty -> 1x | {pe:,} | {ps:.2f} "
          f"| {pe / ps:,.0f} | {1e6 * ps / pe:.2f} |")
    for label, cost in (("1x", p["cost_1x"]), (f"{scale}x", p["cost_10x"])):
        print(f"| peer: Pathway, {label} loaded: median of {rounds} rounds | {rounds * size:,} "
              f"| {rounds * size * cost:.2f} | {1 / cost:,.0f} | {1e6 * cost:.2f} |")
    oe, os_ = p["open"]["from_empty"]["events"], p["open"]["from_empty"]["seconds"]
    print(f"| information: Pathway given every batch at once (may fold queued batches: not fresh after each), "
          f"empty -> 1x | {oe:,} | {os_:.2f} | {oe / os_:,.0f} | {1e6 * os_ / oe:.2f} |")


def print_ratios(p: dict[str, Any], scale: int, eps_1x: float, cost_1x: float, cost_10x: float,
                 eps_dbtoaster: float) -> None:
    """Pathway's rows of bench/m3.py's ratio table, and M3 against DBToaster's published figure."""
    if "unavailable" not in p:
        pe, ps = p["1x"]["from_empty"]["events"], p["1x"]["from_empty"]["seconds"]
        print(f"| M3 / Pathway events/s (empty -> 1x, both fresh after every batch) | {eps_1x / (pe / ps):.2f}x | | |")
        print(f"| Pathway / M3 per-event cost, 1x loaded | {p['cost_1x'] / cost_1x:.2f}x | | |")
        print(f"| Pathway / M3 per-event cost, {scale}x loaded | {p['cost_10x'] / cost_10x:.2f}x | | |")
        print(f"| Pathway per-event cost {scale}x / 1x loaded | {p['cost_10x'] / p['cost_1x']:.2f} | | |")
    print(f"| M3 / DBToaster's published figure (NOT MEASURED HERE: other machine, C++, after each event) "
          f"| {eps_1x / eps_dbtoaster:.2f}x | | |")


def print_runs(p: dict[str, Any], scale: int) -> int:
    """What each Pathway run used, and the check of its view; the number of groups that differ."""
    if "unavailable" in p:
        return 0
    for key, label in (("1x", "empty -> 1x, then the 1x rounds"), ("10x", f"{scale}x preloaded, then the rounds"),
                       ("open", "every batch at once")):
        r = p[key]
        print(f"Pathway run ({label}): {r['commits']:,} commits, {r['timestamps']:,} timestamps; process CPU "
              f"{r['cpu']:.1f} s (its connector thread and one engine worker, PATHWAY_THREADS=1); peak RSS "
              f"{r['rss_mb']:,.0f} MB")
    wrong = p["wrong"]
    print(f"check: Pathway's view equals DuckDB's result at 1x ({len(p['1x']['view']):,} groups): "
          f"{'yes' if not wrong else f'NO, {wrong} groups differ'}")
    return wrong


# -- the child's side ---------------------------------------------------------------------------


class Keys:
    """Row ids for Pathway: each insert the next id, each delete the id of an equal live row."""

    def __init__(self) -> None:
        self.ids: dict[tuple, list[int]] = {}
        self.next_id = 0

    def prepare(self, events: list[tuple]) -> list[tuple]:
        """(sign, id, rel, k1, k2, s, f1, f2, d, p) per event: the union schema's columns (prices in cents,
        discounts in hundredths, dates as day numbers)."""
        out = []
        for rel, sign, row in events:
            if sign > 0:
                self.next_id += 1
                key = self.next_id
                self.ids.setdefault((rel, row), []).append(key)
            else:
                key = self.ids[(rel, row)].pop()
            if rel == "customer":
                out.append((sign, key, 0, row[0], None, row[1], None, None, None, None))
            elif rel == "orders":
                out.append((sign, key, 1, row[0], row[1], None, None, None, row[2].toordinal(), row[3]))
            else:
                out.append((sign, key, 2, row[0], None, None, round(row[1] * 100), round(row[2] * 100),
                            row[3].toordinal(), None))
        return out


def build(pw: Any, subject: Any) -> Any:
    """The Q3 view over the union table read from ``subject``."""

    class Event(pw.Schema):
        id: int = pw.column_definition(primary_key=True)
        rel: int  # 0 customer, 1 orders, 2 lineitem
        k1: int  # c_custkey, o_orderkey, l_orderkey
        k2: int | None  # o_custkey
        s: str | None  # c_mktsegment
        f1: int | None  # l_extendedprice in cents
        f2: int | None  # l_discount in hundredths
        d: int | None  # o_orderdate, l_shipdate (day numbers)
        p: int | None  # o_shippriority

    t = pw.io.python.read(subject, schema=Event, autocommit_duration_ms=None)
    this = pw.this
    c = t.filter((t.rel == 0) & (t.s == "BUILDING")).select(custkey=this.k1)
    o = (t.filter((t.rel == 1) & (pw.unwrap(t.d) < CUT))
         .select(orderkey=this.k1, custkey=this.k2, odate=this.d, prio=this.p))
    li = (t.filter((t.rel == 2) & (pw.unwrap(t.d) > CUT))
          .select(orderkey=this.k1, rev=pw.unwrap(this.f1) * (100 - pw.unwrap(this.f2))))  # exact: 1/10,000ths
    co = c.join(o, c.custkey == o.custkey).select(orderkey=o.orderkey, odate=o.odate, prio=o.prio)
    col = co.join(li, co.orderkey == li.orderkey).select(orderkey=li.orderkey, odate=co.odate, prio=co.prio,
                                                         rev=li.rev)
    return col.groupby(col.orderkey, col.odate, col.prio).reduce(col.orderkey, col.odate, col.prio,
                                                                 revenue=pw.reducers.sum(col.rev))


def peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM: ru_maxrss would carry the parent's over fork and exec)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def child(args: argparse.Namespace) -> dict[str, Any]:
    import pathway as pw

    from m3_workload import Stream

    stream, keys = Stream(seed=args.seed), Keys()
    # Phases: (label, batches of prepared events or None for an untimed preload generated on the fly).
    phases: list[tuple[str, Any]] = []
    if args.preload:
        phases.append(("preload", None))
    else:
        first = keys.prepare(stream.take(args.events))
        phases.append(("from_empty", [first[i:i + args.batch] for i in range(0, len(first), args.batch)]))
        extra = keys.prepare(stream.take(args.extra))
        phases.append(("extra", [extra] if extra else []))
    # The rounds are generated after the preload (the preload advances the stream), in the connector thread.

    class Subject(pw.io.python.ConnectorSubject):
        @property
        def _deletions_enabled(self) -> bool:  # deletes are made through a local alias, which Pathway's check misses
            return True

        def __init__(self) -> None:
            super().__init__()
            self.commits = 0
            self.ends: dict[str, int] = {}  # phase -> number of commits when it ended
            self.sizes: dict[str, int] = {}
            self.starts: dict[str, float] = {}  # round -> when its first event was handed over
            self.t_start = 0.0

        def push(self, batches: Any) -> int:
            add, delete, commit = self.next, self.delete, self.commit
            n = 0
            for batch in batches:
                for sign, key, rel, k1, k2, s, f1, f2, d, p in batch:
                    if sign > 0:
                        add(id=key, rel=rel, k1=k1, k2=k2, s=s, f1=f1, f2=f2, d=d, p=p)
                    else:
                        delete(id=key, rel=rel, k1=k1, k2=k2, s=s, f1=f1, f2=f2, d=d, p=p)
                commit()
                self.commits += 1
                n += len(batch)
                if args.closed and not refreshed.acquire(timeout=300):
                    raise RuntimeError(f"commit {self.commits} was not applied after 300 s")
            return n

        def run(self) -> None:
            for label, batches in phases:
                if batches is None:  # the preload: generated chunk by chunk, untimed
                    left, n = args.preload, 0
                    while left > 0:
                        chunk = keys.prepare(stream.take(min(left, PRELOAD_CHUNK)))
                        n += self.push([chunk])
                        left -= len(chunk)
                else:
                    if label == "from_empty":
                        self.t_start = time.perf_counter()
                    n = self.push(batches)
                self.sizes[label], self.ends[label] = n, self.commits
            rounds = [keys.prepare(stream.take(args.size)) for _ in range(args.rounds)]  # before any is timed
            for r, events in enumerate(rounds):
                label = f"round{r}"
                self.starts[label] = time.perf_counter()
                self.sizes[label] = self.push([events[i:i + args.batch] for i in range(0, len(events), args.batch)])
                self.ends[label] = self.commits

    refreshed = threading.Semaphore(0)  # released once per timestamp the subscriber has seen end
    subject = Subject()
    view = build(pw, subject)
    state: dict[tuple, int] = {}  # view row -> multiplicity (1 once consolidated)
    ends: list[float] = []
    snapshot: list[list] = []
    first_commits = -(-args.events // args.batch) if not args.preload else -1

    def on_change(key: Any, row: dict, time: int, is_addition: bool) -> None:
        v = (row["orderkey"], row["odate"], row["prio"], row["revenue"] / 10_000)
        c = state.get(v, 0) + (1 if is_addition else -1)
        if c:
            state[v] = c
        else:
            del state[v]

    def on_time_end(time_: int) -> None:
        ends.append(time.perf_counter())
        refreshed.release()
        if len(ends) == first_commits:
            snapshot.extend([*v, c] for v, c in state.items())

    pw.io.subscribe(view, on_change=on_change, on_time_end=on_time_end)
    gc.collect()
    gc.disable()  # as bench/m3.py times the M3 runtime: no collector passes over the prepared events
    try:
        cpu0 = time.process_time()
        pw.run(monitoring_level=pw.MonitoringLevel.NONE, default_logging=False)
        cpu = time.process_time() - cpu0
    finally:
        gc.enable()
    if args.closed and len(ends) != subject.commits:
        raise RuntimeError(f"{subject.commits} commits but {len(ends)} timestamps: a batch was not its own update")
    if not args.closed and (args.rounds or args.preload or args.extra):
        raise RuntimeError("without --closed only --events is timed (from empty until the last update)")

    def at(label: str) -> float:
        return ends[subject.ends[label] - 1] if args.closed else ends[-1]

    out: dict[str, Any] = {"version": pw.__version__, "commits": subject.commits, "timestamps": len(ends), "cpu": cpu,
                           "rss_mb": peak_rss_mb()}
    if not args.preload:
        out["from_empty"] = {"events": subject.sizes["from_empty"], "seconds": at("from_empty") - subject.t_start}
        out["view"] = snapshot
    # A round from its first event handed over until its last update seen (only meaningful with --closed:
    # otherwise the engine may still be working through earlier rounds when one starts).
    out["rounds"] = [(at(f"round{r}") - subject.starts[f"round{r}"]) / subject.sizes[f"round{r}"]
                     for r in range(args.rounds)]
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--events", type=int, default=0, help="timed from an empty view, in batches")
    parser.add_argument("--extra", type=int, default=0, help="then applied in one batch (bench/m3.py's naive batches)")
    parser.add_argument("--preload", type=int, default=0, help="instead: applied untimed, in chunks of 50,000")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size", type=int, default=50_000, help="events per timed round")
    parser.add_argument("--closed", action="store_true",
                        help="hand Pathway the next batch only once the last one's update has been seen")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    print(json.dumps(child(args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
