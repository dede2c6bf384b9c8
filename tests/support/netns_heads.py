"""Several Heads on real hosts: each Head in its own namespace on one ZooKeeper, and the Jepsen-style
leadership check (:func:`check_leaders`) over a history of what each Head said while a fault lasted.

The Heads listen on ``0.0.0.0`` and advertise their namespace's address (``--advertise``), as a Head on a
machine with several interfaces would; nodes, clients and the CLI are given every Head (``--head a,b``,
``$BOREAS_HEAD``) and follow the leader (boreas/wire/heads.py).  ``--session-timeout`` is short, so a
leader cut off is replaced within seconds (ZooKeeper here ticks every 500 ms).
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

from support.cluster import get_json, http, wait_until
from support.netns_cluster import HEAD_PORT, START_TIMEOUT, NetCluster

SESSION_TIMEOUT = 2.0
#: Seconds between two rounds of :class:`History` over the Heads.
POLL = 0.2


@dataclass(frozen=True)
class Sample:
    """What one Head said in one ``GET /status``: whether it led, its epoch, its catalog version."""

    head: str
    leading: bool
    epoch: int
    version: int
    sent: float = 0.0  #: monotonic time the request went out: the Head answered between ``sent`` and ``got``
    got: float = 0.0


@dataclass
class NetHeads(NetCluster):
    """Heads on hosts ``head1``, ``head2``, ... (one ``zk://`` catalog), nodes given all of them."""

    names: list[str] = field(default_factory=list)
    catalog: str = ""  #: the zk:// URL every Head serves

    @property
    def head(self) -> str:
        """Every Head in one URL (``http://a:p,b:p``): what nodes, clients and the CLI are given."""
        return "http://" + ",".join(f"{self.net.hosts[n].address}:{HEAD_PORT}" for n in self.names)

    def url(self, name: str) -> str:
        return f"http://{self.net.hosts[name].address}:{HEAD_PORT}"

    def start_heads(self, catalog: str, count: int = 2) -> None:
        """``count`` Heads on ``catalog``, each on a host of its own, started side by side; failover off."""
        self.catalog = catalog
        for i in range(1, count + 1):
            self.names.append(f"head{i}")
            self.net.add_host(self.names[-1])
        for name in self.names:
            self.restart(name, wait=False)
        for name in self.names:
            wait_until(lambda n=name: self.status(n) is not None, START_TIMEOUT, f"Head {name} to listen")
        self.leader()

    def restart(self, name: str, wait: bool = True) -> subprocess.Popen:
        """(Re)start the Head on host ``name``, as the supervisor of a Head that exited with status 3 would."""
        host = self.net.hosts[name]
        proc = self.net.spawn(host, name, "head", "--catalog", self.catalog, "--listen", f"0.0.0.0:{HEAD_PORT}",
                              "--advertise", f"{host.address}:{HEAD_PORT}", "--session-timeout",
                              str(SESSION_TIMEOUT), "--failover-after", "0", "--snapshot-interval", "0")
        if wait:
            wait_until(lambda: self.status(name) is not None, START_TIMEOUT, f"Head {name} to listen")
        return proc

    def supervise(self) -> None:
        """Start again each Head that stopped, as its supervisor would; it must have stopped with status 3
        (it lost the lead), nothing else."""
        for name in self.names:
            proc = self.net.hosts[name].procs[-1]
            if proc.poll() is not None:
                assert proc.returncode == 3, (name, proc.returncode, self.net.log(name)[-2000:])
                assert "lost the lead" in self.net.log(name)
                self.restart(name, wait=False)

    def status(self, name: str) -> dict | None:
        """``name``'s ``/status``, or None when it does not answer."""
        try:
            status, body = http("GET", f"{self.url(name)}/status", token=None, timeout=1.0)
        except OSError:
            return None
        return json.loads(body) if status == 200 else None

    def leader(self, besides: str | None = None) -> str:
        """The host name of the Head that says it leads (waiting for one; not ``besides``)."""
        def leading() -> str | None:
            for name in self.names:
                status = self.status(name) if name != besides else None
                if status and status["leadership"]["leading"]:
                    return name
            return None
        return wait_until(leading, START_TIMEOUT, "a Head to lead", 0.2)

    def nodes(self) -> dict[str, dict]:
        return {row["endpoint"]: row for row in get_json(f"{self.url(self.leader())}/nodes")["nodes"]}


class History:
    """Polls every Head's ``/status`` in a thread of its own while a case runs: the history
    :func:`check_leaders` judges.  A Head that does not answer (cut off, stopped) is left out of that round."""

    def __init__(self, cluster: NetHeads):
        self.cluster = cluster
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="netns heads history", daemon=True)

    def __enter__(self) -> History:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            for name in self.cluster.names:
                sent = time.monotonic()
                status = self.cluster.status(name)
                if status is not None:
                    lead = status["leadership"]
                    self.samples.append(Sample(name, lead["leading"], lead["epoch"], status["version"], sent,
                                               time.monotonic()))
            time.sleep(POLL)


