"""Producers handed to another coordinator while batches flow, in process (docs/cumulus.md §6.5).

The simulated cluster of ``support.cumulus_sim`` (real PartOperators,
messages delivered in random order per link) runs named producers, each
sending to the member it picks.  A node is grown in by a change that also
lists it as a coordinator, later emptied and retired by a change that takes
it off the list: each time, the producers whose rendezvous pick changed are
handed over at the change's first epoch.  A producer's batches that still
reach its old coordinator are forwarded; the node's acknowledgement names
the new one (:meth:`PartOperator.moved_to`), and the publisher then sends
there, sending again the last batches it had not seen acknowledged (as a
redirected link does); members restart from their state now and then.  Every stable read taken equals the single runtime
over exactly the batches its positions name (each producer's prefix), the
members' maps end as the runtime's, and the grown member stamped batches of
producers it was handed.
"""

from __future__ import annotations

import dataclasses
import random
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent / "m3"))
from support.cumulus_sim import Sim  # noqa: E402
from test_cumulus_failover_sim import _shape, check_members  # noqa: E402
from test_cumulus_sim import check_stable, layouts, workloads  # noqa: E402
from test_views_vs_duckdb import SHAPES  # noqa: E402

from boreas.m3.cumulus import relayout as changes  # noqa: E402
from boreas.m3.cumulus.coordinators import pick  # noqa: E402

PRODUCERS = 6  # per relation


class Publishers:
    """Named producers, each sending to one member and following the acknowledgement's hint."""

    def __init__(self, sim: Sim, rng: random.Random):
        self.sim, self.rng = sim, rng
        self.entry: dict[tuple[str, str], int] = {}  # (relation, producer) -> the member it sends to
        self.unacked: dict[tuple[str, str], list[int]] = {}  # the last seqs it may not have seen acknowledged
        self.redirected = 0

    def feed(self, workload, each=None) -> None:
        sim = self.sim
        for rel, events, which, deliveries in workload:
            producer = f"{rel}-{which % PRODUCERS}"
            key = (rel, producer)
            member = self.entry.setdefault(key, pick(producer, sim.coordinators))
            seq = sim.publish_as(member, rel, producer, events)
            self.unacked[key] = (self.unacked.get(key, []) + [seq])[-2:]
            moved = sim.members[member].moved_to(rel, producer)
            if moved is not None:  # the hint: send there from now on, again what may not have been acknowledged
                self.entry[key] = target = sim.nodes.index(moved)
                self.redirected += 1
                unacked = self.unacked.pop(key)
                for again in unacked[len(unacked) - self.rng.randrange(3):]:
                    sim.resend(target, rel, producer, again)
            for _ in range(deliveries):
                sim.deliver_one()
            if self.rng.random() < 0.3:
                sim.tick(0.1)
            if each is not None:
                each()


