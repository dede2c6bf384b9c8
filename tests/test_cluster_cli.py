"""``boreas cluster up``/``down`` with processes (issue 15, items 17-19).

* 17: the examples deploy to the cluster they are submitted to, whatever its
  ports (positions resolved in process: tests/test_node_positions.py).
* 18: ``cluster up`` says when it resumes a catalog and takes ``--fresh``;
  ``cluster down`` stops a cluster running in the background; killing ``cluster
  up`` (SIGKILL, SIGHUP) leaves no Head or node holding a port.
* 19: a deployment naming a node the Head does not know is refused.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from support.cluster import (
    EXAMPLES,
    catalog_at,
    free_consecutive_ports,
    free_port,
    get_json,
    wait_until,
)

def boreas(*args, env: dict | None = None, cwd: Path | None = None, timeout: float = 60):
    base = {k: v for k, v in os.environ.items() if k not in ("BOREAS_HEAD", "BOREAS_TOKEN", "BOREAS_CATALOG")}
    return subprocess.run([sys.executable, "-m", "boreas.cli.main", *map(str, args)], capture_output=True,
                          text=True, env={**base, **(env or {})}, cwd=cwd, timeout=timeout, check=False)


# -- processes ----------------------------------------------------------------------------------------------


class ClusterUp:
    """``boreas cluster up`` as a child process, on free ports, in ``cwd``."""

    def __init__(self, cwd: Path, nodes: int = 3, *extra: str):
        self.head_port = free_port()
        self.base = free_consecutive_ports(nodes, avoid=(self.head_port,))
        self.nodes = [f"localhost:{self.base + i}" for i in range(nodes)]
        self.head = f"http://localhost:{self.head_port}"
        env = {k: v for k, v in os.environ.items() if k not in ("BOREAS_HEAD", "BOREAS_TOKEN", "BOREAS_CATALOG")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "boreas.cli.main", "cluster", "up", "--nodes", str(nodes),
             "--head-port", str(self.head_port), "--base-port", str(self.base), *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd,
            start_new_session=True)
        self.lines: list[str] = []
        # its stderr (and its children's logs) is read all along: a full pipe would stall them
        self.err_lines: list[str] = []
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        try:
            while not any("press Ctrl-C" in line for line in self.lines):
                line = self.proc.stdout.readline()
                if not line:
                    self._reader.join(timeout=10)
                assert line, "".join(self.lines) + self.err
                self.lines.append(line)
            self.token = next(line.split()[1] for line in self.lines if line.startswith("token"))
            self.children = children_of(self.proc.pid)
        except BaseException:
            self.stop()
            raise

    @property
    def out(self) -> str:
        return "".join(self.lines)

    def _read_stderr(self) -> None:
        for line in self.proc.stderr:
            self.err_lines.append(line)

    @property
    def err(self) -> str:
        """What it (and its Head and nodes) wrote to stderr so far; all of it once it has exited."""
        if self.proc.poll() is not None:
            self._reader.join(timeout=10)
        return "".join(self.err_lines)

    def boreas(self, *args, **kw):
        return boreas(*args, env={"BOREAS_HEAD": self.head, "BOREAS_TOKEN": self.token}, **kw)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            self.proc.wait(timeout=30)

    def ports(self) -> list[int]:
        return [self.head_port, *(self.base + i for i in range(len(self.nodes)))]


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return sorted(found)


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:  # exited, waiting to be reaped
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def port_free(port: int) -> bool:
    """A server could listen on ``port`` again (as servers do, with SO_REUSEADDR: TIME_WAIT is no owner)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def held(node: str) -> set[str]:
    """The boxes a node holds (its local catalog)."""
    return set(catalog_at(f"http://{node}/catalog").boxes)


@pytest.mark.slow
def test_examples_deploy_to_the_cluster_they_are_submitted_to_and_unknown_nodes_are_refused(tmp_path):
    """cluster up --base-port: #0.. are its nodes; a node that never registered is refused."""
    cluster = ClusterUp(tmp_path)
    try:
        assert [line.split() for line in cluster.lines if line.startswith("node")] == [
            ["node", n, f"#{i}"] for i, n in enumerate(cluster.nodes)]
        r = cluster.boreas("submit", EXAMPLES / "sensor_chain.xml", EXAMPLES / "sensor_chain_deploy.xml")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "deployed: 3 nodes acknowledged" in r.stdout
        assert [held(n) for n in cluster.nodes] == [{"valid"}, {"to_fahrenheit"}, {"per_sensor"}]

        ghost = tmp_path / "ghost.xml"
        ghost.write_text('<deploy>\n  <node endpoint="localhost:1" query="match"/>\n</deploy>\n')
        r = cluster.boreas("submit", EXAMPLES / "trade_join.xml", ghost)
        assert r.returncode == 2, r.stdout + r.stderr
        assert f"{ghost}:2: /deploy/node: node 'localhost:1' has not registered with the Head" in r.stderr
        assert f"#0 {cluster.nodes[0]}, #1 {cluster.nodes[1]}, #2 {cluster.nodes[2]}" in r.stderr
        beyond = tmp_path / "beyond.xml"
        beyond.write_text('<deploy><node endpoint="#3" query="match"/></deploy>')
        r = cluster.boreas("submit", EXAMPLES / "trade_join.xml", beyond)
        assert r.returncode == 2 and "no node at position #3: the Head has 3 nodes" in r.stderr
        status = get_json(f"{cluster.head}/nodes")
        assert status["version"] == 1  # neither was committed
        assert {row["endpoint"] for row in status["nodes"]} == set(cluster.nodes)  # no "unseen" node
    finally:
        cluster.stop()


