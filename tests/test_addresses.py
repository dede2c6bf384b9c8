"""``--listen`` and ``--advertise``: a server binds one address and is known by another (containers, NAT).

A node listening on every interface (``0.0.0.0``) is deployed to, fed and
read by its advertised address: the catalog names it by that, peers connect
to it, and a wildcard alone is refused as no address anyone can reach.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys

import pytest
from support.cluster import EXAMPLES, TOKEN, free_port
from support.streams import collect

from boreas.cli.addresses import Addresses, add_address_options, addresses_of
from boreas.cli.common import CommandFailed
from boreas.client.publisher import Publisher
from boreas.client.subscriber import Subscriber


def parsed(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_address_options(parser, "this node")
    return parser.parse_args(argv)


@pytest.mark.parametrize("argv, expected", [
    (("--endpoint", "h:1"), Addresses("h:1", "h:1")),
    (("--listen", "h:1"), Addresses("h:1", "h:1")),
    (("--advertise", "h:1"), Addresses("h:1", "h:1")),
    (("--listen", "0.0.0.0:1", "--advertise", "pod-3.svc:1"), Addresses("0.0.0.0:1", "pod-3.svc:1")),
    (("--endpoint", "h:1", "--listen", "0.0.0.0:9"), Addresses("0.0.0.0:9", "h:1")),
    (("--listen", "[::]:1", "--advertise", "[::1]:2"), Addresses("[::]:1", "[::1]:2")),
])
def test_what_a_server_binds_and_what_it_is_known_by(argv, expected):
    assert addresses_of(parsed(*argv), 15000) == expected


@pytest.mark.parametrize("argv, says", [
    ((), "--endpoint"),
    (("--listen", "0.0.0.0:15000"), "--advertise"),
    (("--endpoint", "0.0.0.0:15000"), "--advertise"),
    (("--listen", "h:1", "--advertise", "0.0.0.0:1"), "wildcard"),
])
def test_an_address_no_one_can_reach_is_refused_saying_what_to_give(argv, says):
    with pytest.raises(CommandFailed, match=says):
        addresses_of(parsed(*argv), 15000)


def test_a_node_told_only_a_wildcard_exits_non_zero_saying_why():
    result = subprocess.run([sys.executable, "-m", "boreas.cli.main", "node", "--listen", f"0.0.0.0:{free_port()}"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "--advertise" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.slow
async def test_nodes_listening_on_every_interface_run_a_chain_by_their_advertised_addresses(cluster_factory):
    cluster = cluster_factory()

    def deploy() -> list[str]:
        cluster.start_head()
        nodes = []
        for n in range(3):
            port = free_port()
            nodes.append(cluster.start_node(f"127.0.0.{n + 2}:{port}", listen=f"0.0.0.0:{port}"))
        cluster.submit(EXAMPLES / "sensor_chain.xml",
                       cluster.example("sensor_chain_deploy.xml", dict(zip((15000, 15001, 15002), nodes))))
        return nodes

    nodes = await asyncio.to_thread(deploy)
    catalog = cluster.head_catalog()
    assert set(cluster.nodes()) == set(nodes)  # the Head knows each node by what it advertises
    assert {box.node for box in catalog.boxes.values()} == set(nodes)
    rows = [(sensor, time, 20.0 + sensor) for time in range(0, 181) for sensor in (1, 2)]
    # the subscriber too binds every interface and is reached at an address of its own (its port the one bound)
    async with Subscriber(cluster.head, "Average", TOKEN, listen="0.0.0.0:0", advertise="127.0.0.5") as subscriber:
        assert subscriber.endpoint.startswith("127.0.0.5:")
        async with Publisher(cluster.head, "Reading", TOKEN) as publisher:
            await publisher.send(rows)
        got = await collect(subscriber, 6)  # two sensors' minutes 0, 60 and 120 (180 closes the last)
    assert sorted((sensor, start) for sensor, start, _, _ in got) == [
        (sensor, start) for sensor in (1, 2) for start in (0, 60, 120)]
    assert all(avg == pytest.approx((20.0 + sensor) * 9 / 5 + 32) for sensor, _, avg, _ in got)
