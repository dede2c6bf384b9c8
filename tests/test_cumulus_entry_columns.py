"""Push and Chunk messages carry map entries as Arrow columns (node/cumulus/entry_columns.py, docs/cumulus.md §3.12).

Every key and value type round-trips through a message as it travels
(msgpack of the message, IPC bytes inside) to exactly the list form it
replaces: INT, FLOAT (DOUBLE), STRING, DATE keys (once sent as day numbers),
timestamps, nulls, tuple keys, keyless maps, and the values Arrow cannot
hold as they are (ints past 64 bits, ints mixed with floats).  A Push is
served from a real member's maps and decoded as the applier decodes it; a
Chunk is a real pre-copy of moving segments, staged by the target.  A
relayout under load keeping every read exact, with keys of every type, is
tests/test_cumulus_precopy.py's (its ``all_types`` case).
"""

from __future__ import annotations

import datetime as dt
import random

import msgspec
import pytest
from boreas.m3 import compile_sql
from boreas.m3.cumulus import even_layout, place, relayout
from boreas.m3.cumulus.member import MemberRuntime
from boreas.node.cumulus import entry_columns
from boreas.node.cumulus import messages as msg
from boreas.node.cumulus.precopy import Codecs, SourceCopy, chunk_entries
from boreas.node.cumulus.staging import Staging

_D = [dt.date(1970, 1, 1), dt.date(1995, 3, 15), dt.date(1969, 12, 31)]
_T = [dt.datetime(2026, 11, 30, 3, 12, 5, 250), dt.datetime(1999, 1, 1)]

#: (key columns, values): every type, alone and in tuples, with nulls and Arrow's awkward cases
CASES = {
    "int": ([[1, -7, 2 ** 62]], [3, 0, -5]),
    "double": ([[0.25, -3.5, 1e300]], [0.5, 2.0, -1.25]),
    "string": ([["BUILDING", "", "é🙂"]], [1, 2, 3]),
    "date": ([_D], [1.5, 2.5, 3.5]),
    "timestamp": ([_T], [7, 8]),
    "nullable": ([[1, None, 3], ["a", "b", None]], [None, 2, 3]),
    "tuple_of_all": ([[1, 2], [0.5, 1.5], ["x", "y"], _D[:2], _T], [10, 20]),
    "keyless": ([], [42]),
    "bigint": ([[1, 2]], [2 ** 70, -(2 ** 65)]),
    "mixed_numbers": ([[1, 2, 3]], [1, 2.5, float("inf")]),
    "empty": ([[]], []),
    # columns pyarrow would change or refuse (review of 30 Nov): each travels as tagged text, exactly
    "int_and_string": ([[1, "a"]], [1, 2]),
    "date_and_datetime": ([[_D[0], _T[0]]], [1, 2]),
    "int_beside_date": ([[None, dt.date(2020, 1, 1), 1]], [1, 2, 3]),
    "aware_beside_naive": ([[_T[1], dt.datetime(1999, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=2)))]], [1, 2]),
    "aware": ([[dt.datetime(1999, 1, 1, 5, tzinfo=dt.timezone.utc)]], [1]),
    "bools": ([[True, False, None]], [True, 1, 1.0]),
    "nan_inf": ([[1, 2, 3]], [float("nan"), float("-inf"), 3]),
}



def _travel(message: list) -> list:
    """A message as it arrives: msgpack-encoded, decoded by the internal stream's decoder."""
    raw = msgspec.msgpack.encode([message])
    rows, _ = msg.MessageRows().decode(raw)
    return rows[0]


def _typed(values: list) -> list:
    return [(type(v), v) for v in values]


def _same(a: list, b: list) -> bool:
    """Equal values of the same types (a NaN equal to a NaN; an aware datetime with an equal offset)."""
    return len(a) == len(b) and all(type(x) is type(y) and (x == y or x != x and y != y)
                                    and getattr(x, "utcoffset", lambda: None)() == getattr(y, "utcoffset", lambda: None)()
                                    for x, y in zip(a, b))


@pytest.mark.parametrize("case", sorted(CASES))
def test_entries_round_trip_every_type_to_the_list_form(case):
    columns, values = CASES[case]
    arity = len(columns)
    keys = list(zip(*columns)) if columns else [()] * len(values)
    item = entry_columns.encode_tuples("m", keys, values, arity)
    arrived = _travel(msg.push(1, 0, 2, 1, [item]))
    assert isinstance(arrived[5][0][1], bytes)
    name, got_keys, got_values = entry_columns.decode_tuples(arrived[5][0])
    assert name == "m" and _same(got_values, values) and len(got_keys) == len(keys)
    assert all(_same(list(k), list(j)) for k, j in zip(got_keys, keys))  # no int became a float or a date
    assert entry_columns.size(item) == len(values)
    stored = keys if arity != 1 else [k[0] for k in keys]
    again = entry_columns.decode_stored(entry_columns.encode_stored("m", stored, values, arity))
    assert again[0] == "m" and _same(again[2], values)
    assert _same(again[1], stored) if arity == 1 else all(_same(list(k), list(j)) for k, j in zip(again[1], stored))


