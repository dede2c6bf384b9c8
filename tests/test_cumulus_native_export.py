"""Push and Chunk entries exported from the native backend's C maps in bulk (m3/runtime/native/export.py).

A member on the native backend reads the entries a Push or a Chunk carries
straight from C as column buffers (``rt_export`` by slot, ``rt_get_many``
by key) and ``entry_columns.encode_exported`` wraps them as Arrow: the
message must be exactly what the Python path (entries as Python values,
``entry_columns.encode_stored``/``encode_tuples``) makes of the same
entries: the same schema, the same decoded values of the same types, and
the same IPC bytes.  Random maps of every key type the native backend
holds (INT, FLOAT, STRING, DATE; one key column or several; keyless), with
random slot selections, under hypothesis.  Then a Cumulus simulation of
native members (tests/m3/support/cumulus_sim.py) serves its Pushes this way.
"""

from __future__ import annotations

import datetime as dt
import random
import sys
from pathlib import Path

import numpy as np
import pytest
from boreas.m3.cumulus import SLOTS, Layout, Segment, place, slot
from boreas.m3.syntax import parse_program
from boreas.node.cumulus import entry_columns
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

export = pytest.importorskip("boreas.m3.runtime.native.export")
from boreas.m3.runtime.native.backend import open_native  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent / "m3"))

_TYPES = ("INT", "FLOAT", "STRING", "DATE")
_KEYS = {
    "INT": st.integers(-(2 ** 63), 2 ** 63 - 1) | st.integers(-50, 50),
    "FLOAT": st.floats(allow_nan=False, width=64).map(lambda f: f + 0.0) | st.integers(-20, 20).map(float),
    "STRING": st.text(max_size=6) | st.sampled_from(["ASIA", "", "é🙂"]),
    "DATE": st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31)),
}


@st.composite
def maps(draw):
    """A map (key types, value type) and its entries: key tuples and values other than 0."""
    types = tuple(draw(st.lists(st.sampled_from(_TYPES), min_size=0, max_size=3)))
    floats = draw(st.booleans())
    value = st.floats(allow_nan=False, allow_infinity=False, width=64).filter(bool) if floats else \
        st.integers(-(2 ** 63), 2 ** 63 - 1).filter(bool)
    keys = draw(st.lists(st.tuples(*(_KEYS[t] for t in types)), max_size=1 if not types else 60,
                         unique=True))
    return types, floats, [(k, draw(value)) for k in keys]


def _native(types: tuple, floats: bool, entries: list):
    decl = ", ".join(f"K{i}: {t}" for i, t in enumerate(types))
    cols = ", ".join([f"K{i} {t}" for i, t in enumerate(types)] + ["V FLOAT"])
    p = parse_program(f"CREATE STREAM R({cols}); DECLARE MAP m[{decl}] : {'FLOAT' if floats else 'INT'}; "
                      f"ON +R({', '.join([f'K{i}' for i in range(len(types))] + ['V'])}) DO "
                      f"{{ m[{', '.join(f'K{i}' for i in range(len(types)))}] += {'V' if floats else '1'} }}")
    native = open_native(p, 1e-9)
    native.load("m", entries)
    return native


def _python_item(native, name: str, entries: list) -> list:
    """What the Python path sends of ``entries`` (key tuples, values) read from the same C map."""
    keys = [k for k, _ in entries]
    return entry_columns.encode_tuples(name, keys, [v for _, v in entries], native.arity[name])


def _same_item(got: list, want: list) -> None:
    assert got[0] == want[0]
    a, b = entry_columns.decode_tuples(got), entry_columns.decode_tuples(want)
    assert [list(map(type, k)) for k in a[1]] == [list(map(type, k)) for k in b[1]]
    assert list(map(type, a[2])) == list(map(type, b[2]))
    assert a == b
    assert got[1] == want[1]  # the same IPC bytes: the wire format did not change


@st.composite
def slot_targets(draw):
    """Per slot, the member its segment goes to (-1: stays), segments as a layout change cuts them."""
    cuts = sorted(draw(st.sets(st.integers(1, SLOTS - 1), max_size=8)))
    out = np.empty(SLOTS, dtype=np.int32)
    for lo, hi in zip([0, *cuts], [*cuts, SLOTS]):
        out[lo:hi] = draw(st.integers(-1, 2))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(maps(), slot_targets() | st.none(), st.data())
