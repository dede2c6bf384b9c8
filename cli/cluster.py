"""``boreas cluster up`` and ``down``, and the pipe by which a child stops when ``cluster up`` is gone.

``boreas cluster up`` is a small supervisor: it starts a Head and N nodes as
children, each in a process group of its own, and stops them when it is
stopped (Ctrl-C, SIGTERM, SIGHUP, ``boreas cluster down``).  Each child also
watches a pipe from it (``BOREAS_PARENT_FD``): when ``cluster up`` is gone
however it ended -- ``kill -9`` included -- the pipe reads end-of-file and
the child stops itself, so no Head or node is left holding its port.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from boreas.catalog.endpoints import split_endpoint
from boreas.catalog.positions import spell
from boreas.wire.addressing import DEFAULT_HEAD_PORT, endpoint_url
from boreas.wire.auth import TOKEN_ENV, new_token, resolve_token
from boreas.wire.client import PeerClient, PeerError

from .common import (
    EXIT_FAILED,
    EXIT_OK,
    CommandFailed,
    catalog_url,
    endpoint_of,
    run_until_stopped,
    use_log_format,
)

log = logging.getLogger("boreas.cli")


PARENT_FD_ENV = "BOREAS_PARENT_FD"
#: Seconds a child whose parent is gone has to stop cleanly before it exits anyway.
ORPHAN_GRACE = 10.0


def exit_with_parent() -> None:
    """When started by ``cluster up``: stop (SIGTERM to ourselves) once its pipe reads end-of-file."""
    fd_text = os.environ.pop(PARENT_FD_ENV, None)
    if not fd_text:
        return
    try:
        fd = int(fd_text)
        os.fstat(fd)
    except (ValueError, OSError):
        log.warning("ignoring %s=%r: not an open file descriptor", PARENT_FD_ENV, fd_text)
        return

    def watch() -> None:
        with contextlib.suppress(OSError):
            while os.read(fd, 64):
                pass
        log.warning("boreas cluster up, which started this process, is gone: stopping")
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(ORPHAN_GRACE)
        log.error("did not stop within %g s of its parent: exiting", ORPHAN_GRACE)
        os._exit(EXIT_FAILED)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


# -- cluster up / down ---------------------------------------------------------------


def _spawn(argv: list[str], env: dict[str, str], verbose: bool, parent_fd: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "boreas.cli.main", *(["-v"] if verbose else []), *argv]
    return subprocess.Popen(cmd, env={**env, PARENT_FD_ENV: str(parent_fd)}, stdin=subprocess.DEVNULL,
                            start_new_session=True, pass_fds=(parent_fd,))


async def _wait_ready(head: str, nodes: list[str], token: str, procs: list[subprocess.Popen],
                      timeout: float) -> None:
    deadline = time.monotonic() + timeout
    async with PeerClient(token, timeout=2.0) as peers:
        while True:
            dead = [p for p in procs if p.poll() is not None]
            if dead:
                raise CommandFailed(f"a cluster process exited early: {' '.join(dead[0].args[3:])} "
                                    f"(exit {dead[0].returncode}; is its port taken?)")
            try:
                status = await peers.call("GET", f"{head}/nodes")
                alive = {row["endpoint"] for row in status["nodes"] if row.get("alive")}
                if set(nodes) <= alive:
                    return
            except PeerError:
                pass
            if time.monotonic() > deadline:
                raise CommandFailed(f"cluster not ready after {timeout:g}s")
            await asyncio.sleep(0.1)


def _stop_all(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _prepare_catalog(url: str, fresh: bool) -> str:
    """Start from an empty catalog (``--fresh``) or say which version is resumed; the line to print."""
    from boreas.catalog.store import MissingCatalog, StoreError, erase_embedded, is_private, open_store

    if is_private(url):
        return f"catalog {url}: empty (kept in the Head's memory)"
    if fresh:
        erased = erase_embedded(url)
        if erased is None:
            raise CommandFailed(f"--fresh removes an embedded catalog file; {url} is not one (remove its "
                                "contents yourself, or name a new chroot)")
        path, removed = erased
        return (f"fresh catalog: removed {path}" if removed else f"fresh catalog {path}")
    try:
        with open_store(url, create=False) as store:
            version = store.version()
    except MissingCatalog:
        return f"new catalog {url}"
    except StoreError as exc:
        raise CommandFailed(str(exc)) from None
    if version == 0:
        return f"catalog {url}: empty"
    return (f"resuming catalog version {version} from {url} (what earlier runs submitted is still "
            f"there; --fresh starts from an empty one)")


def _state_dir() -> Path:
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


def _state_file(head_port: int) -> Path:
    return _state_dir() / f"cluster-{head_port}.json"


def _started(pid: int) -> str | None:
    """The process's start time (Linux: /proc), to tell it from a later process with its pid."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _running(pid: int, started: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # not ours
    return started is None or _started(pid) in (None, started)


