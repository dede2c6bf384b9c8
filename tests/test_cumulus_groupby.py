"""Cumulus stage 1 with real processes: a single-relation GROUP BY partitioned over three nodes.

A Head and three node processes on loopback; the view
``SELECT a, SUM(b) AS total, COUNT(*) AS n FROM R GROUP BY a`` is deployed
with ``<partition box="v" segments="8">`` over the three nodes.  Three
publishers (each feeding its own member, which coordinates its batches)
stream random inserts and deletes.  After quiescence:

* the merged read of the view (``QueryClient``, every member asked) equals
  DuckDB over the rows inserted and not deleted, and so does every read the
  owner of one key answers alone, and the merged SUM, MIN and MAX;
* every member holds only the groups whose key it owns under the layout
  (its own answer, asked directly), and the members' entries add up to
  the view's groups (``GET /segments/v``, ``boreas segments v``);
* every member's catalog holds the same layout as the Head's;
* a subscriber of the view's out stream, which gets every member's
  changes, ends with the same view;
* every READ_STABLE taken every 50 ms while the publishers run equals DuckDB
  over exactly the input prefixes its positions name (a consistent cut
  across the members, never half a batch).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import zlib
from collections.abc import AsyncIterator

import duckdb
import pytest
from boreas.client.publisher import Publisher
from boreas.client.query import QueryClient
from boreas.client.subscriber import Subscriber
from boreas.m3.cumulus import Layout, slot
from support.cluster import TOKEN, get_json, wait_until

pytestmark = pytest.mark.slow

SQL = "SELECT a, SUM(b) AS total, COUNT(*) AS n FROM R GROUP BY a"
APP = f"""<borealis>
  <input stream="R" schema="RT"/>
  <schema name="RT"><field name="a" type="int"/><field name="b" type="int"/><field name="sign" type="int"/></schema>
  <box name="v" type="m3">
    <in stream="R"/>
    <out stream="V"/>
    <parameter name="sql" value="{SQL}"/>
    <parameter name="sign-field" value="sign"/>
  </box>
  <output stream="V"/>
</borealis>"""


def deployment(nodes: list[str]) -> str:
    members = "".join(f'<node endpoint="{n}"/>' for n in nodes)
    return f'<deploy><partition box="v" segments="8">{members}</partition></deploy>'


def producers_for_each_member(n: int) -> list[str]:
    """Producer ids that the publisher's pick sends to members 0, 1, ..., n-1."""
    found: dict[int, str] = {}
    i = 0
    while len(found) < n:
        name = f"groupby-{i}"
        found.setdefault(zlib.crc32(name.encode()) % n, name)
        i += 1
    return [found[m] for m in range(n)]


def workload(seed: str, count: int) -> list[tuple[int, int, int]]:
    """Random inserts, and deletes of earlier inserts of the same producer (its order keeps them valid)."""
    rng = random.Random(seed)
    live: list[tuple[int, int]] = []
    rows = []
    for _ in range(count):
        if live and rng.random() < 0.25:
            a, b = live.pop(rng.randrange(len(live)))
            rows.append((a, b, -1))
        else:
            a, b = rng.randrange(150), rng.randrange(-50, 1000)
            live.append((a, b))
            rows.append((a, b, 1))
    return rows


VIEW_SQL = "SELECT a, SUM(b * sign), SUM(sign) FROM R {where} GROUP BY a HAVING SUM(sign) <> 0"


def _loaded(columns: str, rows: list[tuple]) -> duckdb.DuckDBPyConnection:
    """A DuckDB table R of integer rows (one multi-row INSERT: executemany takes seconds for thousands)."""
    con = duckdb.connect()
    con.execute(f"CREATE TABLE R({columns})")
    if rows:
        con.execute("INSERT INTO R VALUES " + ",".join("(" + ", ".join(str(int(v)) for v in r) + ")" for r in rows))
    return con


def expected_view(rows: list[tuple[int, int, int]]) -> dict[tuple, tuple]:
    found = _loaded("a BIGINT, b BIGINT, sign INT", rows).execute(VIEW_SQL.format(where="")).fetchall()
    return {(a,): (total, n) for a, total, n in found}


