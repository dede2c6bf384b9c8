"""What a snapshot keeps of a node's outputs: every batch no receiver acknowledged, sent again after a restart.

In process, no sockets: links that never connected keep what they are
given queued, which is what a link to a stopped receiver does too.  The
real-process checks are in ``test_recovery``, ``test_failover`` and
``test_partition_recovery`` (faults).
"""

from __future__ import annotations

from collections import Counter

import msgspec
from boreas.catalog.model import Catalog, Node, Subscription
from boreas.node.outputs import Outputs

NEXT, CLIENT, LATER = "localhost:15001", "localhost:17000", "localhost:17001"


def catalog(*subscriptions: Subscription) -> Catalog:
    return Catalog(nodes={NEXT: Node(NEXT)}, subscriptions={f"{s.stream}|{s.endpoint}": s for s in subscriptions})


def outputs(cat: Catalog) -> Outputs:
    out = Outputs("localhost:15000", None, "n0", Counter())
    out.follow(cat)
    return out


def pending(out: Outputs, endpoint: str) -> list[tuple[str, str, int, list]]:
    return [(b.stream, b.producer, b.seq, msgspec.msgpack.decode(bytes(b.rows))) for b in out.links[endpoint].pending()]


async def test_unacknowledged_outputs_go_to_the_same_receivers_again_in_their_order():
    cat = catalog(Subscription("S", NEXT), Subscription("S", CLIENT))
    before = outputs(cat)
    for seq in range(3):
        before.route("S", [(seq, "a")], "box~1", seq, resumable=True)
    await before.flush()  # handed to the links: not connected, so nothing is acknowledged
    before.route("S", [(3, "b")], "box~1", 3, resumable=True)  # still in the outbox
    kept = msgspec.msgpack.decode(msgspec.msgpack.encode(before.unacknowledged()))  # as the snapshot file has it

    after = outputs(cat)  # the restarted node's
    assert after.resend(kept) == 8
    want = [("S", "box~1", seq, [[seq, "a" if seq < 3 else "b"]]) for seq in range(4)]
    assert pending(after, NEXT) == want and pending(after, CLIENT) == want
    assert after.counters["batches_resent_from_snapshot"] == 8


async def test_a_stream_now_sent_elsewhere_goes_to_its_nodes_not_to_a_new_client():
    before = outputs(catalog(Subscription("S", CLIENT)))
    before.route("S", [(1, "a")], "box~1", 0, resumable=True)
    kept = before.unacknowledged()

    after = outputs(catalog(Subscription("S", NEXT), Subscription("S", LATER)))
    assert after.resend(kept) == 1
    assert pending(after, NEXT) == [("S", "box~1", 0, [[1, "a"]])]
    assert pending(after, LATER) == []  # a client that subscribed since never asked for it



async def test_a_named_subscriber_that_subscribes_again_elsewhere_gets_what_waited_for_it():
    """Paired by stream and name: what waited at the old endpoint goes to the new one, not to another subscriber."""
    out = outputs(catalog(Subscription("S", CLIENT, name="audit"), Subscription("S", NEXT)))
    for seq in range(3):
        out.route("S", [(seq, "a")], "box~1", seq, resumable=True)
    await out.flush()
    out.follow(catalog(Subscription("S", LATER, name="audit"), Subscription("S", NEXT)))
    assert [b.seq for b in out.links[LATER].pending()] == [0, 1, 2]
    out.route("S", [(3, "a")], "box~1", 3, resumable=True)
    await out.flush()
    assert [b.seq for b in out.links[LATER].pending()] == [0, 1, 2, 3]
    assert [b.seq for b in out.links[NEXT].pending()] == [0, 1, 2, 3]  # the node consumer is not disturbed
    assert CLIENT not in out.links


async def test_a_snapshot_keeps_a_named_subscribers_batches_for_it_wherever_it_resumes():
    before = outputs(catalog(Subscription("S", CLIENT, name="audit")))
    before.route("S", [(1, "a")], "box~1", 0, resumable=True)
    kept = msgspec.msgpack.decode(msgspec.msgpack.encode(before.unacknowledged()))

    other = "localhost:17002"
    after = outputs(catalog(Subscription("S", LATER, name="audit"), Subscription("S", other, name="other")))
    assert after.resend(kept) == 1
    assert pending(after, LATER) == [("S", "box~1", 0, [[1, "a"]])]
    assert pending(after, other) == []  # another named subscriber never asked for it


async def test_what_waits_for_a_named_subscriber_travels_with_the_box_that_produces_it():
    """A move: the source takes what its named subscribers had not acknowledged (sent, queued, or still in the
    outbox); the target queues it for them, and a subscriber of another name gets none of it."""
    source = outputs(catalog(Subscription("S", CLIENT, name="audit"), Subscription("S", NEXT)))
    for seq in range(3):
        source.route("S", [(seq, "a")], "box~1", seq, resumable=True)
    await source.flush()
    source.route("S", [(3, "a")], "box~1", 3, resumable=True)  # not yet handed to the link
    retained = msgspec.msgpack.decode(msgspec.msgpack.encode(source.take_retained(["S"])))
    assert source.links[CLIENT].pending() == [] and [b.seq for b in source.links[NEXT].pending()] == [0, 1, 2]

    other = "localhost:17002"
    target = outputs(catalog(Subscription("S", CLIENT, name="audit"), Subscription("S", other, name="other")))
    target.keep_retained(retained)
    assert pending(target, CLIENT) == [("S", "box~1", seq, [[seq, "a"]]) for seq in range(4)]
    assert pending(target, other) == []