def test_a_chunk_by_slots_from_c_is_the_python_paths_chunk(the_map, target_of, data):
    types, floats, entries = the_map
    native = _native(types, floats, entries)
    col = data.draw(st.sampled_from(range(len(types)))) if types else None
    exported, to = export.by_slots(native, "m", col, target_of)
    dumped = native.dump("m")  # the Python path: every entry as Python values, its slot by hashing.slot
    assert len(to) <= len(dumped) and all(t >= 0 for t in to.tolist())
    for t in sorted(set(to.tolist())):
        mask = to == t
        picked = export.Exported("m", exported.key_types, tuple(k[mask] for k in exported.keys),
                                 exported.values[mask], exported.strings)
        want_t = [(k, v) for k, v in dumped
                  if (0 if target_of is None else target_of[0] if col is None else target_of[slot(k[col])]) == t]
        got_item = entry_columns.encode_exported(picked)
        # (C lists entries in its pool's order, as the dump does: the same order)
        _same_item(got_item, _python_item(native, "m", want_t))
    if target_of is not None and col is not None:  # every entry whose slot leaves, and no other
        assert len(to) == sum(1 for k, _ in dumped if target_of[slot(k[col])] >= 0)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(maps(), st.data())
def test_a_push_at_keys_from_c_is_the_python_paths_push(the_map, data):
    types, floats, entries = the_map
    native = _native(types, floats, entries)
    absent = data.draw(st.lists(st.tuples(*(_KEYS[t] for t in types)), max_size=5 if types else 0))
    asked = list(dict.fromkeys([k for k, _ in entries] + absent))
    random.Random(data.draw(st.integers(0, 99))).shuffle(asked)
    exported = export.at_keys(native, "m", asked)
    values = native.get_many("m", asked)  # the Python path: read each key, keep those present
    want = [(k, v) for k, v in zip(asked, values) if v]
    if not want:  # (no Push item is sent for a map without entries: applying.py skips it)
        assert len(exported) == 0
        return
    _same_item(entry_columns.encode_exported(exported), _python_item(native, "m", want))


def test_string_slots_are_the_slot_hash():
    strings = ["", "q3", "ASIA", "BUILDING", "é🙂", "x" * 100]
    assert export.StringSlots().of(strings).tolist() == [slot(s) for s in strings]
    assert export.SLOTS == SLOTS


