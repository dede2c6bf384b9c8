"""A node's own HTTP input: garbage is a clear 4xx, never a 500, and the node keeps running."""

from __future__ import annotations

import aiohttp
import msgspec
import pytest
from boreas.node.service import NodeService
from support.cluster import TOKEN, free_port


@pytest.fixture
async def node():
    service = NodeService(f"localhost:{free_port()}", head=None, token=TOKEN)
    await service.start()
    yield service
    await service.close()


@pytest.mark.parametrize("body", [b"", b"garbage", msgspec.msgpack.encode([1]),
                                  msgspec.msgpack.encode(["<update/>", b"\x00"]),
                                  msgspec.msgpack.encode([7, 8]), msgspec.msgpack.encode(["<update/>", []])])
async def test_a_garbage_handover_is_a_400_and_the_node_keeps_running(node, body):
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/msgpack"}
    async with aiohttp.ClientSession(headers=headers) as session:
        async with session.post(f"http://{node.endpoint}/handover", data=body) as reply:
            assert reply.status in (400, 422), await reply.text()
            assert "error" in await reply.json()
        async with session.get(f"http://{node.endpoint}/status") as reply:
            assert reply.status == 200


async def test_a_snapshot_request_to_a_node_without_a_data_dir_says_why(node):
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with aiohttp.ClientSession(headers=headers) as session:
        async with session.post(f"http://{node.endpoint}/snapshot", json={"id": 1}) as reply:
            assert reply.status == 409
            assert "--data-dir" in (await reply.json())["error"]


def test_a_publisher_keeps_a_bounded_list_of_refused_rows_and_counts_all():
    from boreas.client.publisher import MAX_REFUSED_KEPT, Publisher
    from boreas.wire.frames import Ack, make_batch

    publisher = Publisher("http://localhost:1", "S", None)
    for seq in range(5):
        errors = [(row, "x", "bad") for row in range(MAX_REFUSED_KEPT)]
        publisher._replied(make_batch("S", "p", seq, []), Ack("S", "p", seq, 0, errors))
    assert publisher.refused_count == 5 * MAX_REFUSED_KEPT
    assert len(publisher.refused) == MAX_REFUSED_KEPT
    publisher._replied(make_batch("S", "p", 9, []), Ack("S", "p", 9, 0, duplicate=True))
    assert publisher.duplicates == 1


UPDATE = """<update version="{version}"><schema name="T"><field name="x" type="int"/></schema>
<input stream="S" schema="T"/> <box name="{name}" type="{type}"><in stream="S"/><out stream="O{name}"/>{params}</box>
</update>"""


@pytest.mark.parametrize("name, type_, params, reason", [
    ("odd", "nonsense", "", "unknown box type 'nonsense'"),
    ("typo", "filter", '<parameter name="expression.0" value="y &gt;"/>', "does not parse"),
    ("view", "m3", '<parameter name="sql" value="SELECT nonsense"/>', "m3 box 'view'"),
])
async def test_an_update_with_a_box_the_node_cannot_run_is_refused_whole(node, name, type_, params, reason):
    """Validated before anything changes: a 422 naming the box and why; the node keeps what it had."""
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/xml"}
    good = UPDATE.format(version=1, name="good", type="filter", params='<parameter name="expression.0" value="x &gt; 1"/>')
    async with aiohttp.ClientSession(headers=headers) as session:
        async with session.post(f"http://{node.endpoint}/update", data=good) as reply:
            assert reply.status == 200
        bad = UPDATE.format(version=2, name=name, type=type_, params=params)
        async with session.post(f"http://{node.endpoint}/update", data=bad) as reply:
            assert reply.status == 422, await reply.text()
            body = await reply.json()
        assert reason in body["error"]
        assert body["diagnostics"] and reason in body["diagnostics"][0]["reason"]
        assert node.local.version == 1 and sorted(node.local.catalog.boxes) == ["good"]
        assert node.dataflow.state.broken == {}
        async with session.get(f"http://{node.endpoint}/status") as reply:
            status = await reply.json()
    assert status["counters"]["updates_rejected"] == 1
    assert status["data"]["broken_boxes"] == {}
