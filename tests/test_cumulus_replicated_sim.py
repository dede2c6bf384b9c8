"""Replicated maps in process (docs/cumulus.md §3.11): every member holds the whole map, none is pushed.

Shapes of ``tests/m3/test_views_vs_duckdb.py`` (Q3, a two-way and a three-way join, a self-join) with some of their
replicable maps (no view reads them; their writers read only replicated
maps) replicated, over 1-4 members with random segments: random inserts and
deletes published into random members, messages delivered in random order,
members restarting from their own ``state()``, and (slow tier) moves, splits
and rebalances while batches flow.  Once everything is
delivered every member holds exactly the single runtime's replicated maps,
every other entry is on its owner, and every stable read equals the single
runtime over the batches its positions name.  Refusals: a replicated map a
view reads, one written from a partitioned map, a name that is no map.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest
from boreas.m3 import compile_sql
from boreas.m3.cumulus import EVERYWHERE, PlacementError, PlanError, classify, place, plan_partition
from boreas.node.cumulus import precopy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent / "m3"))
from support.cumulus_sim import Sim  # noqa: E402
from test_cumulus_sim import check_stable, check_union, layouts, run_and_check, workloads  # noqa: E402
from test_views_vs_duckdb import SHAPES  # noqa: E402


def replicable(program, box: str = "v") -> list[str]:
    """The maps that may be replicated one at a time (any subset of them may be, together)."""
    base = place(program, box=box).columns
    found = []
    for m in program.maps:
        try:
            classify(program, {**base, m.name: EVERYWHERE}, box)
        except PlanError:
            continue
        found.append(m.name)
    return found


def test_q3_with_its_customer_map_replicated_runs_every_statement_locally():
    """Q3's ``m2`` (customers per key, read by every order) replicated: orders no longer need their customer's
    member, so no statement reads another member's entries."""
    program = compile_sql(SHAPES["tpch_q3"])
    before = plan_partition(program, "v", ["a", "b", "c"], 8)
    assert not before.local
    pp = plan_partition(program, "v", ["a", "b", "c"], 8, replicate=["m2"])
    assert pp.local, pp.reason
    assert dict(pp.layout.maps)["m2"] == EVERYWHERE and pp.layout.replicated == {"m2"}
    assert "m2 on every member: replicated" in "\n".join(pp.placement.explain())


def test_replicating_what_cannot_be_replicated_is_refused_with_the_reason():
    program = compile_sql(SHAPES["tpch_q3"])
    with pytest.raises(PlanError, match="map Q1_revenue is replicated, but view Q1 reads it"):
        place(program, box="v", replicate=["Q1_revenue"])
    with pytest.raises(PlacementError, match="replicates map 'nope', which it does not have"):
        place(program, box="v", replicate=["nope"])
    with pytest.raises(PlacementError, match="both replicates map 'm2' and pins it"):
        place(program, box="v", pins={"m2": "O_CUSTKEY"}, replicate=["m2"])
    # m1 (orders per customer and order) is written by ON +orders from m3, partitioned on the order key
    with pytest.raises(PlanError, match=r"map m1 is replicated, but statement \d of ON \+orders .* from map m3"):
        place(program, box="v", replicate=["m1"])


SHAPES_WITH_REPLICABLE = [s for s in ("tpch_q3", "two_way", "three_way", "self_join")
                          if replicable(compile_sql(SHAPES[s]))]
QUICK = {"tpch_q3", "two_way"}


@pytest.mark.parametrize("relayouts", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["fixed", "relayouts"])
@pytest.mark.parametrize("shape", [s if s in QUICK else pytest.param(s, marks=pytest.mark.slow)
                                   for s in SHAPES_WITH_REPLICABLE])
