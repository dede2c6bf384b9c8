"""Submission ids outlive the Head that took them: their records are in the catalog store, so after a
failover the next leader answers ``GET /submissions/{id}`` and a client's wait for the outcome carries on.

docs/architecture.md, "Leadership and fencing" (the state table's submission row).
"""

from __future__ import annotations

import asyncio
import signal

import pytest
from support.cluster import TOKEN, get_json, http
from test_head_failover_ha import APP, heads  # noqa: F401  (the fixture: several Heads on one zk:// catalog)

from boreas.catalog.store import open_store
from boreas.client.head_api import submit_documents, wait_submission
from boreas.head.submissions import STORED, SubmissionLog
from boreas.wire.client import PeerClient


def test_another_head_finds_a_submission_by_its_id_until_its_slot_is_reused():
    """Two Heads' logs on one store: the second never saw the submission, and reads it back by id."""
    store = open_store("memory://")
    try:
        taker, successor = SubmissionLog(lambda: store), SubmissionLog(lambda: store)
        sub = taker.add(7, ["app.xml", "deploy.xml"], {"kept": ["a"]})
        asyncio.run(taker.keep(sub))

        found = asyncio.run(successor.find(sub.id, ["localhost:15000"]))
        assert found is not None
        assert (found.id, found.version, found.sources, found.changes) == (sub.id, 7, ["app.xml", "deploy.xml"],
                                                                           {"kept": ["a"]})
        assert found.affected == ["localhost:15000"]  # it never saw the commit: every node stands for it
        assert asyncio.run(successor.find("7-0000000000", [])) is None  # the right slot, another id

        later = taker.add(7 + STORED, ["other.xml"])  # the same slot, STORED catalog versions later
        asyncio.run(taker.keep(later))
        assert asyncio.run(SubmissionLog(lambda: store).find(sub.id, [])) is None
        assert asyncio.run(SubmissionLog(lambda: store).find(later.id, [])) is not None
    finally:
        store.close()


async def _submit_kill_wait(head: str, files: list[tuple[str, bytes]], kill) -> tuple[dict, dict]:
    async with PeerClient(TOKEN, timeout=60) as peers:
        first = await submit_documents(peers, head, files)
        await asyncio.to_thread(kill)  # the leader that acknowledged it dies before the client asks again
        return first, await wait_submission(peers, head, first, timeout=90)


@pytest.mark.slow
@pytest.mark.zookeeper
def test_a_wait_for_a_submission_succeeds_through_the_next_leader_after_kill_9(heads):  # noqa: F811
    cluster = heads(2)
    cluster.start_heads()
    leader = cluster.leader()
    follower = next(url for url in cluster.urls if url != leader)
    node = cluster.start_node()
    deploy = f'<deploy> <publish stream="In" node="{node}"/> <node endpoint="{node}" query="keep"/> </deploy>'
    files = [("app.xml", APP.encode()), ("deploy.xml", deploy.encode())]

    first, last = asyncio.run(_submit_kill_wait(cluster.head, files, lambda: cluster.kill(leader)))

    assert first["state"] in ("committed", "deploying", "deployed")
    assert (last["id"], last["version"], last["state"]) == (first["id"], first["version"], "deployed")
    assert last["nodes"][node]["state"] == "acknowledged"
    assert cluster.leader() == follower
    assert get_json(f"{follower}/submissions/{first['id']}")["state"] == "deployed"
    assert "keep" in cluster.node_catalog(node).boxes
    assert http("GET", f"{follower}/submissions/{first['version']}-0000000000")[0] == 404
