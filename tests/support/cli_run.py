"""Running the ``boreas`` command as a user would, for the CLI experience tests.

A fresh interpreter with no ``BOREAS_*`` variables from the environment;
what it printed, checked to be one error line and no traceback; and a run
whose stdout nobody reads (``boreas ... | head`` after head exited).  Shared
by :mod:`test_cli_ux` and :mod:`test_cli_ux_commands`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "xml"
NOWHERE = "http://localhost:1"  # a Head that is never reached: the command must stop before


def boreas(*args, env=None, cwd=None, timeout=60):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("BOREAS_")}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "boreas.cli.main", *map(str, args)], capture_output=True,
                          text=True, env=full_env, cwd=cwd, timeout=timeout)


def one_error_line(result: subprocess.CompletedProcess) -> str:
    """The command failed with exactly one line on stderr, and no traceback."""
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def closed_stdout(*args, env=None, cwd=None) -> tuple[int, str]:
    """Run with stdout a pipe nobody reads (``boreas ... | head`` after head exited): exit code, stderr."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("BOREAS_")}
    full_env.update(env or {})
    proc = subprocess.Popen([sys.executable, "-m", "boreas.cli.main", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=full_env, cwd=cwd)
    proc.stdout.close()
    try:
        err = proc.stderr.read()
        return proc.wait(timeout=30), err
    finally:
        if proc.poll() is None:
            proc.kill()


#: Libraries that cost a command tenths of a second to import: a light command loads none of them while it runs.
HEAVY = ("aiohttp", "xmlschema", "sqlglot", "pyarrow", "pandas", "boreas.m3.compiler", "boreas.m3.cumulus")

_IMPORTS_PROBE = """
import atexit, json, runpy, sys
heavy = json.loads(sys.argv.pop(1))
atexit.register(lambda: print("IMPORTED " + json.dumps(sorted(m for m in heavy if m in sys.modules)), file=sys.stderr))
runpy.run_module("boreas.cli.main", run_name="__main__", alter_sys=True)
"""


def boreas_imports(*args, env, cwd=None, timeout=60) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run ``boreas args...`` to the end, as a user does; its result and which of :data:`HEAVY` it had
    imported when it exited (its last line on stderr, taken off ``stderr``)."""
    result = subprocess.run([sys.executable, "-c", _IMPORTS_PROBE, json.dumps(HEAVY), *map(str, args)],
                            capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
    head, _, last = result.stderr.rstrip("\n").rpartition("\n")
    assert last.startswith("IMPORTED "), result.stderr
    result.stderr = head
    return result, json.loads(last[len("IMPORTED "):])
