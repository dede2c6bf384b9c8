"""Pre-copy of moving segments (docs/cumulus.md §6.2), step by step in the in-process simulation.

A segment moves while its keys are written, the source and the target
restart in the middle of the copy, and a second change queues behind the
first (it moves the segment back, so it can only start copying once the
first is done where the segment then is).  Every stable read meanwhile
equals the single-node runtime over the batches its positions name, and
afterwards the members' maps union to exactly the single-node runtime's.
Also: a restored member re-sends exactly the chunks the original sends
(replay), and the pieces (key codecs, bulk deltas) on their own.
"""

from __future__ import annotations

import datetime as dt
import doctest
import random
import sys
from pathlib import Path

import msgspec
import pytest
from boreas.m3 import compile_sql
from boreas.m3.cumulus import SLOTS, Layout, Segment, place, relayout, slot
from boreas.m3.cumulus.stable import EpochDeltas
from boreas.node.cumulus import entry_columns, precopy
from boreas.node.cumulus.part import PartOperator
from boreas.node.cumulus.precopy import KeyCodec
from boreas.wire.columns import Columns

sys.path.insert(0, str(Path(__file__).parent / "m3"))
from support.cumulus_sim import Sim  # noqa: E402
from test_cumulus_sim import check_stable, check_union  # noqa: E402
from test_views_vs_duckdb import SHAPES  # noqa: E402

GROUP = "CREATE STREAM R(a INT, b INT); SELECT a, SUM(b) AS s, COUNT(*) AS n FROM R GROUP BY a"
#: the group-by (maps without indexes: bulk dict moves), TPC-H Q3 (indexed maps, pushes between members, DATE
#: keys), a self-join (a trigger reading what it writes) and a join grouped by keys of every type
CASES = {"group_by": GROUP, "tpch_q3": SHAPES["tpch_q3"], "self_join": SHAPES["self_join"],
         # keys of every type (DATE, STRING, FLOAT) in a join's indexed maps: Chunks and Pushes as Arrow columns
         "all_types": "CREATE STREAM R(a INT, f DOUBLE, s STRING, d DATE, b INT); CREATE STREAM S(a INT, c INT); "
                      "SELECT R.d, R.s, R.f, SUM(R.b * S.c) AS t FROM R, S WHERE R.a = S.a GROUP BY R.d, R.s, R.f"}
_DATES = [dt.date(1994, 6, 1), dt.date(1995, 3, 1), dt.date(1995, 3, 16)]


