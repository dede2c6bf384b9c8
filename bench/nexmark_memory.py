"""Nexmark's memory over time: a windowed query's box state and RSS at N and 5N events, flat within 1.2x.

Why: issue 34's target is that Boreas's memory for every windowed query is
flat from 10M to 50M events: closed windows' state is dropped (docs/m3.md,
"Event time"), so a five times longer stream must not need more.  Each size
runs in its own child process (``python bench/nexmark_memory.py --child q5
N SEED RATE``), so one run's heap does not count in the other's.  The child
generates the events block by block (``nexmark_gen.blocks``, never all at
once: 50M events held whole would be the RSS measured) and feeds each
block to the query's box as ``bench/nexmark_boreas.py`` does (each block's
batches in eighths, so the box sees batches of the size a node's would),
sampling after each eighth:

* the box's state (``state_entries``: map entries of the open windows,
  held session rows) and
* the process's RSS (``VmRSS`` of /proc/self/status);

and at the end the native backend's interned strings (a string column of
distinct values that the box reads grows its intern table, which the map
entries do not show, until a compaction drops the strings no map holds:
docs/m3_native.md, "The intern table").

The *plateau* is the largest sample over the second
half of the run (the windows have long started closing by then), the peak
the largest of all (RSS: ``VmHWM``).  The parent prints both sizes and the
ratio 5N / N of each, against the 1.2x target; and the CPU time per event
(``time.process_time`` around the feeding, which on a loaded machine is
steadier than wall time).

Usage: ``python bench/nexmark.py --memory --events N [--queries q5,q7,q8,q11]`` (the parent), the lead's big
run being ``--events 10000000``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

TARGET = 1.2  # the issue's: within 1.2x from 10M to 50M events
SLICES = 8  # each block's batches fed in eighths, in event order (about 7,500 bids a batch, as a node's might
#             be), the state sampled after each: many samples even on a small run
WINDOWED = ("q5", "q7", "q8", "q11")


def _status(field: str) -> int:
    """A ``/proc/self/status`` size in kB (``VmRSS``, ``VmHWM``)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def measure(name: str, events: int, seed: int, rate: int) -> dict:
    """One run of query ``name`` over ``events`` events, sampled after each block (in this process)."""
    import nexmark_gen
    from nexmark_boreas import Planned, boreas_batch, plan
    from nexmark_queries import BY_NAME

    from boreas.wire.columns import Columns

    planned = plan(BY_NAME[name])
    if not isinstance(planned, Planned):
        return {"query": name, "events": events, "refused": planned}
    q, op = planned.query, planned.operator
    states, rss, out, cpu, seq, read = [], [], 0, 0.0, 0, 0
    for b in nexmark_gen.blocks(nexmark_gen.GeneratorConfig(events, seed=seed, rate=rate)):
        whole = {kind: boreas_batch(kind, b[kind]) for kind in q.reads}
        fed = [(port, kind, Columns(part)) for i in range(SLICES) for port, kind in enumerate(q.reads)
               if (part := _slice(whole[kind], i)).num_rows]
        read += sum(len(cols) for _, _, cols in fed)
        began = time.process_time()
        for port, kind, cols in fed:
            seq += 1
            out += sum(len(rows) for _, rows in op.process_from(port, cols, seq * 0.01, (kind, "gen", seq)))
            if port == len(q.reads) - 1:  # a sample per eighth of the block
                states.append(op.state_entries())
                rss.append(_status("VmRSS"))
        cpu += time.process_time() - began
    began = time.process_time()
    out += sum(len(rows) for _, rows in op.end_of_input((seq + 1) * 0.01))
    cpu += time.process_time() - began
    half = len(states) // 2
    native = op.runtime.native_maps()
    return {"query": name, "events": events, "samples": len(states), "rows_out": out,
            "state_peak": max(states), "state_plateau": max(states[half:]),
            "rss_plateau_mb": max(rss[half:]) / 1024, "rss_peak_mb": _status("VmHWM") / 1024,
            "cpu_us_per_event": cpu / read * 1e6, "left_at_end": op.state_entries(),
            "strings_at_end": None if native is None else len(native.ids.strings)}


def _slice(batch, i: int):
    """The ``i``-th of :data:`SLICES` equal parts of a batch."""
    size = -(-batch.num_rows // SLICES)
    return batch.slice(i * size, size)


def child(name: str, events: int, seed: int, rate: int, python: str = sys.executable) -> dict:
    """:func:`measure` in a fresh process (its RSS its own)."""
    cmd = [python, str(Path(__file__).resolve()), "--child", name, str(events), str(seed), str(rate)]
    done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def report(names: list[str], events: int, seed: int, rate: int) -> list[str]:
    """Lines saying, per windowed query, its state and RSS at N and 5N events and whether 5N/N is within 1.2x."""
    lines = []
    for name in names:
        small, big = child(name, events, seed, rate), child(name, 5 * events, seed, rate)
        if "refused" in small:
            lines.append(f"{name}: refused: {small['refused']}")
            continue
        for r in (small, big):
            lines.append(f"{name} {r['events']:>12,} events: state plateau {r['state_plateau']:,} entries "
                         f"(peak {r['state_peak']:,}, {r['left_at_end']} left at the end), RSS plateau "
                         f"{r['rss_plateau_mb']:,.0f} MB (peak {r['rss_peak_mb']:,.0f} MB), "
                         f"{r['cpu_us_per_event']:.1f} us CPU/event, {r['rows_out']:,} rows out, "
                         f"{r.get('strings_at_end')} strings interned")
        s = big["state_plateau"] / max(small["state_plateau"], 1)
        m = big["rss_plateau_mb"] / small["rss_plateau_mb"]
        verdict = "flat" if max(s, m) <= TARGET else "NOT flat"
        lines.append(f"{name} 5N/N: state {s:.2f}x, RSS {m:.2f}x: {verdict} (target within {TARGET}x)")
    return lines


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        name, n, seed, rate = sys.argv[2], *map(int, sys.argv[3:6])
        print(json.dumps(measure(name, n, seed, rate)), flush=True)
    else:
        sys.exit("run it through bench/nexmark.py --memory")
