"""A Boreas cluster on real hosts (:class:`support.netns.HostNet`): the Head and each node in its own namespace,
and the Jepsen-style checks the fault tests apply after a fault has healed.

Nodes are durable (``--data-dir``) and listen on their namespace's address; the Head is told nothing about
them but its own address, as on separate machines.  Failover is off (``--failover-after 0``): a node cut off
from the Head must keep its boxes and catch up, never have them adopted elsewhere.
"""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from boreas.catalog.model import Catalog
from support.cluster import TOKEN, catalog_at, get_json, http, wait_until
from support.netns import Host, HostNet

HEAD_PORT = 14000
NODE_PORT = 15000
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

    def start_head(self, catalog: str | None = None) -> None:
        host = self.net.add_host("head")
        url = catalog or "sqlite:///" + str(self.workdir / "catalog.db")
        self.net.spawn(host, "head", "head", "--catalog", url, "--listen", f"{host.address}:{HEAD_PORT}",
                       "--failover-after", "0", "--snapshot-interval", "0")
        wait_until(lambda: _up(f"{self.head}/status"), START_TIMEOUT, "the Head to listen")

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

    def submit(self, name: str, *documents: str, timeout: float = 120.0) -> None:
        """``boreas submit`` of XML ``documents`` (written as ``NAME-i.xml``) from the test's namespace; it
        returns once every node involved acknowledged."""
        paths = []
        for i, text in enumerate(documents):
            paths.append(self.workdir / f"{name}-{i}.xml")
            paths[-1].write_text(text)
        env = {**self.net.env, "BOREAS_HEAD": self.head, "BOREAS_TOKEN": TOKEN}
        result = subprocess.run([sys.executable, "-m", "boreas.cli.main", "submit", *map(str, paths),
                                 "--timeout", str(timeout)], env=env, capture_output=True, text=True,
                                timeout=timeout + 60)
        assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)

    def head_version(self) -> int:
        return catalog_at(f"{self.head}/catalog").version

    def node_version(self, endpoint: str) -> int:
        return catalog_at(f"http://{endpoint}/catalog").version

    @staticmethod
    def node_catalog(endpoint: str) -> Catalog:
        return catalog_at(f"http://{endpoint}/catalog")

    def wait_versions_equal(self, endpoints: Iterable[str], timeout: float = 60.0) -> int:
        """Wait until every node holds the Head's catalog version (the catch-up after a heal); that version."""
        endpoints = list(endpoints)

        def equal() -> int | None:
            version = self.head_version()
            return version if all(self.node_version(e) == version for e in endpoints) else None

        return wait_until(equal, timeout, f"the catalog versions of {endpoints} to equal the Head's")


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
