"""Cumulus stage 2 in process: versions, epochs and FETCH/PUSH between real PartOperators.

Every shape of ``tests/m3/test_views_vs_duckdb.py`` (joins, self-joins,
TPC-H Q3, Q5, Q10 among them), partitioned by the planner over 1-4 members
with random segment counts and placements, gets random inserts and deletes
published into random members; messages between members are delivered in
random order (each link keeping its own order), the leader's epoch timer
fires as simulated time passes, and members restart from their own
``state()`` at random points.  Once everything is delivered, the members'
maps union to exactly the single-node runtime's, each entry on its owner,
and the members' out streams, changelogs (-old/+new with weights), add up
to the single runtime's views.
With ``relayouts``, moves, splits and rebalances are asked for at random,
also while others are under way (they queue), and segments are pre-copied
two entries per step, so copies span many steps with writes, restarts and
stable reads in between (docs/cumulus.md §6.2).
"""

from __future__ import annotations

import datetime
import math
import random
import sys
from collections import Counter
from pathlib import Path

import pytest
from boreas.m3 import compile_sql
from boreas.m3.cumulus import SLOTS, Layout, Segment, place
from boreas.node.cumulus import precopy
from boreas.node.operators.m3box import micros_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent / "m3"))
from support.cumulus_sim import Sim  # noqa: E402
from test_views_vs_duckdb import SHAPES  # noqa: E402

_VALUES = {"INT": st.integers(-4, 4), "FLOAT": st.integers(-8, 8).map(lambda i: i / 4),
           "STRING": st.sampled_from(["A", "B", "R", "ASIA", "BUILDING"]),
           "DATE": st.sampled_from([datetime.date(1994, 6, 1), datetime.date(1995, 3, 1), datetime.date(1995, 3, 16)])}


@st.composite
def layouts(draw, maps):
    n = draw(st.integers(1, 4))
    k = draw(st.integers(1, 10))
    cuts = sorted(draw(st.sets(st.integers(1, SLOTS - 1), min_size=k - 1, max_size=k - 1)))
    bounds = [0, *cuts, SLOTS]
    segs = tuple(Segment(i, bounds[i], bounds[i + 1], draw(st.integers(0, n - 1))) for i in range(k))
    return Layout("v", tuple(f"node{i}:1500{i}" for i in range(n)), segs, tuple(maps))


@st.composite
def workloads(draw, relations):
    live: list = []
    out = []
    for _ in range(draw(st.integers(1, 8))):
        rel = draw(st.sampled_from(sorted(relations)))
        events = []
        for _ in range(draw(st.integers(1, 6))):
            mine = [x for x in live if x[0] == rel]
            if mine and draw(st.integers(0, 3)) == 0:
                victim = mine[draw(st.integers(0, len(mine) - 1))]
                live.remove(victim)
                events.append((-1, victim[1]))
            else:
                row = tuple(draw(_VALUES[t]) for _, t in relations[rel])
                live.append((rel, row))
                events.append((1, row))
        out.append((rel, events, draw(st.integers(0, 3)), draw(st.integers(0, 5))))
    return out


def check_union(sim: Sim, layout: Layout) -> None:
    for mp in sim.program.maps:
        if mp.name in layout.replicated:  # every member holds all of it
            single = dict(sim.single.store.items(mp.name))
            for m, op in enumerate(sim.members):
                held = dict(op.runtime.store.items(mp.name))
                assert held.keys() == single.keys(), (mp.name, m, sorted(held.items()), sorted(single.items()))
                assert all(math.isclose(held[k], v, rel_tol=1e-9, abs_tol=1e-9) for k, v in single.items()), (mp.name, m)
            continue
        union: dict = {}
        for m, op in enumerate(sim.members):
            for key, value in op.runtime.store.items(mp.name):
                assert layout.owner(mp.name, key) == m, f"{mp.name}{key} is on member {m}, owned by another"
                union[key] = value
        single = dict(sim.single.store.items(mp.name))
        assert union.keys() == single.keys(), (mp.name, sorted(union.items()), sorted(single.items()))
        for key, value in single.items():
            assert math.isclose(union[key], value, rel_tol=1e-9, abs_tol=1e-9), (mp.name, key, union[key], value)


def check_changelog(sim: Sim) -> None:
    """The members' out streams, a changelog each (-old/+new with weights), add up to the single runtime's views:
    every row once, none left over (a retraction names exactly a row a member emitted, across relayouts too)."""
    for port, view in enumerate(sim.program.views):
        folded = sim.folded.get(port, Counter())
        assert all(n in (0, 1) for n in folded.values()), (view.name, {r: n for r, n in folded.items() if n not in (0, 1)})
        got = {row[:len(view.keys)]: row[len(view.keys):] for row, n in folded.items() if n == 1}
        want = {}
        for key, value in sim.single.view(view.name).items():
            values = value if isinstance(value, tuple) else (value,)
            if any(v != 0 for v in values):
                want[tuple(micros_of(k) if isinstance(k, datetime.date) else k for k in key)] = values
        assert got.keys() == want.keys(), (view.name, sorted(got.items()), sorted(want.items()))
        for key, values in want.items():
            assert all(math.isclose(g, w, rel_tol=1e-9, abs_tol=1e-9) for g, w in zip(got[key], values)), (view.name, key)


