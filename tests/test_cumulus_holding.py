"""Held Work (node/cumulus/coordinator.py): a coordinator stamps a port's batches as one version at ``HOLD`` rows
or the epoch's end, decided by the input alone, so a member restored from its state sends exactly what it would
have (docs/cumulus.md §3.5)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

from boreas.m3 import compile_sql
from boreas.m3.cumulus import place
from boreas.m3.cumulus.layout import even_layout
from boreas.node.cumulus import coordinator, messages as msg
from boreas.node.cumulus.part import PartOperator

sys.path.insert(0, str(Path(__file__).parent))
from support.cumulus_sim import Sim  # noqa: E402

SQL = ("CREATE STREAM R(a INT, b INT); CREATE STREAM S(b INT, c INT); "
       "SELECT R.a, SUM(S.c) AS total FROM R, S WHERE R.b = S.b GROUP BY R.a")


def _sim(members: int) -> Sim:
    program = compile_sql(SQL)
    placement = place(program, box="v")
    layout = even_layout("v", [f"n{i}" for i in range(members)], 8, maps=[(m.map, m.column) for m in placement.maps])
    return Sim(SQL, layout, random.Random(3))


def _events(rng: random.Random, n: int) -> list[tuple[int, tuple]]:
    return [(1, (rng.randrange(6), rng.randrange(6))) for _ in range(n)]


def _twin(op: PartOperator) -> PartOperator:
    twin = PartOperator(op.box, op.inputs, op.outputs, op.partition, op.endpoint)
    twin.restore(op.state())
    return twin


def test_held_batches_leave_with_the_epoch_and_a_restored_member_sends_the_same():
    sim, rng = _sim(2), random.Random(5)
    for relation in ("R", "S", "R"):
        sim.publish(1, relation, _events(rng, 20))
    assert sim.sent[msg.WORK] == 0 and sim.sent[msg.WAKE] == 1  # held; the leader is asked to end the epoch
    op = sim.members[1]
    assert [(port, sum(map(len, held))) for port, held in op.parts.coordinator.holding.items()] == [(0, 40), (1, 20)]
    twin = _twin(op)
    inport = next(iter(op.internal_streams().inputs.values()))
    advance = [msg.advance(1)]
    first, second = op.process(inport, list(advance), sim.now), twin.process(inport, list(advance), sim.now)
    assert first == second and op.state() == twin.state()
    work = [m for _, rows in first for m in rows if m[0] == msg.WORK]
    assert work and {tuple(m[1:4]) for m in work} <= {(0, 1, 0), (0, 1, 1)}  # R's 40 rows one version, S's another
    assert not op.parts.coordinator.holding
    sim._collect(1, first)
    sim.settle()
    for name in (m.name for m in sim.program.maps):  # the members' maps union to the single runtime's
        union: dict = {}
        for member in sim.members:
            union.update(member.runtime.store.items(name))
        assert union == dict(sim.single.store.items(name)), name
    found = sim.stable_read()
    assert found is not None and found[1]["Q1_total"] == dict(found[2].store.items("Q1_total"))


def test_a_port_past_hold_rows_is_stamped_at_once(monkeypatch):
    monkeypatch.setattr(coordinator, "HOLD", 50)
    sim, rng = _sim(2), random.Random(7)
    sim.publish(0, "R", _events(rng, 30))
    assert sim.sent[msg.WORK] == 0
    sim.publish(0, "R", _events(rng, 30))
    assert sim.sent[msg.WORK] >= 1 and not sim.members[0].parts.coordinator.holding


def test_a_lone_member_holds_nothing():
    sim, rng = _sim(1), random.Random(9)
    sim.publish(0, "R", _events(rng, 10))
    assert not sim.members[0].parts.coordinator.holding and sim.members[0].parts.coordinator.seq == 1
