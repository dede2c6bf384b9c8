"""Failover of a partition member in process (docs/cumulus.md §6.3): a guest member hosted by another's operator.

The simulated cluster of ``support.cumulus_sim`` (real PartOperators,
messages delivered in random order per link) loses a member's node at a
random point: another member's node takes it over as a *guest* from its
state (what a failover's replay of the failed node's log rebuilds), with
the messages between the two that were still on their way handed to it
first.  Publishing, delivery, stable reads and restarts go on; once
everything is delivered the members' maps union to exactly the single-node
runtime's, each entry on its owner, and every stable read taken equals the
runtime over the batches its positions name.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import random
import sys
from pathlib import Path

import pytest
from boreas.m3 import compile_sql
from boreas.m3.cumulus import place
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent / "m3"))
from support.cumulus_sim import Sim  # noqa: E402
from test_cumulus_sim import check_stable, layouts, workloads  # noqa: E402
from test_views_vs_duckdb import SHAPES  # noqa: E402


def _shape(sql: str):
    """A shape's program, its placement and the relations its triggers read (name -> (column, type)...)."""
    program = compile_sql(sql)
    relations = {r.name: tuple((c.name, c.type) for c in r.columns) for r in program.relations
                 if any(t.relation == r.name for t in program.triggers)}
    return program, place(program, box="v"), relations


def check_members(sim: Sim) -> None:
    """Every member's maps (a guest's too) hold only what it owns, and together the single runtime's."""
    layout = sim.members[0].hosted[0].layout
    for mp in sim.program.maps:
        union: dict = {}
        for m, op in enumerate(sim.members):
            for key, value in op.hosted[m].runtime.store.items(mp.name):
                assert layout.owner(mp.name, key) == m, f"{mp.name}{key} is on member {m}, owned by another"
                assert key not in union
                union[key] = value
        single = dict(sim.single.store.items(mp.name))
        assert union.keys() == single.keys(), (mp.name, sorted(union.items()), sorted(single.items()))
        for key, value in single.items():
            assert math.isclose(union[key], value, rel_tol=1e-9, abs_tol=1e-9), (mp.name, key, union[key], value)


@pytest.mark.parametrize("shape", [pytest.param("tpch_q3", marks=pytest.mark.slow), "self_join", *(pytest.param(s, marks=pytest.mark.slow)
                                                         for s in ("group_by_join_key", "two_way", "single_group"))])
def test_a_member_taken_over_as_a_guest_keeps_the_view_exact(shape):
    _, placement, relations = _shape(SHAPES[shape])

    @settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(layouts([(m.map, m.column) for m in placement.maps]), workloads(relations), st.randoms(use_true_random=False),
           st.integers(0, 7), st.booleans())
    def check(layout, workload, rng, fail_at, twice):
        sim = Sim(SHAPES[shape], layout, random.Random(rng.random()))
        n = len(layout.members)
        for step, (rel, events, member, deliveries) in enumerate(workload):
            sim.publish(member % n, rel, events)
            for _ in range(deliveries):
                sim.deliver_one()
            if rng.random() < 0.3:
                sim.tick(0.1)
            if n > 1 and step in (fail_at, fail_at + 2 if twice else -1):
                sim.fail_over(rng.randrange(n), rng.randrange(n))
            if rng.random() < 0.1:
                sim.restart(rng.randrange(n))
            check_stable(sim)
        sim.settle()
        check_members(sim)
        assert check_stable(sim)

    check()


