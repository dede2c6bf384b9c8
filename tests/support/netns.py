"""Real hosts for the fault tests: one Linux network namespace per Boreas process, on a bridge of the test's own.

:class:`HostNet` makes a bridge ``btb<pid>x<n>`` in the test's (root) namespace with address ``10.231.S.1/24``
(``S``: a /24 no route of this machine uses yet), and per host a namespace ``boreas-test-<pid>-<n>-<host>``
joined to the bridge by a veth pair: the root side ``bt<pid>x<n><i>``, the host side ``eth0`` with
``10.231.S.<i+2>``.  Each namespace has only its own loopback, so a Head and its nodes talk over the bridge
as they would between machines, and the test process (the publisher, the subscriber, the checks) reaches
every host at its address.  Processes run in their namespace with ``ip netns exec``.

Faults are made with ``ip`` as an operator's network would make them: :meth:`HostNet.link_down` sets a
host's veth down (the host is cut off from everyone), :meth:`HostNet.blackhole` adds blackhole routes
between two hosts (both still reach everyone else).  :func:`netem_missing` says why ``tc netem`` cannot
be used here, if it cannot.

Teardown always runs (:meth:`HostNet.close`: processes killed, namespaces and bridge deleted); a new
:class:`HostNet` first sweeps what a killed test run left behind (names carry the run's pid; only those of
dead pids are swept, so a concurrent run is left alone).
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import signal
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

log = logging.getLogger("tests.netns")

PREFIX = "boreas-test-"
_runs = itertools.count()


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``ip ARGS``; a failure raises with ip's own message."""
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip() or result.returncode}")
    return result


def netns_missing() -> str | None:
    """Why network namespaces cannot be made here (not root, no ``ip``, the kernel refuses), or None."""
    if os.geteuid() != 0:
        return "network namespaces need root (the fault tier runs as root, as CI does)"
    name = f"{PREFIX}probe-{os.getpid()}"
    try:
        result = ip("netns", "add", name, check=False)
    except FileNotFoundError:
        return "no `ip` command (iproute2) on this machine"
    if result.returncode != 0:
        return f"`ip netns add` is not allowed here: {result.stderr.strip()}"
    ip("netns", "delete", name, check=False)
    return None


