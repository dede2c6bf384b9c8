"""A Head, nodes and components in this test's own event loop, on free loopback ports.

Quicker than processes (``support.cluster``) and lets a test look inside the
components; each has its own metrics registry, so several in one process
must not see each other's series (that is part of what the tests check).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from boreas.client.head_api import submit_documents, wait_submission
from boreas.head.service import HeadService
from boreas.node.service import NodeService
from boreas.wire.client import PeerClient

from support.cluster import TOKEN, free_port

#: Reading -> valid (filter, node 0) -> Valid -> to_fahrenheit (map, node 1) -> Converted,
#: and Valid -> totals (an m3 box, node 1: the sum of readings per sensor) -> Totals.
APPLICATION = """<borealis>
  <input stream="Reading" schema="R"/> <output stream="Converted" schema="F"/>
  <schema name="R"><field name="sensor" type="int"/><field name="celsius" type="double"/></schema>
  <schema name="F"><field name="sensor" type="int"/><field name="fahrenheit" type="double"/></schema>
  <schema name="T"><field name="sensor" type="int"/><field name="total" type="double"/></schema>
  <output stream="Totals" schema="T"/>
  <query name="cleanup"><box name="valid" type="filter"><in stream="Reading"/><out stream="Valid"/>
    <parameter name="expression.0" value="celsius &gt; -90.0"/></box></query>
  <query name="convert"><box name="to_fahrenheit" type="map"><in stream="Valid"/><out stream="Converted"/>
    <parameter name="expression.0" value="sensor"/><parameter name="output-field-name.0" value="sensor"/>
    <parameter name="expression.1" value="celsius * 9.0 / 5.0 + 32.0"/>
    <parameter name="output-field-name.1" value="fahrenheit"/></box>
    <box name="totals" type="m3"><in stream="Valid"/><out stream="Totals"/>
    <parameter name="sql" value="CREATE STREAM valid(sensor INT, celsius DOUBLE);&#10;
SELECT sensor, SUM(celsius) AS total FROM valid GROUP BY sensor"/></box></query>
</borealis>"""


def deployment(nodes: list[str], region: str | None = None) -> str:
    regions = "".join(f'<region name="{region}" node="{n}"/>' for n in nodes) if region else ""
    return (f'<deploy><publish stream="Reading" node="{nodes[0]}"/>'
            f'<node endpoint="{nodes[0]}" query="cleanup"/><node endpoint="{nodes[1]}" query="convert"/>'
            f"{regions}</deploy>")


@dataclass
class InProcess:
    head: HeadService
    nodes: list[NodeService] = field(default_factory=list)
    url: str = ""

    def node_url(self, i: int) -> str:
        return f"http://{self.nodes[i].endpoint}"

    async def start_node(self, head: bool = True, data_dir: Path | None = None) -> NodeService:
        node = NodeService(f"localhost:{free_port()}", self.url if head else None, TOKEN, heartbeat=0.2,
                           data_dir=data_dir)
        await node.start()
        self.nodes.append(node)
        if head:  # a deployment naming a node the Head has not heard of is refused
            await asyncio.wait_for(node.registered.wait(), 10)
        return node

    async def deploy(self, region: str | None = None, timeout: float = 20.0) -> dict:
        endpoints = [n.endpoint for n in self.nodes]
        async with PeerClient(TOKEN) as peers:
            status = await submit_documents(peers, self.url, [("app.xml", APPLICATION.encode()),
                                                              ("deploy.xml", deployment(endpoints, region).encode())])
            status = await wait_submission(peers, self.url, status, timeout)
        assert status["state"] == "deployed", status
        return status


@contextlib.asynccontextmanager
async def in_process(nodes: int = 0) -> AsyncIterator[InProcess]:
    """A Head on a memory catalog, and ``nodes`` nodes registered with it."""
    head = HeadService("memory://", TOKEN, snapshot_interval=0, heartbeat_timeout=3.0)
    running = InProcess(head)
    try:
        running.url = "http://" + await head.start("localhost", free_port())
        for _ in range(nodes):
            await running.start_node()
        yield running
    finally:
        for node in running.nodes:
            await node.close()
        await head.close()