def _clusters() -> list[dict]:
    """The clusters ``cluster up`` runs for this user now (stale records are removed)."""
    found = []
    for path in sorted(_state_dir().glob("cluster-*.json")):
        try:
            state = json.loads(path.read_text())
            pid = int(state["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if _running(pid, state.get("started")):
            found.append({**state, "file": str(path)})
        else:
            with contextlib.suppress(OSError):
                path.unlink()
    return found


def cmd_cluster_up(args: argparse.Namespace) -> int:
    use_log_format(args)
    if args.nodes < 1:
        raise CommandFailed("--nodes must be at least 1")
    running = [c for c in _clusters() if c["head_port"] == args.head_port]
    if running:
        raise CommandFailed(f"a cluster is already running with its Head on port {args.head_port} (pid "
                            f"{running[0]['pid']}); stop it with: boreas cluster down --head-port {args.head_port}")
    token = resolve_token(args.token, required=False) or new_token()
    env = {**os.environ, TOKEN_ENV: token}
    url = catalog_url(args)
    head = endpoint_url(f"{args.host}:{args.head_port}")
    nodes = [endpoint_of(f"{args.host}:{args.base_port + i}", 15000) for i in range(args.nodes)]
    print(_prepare_catalog(url, args.fresh), flush=True)

    # Children read the pipe's end; when this process ends, however it ends, they read end-of-file.
    parent_r, parent_w = os.pipe()
    procs: list[subprocess.Popen] = []
    state = _state_file(args.head_port)
    try:
        logs = ["--log-format", args.log_format]  # the children log as cluster up was told to
        procs.append(_spawn(["head", "--catalog", url, "--listen", f"{args.host}:{args.head_port}",
                             "--nodes", ",".join(nodes), *logs], env, args.verbose, parent_r))
        procs += [_spawn(["node", "--endpoint", n, "--head", head, *logs], env, args.verbose, parent_r)
                  for n in nodes]
        os.close(parent_r)
        state.write_text(json.dumps({"pid": os.getpid(), "started": _started(os.getpid()),
                                     "head": head, "head_port": args.head_port, "nodes": nodes,
                                     "catalog": url, "children": [p.pid for p in procs]}))
        code = run_until_stopped(lambda stop: _serve_cluster(stop, args, head, nodes, token, url, procs))
    finally:
        _stop_all(procs)
        with contextlib.suppress(OSError):
            if json.loads(state.read_text()).get("pid") == os.getpid():
                state.unlink()
        os.close(parent_w)
    print("cluster stopped", file=sys.stderr)
    return code


async def _serve_cluster(stop: asyncio.Event, args: argparse.Namespace, head: str, nodes: list[str],
                         token: str, url: str, procs: list[subprocess.Popen]) -> int:
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGHUP, stop.set)  # a closed terminal stops the cluster cleanly
    ready = asyncio.create_task(_wait_ready(head, nodes, token, procs, args.ready_timeout))
    stopped = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({ready, stopped}, return_when=asyncio.FIRST_COMPLETED)
    if stopped in done:
        ready.cancel()
        return EXIT_OK
    stopped.cancel()
    ready.result()
    print(f"head   {head}   catalog {url}")
    for i, n in enumerate(nodes):
        print(f"node   {n}   {spell(i)}")
    print(f"token  {token}")
    print(f"\nexport BOREAS_HEAD={head} {TOKEN_ENV}={token}")
    print("cluster is up; press Ctrl-C to stop it (or, from another shell: boreas cluster down"
          + (f" --head-port {args.head_port}" if args.head_port != DEFAULT_HEAD_PORT else "") + ")", flush=True)
    while not stop.is_set():
        dead = [p for p in procs if p.poll() is not None]
        if dead:
            print(f"error: {' '.join(dead[0].args[3:])} exited with {dead[0].returncode}; "
                  f"stopping the cluster", file=sys.stderr)
            return EXIT_FAILED
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.5)
    return EXIT_OK


def cmd_cluster_down(args: argparse.Namespace) -> int:
    clusters = _clusters()
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
    while time.monotonic() < deadline and (_running(pid, cluster.get("started"))
                                           or any(_alive(c) for c in children)):
        time.sleep(0.1)
    if _running(pid, cluster.get("started")) or any(_alive(c) for c in children):
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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    with contextlib.suppress(OSError):  # a zombie (exited, not yet reaped by its parent) is gone
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True
