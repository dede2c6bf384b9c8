"""Push and Chunk entries installed into the native backend's C maps in bulk (m3/runtime/native/install.py).

A member on the native backend receives a Push's or a Chunk's entries as
Arrow columns (node/cumulus/entry_columns.py) and installs them by
``rt_import`` from the columns' buffers (node/cumulus/entry_install.py),
not through Python values: the C maps must end exactly as the Python path
leaves them (the item decoded to key tuples and values, ``NativeMaps.load``),
for random maps of every key type (INT, FLOAT, STRING, DATE; one to three
columns, or none), INT or FLOAT values, zero values (a removal), keys
repeated (the last wins), items as a Python member sends them (ints in a
FLOAT map or key column) and ints beyond 64 bits (tagged text: the Python
path takes them, and fails or not as it always did).  Then the staging of
Chunks in codes, and a native member's Push installed with its ownership
filter, against the Python forms.
"""

from __future__ import annotations

import datetime as dt
from array import array

import numpy as np
import pytest
from boreas.m3.cumulus import SLOTS, slot
from boreas.m3.syntax import parse_program
from boreas.node.cumulus import entry_columns
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

install = pytest.importorskip("boreas.m3.runtime.native.install")
from boreas.m3.runtime.native.backend import open_native  # noqa: E402
from boreas.node.cumulus.entry_install import entry_columns_of  # noqa: E402
from boreas.node.cumulus.precopy import Codecs  # noqa: E402
from boreas.node.cumulus.staging import Staging, last_wins  # noqa: E402

_TYPES = ("INT", "FLOAT", "STRING", "DATE")
_BIG = st.integers(2 ** 63, 2 ** 70) | st.integers(-(2 ** 70), -(2 ** 63) - 1)
_KEYS = {
    "INT": st.integers(-(2 ** 63), 2 ** 63 - 1) | st.integers(-50, 50),
    "FLOAT": st.floats(allow_nan=False, width=64) | st.integers(-20, 20).map(float) | st.just(-0.0),
    "STRING": st.text(max_size=6) | st.sampled_from(["ASIA", "", "é🙂"]),
    "DATE": st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31)),
}


#: the maps tried: (key types, FLOAT values?), all in one program (one C module to build)
SHAPES = [((), False), ((), True), (("INT",), False), (("FLOAT",), True), (("STRING",), False), (("DATE",), True),
          (("STRING", "INT"), False), (("INT", "FLOAT", "DATE"), True), (("DATE", "STRING"), True),
          (("FLOAT", "STRING", "INT"), False), (("INT",), True), (("STRING",), True)]
_COL = {"INT": "I", "FLOAT": "F", "STRING": "S", "DATE": "D"}


def _program():
    decls, stmts = [], []
    for i, (types, floats) in enumerate(SHAPES):
        keys = ", ".join(f"K{j}: {t}" for j, t in enumerate(types))
        decls.append(f"DECLARE MAP m{i}[{keys}] : {'FLOAT' if floats else 'INT'};")
        stmts.append(f"m{i}[{', '.join(_COL[t] for t in types)}] += {'V' if floats else '1'}")
    return parse_program("CREATE STREAM R(I INT, F FLOAT, S STRING, D DATE, V FLOAT); " + " ".join(decls)
                         + " ON +R(I, F, S, D, V) DO { " + "; ".join(stmts) + " }")


_PROGRAM = _program()


def _natives(n: int = 2) -> list:
    return [open_native(_PROGRAM, 1e-9) for _ in range(n)]