def test_a_value_no_column_can_carry_is_refused_by_the_sender_naming_its_type():
    with pytest.raises(TypeError, match="bytes"):
        entry_columns.encode("m", [[1, b"x"]], [1, 2])


ALL_TYPES = ("CREATE STREAM R(a INT, f DOUBLE, s STRING, d DATE, b INT); "
             "CREATE STREAM S(a INT, c INT); "
             "SELECT R.d, R.s, R.f, SUM(R.b * S.c) AS t FROM R, S WHERE R.a = S.a GROUP BY R.d, R.s, R.f")


def _layout(members: int):
    maps = [(m.map, m.column) for m in place(compile_sql(ALL_TYPES), box="g").maps]
    return even_layout("g", [f"n{i}" for i in range(members)], members, maps=maps)


def _filled(program: str, layout, member: int, rng: random.Random) -> MemberRuntime:
    runtime = MemberRuntime(compile_sql(program), layout, member)
    rows = [(rng.randrange(40), rng.choice([0.5, 1.25, -2.0]), rng.choice(["ASIA", "", "B"]), rng.choice(_D),
             rng.randrange(-5, 9)) for _ in range(300)]
    runtime.apply_grouped([("R", 1, rows), ("S", 1, [(a, rng.randrange(1, 4)) for a in range(40)])])
    return runtime


def test_a_push_carries_a_members_entries_of_every_type_as_the_list_form():
    """What a member serves (its ``read`` of every map, the list form) arrives as the same entries."""
    lay = _layout(1)
    runtime = _filled(ALL_TYPES, lay, 0, random.Random(3))
    listed = {name: runtime.read(name, (None,) * runtime.store.arity[name]) for name in runtime.store.data}
    assert any(isinstance(k[0], dt.date) for entries in listed.values() for k, _ in entries)
    items = [entry_columns.encode_tuples(name, [k for k, _ in entries], [v for _, v in entries],
                                         runtime.store.arity[name]) for name, entries in listed.items() if entries]
    arrived = _travel(msg.push(4, 1, 9, 0, items))
    assert msg.version(arrived) == (4, 1, 9)
    got = {}
    for item in arrived[5]:
        name, keys, values = entry_columns.decode_tuples(item)
        got[name] = list(zip(keys, values))
    assert got == {name: entries for name, entries in listed.items() if entries}


def test_a_chunk_carries_a_moving_segment_of_every_type_as_the_list_form():
    """A pre-copy's chunks, through messages, stage exactly what the list form stages."""
    program = compile_sql(ALL_TYPES)
    lay = _layout(2)
    source = _filled(ALL_TYPES, lay, 1, random.Random(5))
    new = relayout.move(lay, 1, 0)
    copy = SourceCopy(source, new, relayout.moves(lay, new), 1)
    copy.start(source)
    arrow, lists = Staging(), Staging()
    while not copy.done:
        for target, payload in copy.step(source, 7).items():
            assert target == 0
            lists.add(payload)
            arrived = _travel(msg.chunk("c", 1, False, chunk_entries(payload, source)))
            arrow.add_chunk(arrived[4])
    source.apply_grouped([("R", 1, [(a, 0.5, "ASIA", _D[1], 3) for a in range(40)])])  # dirty keys
    final = copy.final(source)[0]
    lists.add(final)
    arrow.add_chunk(_travel(msg.chunk("c", 1, True, chunk_entries(final, source)))[4])
    assert arrow.maps == lists.maps and sum(map(len, arrow.maps.values())) > 0
    assert all(type(k) is type(j) for name in arrow.maps for k, j in zip(arrow.maps[name], lists.maps[name]))
    codecs = Codecs(source.store)  # the staging's state (plain data) still restores
    assert Staging.of(arrow.state(codecs), codecs).maps == lists.maps
    assert {m.name for m in program.maps} >= set(arrow.maps)


def test_a_final_chunks_zero_deletes_a_staged_entry():
    staging = Staging()
    staging.add_chunk([entry_columns.encode_stored("m", [(1, "a"), (2, "b")], [5, 6], 2)])
    staging.add_chunk([entry_columns.encode_stored("m", [(1, "a")], [0], 2)])
    assert staging.maps == {"m": {(2, "b"): 6}}