def test_replicated_maps_equal_the_single_runtime_on_every_member(shape, relayouts, monkeypatch):
    if relayouts:
        monkeypatch.setattr(precopy, "COPY_STEP", 2)
    program = compile_sql(SHAPES[shape])
    candidates = replicable(program)
    relations = {r.name: tuple((c.name, c.type) for c in r.columns) for r in program.relations
                 if any(t.relation == r.name for t in program.triggers)}
    placements = {}
    for k in range(1, len(candidates) + 1):  # the first k candidates replicated
        placements[k] = place(program, box="v", replicate=candidates[:k])

    @settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.data(), workloads(relations), st.randoms(use_true_random=False))
    def check(data, workload, rng):
        placement = placements[data.draw(st.integers(1, len(candidates)))]
        layout = data.draw(layouts([(m.map, m.column) for m in placement.maps]))
        sim = Sim(SHAPES[shape], layout, random.Random(rng.random()))
        run_and_check(sim, workload, rng, relayouts)
        assert sim.members[0].layout.replicated == layout.replicated

    check()


def _q3_events(rng: random.Random, n: int) -> list[tuple[str, list]]:
    """Batches of Q3's customers (half in segment BUILDING), orders and lineitems over a few keys."""
    import datetime

    dates = [datetime.date(1995, 3, 1), datetime.date(1995, 3, 16)]
    out = []
    for _ in range(n):
        custkey, orderkey = rng.randrange(6), rng.randrange(8)
        out.append(("customer", [(1, (custkey, "c", 1.0, 0, rng.choice(["BUILDING", "ASIA"])))]))
        out.append(("orders", [(1, (orderkey, custkey, rng.choice(dates), 0))]))
        out.append(("lineitem", [(1, (orderkey, 1, 10.0, 0.25, rng.choice(dates), "R"))]))
    return out


def _q3_sim(seed: int, members: int, segments: int) -> Sim:
    """Q3 with ``m2`` replicated over ``members`` members in ``segments`` even segments."""
    from boreas.m3.cumulus import even_layout

    placement = place(compile_sql(SHAPES["tpch_q3"]), box="v", replicate=["m2"])
    layout = even_layout("v", [f"n{i}:1" for i in range(members)], segments,
                         maps=[(m.map, m.column) for m in placement.maps])
    return Sim(SHAPES["tpch_q3"], layout, random.Random(seed))


def _feed(sim: Sim, rng: random.Random, batches, publishers: int, restarts=()) -> None:
    """Publish ``batches`` into random members of the first ``publishers``, delivering some messages after each,
    with time passing, members of ``restarts`` restarting now and then, and every stable read checked."""
    for rel, events in batches:
        sim.publish(rng.randrange(publishers), rel, events)
        for _ in range(rng.randrange(4)):
            sim.deliver_one()
        if rng.random() < 0.3:
            sim.tick(0.1)
        if restarts and rng.random() < 0.15:
            sim.restart(rng.choice(restarts))
        check_stable(sim)


@pytest.mark.parametrize("seed", range(6))
def test_a_member_holding_no_segment_still_keeps_the_replicated_maps(seed):
    """Every member of the layout applies a replicated map's writes, also one whose segments all moved away:
    it holds a full copy when segments come back to it."""
    from boreas.m3.cumulus import relayout as changes

    rng, sim = random.Random(seed), _q3_sim(seed, 3, 6)
    _feed(sim, rng, _q3_events(rng, 10), 3)
    sim.settle()
    emptied = changes.move_all(sim.members[0].latest_layout, 0)  # members 1 and 2 hold nothing
    sim.request("empty", emptied)
    sim.settle()
    assert [s.member for s in sim.members[1].layout.segments] == [0] * 6
    _feed(sim, rng, _q3_events(rng, 10), 3)  # customers keep coming while 1 and 2 hold no segment
    sim.settle()
    back = changes.rebalance(sim.members[0].latest_layout, {s.id: 1 for s in emptied.segments})
    sim.request("back", back)
    sim.settle()
    assert len({s.member for s in sim.members[0].layout.segments}) == 3
    assert all(dict(op.runtime.store.items("m2")) for op in sim.members)
    check_union(sim, sim.members[0].layout)
    assert check_stable(sim)


