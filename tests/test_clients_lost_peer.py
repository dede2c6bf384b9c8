"""Clients notice a lost peer (issue 31, item 4): after the cluster goes down, ``boreas subscribe``, ``watch`` and
``region`` say so on stderr, keep trying for ``--retry-for`` seconds, then exit 1 instead of running on silently."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support.cluster import free_port, wait_until
from test_slow_subscriber import one_node

pytestmark = pytest.mark.slow


def test_subscribe_watch_and_region_exit_1_after_the_cluster_goes(cluster_factory):
    cluster = cluster_factory()
    node = one_node(cluster)  # Packet -> pass (a filter) -> Result
    region = f"localhost:{free_port()}"
    argvs = {"subscribe": ["subscribe", "Result", "--retry-for", "3"],
             "watch": ["watch", "--retry-for", "3"],
             "region": ["region", "--endpoint", region, "--retry-for", "3"]}
    procs = {name: subprocess.Popen([sys.executable, "-m", "boreas.cli.main", *argv], env=cluster.env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for name, argv in argvs.items()}
    try:
        wait_until(lambda: any(s.stream == "Result" for s in cluster.head_catalog().subscriptions.values()), 30,
                   "the subscriber to register")
        wait_until(lambda: cluster.head_catalog().globals, 30, "watch to register")
        wait_until(lambda: any(r.endpoint == region for r in cluster.head_catalog().regions.values()), 30,
                   "the region to register")
        cluster.stop(node, kill=True)  # the cluster goes down: node and Head
        cluster.stop("head", kill=True)
        errors = {}
        for name, proc in procs.items():
            _, errors[name] = proc.communicate(timeout=60)
            assert proc.returncode == 1, (name, errors[name])
            assert "Traceback" not in errors[name], errors[name]
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
    assert "lost the connection from the node producing Result" in errors["subscribe"]
    assert "no node has sent Result" in errors["subscribe"]
    for name in ("watch", "region"):
        assert "lost the Head at" in errors[name] and "has not answered for 3s" in errors[name]
