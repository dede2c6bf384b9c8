"""Where ``boreas cluster up`` records the clusters it runs, and ``cluster down``, which finds and stops them.

A record is one JSON file per Head port in this user's runtime directory
(``$XDG_RUNTIME_DIR/boreas-UID`` or the temporary directory), holding the
``cluster up`` process's pid, its start time (so a later process that got the
same pid is not taken for it) and its children's pids (so ``down`` can kill
what a ``cluster up`` that did not stop in time left behind).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

from boreas.catalog.endpoints import split_endpoint

from .common import EXIT_OK, CommandFailed


def state_dir() -> Path:
    """Where ``cluster up`` records the clusters it runs, for ``cluster down`` (this user's only)."""
    for base in (os.environ.get("XDG_RUNTIME_DIR"), tempfile.gettempdir()):
        if not base:
            continue
        path = Path(base) / f"boreas-{os.getuid()}"
        try:
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(path, os.W_OK):
            return path
    raise CommandFailed("no directory to record the cluster in ($XDG_RUNTIME_DIR and the temporary "
                        "directory are not writable)")


def state_file(head_port: int) -> Path:
    return state_dir() / f"cluster-{head_port}.json"


def started_at(pid: int) -> str | None:
    """The process's start time (Linux: /proc), to tell it from a later process with its pid."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def is_running(pid: int, started: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # not ours
    return started is None or started_at(pid) in (None, started)


def clusters_running() -> list[dict]:
    """The clusters ``cluster up`` runs for this user now (stale records are removed)."""
    found = []
    for path in sorted(state_dir().glob("cluster-*.json")):
        try:
            state = json.loads(path.read_text())
            pid = int(state["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if is_running(pid, state.get("started")):
            found.append({**state, "file": str(path)})
        else:
            with contextlib.suppress(OSError):
                path.unlink()
    return found


def cmd_cluster_down(args: argparse.Namespace) -> int:
    clusters = clusters_running()
    port, why = args.head_port, "--head-port"
    if port is None and os.environ.get("BOREAS_HEAD"):
        with contextlib.suppress(ValueError):
            port = split_endpoint(os.environ["BOREAS_HEAD"].split("://", 1)[-1].split("/")[0])[1]
            why = f"$BOREAS_HEAD={os.environ['BOREAS_HEAD']}"
    chosen = clusters if port is None else [c for c in clusters if c["head_port"] == port]
    if not chosen:
        where = f" with its Head on port {port} ({why})" if port is not None else ""
        running = (f"; running: {', '.join(str(c['head_port']) for c in clusters)} (say which with --head-port)"
                   if clusters else "")
        raise CommandFailed(f"no cluster started by `boreas cluster up`{where} is running{running}")
    if len(chosen) > 1:
        raise CommandFailed("several clusters are running; say which with --head-port: "
                            + ", ".join(f"{c['head_port']} ({c['head']})" for c in chosen))
    cluster = chosen[0]
    pid = int(cluster["pid"])
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + args.timeout
    children = [c for c in cluster.get("children", []) if isinstance(c, int)]
    while time.monotonic() < deadline and (is_running(pid, cluster.get("started"))
                                           or any(alive(c) for c in children)):
        time.sleep(0.1)
    if is_running(pid, cluster.get("started")) or any(alive(c) for c in children):
        for target in (pid, *children):
            with contextlib.suppress(OSError):
                os.killpg(target, signal.SIGKILL) if target != pid else os.kill(pid, signal.SIGKILL)
        print(f"killed the cluster on {cluster['head']}: it did not stop within {args.timeout:g} s",
              file=sys.stderr)
    with contextlib.suppress(OSError):
        Path(cluster["file"]).unlink()
    print(f"stopped the cluster: Head {cluster['head']}, {len(cluster['nodes'])} "
          f"node{'s' if len(cluster['nodes']) != 1 else ''} ({', '.join(cluster['nodes'])})")
    return EXIT_OK


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    with contextlib.suppress(OSError):  # a zombie (exited, not yet reaped by its parent) is gone
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True
