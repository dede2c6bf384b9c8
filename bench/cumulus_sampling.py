"""``bench/cumulus.py --sample DIR``: a sampling profile of every node process over the measured window only.

cProfile (``--profile``) times every call, which multiplies a node's CPU per
event several times over and charges start-up (imports, code generation) to
the same file; the question "where does a member's CPU per event go" needs
the node as it runs in the measurement, so this attaches ``py-spy record``
(``--nonblocking``: the node is never paused) to each node from the first
published batch until the view is exact, and writes collapsed stacks
(``DIR/node-LABEL-I.txt``, one ``frame;frame;... count`` line per distinct
stack; idle stacks are left out).  On a machine busier than its cores a
thread waiting for a core after ``epoll_wait`` returned counts as running:
there the event loop's ``select`` and socket writes are over-counted, and a
CPU-time sampler (``setitimer(ITIMER_PROF)`` in the node) is the better
measure (docs/cumulus.md §3.8 gives one profile taken that way).  py-spy is
not a dependency of Boreas: it is found on ``PATH`` or at ``$PY_SPY``.
:func:`summary` reads a file back as self and inclusive shares per function.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections import Counter
from pathlib import Path

RATE = 250  # samples per second and node


def py_spy() -> str:
    found = os.environ.get("PY_SPY") or shutil.which("py-spy")
    if not found:
        raise SystemExit("--sample needs py-spy on PATH or at $PY_SPY (pip install py-spy, in any environment)")
    return found


class Samplers:
    """One ``py-spy record`` per node process, started and stopped together (SIGINT makes it write its file)."""

    def __init__(self, directory: Path, label: str, pids: list[int]):
        self.procs = [subprocess.Popen([py_spy(), "record", "--nonblocking", "--format", "raw", "--rate", str(RATE),
                                        "--pid", str(pid), "--output", str(directory / f"node-{label}-{i}.txt")],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                      for i, pid in enumerate(pids)]

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def summary(path: Path, top: int = 40) -> str:
    """Self and inclusive sample shares per function of one collapsed-stacks file, largest first."""
    own: Counter = Counter()
    incl: Counter = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = int(count)
        total += n
        frames = [f.split(" (")[0] + " (" + f.split(" (")[1].split(":")[0] + ")" if " (" in f else f
                  for f in stack.split(";")]
        own[frames[-1]] += n
        for f in set(frames):
            incl[f] += n
    lines = [f"{path.name}: {total} samples"]
    lines += [f"  self {n / total:6.1%}  incl {incl[f] / total:6.1%}  {f}" for f, n in own.most_common(top)]
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    for name in sys.argv[1:]:
        print(summary(Path(name)))