@st.composite
def received(draw, big: bool = False):
    """A map (key types, FLOAT values?), entries already in it, and an item received: key tuples (repeats
    allowed) and values (0 among them), as a Python or a native member sends them."""
    shape = draw(st.sampled_from(range(len(SHAPES))))
    types, floats = SHAPES[shape]
    keys = {t: _KEYS[t] for t in types}
    if draw(st.booleans()):  # a Python member's FLOAT column of ints
        keys = {t: (st.integers(-20, 20) if t == "FLOAT" else s) for t, s in keys.items()}
    if big and "INT" in types:
        keys["INT"] = keys["INT"] | _BIG
    if floats:
        value = st.floats(allow_nan=False, allow_infinity=False, width=64) | st.integers(-9, 9)
        value = value if draw(st.booleans()) else st.integers(-(2 ** 53), 2 ** 53)  # all ints: an int64 column
    else:
        value = st.integers(-(2 ** 63), 2 ** 63 - 1) | st.just(0)
    small_key = st.tuples(*(_KEYS[t] for t in types))
    before = draw(st.lists(st.tuples(small_key, value.filter(bool)), max_size=1 if not types else 30))
    if big and not floats:
        value = value | _BIG
    key = st.tuples(*(keys[t] for t in types))
    pool = [k for k, _ in before]
    item_keys = draw(st.lists(st.sampled_from(pool) | key if pool else key, max_size=1 if not types else 40))
    values = [draw(value) for _ in item_keys]
    return f"m{shape}", types, floats, before, item_keys, values


def _dump(native, name: str) -> list:
    """Map ``name``'s entries with their values' and keys' types (sorted: the pool's order may differ)."""
    return sorted(((tuple((type(x).__name__, x) for x in k), type(v).__name__, v) for k, v in native.dump(name)),
                  key=repr)


def _python(native, item) -> Exception | None:
    name, keys, values = entry_columns.decode_tuples(item)
    try:
        native.load(name, list(zip(keys, values)))
    except (OverflowError, TypeError) as exc:
        return exc
    return None


def _natural(types, keys, values, floats) -> bool:
    """Whether the item's columns are all of the types the bulk path takes (no tagged column)."""
    def fits(v):
        return not isinstance(v, int) or -(2 ** 63) <= v < 2 ** 63
    kinds = [set(map(type, c)) for c in zip(*keys)] if keys else []
    vkinds = set(map(type, values))
    return (all(fits(k) for key in keys for k in key) and all(map(fits, values))
            and all(len(k) <= 1 for k in kinds) and len(vkinds) <= 1 and (floats or float not in vkinds))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(received(big=True))