def test_a_simulated_cluster_of_native_members_serves_its_pushes_from_c_in_bulk(monkeypatch):
    """Q3's orders read customers from other members (Pushes): served by ``exported_at``, without bringing the
    Python mirror up to date (serving synced it for the maps' arities: 150x the export's CPU), and the members'
    maps still equal the single runtime's (test_cumulus_sim.py's check)."""
    from support.cumulus_sim import Sim

    from boreas.m3.runtime.program import Runtime
    from boreas.node.cumulus.applying import Applier

    serving, synced = [False], []
    sync, serve = getattr(Runtime, "_sync"), getattr(Applier, "_serve")

    def counted_sync(self):
        synced.append(serving[0])
        return sync(self)

    def flagged_serve(self, *args):
        serving[0] = True
        try:
            return serve(self, *args)
        finally:
            serving[0] = False

    monkeypatch.setattr(Runtime, "_sync", counted_sync)
    monkeypatch.setattr(Applier, "_serve", flagged_serve)
    from test_cumulus_sim import check_union
    from test_views_vs_duckdb import SHAPES

    from boreas.m3 import compile_sql

    sql = SHAPES["tpch_q3"]
    maps = tuple((m.map, m.column) for m in place(compile_sql(sql), box="v").maps)
    layout = Layout("v", ("n0:15000", "n1:15001"), (Segment(0, 0, SLOTS // 2, 0), Segment(1, SLOTS // 2, SLOTS, 1)),
                    maps)
    rng = random.Random(4)
    sim = Sim(sql, layout, rng)
    assert all(op.runtime.backend == "native" for op in sim.members)
    program = sim.program
    relations = {r.name: tuple(c.type for c in r.columns) for r in program.relations}
    values = {"INT": lambda: rng.randrange(6), "FLOAT": lambda: rng.randrange(8) / 4,
              "STRING": lambda: rng.choice(["BUILDING", "ASIA", "R"]),
              "DATE": lambda: rng.choice([dt.date(1995, 3, 1), dt.date(1995, 3, 20)])}
    for _ in range(12):
        for rel, types in relations.items():
            sim.publish(rng.randrange(2), rel, [(1, tuple(values[t]() for t in types)) for _ in range(5)])
            for _ in range(rng.randrange(4)):
                sim.deliver_one()
        sim.tick(0.1)
    sim.settle()
    assert sum(op.runtime.exported for op in sim.members) > 0 and not any(synced)
    check_union(sim, layout)


# -- a Chunk: the native pre-copy (node/cumulus/native_copy.py) against the Python one -----------------------------

ALL_TYPES = ("CREATE STREAM R(a INT, f DOUBLE, s STRING, d DATE, b INT); CREATE STREAM S(a INT, c INT); "
             "SELECT R.d, R.s, R.f, SUM(R.b * S.c) AS t FROM R, S WHERE R.a = S.a GROUP BY R.d, R.s, R.f; "
             "SELECT R.s, SUM(R.f) AS g FROM R GROUP BY R.s")
_D = [dt.date(1994, 6, 1), dt.date(1995, 3, 1), dt.date(1995, 3, 16)]


def _rows(rng: random.Random, n: int, keys: int) -> list:
    return [("R", 1, [(rng.randrange(keys), rng.choice([0.5, 1.25, -2.0, 3.0]), rng.choice(["ASIA", "", "B", "é"]),
                       rng.choice(_D), rng.randrange(-5, 9)) for _ in range(n)]),
            ("S", 1, [(a, rng.randrange(1, 4)) for a in rng.sample(range(keys), min(keys, n))])]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.integers(0, 10 ** 6), st.integers(1, 40), st.integers(1, 60), st.booleans())
def test_a_native_copys_chunks_stage_what_the_python_copys_stage(seed, budget, keys, overflow):
    """... also when an INT outgrows 64 bits in the middle of the copy (``overflow``): the member leaves C for
    good, and its copy carries on in Python from the native copy's state."""
    from boreas.m3 import compile_sql
    from boreas.m3.cumulus import relayout
    from boreas.m3.cumulus.member import MemberRuntime
    from boreas.m3.cumulus.native_member import NativeMemberRuntime
    from boreas.node.cumulus.native_copy import NativeSourceCopy, source_copy
    from boreas.node.cumulus.precopy import SourceCopy, chunk_entries, pieces
    from boreas.node.cumulus.staging import Staging

    program = compile_sql(ALL_TYPES)
    maps = tuple((m.map, m.column) for m in place(program, box="v").maps)
    lay = Layout("v", ("n0:1", "n1:2", "n2:3"), (Segment(0, 0, 1000, 0), Segment(1, 1000, 3000, 1),
                                                  Segment(2, 3000, SLOTS, 1)), maps)
    new = relayout.move(relayout.move(lay, 1, 0), 2, 2)
    moves = relayout.moves(lay, new)
    staged = []
    for kind in (MemberRuntime, NativeMemberRuntime):
        rng = random.Random(seed)
        source = kind(program, lay, 1)
        source.apply_grouped(_rows(rng, 3 * keys, keys))
        copy = source_copy(source, new, moves, 1)
        assert type(copy) is (NativeSourceCopy if kind is NativeMemberRuntime else SourceCopy)
        copy.start(source)
        staging = {t: Staging() for t in (0, 2)}
        writes = 0

        def write():  # dirty keys (three batches whatever the steps: between them, or after the last)
            nonlocal writes
            source.apply_grouped(_rows(rng, 5, keys))
            if overflow and writes == 1:
                source.apply_grouped([("R", 1, [(0, 0.5, "B", _D[0], 2 ** 62)]), ("S", 1, [(0, 3)])])
            writes += 1

        while not copy.done:
            for t, payload in copy.step(source, budget).items():
                staging[t].add_chunk(chunk_entries(payload, source))
            if writes < 3:
                write()
        while writes < 3:
            write()
        for t, payload in copy.final(source).items():
            for piece in pieces(payload, 7):
                staging[t].add_chunk(chunk_entries(piece, source))
        copy.take_out(source, 9)
        staged.append(({t: s.maps for t, s in staging.items()},
                       {name: dict(source.read_slice(name)) for name in source.store.data}))
    assert staged[0] == staged[1]
    assert not overflow or source.backend == "python"
    assert any(staged[0][0][t] for t in (0, 2)) or keys < 3


def test_a_moving_segment_copies_from_c_on_native_members(monkeypatch):
    """In the simulation (native members by default), a move runs the native copy and ends exact."""
    from test_cumulus_sim import check_union

    from boreas.m3 import compile_sql
    from boreas.m3.cumulus import relayout
    from boreas.node.cumulus import native_copy, precopy
    from support.cumulus_sim import Sim

    monkeypatch.setattr(precopy, "COPY_STEP", 5)
    made = set()
    maps = tuple((m.map, m.column) for m in place(compile_sql(ALL_TYPES), box="v").maps)
    lay = Layout("v", ("n0:1", "n1:2"), (Segment(0, 0, SLOTS // 2, 0), Segment(1, SLOTS // 2, SLOTS, 1)), maps)
    rng = random.Random(3)
    sim = Sim(ALL_TYPES, lay, rng)
    for rel, sign, rows in _rows(rng, 80, 30):
        sim.publish(1, rel, [(sign, r) for r in rows])
    sim.settle()
    new = relayout.move(lay, 1, 0)
    sim.request("m", new)
    for _ in range(40):
        for rel, sign, rows in _rows(rng, 3, 30):
            sim.publish(rng.randrange(2), rel, [(sign, r) for r in rows])
        sim.tick(0.05)
        for _ in range(20):
            sim.deliver_one()
        change = sim.members[1].parts.changes.first
        if change is not None and change.copy is not None:
            made.add(type(change.copy))
    sim.settle()
    assert made == {native_copy.NativeSourceCopy}
    final = sim.members[0].layout
    assert final.version == new.version
    check_union(sim, final)


def _grouped_copy(kind):
    """A member (``kind``) of a GROUP BY box, its second segment moving to member 0, its copy started."""
    from boreas.m3 import compile_sql
    from boreas.m3.cumulus import relayout
    from boreas.node.cumulus.native_copy import source_copy

    program = compile_sql("CREATE STREAM R(a INT, b INT); SELECT a, SUM(b) AS s FROM R GROUP BY a")
    maps = tuple((m.map, m.column) for m in place(program, box="v").maps)
    lay = Layout("v", ("n0:1", "n1:2"), (Segment(0, 0, 2000, 0), Segment(1, 2000, SLOTS, 1)), maps)
    new = relayout.move(lay, 1, 0)
    source = kind(program, lay, 1)
    source.apply_grouped([("R", 1, [(a, a + 1) for a in range(40)])])
    copy = source_copy(source, new, relayout.moves(lay, new), 1)
    copy.start(source)
    return source, copy


def test_a_key_past_64_bits_written_during_a_native_copy_carries_on_in_python():
    """The batch leaves C (an INT key past 64 bits); the copy's write hook hands its keys to the Python copy (it
    encoded them with the C codec: OverflowError out of the batch, the store written, its version not), and the
    result is the Python member's."""
    from boreas.m3.cumulus.member import MemberRuntime
    from boreas.m3.cumulus.native_member import NativeMemberRuntime

    outcomes = []
    for kind in (MemberRuntime, NativeMemberRuntime):
        source, copy = _grouped_copy(kind)
        source.apply_grouped([("R", 1, [(2 ** 64 + 3, 1), (5, 1)])])
        assert source.backend == "python"
        final = copy.final(source)
        outcomes.append((sorted(map(repr, final.items())), dict(source.read_slice("Q1_s"))))
    assert outcomes[0] == outcomes[1]


def test_a_finished_native_copy_that_leaves_c_stays_finished():
    """Done, then a value overflows (the member leaves C): the Python copy carrying on lists nothing again (it
    listed every map: done went back to False, and the whole segment was sent again after its final chunk)."""
    from boreas.m3.cumulus.native_member import NativeMemberRuntime

    source, copy = _grouped_copy(NativeMemberRuntime)
    while not copy.done:
        copy.step(source, 7)
    source.apply_grouped([("R", 1, [(3, 2 ** 63 - 1)])])
    copy.final(source)
    assert source.backend == "python" and copy.done
    assert copy.step(source, 7) == {}
