"""Real Boreas processes on loopback for integration tests: a Head and nodes.

Each process is ``python -m boreas.cli.main ...`` with its own log file; the
helpers talk to them over HTTP with urllib (no shared state with the test).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from boreas.catalog.documents import read_document
from boreas.catalog.model import Catalog
from boreas.catalog.replicate import apply_update

TOKEN = "test-token-0123456789"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "xml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_consecutive_ports(count: int, avoid: tuple[int, ...] = ()) -> int:
    """A base port such that ``base .. base+count-1`` are all free now (and not in ``avoid``)."""
    import random

    for _ in range(200):
        base = random.randrange(20000, 60000 - count)
        ports = range(base, base + count)
        if any(p in avoid for p in ports):
            continue
        sockets = []
        try:
            for port in ports:
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise RuntimeError(f"no {count} consecutive free ports")


#: Seconds a Head, node or region may take to listen (mostly imports): generous, as on a loaded machine (CI's two
#: cores, or several test workers) a start-up takes many times its quiet 1-2 s; a wait, not a timing assertion.
STARTUP = 60.0


def wait_until(predicate, timeout: float = 15.0, what: str = "condition", interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def http(method: str, url: str, body: bytes | None = None, token: str | None = TOKEN,
         content_type: str = "application/xml", timeout: float = 10.0) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, method=method)
    if body is not None:
        request.add_header("Content-Type", content_type)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def take_snapshot(endpoint: str, snapshot_id: int) -> dict:
    """Have durable node ``endpoint`` take snapshot ``snapshot_id`` now, as the Head asks it to; its answer."""
    status, body = http("POST", f"http://{endpoint}/snapshot", json.dumps({"id": snapshot_id}).encode(),
                        content_type="application/json")
    assert status == 200, (endpoint, status, body[:300])
    return json.loads(body)


def get_json(url: str) -> Any:
    status, body = http("GET", url, token=None)
    assert status == 200, (url, status, body[:300])
    return json.loads(body)


def catalog_at(url: str) -> Catalog:
    status, body = http("GET", url, token=None)
    assert status == 200, (url, status)
    doc = read_document(body, url)
    return apply_update(Catalog(), doc.items, doc.version or 0)


class Cluster:
    """A Head and nodes as child processes; ``close()`` stops whatever is left."""

    def __init__(self, workdir: Path, store_url: str, pending_timeout: float = 30.0,
                 snapshot_interval: float = 0.0, failover_after: float = 0.0):
        self.workdir = workdir
        self.failover_after = failover_after
        self.store_url = store_url
        self.pending_timeout = pending_timeout
        self.snapshot_interval = snapshot_interval
        self.head_port = free_port()
        self.head = f"http://localhost:{self.head_port}"
        self.env = {**os.environ, "BOREAS_TOKEN": TOKEN, "BOREAS_HEAD": self.head}
        self.procs: dict[str, subprocess.Popen] = {}

    # -- processes -----------------------------------------------------------

    def _spawn(self, name: str, *argv: str) -> subprocess.Popen:
        log = open(self.workdir / f"{name.replace(':', '_')}.log", "ab")
        proc = subprocess.Popen([sys.executable, "-m", "boreas.cli.main", *argv], env=self.env,
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        log.close()
        self.procs[name] = proc
        return proc

    def start_head(self, *extra: str) -> None:
        self._spawn("head", "head", "--catalog", self.store_url, "--listen", f"localhost:{self.head_port}",
                    "--pending-timeout", str(self.pending_timeout),
                    "--snapshot-interval", str(self.snapshot_interval),
                    "--failover-after", str(self.failover_after), *extra)
        wait_until(lambda: self._up(f"{self.head}/status"), timeout=STARTUP, what="the Head to listen")

    def start_node(self, endpoint: str | None = None, head: bool = True, data_dir: Path | None = None,
                   shared: bool = False, extra: tuple[str, ...] = (), listen: str | None = None) -> str:
        """A node process; with ``data_dir`` it is durable (restart it with the same dir to recover).

        ``shared``: the data dir counts as shared storage (another node may adopt its boxes); ``extra``: more
        ``boreas node`` options; ``listen``: bind this instead, advertising ``endpoint``.
        """
        endpoint = endpoint or f"localhost:{free_port()}"
        where = ("--listen", listen, "--advertise", endpoint) if listen else ("--endpoint", endpoint)
        self._spawn(endpoint, "node", *where, *(["--head", self.head] if head else []),
                    *(["--data-dir", str(data_dir)] if data_dir is not None else []),
                    *(["--shared-dir"] if shared else []), *extra)
        wait_until(lambda: self._up(f"http://{endpoint}/status"), timeout=STARTUP, what=f"node {endpoint} to listen")
        if head:
            self.wait_alive(endpoint)
        return endpoint

    def start_nodes(self, count: int | None = None, *, endpoints: list[str] | None = None,
                    data_dirs: list[Path] | None = None, shared: bool = False, head: bool = True) -> list[str]:
        """Node processes started side by side (a node's start-up is mostly imports: three take the time of about
        one and a half instead of three), as :meth:`start_node` starts one; their endpoints, in order.

        ``count`` nodes on free ports, or one a given endpoint; ``data_dirs``: one a node (durable nodes).  The
        Head numbers nodes (``#0``..) in the order they register, which here need not be the list's: callers name
        the nodes by endpoint (:meth:`example` writes them into the files)."""
        if endpoints is None:
            endpoints = []
            while len(endpoints) < (count if count is not None else len(data_dirs or ())):
                endpoint = f"localhost:{free_port()}"
                if endpoint not in endpoints:
                    endpoints.append(endpoint)
        dirs = list(data_dirs) if data_dirs is not None else [None] * len(endpoints)
        assert len(dirs) == len(endpoints) and (count is None or count == len(endpoints))
        for endpoint, data_dir in zip(endpoints, dirs):
            self._spawn(endpoint, "node", "--endpoint", endpoint, *(["--head", self.head] if head else []),
                        *(["--data-dir", str(data_dir)] if data_dir is not None else []),
                        *(["--shared-dir"] if shared else []))
        for endpoint in endpoints:
            wait_until(lambda e=endpoint: self._up(f"http://{e}/status"), timeout=STARTUP,
                       what=f"node {endpoint} to listen")
        if head:
            self.wait_alive(*endpoints)
        return list(endpoints)

    def start_region(self, name: str = "default") -> str:
        """A regional component registered with the Head under ``name``; its endpoint."""
        endpoint = f"localhost:{free_port()}"
        self._spawn(f"region-{endpoint}", "region", "--endpoint", endpoint, "--name", name)
        wait_until(lambda: self._up(f"http://{endpoint}/status"), timeout=STARTUP, what=f"region {endpoint} to listen")
        wait_until(lambda: any(r.endpoint == endpoint for r in self.head_catalog().regions.values()),
                   what=f"region {endpoint} registered at the Head")
        return endpoint

    @staticmethod
    def region_status(endpoint: str) -> dict:
        return get_json(f"http://{endpoint}/status")

    def stop(self, name: str, kill: bool = False) -> None:
        proc = self.procs.pop(name)
        proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        proc.wait(timeout=15)

    def close(self) -> None:
        for name in list(self.procs):
            if self.procs[name].poll() is None:
                self.stop(name)
            else:
                self.procs.pop(name)

    def log(self, name: str) -> str:
        return (self.workdir / f"{name.replace(':', '_')}.log").read_text(errors="replace")

    @staticmethod
    def _up(url: str) -> bool:
        try:
            return http("GET", url, token=None, timeout=1.0)[0] == 200
        except OSError:
            return False

    # -- the Head ------------------------------------------------------------

    def nodes(self) -> dict[str, dict]:
        return {row["endpoint"]: row for row in get_json(f"{self.head}/nodes")["nodes"]}

    def wait_alive(self, *endpoints: str, alive: bool = True) -> None:
        def check() -> bool:
            rows = self.nodes()
            return all(rows.get(e, {}).get("alive", False) == alive for e in endpoints)

        wait_until(check, timeout=STARTUP if alive else 15.0,
                   what=f"{endpoints} to be {'up' if alive else 'down'} at the Head")

    def wait_in_sync(self, *endpoints: str) -> None:
        wait_until(lambda: all(self.nodes()[e]["in_sync"] for e in endpoints),
                   what=f"{endpoints} in sync")

    def boreas(self, *args: str, env: dict[str, str] | None = None,
               timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "boreas.cli.main", *map(str, args)],
                              env={**self.env, **(env or {})}, capture_output=True, text=True,
                              timeout=timeout, cwd=self.workdir)

    def submit(self, *files: Path | str, expect: int = 0, **kw: Any) -> subprocess.CompletedProcess:
        result = self.boreas("submit", *files, **kw)
        assert result.returncode == expect, (result.returncode, result.stdout, result.stderr)
        return result

    def head_catalog(self) -> Catalog:
        return catalog_at(f"{self.head}/catalog")

    def submission(self, submission_id: str) -> dict:
        return get_json(f"{self.head}/submissions/{submission_id}")

    # -- nodes ---------------------------------------------------------------

    @staticmethod
    def node_catalog(endpoint: str) -> Catalog:
        return catalog_at(f"http://{endpoint}/catalog")

    @staticmethod
    def node_status(endpoint: str) -> dict:
        return get_json(f"http://{endpoint}/status")

    def three_nodes(self) -> tuple[list[str], dict[int, str]]:
        """Start the Head and three nodes; the nodes, and the example ports they stand for."""
        self.start_head()
        nodes = self.start_nodes(3)
        return nodes, dict(zip((15000, 15001, 15002), nodes))

    def sensor_chain(self) -> tuple[list[str], dict[int, str]]:
        """Three nodes running examples/xml/sensor_chain (filter, map, aggregate, one per node)."""
        nodes, ports = self.three_nodes()
        self.submit(EXAMPLES / "sensor_chain.xml", self.example("sensor_chain_deploy.xml", ports))
        return nodes, ports

    def write(self, name: str, text: str) -> Path:
        path = self.workdir / name
        path.write_text(text)
        return path

    def example(self, name: str, ports: dict[int, str]) -> Path:
        """An example file with its nodes (positions "#0".., or ports ":15000"..) replaced by this cluster's."""
        text = (EXAMPLES / name).read_text()
        for port, endpoint in ports.items():
            text = (text.replace(f'"#{port - 15000}"', f'"{endpoint}"')
                    .replace(f'":{port}"', f'"{endpoint}"').replace(f'"localhost:{port}"', f'"{endpoint}"'))
        return self.write(name, text)
