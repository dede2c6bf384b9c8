"""The native backend's changed keys (``NativeMaps.changed``, C's ``rt_changes``): what an ``m3`` box's changelog
is made of, read from the journals without a Python object per key.

Each case checks what a reader of the view would see: the keys whose values
a batch changed, once each, with the value before the batch and now; a key
written and put back within one batch is not a change.
"""

from __future__ import annotations

from array import array

import pytest
from boreas.m3 import Runtime

from support.native import skip_without_native


def runtime(sql: str) -> Runtime:
    skip_without_native()
    rt = Runtime(sql, backend="native")
    assert rt.backend == "native"
    return rt


def read(rt: Runtime, maps: list[str]) -> dict[tuple, tuple[list, list]]:
    """``{key codes: ([old per map], [new per map])}`` of the last batch, from the column-major buffers."""
    c = rt.native_maps().changed(maps)
    s, n = c.stride, c.n
    keys = [c.keys[i * s:i * s + n] for i in range(c.arity)]
    olds = [c.olds[j * s:j * s + n] for j in range(len(maps))]
    news = [c.news[j * s:j * s + n] for j in range(len(maps))]
    out = {tuple(k[r] for k in keys): ([o[r] for o in olds], [v[r] for v in news]) for r in range(n)}
    assert len(out) == n  # each key once
    return out


def test_changed_keys_carry_their_value_before_the_batch_and_now():
    rt = runtime("CREATE STREAM t(k INT, v INT); SELECT k, SUM(v) AS s FROM t GROUP BY k")
    (name,) = {m for v in rt.program.views for m in v.maps}
    rt.apply_grouped_columns([("t", 1, [array("q", [1, 2, 1]), array("q", [5, 7, 1])])])
    assert read(rt, [name]) == {(1,): ([0], [6]), (2,): ([0], [7])}
    # key 1 written twice and put back (no change); key 2 leaves (0 now); key 3 enters
    rt.apply_grouped_columns([("t", 1, [array("q", [1, 3]), array("q", [4, 9])]),
                              ("t", -1, [array("q", [1, 2]), array("q", [4, 7])])])
    assert read(rt, [name]) == {(2,): ([7], [0]), (3,): ([0], [9])}


def test_a_quotients_maps_are_read_together_and_doubles_compare_as_doubles():
    rt = runtime("CREATE STREAM t(k INT, x DOUBLE); SELECT k, AVG(x) AS a FROM t GROUP BY k")
    (view,) = rt.program.views
    maps = [view.columns[0].numerator, view.columns[0].denominator]
    rt.apply_grouped_columns([("t", 1, [array("q", [1, 2]), array("d", [1.5, 2.0])])])
    got = read(rt, maps)
    assert set(got) == {(1,), (2,)}
    float_map = [m in rt.native_maps().float_maps for m in maps]
    as_value = lambda bits, is_float: array("d", array("q", [bits]).tobytes())[0] if is_float else bits
    old, new = got[(1,)]
    assert [as_value(b, f) for b, f in zip(old, float_map)] == [0, 0]
    assert [as_value(b, f) for b, f in zip(new, float_map)] == [1.5, 1]
    # the count changes while the sum does not: still a change of key 2, with both maps' values
    rt.apply_grouped_columns([("t", 1, [array("q", [2]), array("d", [0.0])])])
    old, new = read(rt, maps)[(2,)]
    assert [as_value(b, f) for b, f in zip(old, float_map)] == [2.0, 1]
    assert [as_value(b, f) for b, f in zip(new, float_map)] == [2.0, 2]


def test_maps_of_different_key_arity_are_refused():
    rt = runtime("CREATE STREAM t(k INT, j INT, v INT); SELECT k, SUM(v) AS s FROM t GROUP BY k; "
                 "SELECT k, j, SUM(v) AS s2 FROM t GROUP BY k, j")
    names = sorted({m for v in rt.program.views for m in v.maps}, key=lambda m: rt.native_maps().arity[m])
    with pytest.raises(ValueError, match="differ in key arity"):
        rt.native_maps().changed(names)


def test_a_changelog_lists_the_rows_that_leave_then_the_rows_that_enter():
    rt = runtime("CREATE STREAM t(k INT, v INT); SELECT k, SUM(v) AS s FROM t GROUP BY k")
    (name,) = {m for v in rt.program.views for m in v.maps}
    native = rt.native_maps()
    rt.apply_grouped_columns([("t", 1, [array("q", [1, 2, 4]), array("q", [5, 7, 3])])])
    # key 1 changes (5 -> 9), key 2 leaves (7 -> 0), key 3 enters (9), key 4 is written and put back
    rt.apply_grouped_columns([("t", 1, [array("q", [1, 3, 4]), array("q", [4, 9, 2])]),
                              ("t", -1, [array("q", [2, 4]), array("q", [7, 2])])])
    log = native.changelog([name])
    keys = array("q", log.keys)[:log.n]
    values = array("q", log.vals)[:log.n]
    weights = array("q", log.weights)[:log.n]
    rows = list(zip(keys, values, weights))
    assert sorted(rows[:log.leaving]) == [(1, 5, -1), (2, 7, -1)]
    assert sorted(rows[log.leaving:]) == [(1, 9, 1), (3, 9, 1)]


def test_a_changelog_holds_exactly_its_rows_packed_column_by_column():
    """Two key columns and a batch that writes the view's map many times more than it changes keys: the
    buffers hold the rows written and nothing more (stride n), each column where the stride says."""
    rt = runtime("CREATE STREAM t(k INT, j INT, v INT); SELECT k, j, SUM(v) AS s FROM t GROUP BY k, j")
    (name,) = {m for v in rt.program.views for m in v.maps}
    native = rt.native_maps()
    rt.apply_grouped_columns([("t", 1, [array("q", [1, 2]), array("q", [10, 20]), array("q", [5, 6])])])
    many = 500  # writes of key (1, 10) and (3, 30); (2, 20) untouched
    rt.apply_grouped_columns([("t", 1, [array("q", [1, 3] * many), array("q", [10, 30] * many),
                                        array("q", [1, 2] * many)])])
    log = native.changelog([name])
    assert (log.n, log.leaving, log.stride) == (3, 1, 3)
    assert (len(log.keys), len(log.vals), len(log.weights)) == (8 * 2 * 3, 8 * 3, 8 * 3)
    keys = array("q", log.keys)
    rows = list(zip(keys[:3], keys[3:6], array("q", log.vals), array("q", log.weights)))
    assert rows[:1] == [(1, 10, 5, -1)]
    assert sorted(rows[1:]) == [(1, 10, 5 + many, 1), (3, 30, 2 * many, 1)]