@pytest.mark.parametrize("shape", [pytest.param("tpch_q3", marks=pytest.mark.slow), "group_by_join_key"])
def test_rebalancing_after_a_failover_empties_the_guest_and_keeps_the_view_exact(shape):
    """``boreas rebalance`` after a failover (m3/cumulus/relayout.py): the node that took a member over
    hands the guest's segments to its own member or to other nodes, so the guest ends with none and the
    nodes even out; publishing goes on across the change, and the view stays exact."""
    from boreas.m3.cumulus import relayout as changes

    _, placement, relations = _shape(SHAPES[shape])

    @settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(layouts([(m.map, m.column) for m in placement.maps]), workloads(relations), workloads(relations),
           st.randoms(use_true_random=False))
    def check(layout, before, after, rng):
        n = len(layout.members)
        if n < 2:
            return
        sim = Sim(SHAPES[shape], layout, random.Random(rng.random()))
        for rel, events, member, deliveries in before:
            sim.publish(member % n, rel, events)
            for _ in range(deliveries):
                sim.deliver_one()
        failed, host = rng.sample(range(n), 2)
        sim.fail_over(failed, host)
        counts: dict[int, int] = {}
        for op in sim.operators().values():
            for m in op.hosted.values():
                for sid, per_map in m.segment_entries().items():
                    counts[sid] = counts.get(sid, 0) + sum(per_map.values())
        leader = sim.members[0].hosted[0]
        new = changes.rebalance(leader.latest_layout, counts, guests=[failed])
        assert new is not leader.latest_layout or not leader.latest_layout.segments_of(failed)
        if new is not leader.latest_layout:
            assert not new.segments_of(failed), "a guest keeps segments after a rebalance"
            sim.request("rebalance", new)
        for rel, events, member, deliveries in after:
            sim.publish(member % n, rel, events)
            for _ in range(deliveries):
                sim.deliver_one()
        sim.settle()
        assert not sim.members[0].hosted[0].layout.segments_of(failed)
        check_members(sim)
        assert check_stable(sim)

    check()


@pytest.mark.parametrize("shape", ["tpch_q3", pytest.param("group_by_join_key", marks=pytest.mark.slow),
                                   pytest.param("self_join", marks=pytest.mark.slow)])  # (make test-fast: Q3)
def test_a_partition_grown_while_events_flow_keeps_the_view_exact(shape):
    """Nodes appended to a running partition (docs/cumulus.md §6.4) join at the first epoch of a rebalance
    that moves segments onto them: every stable read before, across and after it is exact, the new
    members end with segments, and a member restarting from its state (the new one too) carries on."""
    from boreas.m3.cumulus import relayout as changes

    _, placement, relations = _shape(SHAPES[shape])

    @settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(layouts([(m.map, m.column) for m in placement.maps]), workloads(relations), workloads(relations),
           st.randoms(use_true_random=False), st.integers(1, 2))
    def check(layout, before, after, rng, added):
        n = len(layout.members)
        sim = Sim(SHAPES[shape], layout, random.Random(rng.random()))
        sim.feed(before, rng, lambda _: check_stable(sim))
        new_members = [sim.grow(f"new{k}:16000") for k in range(added)]
        leader = sim.members[0].hosted[0]
        base = leader.joinable_layout()
        assert len(base.members) == n + added and base.version == leader.latest_layout.version
        new = changes.rebalance(base, {s.id: 1 for s in base.segments})  # one entry each: spread the segments
        if new is base or not any(new.segments_of(m) for m in new_members):
            new = changes.move(base, base.segments[0].id, new_members[0])
        sim.request("grow", new)

        def restart_now_and_then(_: int) -> None:
            if rng.random() < 0.15:
                sim.restart(rng.choice([0, *new_members]))
            check_stable(sim)

        sim.feed(after, rng, restart_now_and_then)
        sim.settle()
        final = sim.members[0].hosted[0].layout
        assert final.version == new.version and len(final.members) == n + added
        assert any(final.segments_of(m) for m in new_members)
        assert all(sim.members[m].place.joined is not None for m in new_members)
        check_members(sim)
        assert check_stable(sim)

    check()


