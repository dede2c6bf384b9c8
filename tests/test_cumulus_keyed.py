"""Keyed publishing into a partitioned box, with real processes (client/keyed.py).

The single-relation GROUP BY of ``test_cumulus_groupby`` partitioned over
three node processes; a :class:`~boreas.client.keyed.KeyedPublisher` routes
each row by its group key to the member owning it, one sub-producer per
member.  Checked:

* no Work row leaves the node that coordinated it (``work_rows`` of
  ``GET /segments/v``), while a plain publisher's rows do cross;
* the view equals DuckDB after the input stops;
* every READ_STABLE taken while the rows flow equals DuckDB over the
  prefix of each sub-producer's batches its positions name;
* a field the stream does not have is refused before anything is sent.
"""

from __future__ import annotations

import asyncio

import pytest
from boreas.client.keyed import KeyedPublisher
from boreas.client.publisher import Publisher
from boreas.client.query import QueryClient
from boreas.m3.cumulus import Layout
from support.cluster import TOKEN, get_json
from test_cumulus_groupby import APP, BATCH, deployment, expected_view, sample_stable, view_becomes, workload

pytestmark = pytest.mark.slow


def rows_moved(nodes: list[str]) -> tuple[int, int]:
    """Work rows the members kept on their nodes, and sent to other nodes, since they started."""
    counts = [get_json(f"http://{node}/segments/v")["work_rows"] for node in nodes]
    return sum(c["kept"] for c in counts), sum(c["sent"] for c in counts)


async def test_keyed_rows_stay_on_their_owner_and_the_view_and_stable_reads_are_exact(cluster_factory):
    cluster = cluster_factory()
    await asyncio.to_thread(cluster.start_head)
    nodes = await asyncio.to_thread(cluster.start_nodes, 3)
    cluster.submit(cluster.write("app.xml", APP), cluster.write("deploy.xml", deployment(nodes)))
    layout = Layout.from_dict(get_json(f"{cluster.head}/boxes/v")["partition"])
    await asyncio.to_thread(cluster.wait_in_sync, *nodes)

    with pytest.raises(ValueError, match="stream 'R' has no field 'zz' to route by"):
        async with KeyedPublisher(cluster.head, "R", TOKEN, box="v", key="zz"):
            pass

    rows = workload("keyed", 3000)  # deletes follow their inserts: one key, one sub-producer, in order
    batches: dict[str, list[list]] = {}  # sub-producer -> its batches, as sent
    stable_reads: list = []
    async with QueryClient(cluster.head, TOKEN) as reader:
        sampling = asyncio.create_task(sample_stable(reader, "v", stable_reads))
        try:
            async with KeyedPublisher(cluster.head, "R", TOKEN, box="v", key="a", producer="keyed",
                                      batch_size=BATCH) as publisher:
                assert publisher.layout == layout
                assert [p.entries for p in publisher.publishers] == [[n] for n in nodes]
                for start in range(0, len(rows), 200):
                    chunk = rows[start:start + 200]
                    for member, part in publisher.route(chunk).items():
                        batches.setdefault(f"keyed.{member}", []).extend(
                            part[i:i + BATCH] for i in range(0, len(part), BATCH))
                    await publisher.send(chunk)
                    await asyncio.sleep(0.1)  # slow enough for stable epochs to end mid-stream
                assert publisher.accepted == len(rows)
            await asyncio.sleep(0.5)
        finally:
            sampling.cancel()
            await asyncio.gather(sampling, return_exceptions=True)
    assert sorted(batches) == ["keyed.0", "keyed.1", "keyed.2"]
    await view_becomes(cluster.head, "v", expected_view(rows))
    kept, sent = rows_moved(nodes)
    assert (kept, sent) == (len(rows), 0), "a keyed row was coordinated away from its owner"

    assert len(stable_reads) >= 5 and stable_reads[-1].epoch > stable_reads[0].epoch
    partial = 0
    for result in stable_reads:
        upto = {producer: seq for _, producer, seq in result.positions}
        prefix = [row for name, sent_batches in batches.items()
                  for batch in sent_batches[:upto.get(name, -1) + 1] for row in batch]
        assert result.as_dict() == expected_view(prefix), f"stable epoch {result.epoch}"
        partial += 0 < len(prefix) < len(rows)
    assert partial, "some stable reads during the run saw part of the input"

    plain = [(a, 1, 1) for a in range(150)]  # the same box fed by one plain producer: its rows cross
    async with Publisher(cluster.head, "R", TOKEN, producer="plain", batch_size=BATCH) as publisher:
        await publisher.send(plain)
    await view_becomes(cluster.head, "v", expected_view(rows + plain))
    kept_after, sent_after = rows_moved(nodes)
    assert kept_after + sent_after == len(rows) + len(plain) and sent_after > 0
