"""A Boreas cluster on real hosts (:class:`support.netns.HostNet`): the Head and each node in its own namespace,
and the Jepsen-style checks the fault tests apply after a fault has healed.

Nodes are durable (``--data-dir``) and listen on their namespace's address; the Head is told nothing about
them but its own address, as on separate machines.  Failover is off (``--failover-after 0``): a node cut off
from the Head must keep its boxes and catch up, never have them adopted elsewhere.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from boreas.catalog.model import Catalog
from boreas.catalog.store.zkserver import ZOOKEEPER_CONF, ZOOKEEPER_JAR, ZOOKEEPER_MAIN
from support.cluster import TOKEN, catalog_at, get_json, http, wait_until
from support.netns import Host, HostNet

HEAD_PORT = 14000
NODE_PORT = 15000
ZK_PORT = 2181
#: Generous: the machine the tests run on may be heavily loaded.
START_TIMEOUT = 90.0


@dataclass
class NetCluster:
    """A Head and nodes on ``net``; the hosts are named ``head`` and as :meth:`start_nodes` was told."""

    net: HostNet
    workdir: Path

    @property
    def head(self) -> str:
        return f"http://{self.net.hosts['head'].address}:{HEAD_PORT}"

    def start_zookeeper(self) -> str:
        """A standalone ZooKeeper on host ``zk`` (the Debian package's, as tests/conftest.py's), listening on
        its own address only; its ``host:port``.  Fails, never skips, when ZooKeeper is not installed."""
        host = self.net.add_host("zk")
        if shutil.which("java") is None or not ZOOKEEPER_JAR.exists():
            raise AssertionError(f"ZooKeeper is not installed (need java and {ZOOKEEPER_JAR})")
        data = self.workdir / "zk-data"
        data.mkdir()
        config = self.workdir / "zoo.cfg"
        config.write_text(f"tickTime=500\ndataDir={data}\nclientPort={ZK_PORT}\nclientPortAddress={host.address}\n"
                          "maxClientCnxns=0\nforceSync=no\nadmin.enableServer=false\n"
                          "4lw.commands.whitelist=ruok\n")
        classpath = os.pathsep.join(str(p) for p in (ZOOKEEPER_CONF, ZOOKEEPER_JAR) if p.exists())
        self.net.spawn_argv(host, "zookeeper", shutil.which("java") or "java", "-Xmx128m",
                            "-Dzookeeper.admin.enableServer=false", f"-Dzookeeper.log.dir={self.workdir}",
                            "-cp", classpath, ZOOKEEPER_MAIN, str(config))
        wait_until(lambda: _zookeeper_ok(host.address), START_TIMEOUT, "ZooKeeper to serve", 0.5)
        return f"{host.address}:{ZK_PORT}"

    def start_head(self, catalog: str | None = None) -> None:
        host = self.net.hosts.get("head") or self.net.add_host("head")
        url = catalog or "sqlite:///" + str(self.workdir / "catalog.db")
        self.catalog = url
        self.net.spawn(host, "head", "head", "--catalog", url, "--listen", f"{host.address}:{HEAD_PORT}",
                       "--failover-after", "0", "--snapshot-interval", "0")
        wait_until(lambda: _up(f"{self.head}/status"), START_TIMEOUT, "the Head to listen")

    def supervise_head(self) -> None:
        """Until the Head leads: start it again if it stopped, as its supervisor would (on ``zk://`` a Head
        cut off from ZooKeeper past most of its session timeout gives up the lead and exits with status 3,
        docs/deploy.md), or wait while it is still giving up or being elected."""
        def leading() -> bool:
            proc = self.net.hosts["head"].procs[-1]
            if proc.poll() is not None:
                assert proc.returncode == 3, (proc.returncode, self.net.log("head")[-2000:])
                self.start_head(self.catalog)
            try:
                return bool(get_json(f"{self.head}/status").get("leadership", {}).get("leading", True))
            except (OSError, AssertionError):  # not answering yet, or 503 while no Head leads
                return False

        wait_until(leading, START_TIMEOUT, "the Head to lead again")

    def start_nodes(self, *names: str) -> dict[str, str]:
        """Durable nodes on hosts ``names``, started side by side; host name -> node endpoint."""
        endpoints = {}
        for name in names:
            host: Host = self.net.add_host(name)
            endpoints[name] = f"{host.address}:{NODE_PORT}"
            self.net.spawn(host, name, "node", "--endpoint", endpoints[name], "--head", self.head,
                           "--data-dir", str(self.workdir / f"data-{name}"))
        for endpoint in endpoints.values():
            wait_until(lambda e=endpoint: _up(f"http://{e}/status"), START_TIMEOUT, f"node {endpoint} to listen")
        self.wait_alive(*endpoints.values())
        return endpoints

    def nodes(self) -> dict[str, dict]:
        return {row["endpoint"]: row for row in get_json(f"{self.head}/nodes")["nodes"]}

    def wait_alive(self, *endpoints: str) -> None:
        wait_until(lambda: all(self.nodes().get(e, {}).get("alive") for e in endpoints), START_TIMEOUT,
                   f"{endpoints} alive at the Head")

    def start_submit(self, name: str, *documents: str, timeout: float = 120.0) -> subprocess.Popen:
        """``boreas submit`` of XML ``documents`` (written as ``NAME-i.xml``) from the test's namespace, left
        running: it exits once every node involved acknowledged (:meth:`finish_submit`)."""
        paths = []
        for i, text in enumerate(documents):
            paths.append(self.workdir / f"{name}-{i}.xml")
            paths[-1].write_text(text)
        env = {**self.net.env, "BOREAS_HEAD": self.head, "BOREAS_TOKEN": TOKEN}
        return subprocess.Popen([sys.executable, "-m", "boreas.cli.main", "submit", *map(str, paths),
                                 "--timeout", str(timeout)], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    @staticmethod
    def finish_submit(proc: subprocess.Popen, timeout: float = 180.0) -> None:
        """Wait for a :meth:`start_submit`; it must have succeeded."""
        try:
            out, err = proc.communicate(timeout=timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0, (proc.returncode, out, err)

    def submit(self, name: str, *documents: str) -> None:
        self.finish_submit(self.start_submit(name, *documents))

    @staticmethod
    def node_catalog(endpoint: str) -> Catalog:
        return catalog_at(f"http://{endpoint}/catalog")

    def wait_in_sync(self, endpoints: Iterable[str], timeout: float = 90.0) -> None:
        """Wait until no node's catalog diverges from the Head's: each node holds (by its own ``/status``) the
        version of its slice the Head wants it to hold, and the Head has its acknowledgement of it.

        A node's slice is the catalog's boxes, streams and subscriptions on that node; the Head bumps a node's
        desired version only when its slice changed, so the versions compared are per node, not the Head's
        catalog version."""
        endpoints = list(endpoints)

        def diverging() -> list[str]:
            rows = self.nodes()
            problems = []
            for endpoint in endpoints:
                row = rows.get(endpoint, {})
                held = get_json(f"http://{endpoint}/status")["version"]
                if not (row.get("in_sync") and row.get("desired_version") == row.get("acked_version") == held):
                    problems.append(f"{endpoint}: holds {held}, Head wants {row.get('desired_version')}, "
                                    f"acknowledged {row.get('acked_version')}")
            return problems

        wait_until(lambda: not diverging(), timeout, f"the nodes' catalogs to match the Head's ({endpoints})", 0.5)


def _zookeeper_ok(address: str) -> bool:
    try:
        with socket.create_connection((address, ZK_PORT), timeout=2.0) as s:
            s.sendall(b"ruok")
            return s.recv(16) == b"imok"
    except OSError:
        return False


def _up(url: str) -> bool:
    try:
        return http("GET", url, token=None, timeout=2.0)[0] == 200
    except OSError:
        return False


def check_delivery(acknowledged: dict[str, int], received: list[tuple[str, int]]) -> list[str]:
    """The Jepsen-style delivery check; the violations found (empty: none).

    ``acknowledged``: producer -> rows it published and got acknowledged, numbered ``0..n-1`` in the order
    sent; ``received``: ``(producer, seq)`` in the order the subscriber got them.  Every acknowledged row
    must arrive, none twice, and each producer's in the order it was sent.  Rows sent but never
    acknowledged may arrive or not, but also only once and in order.

    >>> check_delivery({"p": 3}, [("p", 0), ("p", 1), ("p", 2)])
    []
    >>> check_delivery({"p": 4}, [("p", 0), ("p", 2), ("p", 1), ("p", 1)])
    ['p: seq 2 arrived after 0 (out of order or lost)', 'p: seq 1 arrived after 2 (out of order or lost)', \
'p: seq 1 arrived twice', 'p: 1 of 4 acknowledged rows never arrived, the first seq 3']
    """
    problems = []
    last: dict[str, int] = defaultdict(lambda: -1)
    seen: dict[str, set[int]] = defaultdict(set)
    for producer, seq in received:
        if seq in seen[producer]:
            problems.append(f"{producer}: seq {seq} arrived twice")
        elif seq != last[producer] + 1:
            problems.append(f"{producer}: seq {seq} arrived after {last[producer]} (out of order or lost)")
        seen[producer].add(seq)
        last[producer] = max(last[producer], seq)
    for producer, count in acknowledged.items():
        missing = [s for s in range(count) if s not in seen[producer]]
        if missing:
            problems.append(f"{producer}: {len(missing)} of {count} acknowledged rows never arrived, "
                            f"the first seq {missing[0]}")
    return problems