def netem_missing(namespace: str) -> str | None:
    """Why ``tc netem`` (loss, delay) cannot be used in ``namespace``, or None."""
    probe = subprocess.run(["ip", "netns", "exec", namespace, "tc", "qdisc", "add", "dev", "lo", "root",
                            "netem", "delay", "1ms"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"tc netem unavailable (kernel module sch_netem missing?): {probe.stderr.strip()}"
    subprocess.run(["ip", "netns", "exec", namespace, "tc", "qdisc", "del", "dev", "lo", "root"],
                   capture_output=True, timeout=30)
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_namespace(namespace: str) -> None:
    """SIGKILL every process left in ``namespace``, then delete it."""
    pids = ip("netns", "pids", namespace, check=False).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    ip("netns", "delete", namespace, check=False)


def sweep_stale() -> list[str]:
    """Delete the namespaces and bridges of test runs whose process is gone; their names."""
    swept = []
    for line in ip("netns", "list").stdout.splitlines():
        name = line.split()[0] if line.strip() else ""
        match = re.match(re.escape(PREFIX) + r"(\d+)-", name)
        if match and not _alive(int(match.group(1))):
            _kill_namespace(name)
            swept.append(name)
    for line in ip("-o", "link", "show", "type", "bridge").stdout.splitlines():
        match = re.match(r"\d+: (btb(\d+)x\d+)[:@]", line)
        if match and not _alive(int(match.group(2))):
            ip("link", "delete", match.group(1), check=False)
            swept.append(match.group(1))
    return swept


def _free_subnet() -> int:
    """A third octet S such that no route here covers 10.231.S.0/24 yet."""
    used = ip("-4", "route", "show", "table", "all").stdout
    start = (os.getpid() * 7) % 250 + 1
    for offset in range(250):
        octet = (start + offset) % 250 + 1
        if f"10.231.{octet}." not in used:
            return octet
    raise RuntimeError("no free 10.231.S.0/24 subnet for the test network")


@dataclass
class Host:
    """One namespace on the bridge: its name in the test, namespace, root-side veth and address."""

    name: str
    namespace: str
    veth: str
    address: str
    procs: list[subprocess.Popen] = field(default_factory=list)


class HostNet:
    """A bridge and hosts (namespaces) of one test; :meth:`close` removes all of it.

    Usage::

        net = HostNet(tmp_path)
        try:
            head = net.add_host("head")
            net.spawn(head, "head", "boreas", "head", "--listen", f"{head.address}:14000")
            with net.blackhole("head", "a"):
                ...
        finally:
            net.close()
    """

    def __init__(self, workdir: Path, env: dict[str, str] | None = None):
        swept = sweep_stale()
        if swept:
            log.warning("swept what earlier test runs left: %s", ", ".join(swept))
        self.workdir = workdir
        self.env = {**os.environ, **(env or {})}
        self.run = f"{os.getpid()}x{next(_runs) % 100}"
        self.bridge = f"btb{self.run}"
        self.subnet = _free_subnet()
        self.gateway = f"10.231.{self.subnet}.1"
        self.hosts: dict[str, Host] = {}
        self._made_bridge = False
        ip("link", "add", self.bridge, "type", "bridge")
        self._made_bridge = True
        ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")

    def add_host(self, name: str) -> Host:
        """A namespace joined to the bridge, with loopback up and the next address."""
        index = len(self.hosts)
        host = Host(name, f"{PREFIX}{os.getpid()}-{self.run.split('x')[1]}-{name}", f"bt{self.run}{index}",
                    f"10.231.{self.subnet}.{index + 2}")
        self.hosts[name] = host
        ip("netns", "add", host.namespace)
        ip("link", "add", host.veth, "type", "veth", "peer", "name", "eth0", "netns", host.namespace)
        ip("link", "set", host.veth, "master", self.bridge, "up")
        self.exec_in(host, "ip", "link", "set", "lo", "up")
        self.exec_in(host, "ip", "addr", "add", f"{host.address}/24", "dev", "eth0")
        self.exec_in(host, "ip", "link", "set", "eth0", "up")
        return host

    def exec_in(self, host: Host, *argv: str) -> subprocess.CompletedProcess:
        """Run a short command in ``host``'s namespace; a failure raises with its stderr."""
        result = subprocess.run(["ip", "netns", "exec", host.namespace, *argv], capture_output=True, text=True,
                                timeout=30)
        if result.returncode != 0:
            raise RuntimeError(f"in {host.name}: {' '.join(argv)}: {result.stderr.strip()}")
        return result

    def spawn(self, host: Host, label: str, *boreas_argv: str) -> subprocess.Popen:
        """``boreas ARGV`` (this interpreter's) running in ``host``'s namespace, logging to ``LABEL.log``."""
        return self.spawn_argv(host, label, sys.executable, "-m", "boreas.cli.main", *boreas_argv)

    def spawn_argv(self, host: Host, label: str, *argv: str) -> subprocess.Popen:
        """Any program running in ``host``'s namespace, logging to ``LABEL.log``; stopped by :meth:`close`."""
        with open(self.workdir / f"{label}.log", "ab") as out:
            proc = subprocess.Popen(["ip", "netns", "exec", host.namespace, *argv], env=self.env, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        host.procs.append(proc)
        return proc

    def log(self, label: str) -> str:
        path = self.workdir / f"{label}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    # -- faults ----------------------------------------------------------------

    @contextmanager
    def link_down(self, name: str) -> Iterator[None]:
        """``name``'s veth down for the block: the host reaches no one and no one reaches it."""
        host = self.hosts[name]
        ip("link", "set", host.veth, "down")
        try:
            yield
        finally:
            ip("link", "set", host.veth, "master", self.bridge, "up")

    @contextmanager
    def blackhole(self, one: str, other: str) -> Iterator[None]:
        """Blackhole routes between hosts ``one`` and ``other`` for the block (each drops what it would send
        the other); both still reach every other host and the test."""
        pairs = ((self.hosts[one], self.hosts[other]), (self.hosts[other], self.hosts[one]))
        for host, peer in pairs:
            self.exec_in(host, "ip", "route", "add", "blackhole", f"{peer.address}/32")
        try:
            yield
        finally:
            for host, peer in pairs:
                self.exec_in(host, "ip", "route", "del", "blackhole", f"{peer.address}/32")

    @contextmanager
    def netem(self, name: str, *spec: str) -> Iterator[None]:
        """``tc netem SPEC`` (say ``loss 10% delay 50ms``) on ``name``'s link for the block."""
        host = self.hosts[name]
        self.exec_in(host, "tc", "qdisc", "add", "dev", "eth0", "root", "netem", *spec)
        try:
            yield
        finally:
            self.exec_in(host, "tc", "qdisc", "del", "dev", "eth0", "root")

    # -- teardown --------------------------------------------------------------

    def close(self) -> None:
        """Stop every process (SIGTERM, then SIGKILL), delete the namespaces (their veths go with them) and the
        bridge.  Safe to call twice; each step runs even when an earlier one failed."""
        for host in self.hosts.values():
            for proc in host.procs:
                if proc.poll() is None:
                    proc.terminate()
        for host in self.hosts.values():
            for proc in host.procs:
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=15)
            host.procs.clear()
        for host in list(self.hosts.values()):
            _kill_namespace(host.namespace)
            ip("link", "delete", host.veth, check=False)
        self.hosts.clear()
        if self._made_bridge:
            ip("link", "delete", self.bridge, check=False)
            self._made_bridge = False