class PrefixViews:
    """The view over any per-producer prefix of ``data`` (as a READ_STABLE's positions name it), from DuckDB
    loaded once: each prefix is one query, so hundreds of stable reads are checked in seconds.

    >>> views = PrefixViews({"p": [(1, 5, 1)] * BATCH + [(1, 7, -1)] * BATCH})
    >>> views.at([("R", "p", 0)]), views.at([("R", "p", 1)]), views.at([])
    ({(1,): (200, 40)}, {}, {})
    """

    def __init__(self, data: dict[str, list[tuple[int, int, int]]]):
        self._producers = sorted(data)
        self._con = _loaded("producer INT, i BIGINT, a BIGINT, b BIGINT, sign INT",
                            [(p, i, *row) for p, name in enumerate(self._producers)
                             for i, row in enumerate(data[name])])
        self._seen: dict[tuple, dict] = {}

    def at(self, positions) -> dict[tuple, tuple]:
        """The view over batches ``0..seq`` of each ``(stream, producer, seq)`` (none of a producer not named)."""
        upto = {producer: seq for _, producer, seq in positions}
        counts = tuple(BATCH * (upto.get(name, -1) + 1) for name in self._producers)
        if counts not in self._seen:
            where = "WHERE " + " OR ".join(f"(producer = {p} AND i < {n})" for p, n in enumerate(counts))
            found = self._con.execute(VIEW_SQL.format(where=where)).fetchall()
            self._seen[counts] = {(a,): (total, n) for a, total, n in found}
        return self._seen[counts]


BATCH = 40  # rows per publisher batch: batch seq k holds rows [40k, 40k + 40)


async def sample_stable(client: QueryClient, box: str, into: list, every: float = 0.05) -> None:
    """A READ_STABLE of ``box`` every ``every`` seconds, appended to ``into``, until cancelled."""
    while True:
        into.append(await client.query(box, stable=True))
        await asyncio.sleep(every)


@contextlib.asynccontextmanager
async def streaming(head: str, data: dict[str, list[tuple]], stable_reads: list, box: str = "v",
                    lead: float = 0.5) -> AsyncIterator[None]:
    """Publish ``data`` (producer -> rows) into ``box`` and take a READ_STABLE every 50 ms into ``stable_reads``;
    the body runs ``lead`` seconds in (layout changes while events flow); on leaving, the publishers finish
    and the sampling stops half a second later (on an error, both stop at once)."""
    async with QueryClient(head, TOKEN) as reader:
        sampling = asyncio.create_task(sample_stable(reader, box, stable_reads))
        publishing = asyncio.gather(*(publish(head, p, rows) for p, rows in data.items()))
        try:
            await asyncio.sleep(lead)
            yield
            await publishing
            await asyncio.sleep(0.5)
        finally:
            publishing.cancel()
            sampling.cancel()
            await asyncio.gather(publishing, sampling, return_exceptions=True)


async def view_becomes(head: str, box: str, expected: dict, timeout: float = 60.0) -> None:
    """Read ``box`` until it equals ``expected`` (members catch up after the input stops), at most ``timeout`` s."""
    async with QueryClient(head, TOKEN) as client:
        deadline = asyncio.get_running_loop().time() + timeout
        while (await client.query(box)).as_dict() != expected:
            assert asyncio.get_running_loop().time() < deadline, f"view {box} never equalled DuckDB"
            await asyncio.sleep(0.2)


async def publish(head: str, producer: str, rows: list[tuple]) -> None:
    async with Publisher(head, "R", TOKEN, producer=producer, batch_size=BATCH) as publisher:
        for start in range(0, len(rows), 200):
            await publisher.send(rows[start:start + 200])
            await asyncio.sleep(0.1)  # slow enough for stable epochs to end mid-stream
        assert [link.endpoint for link in publisher.links] == publisher.entries and len(publisher.entries) == 1