@pytest.mark.slow  # (8 s and more: test-fast keeps the case below)
@pytest.mark.parametrize("shape", ["group_by_join_key", "tpch_q3"])
def test_producers_are_handed_to_a_grown_coordinator_and_back_keeping_every_read_exact(shape):
    _, placement, relations = _shape(SHAPES[shape])

    @settings(max_examples=10, deadline=None, phases=(Phase.explicit, Phase.reuse, Phase.generate), suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(layouts([(m.map, m.column) for m in placement.maps]), workloads(relations), workloads(relations),
           workloads(relations), st.randoms(use_true_random=False))
    def check(layout, before, during, after, rng):
        n = len(layout.members)
        sim = Sim(SHAPES[shape], layout, random.Random(rng.random()))
        pubs = Publishers(sim, rng)
        pubs.feed(before * 3, lambda: check_stable(sim))
        new = sim.grow("new:16000")
        leader = sim.members[0]
        base = leader.joinable_layout()
        grown = dataclasses.replace(changes.move(base, base.segments[0].id, new),
                                    coordinators=(*range(n), new))  # (as the API decides it: node/cumulus/api.py)
        sim.request("grow", grown)

        def restart_now_and_then() -> None:  # (a member continues from its state: what it hands, holds, forwards)
            if rng.random() < 0.1:
                sim.restart(rng.randrange(len(sim.members)))
            check_stable(sim)

        pubs.feed(during * 3, restart_now_and_then)
        sim.settle()
        assert sim.members[0].layout.coordinators == grown.coordinators
        coordinated = len(sim.members[new].parts.handing.seen)
        back = sim.members[0].latest_layout
        back = dataclasses.replace(back, version=back.version + 1, segments=tuple(
            dataclasses.replace(seg, member=0) if seg.member == new else seg for seg in back.segments))
        sim.request("empty", back)
        sim.request("retire", changes.retire(back, new, keep=n))
        pubs.feed(after * 3, restart_now_and_then)
        sim.settle()
        assert len(sim.members[0].layout.members) == n and sim.members[0].layout.coordinators == tuple(range(n))
        check_members(sim)
        assert check_stable(sim)
        if coordinated:  # producers the grown member won and stamped: handed back when it retired
            assert set(sim.members[new].parts.handing.handed) >= set(sim.members[new].parts.handing.seen)
        redirected.append((pubs.redirected, coordinated))

    redirected: list[tuple[int, int]] = []
    check()
    assert sum(r for r, _ in redirected) > 0 and sum(c for _, c in redirected) > 0, "no producer handed over"


def test_a_handed_producer_resent_and_forwarded_is_taken_once_in_order():
    """One producer, its pick moved by the growth: batches reach the old coordinator after the change, are
    forwarded, and the publisher sends the last two again to the new one; each is applied once, in order."""
    from boreas.m3.cumulus.layout import even_layout

    _, placement, relations = _shape(SHAPES["group_by_join_key"])
    layout = even_layout("v", ["n0:1", "n1:1"], 4, tuple((m.map, m.column) for m in placement.maps))
    sim = Sim(SHAPES["group_by_join_key"], layout, random.Random(3))
    rel = sorted(relations)[0]
    producer = next(f"p{i}" for i in range(100) if pick(f"p{i}", 2) != 2 and pick(f"p{i}", (0, 1, 2)) == 2)
    old = pick(producer, 2)
    row = tuple(1 for _ in relations[rel])
    for _ in range(3):
        sim.publish_as(old, rel, producer, [(1, row)])
    sim.settle()
    new = sim.grow("n2:1")
    base = sim.members[0].joinable_layout()
    sim.request("grow", dataclasses.replace(changes.move(base, 1, new), coordinators=(0, 1, new)))
    sim.settle()
    assert sim.members[old].moved_to(rel, producer) == "n2:1"
    seqs = [sim.publish_as(old, rel, producer, [(1, row)]) for _ in range(3)]  # forwarded
    for seq in seqs[-2:]:
        sim.resend(new, rel, producer, seq)  # and sent again direct, maybe ahead of the forwarded ones
    sim.publish_as(new, rel, producer, [(1, row)])
    sim.settle()
    check_members(sim)
    assert check_stable(sim)
    handing = sim.members[new].parts.handing
    assert handing.seen[(rel, producer)] == 6 and not handing.held
    assert sim.members[old].parts.handing.forwarded == 3


def test_a_handed_producers_final_mark_is_taken_after_its_batches():
    """A producer ends (an empty final mark numbered after its batches, ``Publisher.close(final=True)``) after
    its pick moved: sent to the new coordinator while batches forwarded by the old one are still on their way,
    or to the old one, which forwards it on the same ordered link after them.  Either way the new coordinator
    takes it after every batch before it: the producer's last position is the mark's, and every stable read is
    a prefix."""
    from boreas.m3.cumulus.layout import even_layout

    _, placement, relations = _shape(SHAPES["group_by_join_key"])
    rel = sorted(relations)[0]
    row = tuple(1 for _ in relations[rel])
    for via_old in (False, True):
        layout = even_layout("v", ["n0:1", "n1:1"], 4, tuple((m.map, m.column) for m in placement.maps))
        sim = Sim(SHAPES["group_by_join_key"], layout, random.Random(4))
        producer = next(f"p{i}" for i in range(100) if pick(f"p{i}", 2) != 2 and pick(f"p{i}", (0, 1, 2)) == 2)
        old = pick(producer, 2)
        for _ in range(3):
            sim.publish_as(old, rel, producer, [(1, row)])
        sim.settle()
        new = sim.grow("n2:1")
        base = sim.members[0].joinable_layout()
        sim.request("grow", dataclasses.replace(changes.move(base, 1, new), coordinators=(0, 1, new)))
        sim.settle()
        for _ in range(3):
            sim.publish_as(old, rel, producer, [(1, row)])  # forwarded: on the old -> new link, not delivered yet
        last = sim.publish_as(old if via_old else new, rel, producer, [])  # the final mark, seq 6
        sim.settle()
        check_members(sim)
        assert check_stable(sim)
        positions = {(s, p): q for s, p, q in sim.members[0].stable_info()["positions"]}
        assert positions[(rel, producer)] == last == 6, via_old  # the stable read includes the whole producer
        assert sim.members[new].parts.handing.seen[(rel, producer)] == 6
        assert sim.members[old].parts.handing.forwarded == 3 + via_old
