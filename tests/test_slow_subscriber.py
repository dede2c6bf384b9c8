"""One subscriber that stops reading must not stall the node for everyone else (issue 15 item 1), and one
that keeps reading is never cut off by a burst (issue 31).

A client subscriber gets a buffer of its own on the node that sends to it.
By default it is judged by whether it keeps acknowledging: one that
acknowledged nothing for ``--subscriber-slow-after`` seconds while batches
waited (or that would need more than ``--subscriber-buffer-mb``) is cut off,
told how much it missed, and its reader raises; one that reads late but
keeps acknowledging gets everything, however large the burst.
``on-slow="drop"`` drops batches past a bound of its own, ``"block"`` keeps
the old back-pressure; the node's other streams and subscribers go on.
Links between nodes keep their back-pressure.
"""

from __future__ import annotations

import asyncio

import pytest
from boreas.client.publisher import Publisher
from boreas.client.subscriber import Subscriber, SubscriberTooSlow
from support.cluster import TOKEN, get_json, wait_until
from support.streams import collect

APP = """<borealis>
  <input stream="Packet" schema="P"/> <output stream="Result" schema="P"/>
  <schema name="P"> <field name="value" type="double"/> <field name="time" type="int"/> </schema>
  <box name="pass" type="filter"> <in stream="Packet"/> <out stream="Result"/>
    <parameter name="expression.0" value="time &gt;= 0"/> </box>
</borealis>"""


async def paced(publisher: Publisher, rows: list[tuple], chunk: int = 500, pause: float = 0.02) -> None:
    """Publish at a rate a reading subscriber keeps up with (~25k rows/s, far below the node's), so the only
    subscriber that falls a whole buffer behind is the one that stopped reading, not one that reads but
    shares this process's loop with a publisher bursting faster than the node's output can be read.
    (At ~50k rows/s, 5,000 ten-row batches a second, the reader in this process fell a buffer behind too
    when other work shared the two cores: load 4-7, before and after the links' direct write alike.)"""
    for i in range(0, len(rows), chunk):
        await publisher.send(rows[i:i + chunk])
        await asyncio.sleep(pause)


def one_node(cluster, *extra: str) -> str:
    cluster.start_head()
    node = cluster.start_node(extra=extra)
    app = cluster.write("app.xml", APP)
    dep = cluster.write("dep.xml", f'<deploy> <publish stream="Packet" node="{node}"/>'
                                   f' <node endpoint="{node}" query="pass"/> </deploy>')
    cluster.submit(app, dep)
    return node


@pytest.mark.slow
async def test_a_subscriber_that_stops_reading_is_cut_off_and_the_others_go_on(cluster_factory):
    cluster = cluster_factory()
    node = await asyncio.to_thread(one_node, cluster, "--subscriber-slow-after", "2")
    rows = [(1.0, n) for n in range(30_000)]
    async with Subscriber(cluster.head, "Result", TOKEN) as reader, \
            Subscriber(cluster.head, "Result", TOKEN, queue_batches=1) as stalled:
        reading = asyncio.create_task(collect(reader, len(rows), timeout=90))
        async with Publisher(cluster.head, "Packet", TOKEN, producer="slow-test", batch_size=10) as publisher:
            await paced(publisher, rows)
        assert await reading == rows  # the stalled subscriber did not hold anyone up
        links = await asyncio.to_thread(
            wait_until, lambda: (got := get_json(f"http://{node}/status")["data"]["links"])[stalled.endpoint].get(
                "slow_disconnects") and got, timeout=30, what="the stalled subscriber to be cut off")
        with pytest.raises(SubscriberTooSlow, match="read too slowly") as cut:
            await collect(stalled, len(rows), timeout=30)
        assert "no acknowledgement for" in str(cut.value) and "rows) that waited for it are dropped" in str(cut.value)
        assert links[stalled.endpoint]["dropped_batches"] > 0
        assert links[reader.endpoint].get("slow_disconnects", 0) == 0


