"""Benchmark: moving boxes while tuples flow -- the moved box's pause, and the rest of the network.

It starts a real Head (embedded catalog) and three nodes on loopback and
deploys three small pipelines:

* ``f``: a stateless filter on Packet, published to node A;
* ``g``: an aggregate on Keyed, grouped by ``key``, whose windows never
  close, loaded with ``--groups`` groups (100,000 by default) before it moves;
* ``o1 -> o2``: a filter and a map on Other, on node C: "the rest of the
  network".

While a publisher keeps Packet and Keyed flowing, ``f`` and then ``g`` move
between A and B, each several times.  A node reports a moved box's *pause*
in ``/status``: from the moment the source took it out of its dataflow
(after its last batch there) to its first batch processed on the target.
The targets are under 100 ms for ``f`` and under 1 s for ``g``.

The rest of the network's throughput is measured by publishing ``--other``
tuples into C and timing until the subscriber has them all: once with no
move going on (the peer, same run), once while ``g`` moves back and forth;
the ratio should be 1 within noise.  On a machine with two or more cores
the Head and the two nodes a box moves between are pinned to one core, and
node C and this process to another, as if they were different machines
(``--no-pin`` lets them share, and then a move's CPU cost shows up in the
rest of the network).

Usage::

    .venv/bin/python bench/move.py [--groups 100000] [--moves 5] [--other 500000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from procs import (  # noqa: E402
    BenchError,
    Run,
    loopback_endpoints,
    run_bench,
    sqlite_catalog,
    start_head,
    start_node,
    wait_ready,
)

APP = """<borealis>
  <input stream="Packet" schema="P"/> <input stream="Keyed" schema="K"/> <input stream="Other" schema="P"/>
  <output stream="FOut" schema="P"/> <output stream="GOut" schema="G"/> <output stream="OOut" schema="P"/>
  <schema name="P"> <field name="value" type="double"/> <field name="time" type="int"/> </schema>
  <schema name="K"> <field name="key" type="int"/> <field name="time" type="int"/> <field name="value" type="double"/> </schema>
  <schema name="G"> <field name="key" type="int"/> <field name="time" type="int"/> <field name="n" type="int"/>
    <field name="total" type="double"/> </schema>
  <box name="f" type="filter"> <in stream="Packet"/> <out stream="FOut"/>
    <parameter name="expression.0" value="value &gt;= 0.0"/> </box>
  <box name="g" type="aggregate"> <in stream="Keyed"/> <out stream="GOut"/>
    <parameter name="aggregate-function.0" value="count()"/> <parameter name="aggregate-function-output-name.0" value="n"/>
    <parameter name="aggregate-function.1" value="sum(value)"/> <parameter name="aggregate-function-output-name.1" value="total"/>
    <parameter name="group-by" value="key"/> <parameter name="window-size-by" value="VALUES"/>
    <parameter name="window-size" value="1000000000"/> <parameter name="order-by" value="FIELD"/>
    <parameter name="order-on-field" value="time"/> </box>
  <box name="o1" type="filter"> <in stream="Other"/> <out stream="Mid"/>
    <parameter name="expression.0" value="value &gt;= 0.0"/> </box>
  <box name="o2" type="map"> <in stream="Mid"/> <out stream="OOut"/>
    <parameter name="expression.0" value="value * 2.0"/> <parameter name="output-field-name.0" value="value"/>
    <parameter name="expression.1" value="time"/> <parameter name="output-field-name.1" value="time"/> </box>