def check_leaders(samples: list[Sample]) -> list[str]:
    """The Jepsen-style leadership check over a :class:`History`; the violations found (empty: none).

    * one leader per epoch: no epoch is claimed by two Heads;
    * no Head's catalog version ever goes back, nor its epoch while it leads;
    * no two leaders commit: the versions a leader of epoch ``e`` held all come at or before those any
      later leader held (an old leader that committed after its successor took over would hold a version
      above the successor's first);
    * no two leaders at once: no Head says it leads at an epoch after (in real time: its request was sent
      after the other's answer came back) a Head said it leads at a later epoch.

    >>> ok = [Sample("h1", True, 1, 3), Sample("h2", False, 0, 3), Sample("h2", True, 2, 3), Sample("h2", True, 2, 4)]
    >>> check_leaders(ok)
    []
    >>> check_leaders([Sample("h1", True, 1, 3), Sample("h2", True, 1, 3)])
    ['epoch 1 claimed by h1, h2']
    >>> check_leaders([Sample("h1", True, 1, 5), Sample("h2", True, 2, 4), Sample("h1", False, 1, 4)])
    ['h1: version 5 then 4', 'epoch 1 held version 5 after epoch 2 held 4 (two leaders committed)']
    >>> check_leaders([Sample("h2", True, 2, 4, 1.0, 1.1), Sample("h1", True, 1, 4, 1.2, 1.3)])
    ['h1 led at epoch 1 after h2 led at epoch 2 (two leaders at once)']
    """
    problems = []
    claims: dict[int, set[str]] = defaultdict(set)
    versions: dict[int, list[int]] = defaultdict(list)
    last_version: dict[str, int] = {}
    last_epoch: dict[str, int] = {}
    for sample in samples:
        if sample.version < last_version.get(sample.head, 0):
            problems.append(f"{sample.head}: version {last_version[sample.head]} then {sample.version}")
        last_version[sample.head] = sample.version
        if not sample.leading:
            continue
        if sample.epoch < last_epoch.get(sample.head, 0):
            problems.append(f"{sample.head}: led at epoch {last_epoch[sample.head]} then {sample.epoch}")
        last_epoch[sample.head] = sample.epoch
        claims[sample.epoch].add(sample.head)
        versions[sample.epoch].append(sample.version)
    for epoch, heads in sorted(claims.items()):
        if len(heads) > 1:
            problems.append(f"epoch {epoch} claimed by {', '.join(sorted(heads))}")
    epochs = sorted(versions)
    leads = [s for s in samples if s.leading]
    for earlier in leads:
        later = next((s for s in leads if s.epoch > earlier.epoch and s.got < earlier.sent), None)
        if later is not None:
            problems.append(f"{earlier.head} led at epoch {earlier.epoch} after {later.head} led at epoch "
                            f"{later.epoch} (two leaders at once)")
    for i, earlier in enumerate(epochs):
        for later in epochs[i + 1:]:
            if max(versions[earlier]) > min(versions[later]):
                problems.append(f"epoch {earlier} held version {max(versions[earlier])} after epoch {later} "
                                f"held {min(versions[later])} (two leaders committed)")
    return problems
