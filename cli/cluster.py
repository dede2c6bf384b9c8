"""``boreas cluster up`` and ``down``, and the pipe by which a child stops when ``cluster up`` is gone.

``boreas cluster up`` is a development cluster on one machine: it starts a
Head and N durable nodes as children, each in a process group of its own,
keeps them running, and stops them when it is stopped (Ctrl-C, SIGTERM,
SIGHUP, ``boreas cluster down``) -- only then.

* **Durable nodes.**  Each node gets a data directory (its input log, local
  catalog and snapshots) under the cluster's data directory: next to an
  embedded catalog file, ``NAME.nodes/HOST-PORT`` for ``NAME.db``
  (``./boreas-catalog.nodes/localhost-15000`` by default), or ``--data-dir``.
  It lives as long as the catalog it goes with: kept when the catalog is
  resumed, emptied when the catalog is new or ``--fresh``; with a
  ``memory://`` catalog it is a temporary directory removed at the end.
* **Restarts.**  A child that exits is started again with the same command
  line (a node on its endpoint with its data directory, so it recovers its
  boxes' state from its snapshot and log; the Head rebuilds from the catalog
  store), and ``cluster up`` says so on stderr.  One that keeps dying right
  away is restarted after growing delays and, after a bounded number of
  attempts, given up with a message; the rest of the cluster keeps running
  (:mod:`.cluster_supervisor`).
* **No failover race.**  The nodes are *not* ``--shared-dir`` nodes: the
  Head fails over only nodes whose data directory it is told is shared
  (:mod:`boreas.head.failover`), so no other node ever adopts the boxes of a
  node ``cluster up`` is restarting, whatever ``--failover-after`` is; the
  restart always wins.  The Head just shows such a node as down (and, past
  ``--failover-after``, why it is not failed over) until it is back.

* **TLS** (``--tls``).  A throwaway CA and one certificate for the cluster
  are made in ``DATA/tls`` (:mod:`.cluster_certs`; kept and reused while the
  directory is), every child is started with them (``$BOREAS_TLS_*``), and
  what ``cluster up`` prints says how a client trusts them.  With
  ``--tls-client-auth`` too, every server requires the cluster's certificate
  of its clients (mutual TLS).  Certificates given with ``--tls-cert``,
  ``--tls-key`` and ``--tls-ca`` are passed on instead of made.

Each child also watches a pipe from it (``BOREAS_PARENT_FD``): when ``cluster
up`` is gone however it ended -- ``kill -9`` included -- the pipe reads
end-of-file and the child stops itself, so no Head or node is left holding
its port.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import shutil
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
from boreas.wire.tls import CA_ENV, CERT_ENV, CLIENT_AUTH_ENV, KEY_ENV, TlsConfig
from boreas.wire.tls import configure as configure_tls
from boreas.wire.tls import current as current_tls

from .cluster_registry import clusters_running, started_at, state_file
from .cluster_supervisor import Supervisor
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


async def _wait_ready(head: str, nodes: list[str], token: str, supervisor: Supervisor,
                      timeout: float) -> None:
    deadline = time.monotonic() + timeout
    async with PeerClient(token, timeout=2.0) as peers:
        while True:
            dead = supervisor.exited_early()
            if dead is not None:
                raise CommandFailed(f"a cluster process exited early: {dead.name} "
                                    f"(exit {dead.proc.returncode}; {dead.hint})")  # type: ignore[union-attr]
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


def _prepare_catalog(url: str, fresh: bool) -> tuple[str, bool]:
    """Start from an empty catalog (``--fresh``) or say which version is resumed.

    Returns the line to print and whether the catalog is empty (new, fresh or version 0).
    """
    from boreas.catalog.store import MissingCatalog, StoreError, erase_embedded, is_private, open_store

    if is_private(url):
        return f"catalog {url}: empty (kept in the Head's memory)", True
    if fresh:
        erased = erase_embedded(url)
        if erased is None:
            raise CommandFailed(f"--fresh removes an embedded catalog file; {url} is not one (remove its "
                                "contents yourself, or name a new chroot)")
        path, removed = erased
        return (f"fresh catalog: removed {path}" if removed else f"fresh catalog {path}"), True
    try:
        with open_store(url, create=False) as store:
            version = store.version()
    except MissingCatalog:
        return f"new catalog {url}", True
    except StoreError as exc:
        raise CommandFailed(str(exc)) from None
    if version == 0:
        return f"catalog {url}: empty", True
    return (f"resuming catalog version {version} from {url} (what earlier runs submitted is still "
            f"there; --fresh starts from an empty one)"), False


def _data_root(url: str, given: str | None) -> tuple[Path, bool]:
    """Where the nodes keep their data, one directory each, and whether it is temporary.

    ``--data-dir``; else next to an embedded catalog file (``NAME.nodes`` for
    ``NAME.db``); a temporary directory for a ``memory://`` catalog, which
    goes with the Head; ``./boreas-cluster.nodes`` for any other.
    """
    if given:
        return Path(given).resolve(), False
    from boreas.catalog.store import is_private

    if is_private(url):
        return Path(tempfile.mkdtemp(prefix="boreas-cluster-")), True
    if url.startswith("sqlite:"):
        from boreas.catalog.store.sqlite import sqlite_path

        return sqlite_path(url).with_suffix(".nodes"), False
    return Path.cwd() / "boreas-cluster.nodes", False


def node_dir(root: Path, endpoint: str) -> Path:
    """A node's data directory under the cluster's.

    >>> str(node_dir(Path("/c/boreas-catalog.nodes"), "localhost:15001"))
    '/c/boreas-catalog.nodes/localhost-15001'
    """
    return root / endpoint.replace(":", "-").replace("/", "-")


def _prepare_data(root: Path, empty: bool, temporary: bool) -> str:
    """Empty the nodes' data directories when their catalog is empty (it no longer has their boxes); the line.

    Every node data directory in ``root`` goes (one a durable node wrote its
    ``identity.json`` in), whatever the ports of the run that left it.
    """
    try:
        root.mkdir(parents=True, exist_ok=True)
        removed = [d for d in root.iterdir() if empty and (d / "identity.json").exists()]
        for d in removed:
            shutil.rmtree(d)
    except OSError as exc:
        raise CommandFailed(f"cannot prepare the nodes' data directory {root}: {exc}") from None
    if temporary:
        return f"data for the nodes in {root} (temporary, as the catalog is: removed when the cluster stops)"
    if removed:
        return f"data for the nodes in {root}: emptied (what it held went with an earlier catalog)"
    return f"data for the nodes in {root} (kept with the catalog; --fresh empties both)"


def cmd_cluster_up(args: argparse.Namespace) -> int:
    use_log_format(args)
    if args.nodes < 1:
        raise CommandFailed("--nodes must be at least 1")
    running = [c for c in clusters_running() if c["head_port"] == args.head_port]
    if running:
        raise CommandFailed(f"a cluster is already running with its Head on port {args.head_port} (pid "
                            f"{running[0]['pid']}); stop it with: boreas cluster down --head-port {args.head_port}")
    token = resolve_token(args.token, required=False) or new_token()
    env = {**os.environ, TOKEN_ENV: token}
    url = catalog_url(args)
    nodes = [endpoint_of(f"{args.host}:{args.base_port + i}", 15000) for i in range(args.nodes)]
    line, empty = _prepare_catalog(url, args.fresh)
    print(line, flush=True)
    data, temporary = _data_root(url, args.data_dir)
    try:
        print(_prepare_data(data, empty, temporary), flush=True)
        env.update(_cluster_tls(args, data))
        head = endpoint_url(f"{args.host}:{args.head_port}")  # https once TLS is on

        # Children read the pipe's end; when this process ends, however it ends, they read end-of-file.
        # Its read end stays open here too: a restarted child is handed it again.
        parent_r, parent_w = os.pipe()
        state = state_file(args.head_port)

        def record(pids: list[int]) -> None:
            state.write_text(json.dumps({"pid": os.getpid(), "started": started_at(os.getpid()),
                                         "head": head, "head_port": args.head_port, "nodes": nodes,
                                         "catalog": url, "data": str(data), "children": pids}))

        supervisor = Supervisor(spawn=lambda argv: _spawn(argv, env, args.verbose, parent_r),
                                say=lambda text: print(text, file=sys.stderr, flush=True), changed=record)
        logs = ["--log-format", args.log_format]  # the children log as cluster up was told to
        supervisor.add(f"head {args.host}:{args.head_port}",
                       ["head", "--catalog", url, "--listen", f"{args.host}:{args.head_port}",
                        "--nodes", ",".join(nodes), *logs],
                       hint=f"is port {args.head_port} taken? its own messages are above")
        for n in nodes:
            supervisor.add(f"node {n}", ["node", "--endpoint", n, "--head", head,
                                         "--data-dir", str(node_dir(data, n)), *logs],
                           hint=f"is port {split_endpoint(n)[1]} taken? its own messages are above")
        try:
            supervisor.start_all()
            record(supervisor.pids())
            code = run_until_stopped(lambda stop: _serve_cluster(stop, args, head, nodes, token, url, supervisor))
        finally:
            supervisor.stop_all()
            with contextlib.suppress(OSError):
                if json.loads(state.read_text()).get("pid") == os.getpid():
                    state.unlink()
            os.close(parent_r)
            os.close(parent_w)
    finally:
        if temporary:
            shutil.rmtree(data, ignore_errors=True)
    print("cluster stopped", file=sys.stderr)
    return code


async def _serve_cluster(stop: asyncio.Event, args: argparse.Namespace, head: str, nodes: list[str],
                         token: str, url: str, supervisor: Supervisor) -> int:
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGHUP, stop.set)  # a closed terminal stops the cluster cleanly
    ready = asyncio.create_task(_wait_ready(head, nodes, token, supervisor, args.ready_timeout))
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
    tls = current_tls()
    if tls.enabled:
        print(f"tls    CA {tls.ca}" + (f"   client certificate required: {tls.cert} {tls.key}" if tls.client_auth
                                       else ""))
    exports = " ".join(f"{name}={value}" for name, value in _tls_env(tls, clients=True).items())
    print(f"\nexport BOREAS_HEAD={head} {TOKEN_ENV}={token}" + (f" {exports}" if exports else ""))
    print("cluster is up; press Ctrl-C to stop it (or, from another shell: boreas cluster down"
          + (f" --head-port {args.head_port}" if args.head_port != DEFAULT_HEAD_PORT else "") + ")", flush=True)
    await supervisor.run(stop)  # a Head or node that exits is restarted; only stop ends it
    return EXIT_OK


def _cluster_tls(args: argparse.Namespace, data: Path) -> dict[str, str]:
    """With ``--tls``: make (or reuse) the cluster's CA and certificate and turn TLS on here; the children's env."""
    if args.tls:
        from .cluster_certs import CertificatesFailed, make_certificates

        if args.tls_cert or args.tls_key or args.tls_ca:
            raise CommandFailed("--tls makes the cluster's certificates: give either it or --tls-cert, --tls-key "
                                "and --tls-ca, not both")
        try:
            made = make_certificates(data / "tls", args.host)
        except CertificatesFailed as exc:
            raise CommandFailed(str(exc)) from None
        configure_tls(TlsConfig(cert=str(made.cert), key=str(made.key), ca=str(made.ca),
                                client_auth=bool(args.tls_client_auth or TlsConfig.from_env().client_auth)))
        print(f"TLS: a throwaway CA and the cluster's certificate in {data / 'tls'}", flush=True)
    tls = current_tls()
    if tls.enabled and not tls.cert:
        raise CommandFailed("cluster up with TLS needs a certificate to serve with: pass --tls (a throwaway CA "
                            "and certificate are made) or --tls-cert and --tls-key")
    return _tls_env(tls, clients=False)


def _tls_env(tls: TlsConfig, clients: bool) -> dict[str, str]:
    """The ``$BOREAS_TLS_*`` of a child (``clients=False``) or of a client of the cluster (only what it needs)."""
    if not tls.enabled:
        return {}
    env = {CA_ENV: str(tls.ca)} if tls.ca else {}
    if tls.cert and (not clients or tls.client_auth):
        env[CERT_ENV] = str(tls.cert)
        if tls.key:
            env[KEY_ENV] = str(tls.key)
    if tls.client_auth and not clients:
        env[CLIENT_AUTH_ENV] = "1"
    return env