@pytest.mark.slow
async def test_a_subscriber_that_reads_late_but_keeps_acknowledging_gets_the_whole_burst(cluster_factory):
    """A burst far beyond what a subscriber reads meanwhile (as a replay after recovery is) is retained for it,
    not cut off: the node judges it by its acknowledgements, and it stalls for less than slow-after."""
    cluster = cluster_factory()
    node = await asyncio.to_thread(one_node, cluster, "--subscriber-slow-after", "5")
    rows = [(1.0, n) for n in range(60_000)]
    async with Subscriber(cluster.head, "Result", TOKEN, queue_batches=1) as late:
        async with Publisher(cluster.head, "Packet", TOKEN, producer="burst-test", batch_size=10) as publisher:
            await publisher.send(rows)  # 6,000 batches at once: far past the old 1,024-batch buffer
        assert await collect(late, len(rows), timeout=90) == rows
        link = get_json(f"http://{node}/status")["data"]["links"][late.endpoint]
        assert link.get("slow_disconnects", 0) == 0 and link.get("dropped_batches", 0) == 0


@pytest.mark.slow
async def test_a_subscription_may_choose_to_have_batches_dropped_instead(cluster_factory):
    """``on-slow="drop"`` (``boreas subscribe --on-slow drop``): the laggard stays connected and misses
    batches, counted; the subscription carries its policy through the catalog."""
    cluster = cluster_factory()
    # every batch the box writes leaves as its own (no adaptive batching), so the laggard meets thousands
    node = await asyncio.to_thread(one_node, cluster, "--batch-rows", "1")
    rows = [(1.0, n) for n in range(30_000)]
    async with Subscriber(cluster.head, "Result", TOKEN) as reader, \
            Subscriber(cluster.head, "Result", TOKEN, queue_batches=1, on_slow="drop") as lagging:
        subscription = cluster.head_catalog().subscriptions[f"Result|{lagging.endpoint}"]
        assert subscription.on_slow == "drop"
        reading = asyncio.create_task(collect(reader, len(rows), timeout=90))
        async with Publisher(cluster.head, "Packet", TOKEN, producer="drop-test", batch_size=10) as publisher:
            await paced(publisher, rows)
        assert await reading == rows
        link = get_json(f"http://{node}/status")["data"]["links"][lagging.endpoint]
        assert link["slow_drops"] > 0 and link.get("slow_disconnects", 0) == 0 and link["connected"]
        assert lagging.failure is None


@pytest.mark.slow
async def test_boreas_subscribe_cut_off_exits_non_zero_saying_how_much_it_missed(cluster_factory):
    """The CLI never keeps running silently past a gap: its stdout is not read (a stuck pipe), the node cuts it
    off, and once it can write again it prints what it had, says what it missed and exits 1."""
    import subprocess
    import sys

    cluster = cluster_factory()
    node = await asyncio.to_thread(one_node, cluster, "--subscriber-slow-after", "2")
    cli = subprocess.Popen([sys.executable, "-m", "boreas.cli.main", "subscribe", "Result"], env=cluster.env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        await asyncio.to_thread(wait_until, lambda: any(
            s.stream == "Result" for s in cluster.head_catalog().subscriptions.values()), 30, "the CLI to subscribe")
        endpoint = next(s.endpoint for s in cluster.head_catalog().subscriptions.values() if s.stream == "Result")
        async with Publisher(cluster.head, "Packet", TOKEN, producer="cli-cut", batch_size=10) as publisher:
            await paced(publisher, [(1.0, n) for n in range(30_000)])
        await asyncio.to_thread(wait_until, lambda: get_json(f"http://{node}/status")["data"]["links"][endpoint].get(
            "slow_disconnects"), 30, "the CLI to be cut off")
        out, err = await asyncio.to_thread(cli.communicate, timeout=60)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == 1, err
    assert "read too slowly" in err and "rows) that waited for it are dropped" in err and "Traceback" not in err
    assert 0 < len(out.splitlines()) < 30_000