async def test_a_partitioned_group_by_over_three_nodes_equals_duckdb(cluster_factory):
    cluster = cluster_factory()
    await asyncio.to_thread(cluster.start_head)
    nodes = await asyncio.to_thread(cluster.start_nodes, 3)
    cluster.submit(cluster.write("app.xml", APP), cluster.write("deploy.xml", deployment(nodes)))
    head_box = get_json(f"{cluster.head}/boxes/v")
    layout = Layout.from_dict(head_box["partition"])
    assert head_box["node"] is None and layout.members == tuple(nodes) and len(layout.segments) == 8
    await asyncio.to_thread(cluster.wait_in_sync, *nodes)
    for node in nodes:  # every member's local catalog holds the same layout
        part = cluster.node_catalog(node).partitions["v"]
        assert part.layout == layout.version and len(part.segments) == 8 and part.nodes == tuple(nodes)

    producers = producers_for_each_member(3)
    data = {p: workload(p, 1500) for p in producers}
    changes: dict[tuple, tuple] = {}  # the view as its change stream tells it: each member's changes

    async def follow(subscriber: Subscriber) -> None:
        async for (a, total, n), weight in subscriber.changes():  # a changelog: -old, then +new
            if weight > 0:
                changes[(a,)] = (total, n)
            elif changes.get((a,)) == (total, n):
                del changes[(a,)]

    stable_reads: list = []

    async with Subscriber(cluster.head, "V", TOKEN) as subscriber, QueryClient(cluster.head, TOKEN) as reader:
        reading = asyncio.create_task(follow(subscriber))
        sampling = asyncio.create_task(sample_stable(reader, "v", stable_reads))
        await asyncio.gather(*(publish(cluster.head, p, rows) for p, rows in data.items()))
        await asyncio.sleep(0.5)
        sampling.cancel()
        everything = [r for rows in data.values() for r in rows]
        expected = expected_view(everything)
        await asyncio.to_thread(wait_until, lambda: {k: v for k, v in changes.items() if v[1]} == expected, 60.0,
                                "the out stream's changes to add up to the view")
        reading.cancel()

    async with QueryClient(cluster.head, TOKEN) as client:
        async def settled() -> bool:
            return (await client.query("v")).as_dict() == expected
        deadline = asyncio.get_running_loop().time() + 60
        while not await settled():
            assert asyncio.get_running_loop().time() < deadline, "the partitioned view never equalled DuckDB"
            await asyncio.sleep(0.2)
        merged = await client.query("v")
        assert sorted(merged.segments) == list(range(8)) and sorted(merged.members) == [0, 1, 2]
        totals = [t for t, _ in expected.values()]
        assert (await client.query("v", "Q1_total", agg="sum")).value == sum(totals)
        assert (await client.query("v", "Q1_total", agg="min")).value == min(totals)
        assert (await client.query("v", "Q1_total", agg="max")).value == max(totals)
        for (a,), value in list(expected.items())[:10]:  # one key: its owner alone answers
            one = await client.query("v", "V", [a])
            assert one.as_dict() == {(a,): value} and one.members == (layout.owner_of_slot(slot(a)),)

    holders: dict[int, set] = {}
    for member, node in enumerate(nodes):  # each member holds exactly the groups it owns
        answer = get_json(f"http://{node}/query/v?map=Q1_n")
        keys = {row["key"][0] for row in answer["rows"]}
        assert all(layout.owner_of_slot(slot(a)) == member for a in keys)
        assert sorted(answer["segments"]) == sorted(s.id for s in layout.segments_of(member))
        holders[member] = keys
    assert set().union(*holders.values()) == {a for (a,) in expected} and sum(map(len, holders.values())) == len(expected)
    assert all(holders.values()), "every member got some groups"

    # every READ_STABLE taken while the publishers ran equals DuckDB over the input prefixes it names
    assert len(stable_reads) >= 5
    epochs = [r.epoch for r in stable_reads]
    assert epochs == sorted(epochs) and epochs[-1] > epochs[0]
    covered = []
    prefixes = PrefixViews(data)
    for result in stable_reads:
        upto = {producer: seq for stream, producer, seq in result.positions}
        assert result.as_dict() == prefixes.at(result.positions), f"stable epoch {result.epoch}"
        assert result.age is not None and result.age >= 0
        covered.append(sum(min(len(rows), BATCH * (upto.get(p, -1) + 1)) for p, rows in data.items()))
    assert any(0 < n < len(everything) for n in covered), "some reads during the run saw part of the input"

    entries = 0
    for node in nodes:
        counted = get_json(f"http://{node}/segments/v")
        entries += sum(n for per_map in counted["segments"].values() for n in per_map.values())
    assert entries == 2 * len(expected)  # Q1_total and Q1_n, one entry per live group each

    shown = await asyncio.to_thread(cluster.boreas, "segments", "v", "--head", cluster.head)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.strip().splitlines()
    assert len(lines) == 9 and lines[0].startswith("v/0") and f"{entries:,} entries" in lines[-1]
    raw = await asyncio.to_thread(cluster.boreas, "segments", "v", "--head", cluster.head, "--json")
    assert raw.returncode == 0 and len(json.loads(raw.stdout)) == 3