@pytest.mark.parametrize("seed", [0, *(pytest.param(s, marks=pytest.mark.slow) for s in range(1, 4))])
def test_a_growing_change_cancelled_leaves_the_node_joining_until_the_next_one(seed):
    """A change that would make a joining node a member, cancelled before its first epoch, leaves it
    joining (no epoch, no state, not counted for stable epochs); the next change makes it a member."""
    from boreas.m3.cumulus import relayout as changes
    from boreas.m3.cumulus.layout import even_layout

    _, placement, relations = _shape(SHAPES["tpch_q3"])
    layout = even_layout("v", ["node0:15000", "node1:15001"], 4, tuple((m.map, m.column) for m in placement.maps))
    rng = random.Random(seed)
    sim = Sim(SHAPES["tpch_q3"], layout, rng)
    values = {"INT": lambda: rng.randrange(5), "FLOAT": lambda: rng.randrange(8) / 4,
              "STRING": lambda: rng.choice(["BUILDING", "A"]),
              "DATE": lambda: rng.choice([datetime.date(1995, 3, 1), datetime.date(1995, 3, 16)])}
    rows = {rel: [(1, tuple(values[t]() for _, t in columns)) for _ in range(20)]
            for rel, columns in relations.items()}
    for rel, events in rows.items():
        sim.publish(rng.randrange(2), rel, events)
    sim.settle()
    new_member = sim.grow("node2:15002")
    leader = sim.members[0]
    first = changes.move(leader.joinable_layout(), 1, new_member)
    sim.request("grow", first)
    sim.cancel(f"grow/{sim.changes}")
    sim.settle()
    joining = sim.members[new_member]
    assert "grow/1" in leader.parts.changes.cancelled and "grow/1" in joining.parts.changes.cancelled
    assert joining.place.joined is None and not joining.parts.changes.relayouts and leader.layout.version == layout.version
    assert leader.parts.changes.reach() == 2 and check_stable(sim)
    second = changes.move(leader.joinable_layout(), 2, new_member)
    sim.request("grow-again", second)
    for rel, events in rows.items():
        sim.publish(rng.randrange(2), rel, [(-1, row) for _, row in events[: len(events) // 2]])
    sim.settle()
    assert joining.place.joined is not None and leader.layout.segments_of(new_member)
    check_members(sim)
    assert check_stable(sim)


@pytest.mark.parametrize("shape", [pytest.param("tpch_q3", marks=pytest.mark.slow), "group_by_join_key"])
def test_a_grown_member_emptied_and_retired_keeps_the_view_exact(shape):
    """A node grown into the partition takes segments, gives them back, and retires (docs/cumulus.md §6.4):
    from the retiring change's first epoch it takes no part (no Close, no Done), and every stable read before,
    across and after it is exact."""
    from boreas.m3.cumulus import relayout as changes

    _, placement, relations = _shape(SHAPES[shape])

    @settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(layouts([(m.map, m.column) for m in placement.maps]), workloads(relations), workloads(relations),
           st.randoms(use_true_random=False))
    def check(layout, before, after, rng):
        n = len(layout.members)
        sim = Sim(SHAPES[shape], layout, random.Random(rng.random()))
        new = sim.grow("new:16000")
        leader = sim.members[0]
        sim.request("grow", changes.move(leader.joinable_layout(), layout.segments[0].id, new))
        sim.feed(before, rng, lambda _: check_stable(sim))
        sim.settle()
        assert leader.layout.segments_of(new)
        base = leader.latest_layout  # every segment of the new member back to the first ones
        back = dataclasses.replace(base, version=base.version + 1, segments=tuple(
            dataclasses.replace(seg, member=rng.randrange(n)) if seg.member == new else seg for seg in base.segments))
        sim.request("empty", back)
        with pytest.raises(ValueError, match="coordinates published input"):
            changes.retire(layout, n - 1, keep=n)  # (the last of the first members)
        sim.request("retire", changes.retire(back, new, keep=n))
        sim.feed(after, rng, lambda _: check_stable(sim))
        sim.settle()
        assert len(leader.layout.members) == n and not sim.members[new].runtime.entries()
        retired, last = sim.members[new], leader.place.history[-1][0]
        assert retired.parts.applier.at == [last, 0]  # it applied every epoch before it retired, and none since
        assert not any(c == new for op in sim.members[:n] for _, c in op.parts.applier.closes)  # it closed none of them
        check_members(sim)
        assert check_stable(sim)

    check()