</borealis>"""


async def node_status(peers, node: str) -> dict:
    return await peers.call("GET", f"http://{node}/status")


async def move_and_measure(head: str, token: str, peers, box: str, a: str, b: str, moves: int,
                           until: asyncio.Event | None = None) -> list[float]:
    """Move ``box`` between ``a`` and ``b`` ``moves`` times (and on until ``until`` is set); the pauses (s)."""
    from boreas.client.optimizer import Optimizer

    pauses = []
    n = 0
    while n < moves or (until is not None and not until.is_set()):
        target = b if n % 2 == 0 else a
        before = len((await node_status(peers, target))["data"]["move_pauses"].get(box, []))
        async with Optimizer(head, token, timeout=30.0) as optimizer:
            await optimizer.move(box, target)
        deadline = time.monotonic() + 30
        while True:
            got = (await node_status(peers, target))["data"]["move_pauses"].get(box, [])
            if len(got) > before or (before == 20 and got):
                pauses.append(got[-1])
                break
            if time.monotonic() > deadline:
                raise BenchError(f"box {box} never processed a batch on {target} after moving")
            await asyncio.sleep(0.02)
        n += 1
        await asyncio.sleep(0.3)
    return pauses


async def rest_of_network(head: str, token: str, count: int) -> float:
    """Tuples/s through o1 -> o2 on node C: publish ``count`` tuples, until the subscriber has them."""
    from boreas.client.publisher import Publisher
    from boreas.client.subscriber import Subscriber

    rows = [(float(i % 100), i) for i in range(count)]
    async with Subscriber(head, "OOut", token) as subscriber:
        async def read() -> None:
            seen = 0
            async for _ in subscriber:
                seen += 1
                if seen == count:
                    return
        reading = asyncio.create_task(read())
        began = time.perf_counter()
        async with Publisher(head, "Other", token, batch_size=500) as publisher:
            await publisher.send(rows)
        await asyncio.wait_for(reading, 120)
        return count / (time.perf_counter() - began)


async def measure(args: argparse.Namespace, run: Run) -> dict:
    from boreas.client.head_api import deploy_and_wait
    from boreas.client.publisher import Publisher
    from boreas.wire.client import PeerClient

    head_ep, a, b, c = loopback_endpoints(4)
    head = start_head(run.procs, sqlite_catalog(run.tmp / "catalog.db"), head_ep)
    movers = [run.procs.children[-1].proc] + [start_node(run.procs, n, head) for n in (a, b)]
    rest = start_node(run.procs, c, head)
    if args.pin and len(os.sched_getaffinity(0)) >= 2:
        # One core for the Head and the two nodes a box moves between, the other for the rest
        # of the network and this process: as if they ran on different machines.
        first, second = sorted(os.sched_getaffinity(0))[:2]
        for proc in movers:
            os.sched_setaffinity(proc.pid, {first})
        for pid in (rest.pid, 0):
            os.sched_setaffinity(pid, {second})
    await wait_ready(run.procs, head, [a, b, c])
    deploy = f"""<deploy> <publish stream="Packet" node="{a}"/> <publish stream="Keyed" node="{a}"/>
  <publish stream="Other" node="{c}"/> <node endpoint="{a}" query="f g"/> <node endpoint="{b}" query=""/>
  <node endpoint="{c}" query="o1 o2"/> </deploy>"""
    async with PeerClient(run.token) as peers:
        await deploy_and_wait(peers, head, APP, "move_app.xml")
        await deploy_and_wait(peers, head, deploy, "move_deploy.xml")
    async with PeerClient(run.token) as peers, \
            Publisher(head, "Packet", run.token, batch_size=50) as packets, \
            Publisher(head, "Keyed", run.token, batch_size=1000) as keyed:
        await keyed.send([(k, 1, 1.0) for k in range(args.groups)])  # one open window per group
        while (await node_status(peers, a))["data"]["flow"].get("rows_in", 0) < args.groups:
            await asyncio.sleep(0.05)
        stop = asyncio.Event()

        async def trickle() -> None:  # input for the moved boxes, so each shows its first batch
            t = 2
            while not stop.is_set():
                await packets.send([(1.0, t)] * 20)
                await keyed.send([(t % args.groups, t, 1.0)] * 20)
                t += 1
                await asyncio.sleep(0.005)

        flowing = asyncio.create_task(trickle())
        try:
            await rest_of_network(head, run.token, args.other // 4)  # warm-up
            baseline = await rest_of_network(head, run.token, args.other)
            f_pauses = await move_and_measure(head, run.token, peers, "f", a, b, args.moves)
            measured = asyncio.Event()
            moving = asyncio.create_task(move_and_measure(head, run.token, peers, "g", a, b, args.moves,
                                                          until=measured))
            await asyncio.sleep(0.1)  # the first move is under way
            during = await rest_of_network(head, run.token, args.other)
            measured.set()
            g_pauses = await moving
        finally:
            stop.set()
            await flowing
    return {"f": f_pauses, "g": g_pauses, "baseline": baseline, "during": during}


def report(args: argparse.Namespace, r: dict) -> None:
    def ms(values: list[float]) -> str:
        return f"median {statistics.median(values) * 1e3:.1f} ms, max {max(values) * 1e3:.1f} ms"

    where = "moving nodes and the rest pinned to separate cores" if args.pin else "all sharing the cores"
    print(f"\nmoving boxes while tuples flow ({len(r['f'])} moves of f, {len(r['g'])} of g; "
          f"3 nodes on one machine, {where})\n")
    print(f"{'figure':44} {'measured':34} {'target':>14}")
    print(f"{'pause of a stateless filter':44} {ms(r['f']):34} {'< 100 ms':>14}")
    print(f"{f'pause of an aggregate with {args.groups:,} groups':44} {ms(r['g']):34} {'< 1 s':>14}")
    ratio = r["during"] / r["baseline"]
    print(f"{'rest of the network, no move (peer)':44} {r['baseline']:>12,.0f} tuples/s")
    print(f"{'rest of the network, while g moves':44} {r['during']:>12,.0f} tuples/s"
          f"   ratio {ratio:.2f} (1.00 = unchanged)")
    verdict = (max(r["f"]) < 0.1, max(r["g"]) < 1.0)
    print(f"\nstateless pause {'met' if verdict[0] else 'MISSED'}; aggregate pause "
          f"{'met' if verdict[1] else 'MISSED'} (by the slowest of the moves)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=100_000)
    parser.add_argument("--moves", type=int, default=5)
    parser.add_argument("--other", type=int, default=500_000)
    parser.add_argument("--no-pin", dest="pin", action="store_false",
                        help="do not pin the moving nodes and the rest of the network to different cores")
    parser.add_argument("--keep-logs", action="store_true")
    args = parser.parse_args()

    def body(run: Run) -> None:
        report(args, asyncio.run(measure(args, run)))

    return run_bench("move", body, args.keep_logs)


if __name__ == "__main__":
    sys.exit(main())