# -- a state saved before Arrow Pushes and Chunks (their list forms) still restores ------------------------------

def _to_old_forms(state, op) -> int:
    """Rewrite, in place, every waiting Push and early Chunk of a member's ``state`` in the list form a state
    saved before this change holds; how many items were rewritten."""
    enc, codecs = op.parts.applier.encode_key, op.parts.changes.copier.codecs
    done = 0
    if isinstance(state, dict):
        for v in state.get("pushes", []) if isinstance(state.get("pushes"), list) else []:
            for by in v[3]:
                old = []
                for item in by[1]:
                    if len(item) == 3:  # (rewritten at an earlier restart)
                        old.append(item)
                        continue
                    name, keys, values = entry_columns.decode_tuples(item)
                    old.extend([name, enc(name, key), value] for key, value in zip(keys, values))
                    done += 1
                by[1] = old
        for m in state.get("early", []) if isinstance(state.get("early"), list) else []:
            old = []
            for item in m[4]:
                if len(item) == 3:
                    old.append(item)
                    continue
                name, keys, values = entry_columns.decode_stored(item)
                old.append([name, codecs.keys[name].encode(keys), values])
                done += 1
            m[4] = old
        for value in state.values():
            done += _to_old_forms(value, op)
    elif isinstance(state, list):
        for value in state:
            done += _to_old_forms(value, op) if isinstance(value, dict) else 0
    return done


def _restart_from_old_forms(sim, member: int) -> int:
    """As ``Sim.restart``, from the member's state with its Pushes and early Chunks in the old list forms."""
    from dataclasses import replace

    from boreas.node.cumulus.part import PartOperator

    op = sim.members[member]
    state = msgspec.msgpack.decode(msgspec.msgpack.encode(op.state()))
    done = _to_old_forms(state, op)
    fresh = PartOperator(op.box, op.inputs, op.outputs, replace(op.partition, nodes=sim.nodes), sim.nodes[member])
    fresh.restore(msgspec.msgpack.decode(msgspec.msgpack.encode(state)), sim.now)
    sim.members = [fresh if other is op else other for other in sim.members]
    return done


def _sim(members: int, seed: int):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent / "m3"))
    from support.cumulus_sim import Sim
    from test_cumulus_precopy import Events
    from test_cumulus_sim import check_stable

    program = compile_sql(ALL_TYPES)
    maps = [(m.map, m.column) for m in place(program, box="v").maps]
    lay = even_layout("v", [f"n{i}:{15000 + i}" for i in range(members)], members, maps=maps)
    return Sim(ALL_TYPES, lay, random.Random(seed)), Events(ALL_TYPES, random.Random(seed), keys=30), lay, check_stable


def test_a_state_with_pushes_waiting_in_the_old_list_form_restores_and_reads_exactly():
    """A member saved (before Arrow Pushes) holding Pushes ``[map, key, value]`` for a waiting version applies
    them once restored: every stable read stays exact."""
    found = 0
    for seed in range(20):
        sim, events, _, check_stable = _sim(3, seed)  # (a Push from member 1 can beat the Work from 0 to 2)
        rng = random.Random(seed)
        for _ in range(40):
            sim.publish(rng.randrange(3), *events.batch(6))
            for _ in range(rng.randrange(8)):
                sim.deliver_one()
                waiting = [m for m, op in enumerate(sim.members) if op.parts.applier.pushes]
                if waiting:
                    found += _restart_from_old_forms(sim, waiting[0])
            sim.tick(0.05)
        sim.settle()
        assert check_stable(sim)
        if found:
            return
    raise AssertionError("no member held a waiting Push to save")


def test_a_state_with_early_chunks_in_the_old_list_form_restores_and_stages_exactly():
    """A target saved (before Arrow Chunks) holding early Chunks ``[map, keys, values]`` (a source's chunks that
    came before the leader's Relayout) stages them once restored: the move ends exact."""
    for seed in range(30):
        sim, events, lay, check_stable = _sim(3, seed)
        rng = random.Random(seed)
        for _ in range(20):
            sim.publish(rng.randrange(3), *events.batch(10))
            sim.tick(0.05)
        sim.settle()
        source = next(s for s in lay.segments if s.member == 1)
        sim.request("m", relayout.move(lay, source.id, 2))  # leader 0 tells 1 and 2; 1's chunks may beat it to 2
        found = 0
        for _ in range(2000):
            if not sim.deliver_one():
                sim.tick(0.05)
            if sim.members[2].parts.changes.early:
                found = _restart_from_old_forms(sim, 2)
                break
        sim.settle()
        assert check_stable(sim)
        if found:
            return
    raise AssertionError("no target held an early Chunk to save")
