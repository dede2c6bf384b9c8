"""A closing's store of closed entries (m3/runtime/closed.py ``fill``) against ``MapStore.add_many``: the same
data and indexes, over random entries, key widths and indexes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from boreas.m3.runtime.closed import fill
from boreas.m3.runtime.maps import MapStore
from boreas.m3.syntax import parse_program

INDEXES = {1: [[]], 2: [[], [(0,)], [(1,), (0,)]], 3: [[], [(0, 1)], [(2,), (0, 1)], [(0,), (1, 2)]]}


@settings(max_examples=40, deadline=None)
@given(data=st.data(), arity=st.sampled_from([1, 2, 3]))
def test_fill_holds_what_add_many_holds(data, arity):
    specs = data.draw(st.sampled_from(INDEXES[arity]))
    keys = ", ".join(f"K{i}: INT" for i in range(arity))
    program = parse_program(f"DECLARE MAP n[{keys}] : INT;")
    entries = data.draw(st.dictionaries(st.tuples(*[st.integers(0, 3)] * arity), st.integers(-1, 2), max_size=20))
    filled, added = MapStore(program, {"n": specs}), MapStore(program, {"n": specs})
    fill(filled, "n", entries)
    added.add_many("n", [(added.pack("n", k), v) for k, v in entries.items()])
    assert filled.data == added.data and filled.indexes == added.indexes


@settings(max_examples=30, deadline=None)
@given(entries=st.dictionaries(st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3)),
                               st.integers(-1, 2), max_size=20))
def test_a_closed_views_rows_read_off_its_index_are_its_candidate_rows(entries):
    """``_index_rows`` (the index's bound parts) against ``candidate_rows`` (every entry's key): same rows, order."""
    from boreas.m3.runtime.closed import _index_rows
    from boreas.m3.runtime.viewchanges import current_reader
    from boreas.m3.runtime.views import candidate_rows, view_form

    program = parse_program("DECLARE MAP mm[W: INT, S: INT, P: INT] : INT;"
                            " DECLARE VIEW top[e := W, s := S](hi := MAX(P : mm[W, S, P]));")
    store = MapStore(program, {"mm": [(0, 1)]})
    fill(store, "mm", entries)
    form = view_form(program, program.views[0])
    assert _index_rows(form, store) == candidate_rows(form, current_reader(store).entries)