def test_a_bulk_import_leaves_the_c_maps_as_the_python_install_does(case):
    name, types, floats, before, keys, values = case
    a, b = _natives()
    for native in (a, b):
        native.load(name, before)
    item = entry_columns.encode_tuples(name, keys, values, len(types))
    want = _python(a, item)
    cols = entry_columns_of(b, item)
    if cols is None:
        got = _python(b, item)  # the Python path: what the member does with such an item
        assert not keys or not _natural(types, keys, values, floats)
        assert type(got) is type(want)
    else:
        assert want is None
        coded = install.import_columns(b, name, cols.columns, cols.values, ints_as_float=cols.ints_as_float,
                                       install=True)
        assert len(coded) == len(keys)
    assert _dump(b, name) == _dump(a, name)
    # (the codes agree too: every key of the dump reads back from both at the same value)
    for k, v in a.dump(name):
        assert b.get_many(name, [k])[0] == v


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(received(), st.data())
def test_a_push_installs_only_the_entries_the_member_does_not_own(case, data):
    """``skip`` by slot in C keeps exactly the entries whose partition column's slot (hashing.slot) is not ours."""
    name, types, floats, _, keys, values = case
    if not types or not keys:
        return
    col = data.draw(st.sampled_from(range(len(types))))
    ours = np.asarray(data.draw(st.lists(st.booleans(), min_size=8, max_size=8)) * (SLOTS // 8), dtype=bool)
    a, b = _natives()
    item = entry_columns.encode_tuples(name, keys, values, len(types))
    cols = entry_columns_of(b, item)
    if cols is None:
        return
    _, dkeys, dvalues = entry_columns.decode_tuples(item)
    foreign = [(k, v) for k, v in zip(dkeys, dvalues) if not ours[slot(k[col])]]
    a.load(name, foreign)
    coded = install.import_columns(b, name, cols.columns, cols.values, ints_as_float=cols.ints_as_float,
                                   install=True, skip=ours, col=col)
    assert len(coded) == len(foreign)
    assert _dump(b, name) == _dump(a, name)
    # uninstalling by the codes kept leaves the map empty, as the Python path's removal by key does
    b.set_codes(name, array("q", coded.table.tobytes()), array("q", bytes(8 * len(coded))))
    a.load(name, [(k, 0) for k, _ in foreign])
    assert _dump(b, name) == _dump(a, name) == []


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.sampled_from(range(len(SHAPES))), st.lists(received(), min_size=1, max_size=3), st.data())
def test_chunks_staged_as_codes_are_the_python_staging(shape, cases, data):
    """Chunks of one map staged in codes (last value wins, 0 deletes), with Python-only items among them, give
    the Python staging's entries and state, and merge into the C map as the Python staging does."""
    types, floats = SHAPES[shape]
    name = f"m{shape}"
    rt, rt_python = _members()
    items = []
    for _, types_i, floats_i, before, keys, values in cases:
        if (types_i, floats_i) != (types, floats):  # (a case of another map of the same keys: FLOAT values, or not)
            continue
        # (a sender puts a key in one chunk once; across chunks keys repeat, and the last value wins)
        entries = list(dict(reversed([*before, *zip(keys, values)])).items())
        if floats and data.draw(st.booleans()):
            entries = [(k, float(v)) for k, v in entries]
        if entries:
            items.append(entry_columns.encode_tuples(name, [k for k, _ in entries], [v for _, v in entries],
                                                     len(types)))
    coded, python = Staging(), Staging()
    for item in items:
        python.add_chunk([item])
        coded.add_chunk([item], None, rt)
    assert not items or coded.coded or coded.maps
    codecs = Codecs(rt_python.store)
    assert Staging.of(coded.state(codecs), codecs).maps == python.maps
    coded.merge(rt, 5)
    python.merge(rt_python, 5)
    assert rt.native_maps() is not None
    assert rt.store.data[name] == rt_python.store.data[name]  # (-0.0 == 0.0: the C maps key both as 0.0)
    assert _dump(rt.native_maps(), name) == _dump(rt_python.native_maps(), name)
    assert dict(rt.deltas.after(4, name)) == dict(rt_python.deltas.after(4, name))


def _members():
    """Two native members of a one-member layout (every map partitioned on its first key column)."""
    from boreas.m3.cumulus import even_layout
    from boreas.m3.cumulus.native_member import NativeMemberRuntime

    lay = even_layout("g", ["n0"], 1, maps=[(f"m{i}", 0 if t else None) for i, (t, _) in enumerate(SHAPES)])
    return NativeMemberRuntime(_PROGRAM, lay, 0), NativeMemberRuntime(_PROGRAM, lay, 0)


def test_last_wins_keeps_each_keys_last_value_and_drops_zeros():
    from boreas.m3.runtime.native.install import Coded
    part = Coded("m", np.array([[1], [2], [1], [3], [2]]), np.array([5, 6, 7, 8, 0]))
    got = last_wins([part, Coded("m", np.array([[3]]), np.array([9]))])
    assert got.table.ravel().tolist() == [1, 3] and got.bits.tolist() == [7, 9]


def test_a_simulated_cluster_of_native_members_installs_pushes_and_chunks_in_bulk(monkeypatch):
    """In the simulation (native members by default: real PartOperators, messages in random order, members
    restarting from their states), a join's Pushes and a moving segment's Chunks take the bulk path, and the
    members' maps still union to the single runtime's (test_cumulus_sim.py's check), before and after the move."""
    import random
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent / "m3"))
    from support.cumulus_sim import Sim
    from test_cumulus_native_export import ALL_TYPES, _rows
    from test_cumulus_sim import check_union

    from boreas.m3 import compile_sql
    from boreas.m3.cumulus import Layout, Segment, place, relayout
    from boreas.m3.cumulus import native_member
    from boreas.node.cumulus import precopy, staging

    calls = {"push": 0, "chunk": 0}

    def counting(kind, real):
        def wrapped(*args, **kwargs):
            calls[kind] += 1
            return real(*args, **kwargs)
        return wrapped

    monkeypatch.setattr(native_member, "import_columns", counting("push", native_member.import_columns))
    monkeypatch.setattr(staging, "import_columns", counting("chunk", staging.import_columns))
    monkeypatch.setattr(precopy, "COPY_STEP", 5)
    maps = tuple((m.map, m.column) for m in place(compile_sql(ALL_TYPES), box="v").maps)
    lay = Layout("v", ("n0:1", "n1:2"), (Segment(0, 0, SLOTS // 2, 0), Segment(1, SLOTS // 2, SLOTS, 1)), maps)
    rng = random.Random(5)
    sim = Sim(ALL_TYPES, lay, rng)
    assert all(op.runtime.backend == "native" for op in sim.members)
    for rel, sign, rows in _rows(rng, 60, 30):
        sim.publish(rng.randrange(2), rel, [(sign, r) for r in rows])
    sim.settle()
    check_union(sim, lay)
    new = relayout.move(lay, 1, 0)
    sim.request("m", new)
    for _ in range(30):
        for rel, sign, rows in _rows(rng, 3, 30):
            sim.publish(rng.randrange(2), rel, [(sign, r) for r in rows])
        sim.tick(0.05)
        for _ in range(20):
            sim.deliver_one()
    sim.settle()
    assert sim.members[0].layout.version == new.version
    assert calls["push"] > 0 and calls["chunk"] > 0, calls
    check_union(sim, sim.members[0].layout)


def test_codes_staged_before_the_member_left_c_are_put_in_through_python():
    """A member that moved to the Python backend (an INT beyond 64 bits) between staging and merge gets the
    staged codes decoded and put in: its maps end as a Python staging's merge leaves them."""
    name, types = "m6", SHAPES[6][0]  # (STRING, INT) -> INT
    keys = [("a", 1), ("b", 2), ("a", 1), ("c", 3)]
    item = entry_columns.encode_tuples(name, keys, [5, 6, 7, 0], len(types))
    rt, rt_python = _members()
    coded, python = Staging(), Staging()
    coded.add_chunk([item], None, rt)
    python.add_chunk([item])
    assert coded.coded and not coded.maps
    row = (2 ** 70, 1.0, "z", dt.date(2020, 1, 1), 1.0)
    for member in (rt, rt_python):
        member.apply_grouped([("R", 1, [row])])
        assert member.backend == "python"
    coded.merge(rt, 3)
    python.merge(rt_python, 3)
    assert rt.store.data[name] == rt_python.store.data[name] == {("a", 1): 7, ("b", 2): 6, **{
        k: v for k, v in rt_python.store.data[name].items() if k[0] == "z"}}
    assert dict(rt.deltas.after(2, name)) == dict(rt_python.deltas.after(2, name))


def test_a_push_of_a_map_the_member_holds_whole_installs_nothing_and_a_failed_push_leaves_nothing():
    """Entries pushed for a map this member holds whole (replicated, or one it is home of) are none of its
    foreign keys: the Python path drops them, so the bulk path installs none (a review found it raised on
    a keyed map, and the version was lost).  And a Push whose later map fails takes out what its earlier
    maps set in C: nothing of it stays (a review found a bulk item left behind)."""
    from boreas.m3.cumulus import even_layout
    from boreas.m3.cumulus.native_member import NativeMemberRuntime
    from boreas.m3.runtime.native.install import Pushed

    home = even_layout("g", ["n0", "n1"], 2, maps=[(f"m{i}", None if i == 2 else (0 if t else None))
                                                    for i, (t, _) in enumerate(SHAPES)])
    rt = NativeMemberRuntime(_PROGRAM, home, home.home)
    native = rt.native_maps()
    held = entry_columns_of(native, entry_columns.encode_tuples("m2", [(1,), (2,)], [5, 6], 1))
    assert rt.apply_with([], Pushed(native, {}, [held])) == 1
    assert native.dump("m2") == []

    lay = even_layout("g", ["n0", "n1"], 2, maps=[(f"m{i}", 0 if t else None) for i, (t, _) in enumerate(SHAPES)])
    rt = NativeMemberRuntime(_PROGRAM, lay, 1)
    native = rt.native_maps()
    foreign = [k for k in range(40) if slot(k) < SLOTS // 2][:3]  # (keys member 0 owns)
    bulk = entry_columns_of(native, entry_columns.encode_tuples("m2", [(k,) for k in foreign], [5] * 3, 1))
    too_big = {("m6", ("s", 2 ** 70)): 1}  # (a key beyond 64 bits: the Python path's load raises)
    with pytest.raises(OverflowError):
        rt.apply_with([], Pushed(native, too_big, [bulk]))
    assert native.dump("m2") == []
