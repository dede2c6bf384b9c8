"""Run a ``boreas`` command with a CPU-time profiler switched on and off by signals.

Why: a node's whole-life profile (``python -m cProfile``) is mostly start-up,
deployment and compiling, and its wall-clock times swing with the load of a
shared machine.  This one counts CPU time (``time.process_time``) and only
between SIGUSR1 (start) and SIGUSR2 (stop, then the stats are written to
OUT), so a bench can profile just the seconds its events flow
(bench/columnar.py ``--profile``).

Usage: ``python bench/cpu_profile.py OUT boreas-arguments...``
"""

from __future__ import annotations

import cProfile
import signal
import sys
import time


def main() -> int:
    out, argv = sys.argv[1], sys.argv[2:]
    profile = cProfile.Profile(time.process_time)
    signal.signal(signal.SIGUSR1, lambda *_: profile.enable())

    def stop(*_) -> None:
        profile.disable()
        profile.dump_stats(out)

    signal.signal(signal.SIGUSR2, stop)
    from boreas.cli.main import main as boreas

    return boreas(argv)


if __name__ == "__main__":
    sys.exit(main())