@pytest.mark.parametrize("seed", range(4))
def test_a_member_joining_gets_a_copy_of_the_replicated_maps(seed):
    """A node appended to the partition joins at the first epoch of a change that moves segments onto it;
    member 0 copies it the replicated maps meanwhile (customers keep coming, restarts happen): from then on it
    holds exactly the single runtime's ``m2``, and every stable read before, across and after is exact."""
    from boreas.m3.cumulus import relayout as changes

    rng, sim = random.Random(seed), _q3_sim(seed, 2, 4)
    _feed(sim, rng, _q3_events(rng, 12), 2)
    joining = sim.grow("new:16000")
    base = sim.members[0].joinable_layout()
    new = changes.move(base, base.segments[0].id, joining)
    assert (changes.REPLICAS, 0, joining) in changes.moves(sim.members[0].latest_layout, new)
    sim.request("grow", new)
    _feed(sim, rng, _q3_events(rng, 12), 2, restarts=(0, joining))
    sim.settle()
    final = sim.members[0].layout
    assert final.version == new.version and len(final.members) == 3 and sim.members[joining].place.joined is not None
    assert dict(sim.members[joining].runtime.store.items("m2"))
    check_union(sim, final)
    assert check_stable(sim)


@pytest.mark.parametrize("seed", range(4))
def test_a_member_taken_over_as_a_guest_keeps_its_copy_of_the_replicated_maps(seed):
    """A member failed over to another member's node (a guest there, docs/cumulus.md §6.3) goes on applying the
    replicated maps' writes: every member, the guest too, ends with exactly the single runtime's ``m2``."""
    rng, sim = random.Random(seed), _q3_sim(seed, 3, 6)
    batches = _q3_events(rng, 16)
    _feed(sim, rng, batches[:20], 3)
    failed, host = rng.sample(range(3), 2)
    sim.fail_over(failed, host)
    _feed(sim, rng, batches[20:], 3, restarts=(host,))
    sim.settle()
    layout = sim.members[0].hosted[0].layout
    single = dict(sim.single.store.items("m2"))
    assert single
    for m, op in enumerate(sim.members):
        assert dict(op.hosted[m].runtime.store.items("m2")) == single, (m, failed, host)
    assert check_stable(sim)
    assert layout.replicated == {"m2"}


def test_a_bulk_load_sends_a_replicated_map_to_every_member_and_counts_each_entry_once(monkeypatch):
    """``load_view``'s tasks (spark/load_arrow.py): a partitioned map's entry goes to its owner, a replicated
    map's to every member, and the report counts each entry once."""
    import asyncio

    import pyarrow as pa
    from boreas.m3.cumulus import even_layout
    from boreas.spark import load_arrow, load_tasks

    layout = even_layout("q3", ["a:1", "b:1", "c:1"], 6, maps=[("t", 0), ("d", EVERYWHERE)])
    got: dict[int, list] = {0: [], 1: [], 2: []}

    async def post_part(peers, box, member, endpoint, job, part, body, timeout, content_type):
        table = pa.ipc.open_stream(body).read_all()
        name = table.schema.metadata[b"map"].decode()
        got[member] += [(name, (k,), v) for k, v in zip(*(c.to_pylist() for c in table.columns))]

    monkeypatch.setattr(load_arrow, "post_part", post_part)
    target = load_tasks.LoadTarget("q3", layout.to_dict(), (("t", ("INT",), "INT"), ("d", ("INT",), "INT")),
                                   "job", None, 7, 5.0)
    t = pa.record_batch({"k0": list(range(30)), "value": [1] * 30})
    d = pa.record_batch({"k0": list(range(5)), "value": [2] * 5})
    reports = [asyncio.run(load_arrow._send(target, i, 0, iter([batch]))) for i, batch in enumerate((t, d))]
    assert [r.entries for r in reports] == [{"t": 30, "d": 0}, {"t": 0, "d": 5}]
    assert not any(r.refused for r in reports)
    for member, entries in got.items():
        assert sorted(k[0] for name, k, _ in entries if name == "d") == list(range(5))
        assert all(layout.owner("t", tuple(k)) == member for name, k, _ in entries if name == "t")
    assert sum(1 for entries in got.values() for name, _, _ in entries if name == "t") == 30