def test_killing_cluster_up_leaves_no_process_holding_a_port(tmp_path):
    cluster = ClusterUp(tmp_path, 1)
    try:
        assert len(cluster.children) == 2
        os.kill(cluster.proc.pid, signal.SIGKILL)
        cluster.proc.wait(timeout=10)
        wait_until(lambda: all(gone(pid) for pid in cluster.children), timeout=20,
                   what="the Head and the node to stop after their cluster up was killed")
        wait_until(lambda: all(port_free(p) for p in cluster.ports()), timeout=5, what="their ports to be free")
    finally:
        reap(cluster.children)


def reap(pids: list[int]) -> None:
    """Kill what a failed test left running."""
    for pid in pids:
        if not gone(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_two_clusters_in_one_run_each_get_their_own_deployment(tmp_path):
    """The demo on DEMO_BASE_PORT next to a cluster on other ports: each submission stays in its cluster."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = ClusterUp(tmp_path / "a")
    try:
        second = ClusterUp(tmp_path / "b")
        try:
            for cluster, app in ((first, "trade_join"), (second, "sensor_chain")):
                r = cluster.boreas("submit", EXAMPLES / f"{app}.xml", EXAMPLES / f"{app}_deploy.xml")
                assert r.returncode == 0, r.stdout + r.stderr
            assert [held(n) for n in first.nodes] == [set(), set(), {"match"}]
            assert [held(n) for n in second.nodes] == [{"valid"}, {"to_fahrenheit"}, {"per_sensor"}]
        finally:
            second.stop()
    finally:
        first.stop()


@pytest.mark.slow
def test_cluster_up_resumes_its_catalog_and_says_so_or_starts_fresh(tmp_path):
    cluster = ClusterUp(tmp_path, 3)
    try:
        assert cluster.lines[0].startswith("new catalog sqlite:///")
        r = cluster.boreas("submit", EXAMPLES / "trade_join.xml", EXAMPLES / "trade_join_deploy.xml")
        assert r.returncode == 0, r.stderr
    finally:
        cluster.stop()
    again = ClusterUp(tmp_path, 3)
    try:
        assert again.lines[0].startswith("resuming catalog version 1 from sqlite:///")
        assert "--fresh starts from an empty one" in again.lines[0]
        assert again.lines[1] == (f"data for the nodes in {tmp_path / 'boreas-catalog.nodes'} (kept with the "
                                  "catalog; --fresh empties both)\n")
        assert get_json(f"{again.head}/nodes")["version"] == 1
        r = again.boreas("submit", EXAMPLES / "trade_join.xml", EXAMPLES / "trade_join_deploy.xml")
        assert r.returncode == 2 and "duplicate" in r.stderr  # what the README warns of
    finally:
        again.stop()
    fresh = ClusterUp(tmp_path, 3, "--fresh")
    try:
        assert fresh.lines[0].startswith("fresh catalog: removed ")
        assert fresh.lines[1].endswith(": emptied (what it held went with an earlier catalog)\n")
        assert get_json(f"{fresh.head}/nodes")["version"] == 0
        r = fresh.boreas("submit", EXAMPLES / "trade_join.xml", EXAMPLES / "trade_join_deploy.xml")
        assert r.returncode == 0, r.stderr
    finally:
        fresh.stop()


@pytest.mark.slow
def test_cluster_down_stops_a_cluster_in_the_background(tmp_path):
    cluster = ClusterUp(tmp_path, 2)
    try:
        r = boreas("cluster", "down", "--head-port", cluster.head_port)
        assert r.returncode == 0, r.stderr
        assert f"stopped the cluster: Head {cluster.head}, 2 nodes" in r.stdout
        assert cluster.proc.wait(timeout=5) == 0
        assert all(gone(pid) for pid in cluster.children)
        assert all(port_free(p) for p in cluster.ports())
    finally:
        cluster.stop()
        reap(cluster.children)
    r = boreas("cluster", "down", "--head-port", cluster.head_port)
    assert r.returncode == 1 and "no cluster started by `boreas cluster up`" in r.stderr


@pytest.mark.slow
def test_a_hangup_stops_cluster_up_cleanly(tmp_path):
    cluster = ClusterUp(tmp_path, 1)
    try:
        cluster.proc.send_signal(signal.SIGHUP)
        assert cluster.proc.wait(timeout=30) == 0
        assert "cluster stopped" in cluster.err
        assert all(gone(pid) for pid in cluster.children)
        assert all(port_free(p) for p in cluster.ports())
    finally:
        reap(cluster.children)


def test_static_deploy_resolves_positions_with_nodes(tmp_path):
    r = boreas("deploy", EXAMPLES / "trade_join.xml", EXAMPLES / "trade_join_deploy.xml",
               "--nodes", "localhost:1,localhost:2", env={"BOREAS_TOKEN": "t"})
    assert r.returncode == 2
    assert "trade_join_deploy.xml:11: /deploy/node: no node at position #2: --nodes lists 2" in r.stderr


# -- issue 31, item 3: cluster up keeps its cluster running --------------------------------------------------


def child_serving(cluster: ClusterUp, word: str) -> int:
    """The pid of cluster up's child whose command line has ``word`` (an endpoint, or "head")."""
    for pid in children_of(cluster.proc.pid):
        with contextlib.suppress(OSError):
            if word.encode() in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[3:]:  # after python -m ...
                return pid
    raise AssertionError(f"no child of cluster up runs {word}: {children_of(cluster.proc.pid)}")


def member(cluster: ClusterUp, node: str) -> dict:
    """The Head's view of ``node`` ({} while it has not heard of it)."""
    return next((row for row in get_json(f"{cluster.head}/nodes")["nodes"] if row["endpoint"] == node), {})


def query_q3(cluster: ClusterUp) -> dict:
    r = cluster.boreas("query", "q3", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    return {tuple(row["key"]): row["value"] for row in map(json.loads, r.stdout.splitlines())}


def head_answers(cluster: ClusterUp) -> bool:
    with contextlib.suppress(OSError, AssertionError):
        return bool(get_json(f"{cluster.head}/nodes"))
    return False


@pytest.mark.slow
@pytest.mark.faults
def test_cluster_up_restarts_a_killed_node_and_head_and_nothing_is_lost(tmp_path):
    """kill -9 of a node: cluster up restarts it on its endpoint with its data directory, says so, and
    the q3 view it holds is all there (from its snapshot and its log); likewise the Head; cluster down
    then still stops everything, the restarted processes included."""
    cluster = ClusterUp(tmp_path, 2)
    try:
        data = tmp_path / "boreas-catalog.nodes"
        assert cluster.lines[1].startswith(f"data for the nodes in {data} ")
        holder = cluster.nodes[1]  # tpch_q3_deploy.xml: q3 on #1
        r = cluster.boreas("submit", EXAMPLES / "tpch_q3.xml", EXAMPLES / "tpch_q3_deploy.xml")
        assert r.returncode == 0, r.stdout + r.stderr
        assert (data / holder.replace(":", "-") / "catalog.xml").exists()
        for stream in ("Customer", "Orders"):
            r = cluster.boreas("publish", stream, "--file", EXAMPLES.parent / "data" / f"{stream.lower()}.csv")
            assert r.returncode == 0, r.stderr
        # a snapshot with customers and orders in it; the line items only in the log after it
        wait_until(lambda: member(cluster, holder)["recovery"]["last_snapshot"], timeout=60,
                   what="a complete snapshot of the node holding q3")
        r = cluster.boreas("publish", "Lineitem", "--file", EXAMPLES.parent / "data" / "lineitem.csv")
        assert r.returncode == 0, r.stderr
        before = query_q3(cluster)
        assert len(before) == 30  # README: "the same 30 rows"
        incarnation = member(cluster, holder)["incarnation"]

        os.kill(child_serving(cluster, holder), signal.SIGKILL)
        wait_until(lambda: f"node {holder} exited with -9; restarting it (1st restart)" in cluster.err,
                   timeout=30, what="cluster up to say it restarts the node")
        wait_until(lambda: (lambda m: m.get("alive") and m["incarnation"] != incarnation
                            and m["recovery"]["state"] == "ready")(member(cluster, holder)),
                   timeout=60, what="the node to be back on its endpoint, recovered")
        recovery = member(cluster, holder)["recovery"]
        assert recovery["restored_from"]  # from its snapshot (and the log after it, when a later one did not complete)
        assert query_q3(cluster) == before
        assert cluster.proc.poll() is None

        os.kill(child_serving(cluster, "head"), signal.SIGKILL)
        wait_until(lambda: f"head localhost:{cluster.head_port} exited with -9; restarting it (1st restart)"
                   in cluster.err, timeout=30, what="cluster up to say it restarts the Head")
        wait_until(lambda: head_answers(cluster) and all(member(cluster, n).get("alive") for n in cluster.nodes),
                   timeout=60, what="the restarted Head to hear from both nodes")
        assert get_json(f"{cluster.head}/nodes")["version"] == 1  # rebuilt from the catalog store
        assert query_q3(cluster) == before

        children = children_of(cluster.proc.pid)
        r = boreas("cluster", "down", "--head-port", cluster.head_port)
        assert r.returncode == 0, r.stderr
        assert cluster.proc.wait(timeout=30) == 0
        assert "cluster stopped" in cluster.err
        assert all(gone(pid) for pid in children)
        assert all(port_free(p) for p in cluster.ports())
    finally:
        cluster.stop()