def check_stable(sim: Sim) -> bool:
    """A READ_STABLE across the members equals the single runtime over exactly the batches its positions name."""
    found = sim.stable_read()
    if found is None:
        return False
    epoch, maps, expected = found
    for name, got in maps.items():
        want = dict(expected.store.items(name))
        assert got.keys() == want.keys(), (epoch, name, sorted(got.items()), sorted(want.items()))
        for key, value in want.items():
            assert math.isclose(got[key], value, rel_tol=1e-9, abs_tol=1e-9), (epoch, name, key)
    return True


SIM_SHAPES = ["two_way", "two_way_join_on", "three_way", "three_way_count_no_group", "self_join",
              "self_join_same_column", "group_by_join_key", "arithmetic_across_join", "selection_or_across_join",
              "two_queries", "tpch_q3", "tpch_q5", "tpch_q10", "seed_example_2_1", "single_group", "avg"]
#: The shapes make test-fast leaves to make test: the TPC-H shapes whose examples take seconds each (tpch_q3
#: stays for the kind), and joins of the kinds the quick shapes already cover (three-way, a second view,
#: arithmetic or OR across a join, a self-join on one column).
HEAVY_SHAPES = {"tpch_q3", "tpch_q5", "tpch_q10", "three_way", "three_way_count_no_group", "self_join_same_column",
                "arithmetic_across_join", "selection_or_across_join", "two_queries", "seed_example_2_1"}


@pytest.mark.parametrize("relayouts", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["fixed", "relayouts"])
@pytest.mark.parametrize("shape", [pytest.param(s, marks=pytest.mark.slow) if s in HEAVY_SHAPES else s
                                   for s in SIM_SHAPES])
def test_partitioned_members_equal_the_single_runtime(shape, relayouts, monkeypatch):
    if relayouts:
        monkeypatch.setattr(precopy, "COPY_STEP", 2)
    program = compile_sql(SHAPES[shape])
    placement = place(program, box="v")
    relations = {r.name: tuple((c.name, c.type) for c in r.columns) for r in program.relations
                 if any(t.relation == r.name for t in program.triggers)}

    @settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(layouts([(m.map, m.column) for m in placement.maps]), workloads(relations), st.randoms(use_true_random=False))
    def check(layout, workload, rng):
        run_and_check(Sim(SHAPES[shape], layout, random.Random(rng.random())), workload, rng, relayouts)

    check()


def run_and_check(sim: Sim, workload, rng: random.Random, relayouts: bool) -> None:
    """Publish ``workload`` into random members, delivering messages, letting time pass, restarting members and
    (with ``relayouts``) asking for layout changes now and then, checking every stable read; then, once settled,
    every member at the final layout, every map exact on its owners, the stable epoch covering everything, and
    no delta left."""
    n = len(sim.members)
    for rel, events, member, deliveries in workload:
        sim.publish(member % n, rel, events)
        for _ in range(deliveries):
            sim.deliver_one()
        if rng.random() < 0.3:
            sim.tick(0.1)
        if rng.random() < 0.1:
            sim.restart(rng.randrange(n))
        if relayouts and rng.random() < 0.3:
            sim.relayout(f"c{rng.random()}", queue=rng.random() < 0.3)
        check_stable(sim)
    sim.settle()
    final = sim.members[0].layout
    assert all(op.layout == final and op.parts.changes.pending is None for op in sim.members), [(op.member, op.layout.version, final.version, op.parts.changes.pending, op.parts.changes.relayouts, op.parts.changes.settling, op.parts.coordinator.epoch, op.parts.applier.at, op.leader and op.leader.stable) for op in sim.members]
    check_union(sim, final)
    check_changelog(sim)
    assert check_stable(sim)  # after the input stops, the stable epoch covers everything
    assert all(op.runtime.deltas.entries() == 0 for op in sim.members), "deltas left after quiescence"


@pytest.mark.parametrize("backend", ["auto", "python", "native"])
def test_a_member_runs_the_backend_its_box_asks_for(backend):
    """A partition member runs the native backend (m3/cumulus/native_member.py) unless its box's ``backend``
    parameter asks for Python; the parameter is read as for any m3 box."""
    from dataclasses import replace

    from boreas.node.cumulus.part import PartOperator

    sql = "CREATE STREAM R(a INT, b INT); SELECT a, SUM(b) AS s FROM R GROUP BY a"
    maps = tuple((m.map, m.column) for m in place(compile_sql(sql), box="v").maps)
    layout = Layout("v", ("n0:15000", "n1:15001"), (Segment(0, 0, SLOTS // 2, 0), Segment(1, SLOTS // 2, SLOTS, 1)), maps)
    sim = Sim(sql, layout, random.Random(0))
    inputs, outputs, partition = sim.built_from
    box = replace(sim.box, params=(*sim.box.params, ("backend", backend)))
    member = PartOperator(box, inputs, outputs, partition, partition.nodes[0])
    assert member.backend == ("python" if backend == "python" else "native")
    assert member.backend_reason is None
