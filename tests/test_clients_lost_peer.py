"""Clients notice a lost peer (issue 31, item 4): after the cluster goes down, ``boreas subscribe``, ``watch`` and
``region`` say so on stderr, keep trying for ``--retry-for`` seconds, then exit 1 instead of running on silently."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support.cluster import free_port, wait_until

pytestmark = pytest.mark.slow

APP = """<borealis>
  <input stream="Packet" schema="P"/> <output stream="Result" schema="P"/>
  <schema name="P"> <field name="value" type="double"/> <field name="time" type="int"/> </schema>
  <box name="pass" type="filter"> <in stream="Packet"/> <out stream="Result"/>
    <parameter name="expression.0" value="time &gt;= 0"/> </box>
</borealis>"""


def test_subscribe_watch_and_region_exit_1_after_the_cluster_goes(cluster_factory):
    cluster = cluster_factory()
    cluster.start_head()
    node = cluster.start_node()
    cluster.submit(cluster.write("app.xml", APP), cluster.write(
        "dep.xml", f'<deploy><publish stream="Packet" node="{node}"/><node endpoint="{node}" query="pass"/></deploy>'))
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