def two_members(sql: str) -> Layout:
    program = compile_sql(sql)
    maps = tuple((m.map, m.column) for m in place(program, box="v").maps)
    return Layout("v", ("n0:15000", "n1:15001"), (Segment(0, 0, SLOTS // 2, 0), Segment(1, SLOTS // 2, SLOTS, 1)), maps)


class Events:
    """Random rows of a program's relations over small domains (so joins hit), and deletes of live ones."""

    def __init__(self, sql: str, rng: random.Random, keys: int):
        program = compile_sql(sql)
        self.relations = {r.name: [c.type for c in r.columns] for r in program.relations
                          if any(t.relation == r.name for t in program.triggers)}
        self.rng, self.keys, self.live = rng, keys, []

    def _value(self, kind: str):
        r = self.rng
        return {"INT": lambda: r.randrange(self.keys), "FLOAT": lambda: r.randrange(8) / 4,
                "STRING": lambda: r.choice(["BUILDING", "ASIA", "A"]), "DATE": lambda: r.choice(_DATES)}[kind]()

    def batch(self, n: int) -> tuple[str, list]:
        relation = self.rng.choice(sorted(self.relations))
        out = []
        for _ in range(n):
            mine = [x for x in self.live if x[0] == relation]
            if mine and self.rng.random() < 0.25:
                victim = self.rng.choice(mine)
                self.live.remove(victim)
                out.append((-1, victim[1]))
            else:
                row = tuple(self._value(t) for t in self.relations[relation])
                self.live.append((relation, row))
                out.append((1, row))
        return relation, out


def deliver(sim: Sim, n: int) -> None:
    for _ in range(n):
        if not sim.deliver_one():
            return


@pytest.mark.parametrize("seed", [0, *(pytest.param(s, marks=pytest.mark.slow) for s in range(1, 4))])  # (make test-fast: 0)
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_segment_moves_exactly_while_written_restarted_and_followed_by_a_queued_change(case, seed, monkeypatch):
    monkeypatch.setattr(precopy, "COPY_STEP", 1)  # a copy of many steps
    sql, lay = CASES[case], two_members(CASES[case])
    rng = random.Random(seed)
    sim = Sim(sql, lay, random.Random(seed))
    events = Events(sql, rng, keys=60)
    for _ in range(60):
        sim.publish(rng.randrange(2), *events.batch(10))
        deliver(sim, 5)
        sim.tick(0.05)
    sim.settle()
    assert check_stable(sim)

    sim.request("there", relayout.move(lay, 1, 0))  # segment 1: member 1 -> member 0 (the leader)
    deliver(sim, 1000)  # the Relayout reaches the source; its copy goes one step per poll
    steps, dirty_seen, queued = 0, False, False
    while sim.members[1].parts.changes.copier.due(sim.members[1].parts.changes.first):
        sim.tick(0.02)  # polls the source (its timer is due at once while it copies); epochs go on
        steps += 1
        relation, rows = events.batch(4)  # writes land in the moving segment as well as elsewhere
        sim.publish(rng.randrange(2), relation, rows)
        deliver(sim, rng.randrange(8))
        copy = sim.members[1].parts.changes.relayouts[0].copy
        dirty_seen |= copy is not None and any(copy.dirty.values())
        if steps in (2, 5):
            sim.restart(1)  # the source, in the middle of its copy
        if steps == 3:
            sim.restart(0)  # the target (and leader), holding staged entries
        if steps == 4:  # a second change queues behind: the segment comes back, copied from member 0 this time
            sim.request("back", relayout.move(sim.members[0].latest_layout, 1, 1))
            queued = True
        check_stable(sim)
    assert steps > 4 and queued
    assert sim.members[0].parts.changes.pending is not None and sim.members[0].parts.changes.relayouts[-1].first is None
    sim.settle()
    final = sim.members[0].layout
    assert final.version == 3 and [s.member for s in final.segments] == [0, 1]
    assert all(op.layout == final and op.parts.changes.pending is None and not op.parts.changes.early for op in sim.members)
    check_union(sim, final)
    assert check_stable(sim)
    assert all(op.runtime.deltas.entries() == 0 for op in sim.members), "deltas left after quiescence"
    # between the members (not counting what a member sends itself): a final chunk per change, the first's
    # Copied (the second's source is the leader), a Flip per change to member 1
    assert (sim.sent["k!"], sim.sent["y"], sim.sent["f"]) == (2, 1, 2)
    if case == "group_by":
        assert dirty_seen, "no key of the moving segment was written during the copy"


def comparable(emitted: list) -> list:
    """What a member emitted, its view changes (a changelog's Columns) as rows and weights, to compare."""
    return [(port, (rows.rows(), rows.weight_list()) if isinstance(rows, Columns) else rows) for port, rows in emitted]


def test_a_restored_source_sends_the_chunks_the_original_sends(monkeypatch):
    """Replay after a snapshot taken mid-copy re-sends identical messages (peers drop them as duplicates)."""
    monkeypatch.setattr(precopy, "COPY_STEP", 7)
    lay = two_members(GROUP)
    sim = Sim(GROUP, lay, random.Random(1))
    sim.publish(1, "R", [(1, (a, a % 5 + 1)) for a in range(400)])
    sim.settle()
    sim.request("m", relayout.move(lay, 1, 0))
    deliver(sim, 1000)
    source = sim.members[1]
    for _ in range(3):
        sim.tick(0.01)
    assert source.parts.changes.copier.due(source.parts.changes.first)
    saved = msgspec.msgpack.decode(msgspec.msgpack.encode(source.state()))
    twin = PartOperator(source.box, source.inputs, source.outputs, source.partition, source.partition.nodes[1])
    twin.restore(saved, sim.now)
    rows = [(a, 2, 1) for a in range(0, 400, 3)]  # writes to moving keys between steps
    assert source.next_deadline() == twin.next_deadline() is not None  # the copy's timer is state too
    now = sim.now
    for seq in range(200):
        now += 0.007  # steps after some batches, and on some polls
        got = [comparable(op.poll(now)) for op in (source, twin)]
        assert got[0] == got[1]
        got = [comparable(op.process_from(0, rows, now, ("R", "p", seq))) for op in (source, twin)]
        assert got[0] == got[1]
        if not source.parts.changes.copier.due(source.parts.changes.first):
            break
    assert not source.parts.changes.copier.due(source.parts.changes.first) and not twin.parts.changes.copier.due(twin.parts.changes.first) and seq > 10


def test_the_move_pause_work_is_bulk(monkeypatch):
    """The flip moves a map without indexes with dict operations: the source's store loses the moved keys
    and the target's gains them in one pass each, and stable reads of the epoch before still see them on the
    source (bulk deltas)."""
    lay = two_members(GROUP)
    sim = Sim(GROUP, lay, random.Random(2))
    sim.publish(0, "R", [(1, (a, 1)) for a in range(2000)])
    sim.settle()
    moving = {a for a in range(2000) if slot(a) >= SLOTS // 2}
    sim.request("m", relayout.move(lay, 1, 0))
    sim.settle()
    target = sim.members[0]
    assert {k for k, _ in target.runtime.read_slice("Q1_n")} >= {(a,) for a in moving}
    assert sim.members[1].runtime.store.size("Q1_n") == 0
    assert max(sum(map(entry_columns.size, m[4])) for m in sim.chunks) <= precopy.COPY_STEP


def test_key_codecs_round_trip_dates_tuples_and_plain_values():
    for types, keys in [(("INT",), [3, -1, 7]), (("STRING",), ["a", "BUILDING"]), (("FLOAT",), [0.25, 3.0]),
                        (("DATE",), _DATES), (("INT", "DATE", "INT"), [(1, _DATES[0], 2), (3, _DATES[2], 0)]),
                        ((), [()]), (("INT", "STRING"), [(1, "x")])]:
        codec = KeyCodec(types)
        wire = msgspec.msgpack.decode(msgspec.msgpack.encode(codec.encode(list(keys))))
        assert codec.decode(wire) == list(keys), types


def test_bulk_deltas_read_and_snapshot_like_single_ones():
    d = EpochDeltas()
    d.record(3, "m", 1, 5)
    d.bulk(3, "m", {1: 2, 2: 4}, -1)
    d.bulk(4, "m", {9: 1}, 1)
    assert sorted(d.after(2, "m")) == [(1, -2), (1, 5), (2, -4), (9, 1)]
    assert sorted(d.after(3, "m")) == [(9, 1)] and d.epochs() == [3, 4] and d.entries() == 4
    again = EpochDeltas()
    again.restore(msgspec.msgpack.decode(msgspec.msgpack.encode(d.state(lambda n, k: k))), lambda n, k: k)
    assert sorted(again.after(2, "m")) == [(1, 3), (2, -4), (9, 1)]
    d.forget_through(3)
    assert d.epochs() == [4] and d.entries() == 1


def test_the_modules_examples():
    assert doctest.testmod(precopy).failed == 0
