"""End of input for a partitioned box's member, at the router: its node ends the box's out stream once the
end of the box's input settled everywhere, with no producer, a producer handed away, or an adopter's
producers (node/router.py, node/stream_ends.py; docs/cumulus.md §3.13)."""

from __future__ import annotations

from support.operators import T
from test_stream_ends import NEXT, sent


class Member:
    """A partitioned box's member as the router sees it: it owes rows (``holds_end``) until a message from
    another member (its internal port 1) says the end of the box's input settled (node/cumulus/end_marks.py)."""

    takes_columns = False

    def __init__(self, inner):
        self.inner, self.settled = inner, False
        self.handed: dict[str, str] = {}  # producer -> the node its coordinator here handed it to (§6.5)
        self.pending = False  # a message said the end settles at the member's next call (settle_later)

    def moved_to(self, stream: str, producer: str) -> str | None:
        return self.handed.get(producer)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def process_from(self, port: int, rows, now: float, origin):
        if port == 1:
            self.settled = self.settled or ["settled"] in [list(r) for r in rows]
            self.pending = self.pending or ["settle_later"] in [list(r) for r in rows]
            return [(0, [(9.0, 9)])]  # its last row, emitted with the message that settles the end
        self.settled = self.settled or self.pending  # (a member runs the messages waiting at any call)
        return self.inner.process(port, rows, now)

    def holds_end(self) -> bool:
        return not self.settled


def member_router():
    from collections import Counter

    from boreas.catalog.model import Box, Catalog, InPort, Node, Subscription
    from boreas.node.box_state import BoxStates
    from boreas.node.flow_clock import FlowClock
    from boreas.node.operators.base import InternalStreams
    from boreas.node.outputs import Outputs
    from boreas.node.router import Router

    states = BoxStates()
    states.follow({"p": Box("p", "filter", (InPort("Packet"),), ("Kept",), (("expression.0", "true"),))},
                  {"Packet": T, "Kept": T})
    states.operators["p"] = Member(states.operators["p"])
    out = Outputs("localhost:15000", None, "n0", Counter())
    out.follow(Catalog(nodes={NEXT: Node(NEXT)}, subscriptions={"Kept|n": Subscription("Kept", NEXT)}))
    router = Router("localhost:15000", "n0", states, out, FlowClock(), Counter())
    router.rewire({"p": InternalStreams({"p@0": 1}, (), {})})
    return states, out, router


async def test_a_member_on_a_node_no_producer_published_to_ends_its_out_stream_once_the_end_settled():
    """No producer published Packet here: the node's input never ends, yet the member learns from the others
    that the box's input ended everywhere; its out stream ends then, after its last row (before the fix it
    never ended: the router ended a box's out streams only after its node's inputs ended)."""
    states, out, router = member_router()
    await router.enter("p@0", [["work"]], "peer", 0, "")
    assert not any(final for *_, final in sent(out, NEXT))
    await router.enter("p@0", [["settled"]], "peer", 1, "")
    assert [final for *_, final in sent(out, NEXT)] == [False, False, True]  # its rows, then the final mark
    await router.enter("p@0", [["settled"]], "peer", 2, "")
    assert sum(final for *_, final in sent(out, NEXT)) == 1  # once
    assert "p" in states.ends.state()["boxes"]  # (a snapshot keeps it: a replay ends it once)


async def test_a_member_whose_node_has_an_open_producer_waits_for_its_final_mark():
    """A producer published here and has not ended (it started after the end passed): the node's out stream
    waits for its final mark, as a node's input end always did."""
    states, out, router = member_router()
    await router.enter("Packet", [(1.0, 1)], "a", 0, "")
    await router.enter("p@0", [["settled"]], "peer", 0, "")
    assert not any(final for *_, final in sent(out, NEXT))
    await router.enter("Packet", [], "a", 1, "", final=True)
    assert sent(out, NEXT)[-1][2] and sum(final for *_, final in sent(out, NEXT)) == 1


async def test_a_member_ends_its_out_stream_though_a_producer_that_published_here_was_handed_away():
    """A coordinator here handed producer a to a member on another node (a rebalance, docs/cumulus.md §6.5), after
    a's batches came here: a's publisher sends its final mark there, and the end settles once that coordinator
    heard it; b published here and ended.  The out stream ends once the end settled (before the fix it never
    did: a counted as published here, its end never came here, and ``boreas subscribe`` waited for good)."""
    states, out, router = member_router()
    states.operators["p"].handed["a"] = "localhost:15002"
    await router.enter("Packet", [(1.0, 1)], "a", 0, "")
    await router.enter("Packet", [(1.0, 2)], "a", 1, "")
    await router.enter("Packet", [(1.0, 3)], "b", 0, "")
    await router.enter("Packet", [], "b", 1, "", final=True)
    assert not any(final for *_, final in sent(out, NEXT))
    await router.enter("p@0", [["settled"]], "peer", 0, "")
    assert sent(out, NEXT)[-1][2] and sum(final for *_, final in sent(out, NEXT)) == 1


async def test_a_producer_handed_to_a_member_on_this_node_is_still_waited_for():
    """A producer handed to another member hosted on this node still sends here: its final mark is waited for."""
    states, out, router = member_router()
    states.operators["p"].handed["a"] = "localhost:15000"
    await router.enter("Packet", [(1.0, 1)], "a", 0, "")
    await router.enter("p@0", [["settled"]], "peer", 0, "")
    assert not any(final for *_, final in sent(out, NEXT))
    await router.enter("Packet", [], "a", 1, "", final=True)
    assert sent(out, NEXT)[-1][2]


async def test_a_producers_first_batch_that_settles_the_member_counts_as_published_here():
    """The member runs the message that settles the end while it takes producer a's first batch here: a counts
    as a producer of this node, so the final mark waits for a's and comes after all of a's rows (before the fix
    the router recorded a's position after routing the batch, and the final mark went out before a's next
    batch)."""
    states, out, router = member_router()
    await router.enter("p@0", [["settle_later"]], "peer", 0, "")
    await router.enter("Packet", [(1.0, 1)], "a", 0, "")
    assert states.operators["p"].settled and not any(final for *_, final in sent(out, NEXT))
    await router.enter("Packet", [(1.0, 2)], "a", 1, "")
    await router.enter("Packet", [], "a", 2, "", final=True)
    assert [final for *_, final in sent(out, NEXT)] == [False, False, False, True]


async def test_an_adopter_takes_the_final_marks_of_the_failed_nodes_producers_with_their_positions():
    """A failover: the adopter takes the positions of the partitioned box's input on the failed node (its replay),
    so the router counts producer a, which published there, as one of this node's; a's final mark came there
    too and comes along (node/adopt.py ``take_guest_inputs``), so the out stream here ends once the end settled
    (before the fix only the positions came: a counted as open here for good)."""
    from boreas.node.adopt import take_guest_inputs

    failed, _, replayer = member_router()
    await replayer.enter("Packet", [(1.0, 1)], "a", 0, "")
    await replayer.enter("Packet", [], "a", 1, "", final=True)
    states, out, router = member_router()
    take_guest_inputs(failed, states, set(), {"Packet"})
    assert states.processed[("Packet", "a")] == 1
    await router.enter("p@0", [["settled"]], "peer", 0, "")
    assert sent(out, NEXT)[-1][2]
