"""``COUNT(DISTINCT x)`` kept as counts of its multiplicity map's slices (``m3/runtime/slicecounts.py``): on
the native backend a map a general view reads only as a slice's count has no Python mirror kept per batch; its
counts are adjusted from the C journal's 0 <-> non-zero transitions.  The views against DuckDB after every batch
of random inserts and deletes, both backends (``m3_harness`` reads ``view()``, which counts a slice again from
the map: not the counts); each batch's ``changes()``, which the counts make, folded against the native view and
the Python backend's; and the mechanism's own choices: which maps it counts, and that their mirror is not
written per batch.
"""

from __future__ import annotations

import pytest
from boreas.m3 import Runtime, compile_sql
from boreas.m3.runtime import maps
from boreas.m3.runtime.memos import Memos
from boreas.m3.runtime.views import view_form
from m3_harness import changed_rows, check_against_duckdb, fold_changes, shape_params

GENERIC = """
CREATE STREAM R(a INT, b INT, c INT);
CREATE STREAM S(b INT, d INT);
"""

SHAPES: dict[str, str] = {
    "distinct_with_filters": GENERIC + """SELECT a, COUNT(*) AS n, MAX(c) AS hi, COUNT(DISTINCT b) AS bs,
        COUNT(DISTINCT b) FILTER (WHERE c < 3) AS low_bs, COUNT(DISTINCT c) FILTER (WHERE b >= 2) AS cs
        FROM R GROUP BY a""",
    "two_group_columns": GENERIC + """SELECT a, c, COUNT(DISTINCT b) AS bs, SUM(b) AS total FROM R
        GROUP BY a, c""",
    "distinct_over_a_join": GENERIC + """SELECT S.d, COUNT(DISTINCT R.a) AS n, COUNT(*) AS m FROM R, S
        WHERE R.b = S.b GROUP BY S.d""",
}


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape):
    check_against_duckdb(SHAPES[shape], examples=12)  # (kept cheap: the suite is near its CI budget)


def _memos(program) -> Memos:
    forms = {v.name: view_form(program, v) for v in program.views if v.general}
    return Memos(program, forms, False, forms)


def test_the_distinct_maps_are_counted_and_the_others_kept():
    program = compile_sql(SHAPES["distinct_with_filters"])
    counted = _memos(program).counts.counted
    distinct = {m.name for m in program.maps if m.name.endswith("_values")}
    assert distinct and set(counted) == distinct, counted
    assert set(counted.values()) == {1}  # (a, x): the distinct value's position
    member = Memos(program, (), True, {v.name: view_form(program, v) for v in program.views if v.general})
    assert not member.counts.counted  # a partition member's maps change between batches: no counts


def test_the_counted_maps_mirror_is_not_written_per_batch(monkeypatch):
    """The native runtime's mirror is set only for the maps it keeps; the counted maps' counts come from the
    journal, and the view read whole (which syncs the mirror) still agrees with the changes."""
    program = compile_sql(SHAPES["distinct_with_filters"])
    counted = set(_memos(program).counts.counted)
    written: list[str] = []
    add_many = maps.MapStore.add_many

    def noting(self, name, *args, **kwargs):
        written.append(name)
        return add_many(self, name, *args, **kwargs)

    monkeypatch.setattr(maps.MapStore, "add_many", noting)
    rt = Runtime(program, backend="native")
    if rt.backend != "native":
        pytest.skip(rt.backend_reason)
    rt.apply_batch([("R", 1, (1, 2, 1)), ("R", 1, (1, 2, 5)), ("R", 1, (1, 3, 1)), ("R", 1, (2, 2, 2))])
    assert changed_rows(rt)["Q1"] == [((1,), (3, 5, 2, 2, 2)), ((2,), (1, 2, 1, 1, 1))]
    rt.apply_batch([("R", -1, (1, 3, 1)), ("R", 1, (1, 2, 1))])
    assert changed_rows(rt)["Q1"] == [((1,), (3, 5, 1, 1, 2))]
    assert written and not counted & set(written)
    assert sorted(rt.view("Q1").items()) == [((1,), (3, 5, 1, 1, 2)), ((2,), (1, 2, 1, 1, 1))]


def test_slice_changes_are_the_counts_net_changes_in_first_written_order():
    """One key per slice whose count changed, with the net change; a slice whose entries came and went in equal
    numbers, and an entry whose multiplicity only grew, are not named."""
    from boreas.m3.runtime.native.slicechanges import slice_changes

    program = compile_sql(GENERIC + "SELECT a, COUNT(DISTINCT b) AS bs FROM R GROUP BY a")
    rt = Runtime(program, backend="native")
    if rt.backend != "native":
        pytest.skip(rt.backend_reason)
    (name,) = _memos(program).counts.counted
    rt.apply_batch([("R", 1, (1, 1, 0)), ("R", 1, (2, 1, 0)), ("R", 1, (3, 1, 0))])
    rt.changes()
    rt.apply_batch([("R", 1, (3, 2, 0)), ("R", 1, (2, 2, 0)), ("R", -1, (2, 1, 0)), ("R", 1, (1, 1, 0)),
                    ("R", -1, (1, 1, 0)), ("R", -1, (1, 1, 0)), ("R", 1, (3, 3, 0))])
    keys, deltas = slice_changes(rt.native_maps(), name, 1)
    assert [(k[0], d) for k, d in zip(keys, deltas)] == [(3, 2), (1, -1)]
    assert sorted(rt.changes()["Q1"]) == [((1,), 0), ((3,), 3)]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_changes_folded_are_the_view_and_the_python_backends(shape):
    """The counts themselves (``slice_changes``, ``SliceCounts.advance``, the readers' ``count``/``before``)
    run only when ``changes()`` is read: every batch's changes, folded, must be the native view and the
    Python backend's (which the DuckDB test above checks), with ``changes()`` left unread in some batches so
    the counts are also taken from the map whole again."""
    from hypothesis import HealthCheck, given, settings, strategies as st

    program = compile_sql(SHAPES[shape])
    if Runtime(program, backend="native").backend != "native":
        pytest.skip("no native backend here")
    event = st.one_of(
        st.tuples(st.just("R"), st.sampled_from([1, 1, -1]),
                  st.tuples(st.integers(0, 2), st.integers(0, 3), st.integers(0, 3))),
        st.tuples(st.just("S"), st.sampled_from([1, 1, -1]), st.tuples(st.integers(0, 3), st.integers(0, 2))))
    batches = st.lists(st.tuples(st.lists(event, max_size=12), st.booleans()), min_size=1, max_size=12)

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(batches)
    def check(steps):
        native, python = Runtime(program, backend="native"), Runtime(program, backend="python")
        names = [v.name for v in program.views if not v.internal]
        folded: dict[str, dict] = {name: {} for name in names}
        read_before = True
        for events, read in steps:
            native.apply_batch(events)
            python.apply_batch(events)
            if read:
                changes = native.changes()
                for name in names:
                    if not read_before:  # (a batch left unread: its changes are lost to the fold)
                        folded[name] = dict(native.view(name))
                    fold_changes(folded[name], changes.get(name, []))
            read_before = read
            if read:
                for name in names:
                    assert folded[name] == dict(python.view(name)), name
                    assert dict(native.view(name)) == dict(python.view(name)), name

    check()
