"""Health (issue 16 item 4): /healthz while the process is up, /readyz 200 or 503 naming each failing
check, on the Head, nodes, regional and global components; ``--log-format json``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

from boreas.catalog.store import StoreError
from boreas.head.service import HeadService
from boreas.node.readiness import node_checks
from boreas.node.service import NodeService
from boreas.regional.component import RegionalComponent
from boreas.regional.global_component import GlobalComponent
from boreas.regional.metrics import region_checks
from boreas.wire.client import PeerClient
from boreas.wire.health import Health
from boreas.wire.server import HttpServer
from support.cluster import TOKEN, free_port
from support.inprocess import in_process


async def probe(url: str) -> tuple[int, int, dict]:
    """(/healthz status, /readyz status, /readyz body) of the component at ``url``."""
    async with PeerClient(None) as peers:
        live, _ = await peers.request("GET", f"{url}/healthz")
        ready, body = await peers.request("GET", f"{url}/readyz")
    return live, ready, json.loads(body)


async def until_ready(url: str, timeout: float = 15.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        _, ready, body = await probe(url)
        if ready == 200:
            return body
        if time.monotonic() > deadline:
            raise AssertionError(f"{url} not ready after {timeout} s: {body}")
        await asyncio.sleep(0.1)


async def test_readyz_names_each_failing_check_and_why():
    async def slow() -> None:
        await asyncio.sleep(5)

    def broken() -> None:
        raise RuntimeError("disk on fire")

    server = HttpServer("demo", token=None)
    checks = {"fine": lambda: None, "also_fine": lambda: True, "store": lambda: "store unreachable",
              "flag": lambda: False, "broken": broken, "slow": slow}
    Health("demo", checks, timeout=0.2).add_routes(server.app)
    endpoint = await server.start("localhost", 0)
    try:
        live, ready, body = await probe(f"http://{endpoint}")
    finally:
        await server.close()
    assert (live, ready) == (200, 503)
    assert body["status"] == "not ready" and body["component"] == "demo"
    assert body["failing"] == {"store": "store unreachable", "flag": "failed",
                               "broken": "RuntimeError: disk on fire", "slow": "no answer within 0.2 s"}
    assert body["checks"]["fine"] == body["checks"]["also_fine"] == "ok"


async def test_a_node_is_ready_once_registered_and_in_sync_and_not_once_the_head_is_gone():
    head_port = free_port()
    node = NodeService(f"localhost:{free_port()}", f"http://localhost:{head_port}", TOKEN, heartbeat=0.2)
    await node.start()
    head = HeadService("memory://", TOKEN, snapshot_interval=0)
    try:
        url = f"http://{node.endpoint}"
        live, ready, body = await probe(url)
        assert (live, ready) == (200, 503)  # up, but no Head has answered yet
        assert set(body["failing"]) == {"registered", "in_sync"}
        assert "not registered with the Head" in body["failing"]["registered"]
        assert body["checks"]["recovered"] == "ok"

        await head.start("localhost", head_port)
        assert (await until_ready(f"http://localhost:{head_port}"))["checks"] == {"store": "ok", "catalog": "ok"}
        assert (await until_ready(url))["failing"] == {}

        await head.close()
        deadline = time.monotonic() + 10
        while True:  # three heartbeats unanswered (at least 3 s): no longer registered
            _, ready, body = await probe(url)
            if ready == 503:
                break
            assert time.monotonic() < deadline, body
            await asyncio.sleep(0.2)
        assert "has not answered a heartbeat" in body["failing"]["registered"]
        assert (await probe(url))[0] == 200  # still up
    finally:
        await node.close()
        await head.close()


async def test_the_head_is_not_ready_while_its_store_does_not_answer(monkeypatch):
    async with in_process() as cluster:
        assert (await probe(cluster.url))[1] == 200

        def unreachable() -> int:
            raise StoreError("zk://10.0.0.1:2181/boreas: no answer within 30 s")

        monkeypatch.setattr(cluster.head.store, "version", unreachable)
        live, ready, body = await probe(cluster.url)
    assert (live, ready) == (200, 503)
    assert list(body["failing"]) == ["store"] and "no answer within 30 s" in body["failing"]["store"]


async def test_a_recovering_or_fenced_node_is_not_ready(tmp_path):
    node = NodeService(f"localhost:{free_port()}", None, TOKEN, data_dir=tmp_path / "data")
    checks = node_checks(node)  # not started: a durable node has not replayed its log yet
    assert "recovering" in checks["recovered"]()
    assert checks["registered"]() is None and checks["in_sync"]() is None  # no Head to ask
    node.recovered.set()
    assert checks["recovered"]() is None
    node.fenced = "localhost:1"
    assert "adopted by localhost:1" in checks["recovered"]()


async def test_regional_and_global_components_are_ready_when_registered_and_in_sync():
    async with in_process(nodes=2) as cluster:
        region = RegionalComponent(cluster.url, TOKEN, name="r")
        watcher = GlobalComponent(cluster.url, TOKEN)
        assert "not registered" in (await Health("r", region_checks(region)).readiness())[1]["registered"]
        await region.start("localhost", 0)
        await watcher.start("localhost", 0)
        try:
            await cluster.deploy(region="r")
            region_url, watcher_url = f"http://{region.endpoint}", f"http://{watcher.endpoint}"
            assert (await until_ready(region_url))["checks"] == {"registered": "ok", "in_sync": "ok"}
            assert (await until_ready(watcher_url))["checks"] == {"registered": "ok", "in_sync": "ok"}

            region.catalog.versions[cluster.nodes[1].endpoint] = 0  # as if a reflection were still on its way
            _, ready, body = await probe(region_url)
            assert ready == 503 and cluster.nodes[1].endpoint in body["failing"]["in_sync"]

            await cluster.nodes[0].close()  # a member the region cannot ask
            _, ready, body = await probe(region_url)
            assert ready == 503 and "cannot ask it" in body["failing"]["in_sync"]
            cluster.nodes.pop(0)
        finally:
            await watcher.close()
            await region.close()


async def test_a_global_component_is_not_ready_before_its_copy():
    async with in_process() as cluster:
        watcher = GlobalComponent(cluster.url, TOKEN)
        server_endpoint = await watcher.server.start("localhost", 0)  # listening, not registered yet
        try:
            _, ready, body = await probe(f"http://{server_endpoint}")
        finally:
            await watcher.close(disconnect=False)
    assert ready == 503
    assert "not registered" in body["failing"]["registered"]
    assert "waiting for the full copy" in body["failing"]["in_sync"]


def test_log_format_json_writes_one_json_object_per_record(tmp_path):
    port = free_port()
    env = {**os.environ, "BOREAS_TOKEN": TOKEN}
    proc = subprocess.Popen([sys.executable, "-m", "boreas.cli.main", "head", "--catalog", "memory://",
                             "--listen", f"localhost:{port}", "--log-format", "json"],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env, text=True)
    try:
        first = proc.stderr.readline()  # the Head says where it serves once it listens
    finally:
        proc.terminate()
        _, rest = proc.communicate(timeout=20)
    lines = [line for line in (first + rest).splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert records and all({"time", "level", "logger", "message"} <= set(r) for r in records)
    assert any(f"localhost:{port}" in r["message"] for r in records)
    assert records[0]["time"].endswith("Z") and records[0]["level"] == "INFO"


def test_the_doctests_of_health_and_the_json_log_format():
    import doctest

    import boreas.cli.common
    import boreas.wire.health

    for module in (boreas.wire.health, boreas.cli.common):
        result = doctest.testmod(module)
        assert result.attempted and not result.failed, module.__name__
