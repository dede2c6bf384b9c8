"""``rt_slice_changes`` (m3/runtime/native/crt_slices.py) against the numpy reading it replaced.

A counted map's slices whose count of non-zero entries a batch changed, one key each and the change, in the
order first written: found by one hash pass in C (``slicechanges.slice_changes``) and by numpy over the batch's
distinct keys (``slice_changes_numpy``, the reference).  Random insert and delete batches (rows inserted and
deleted in one batch, slices emptied and filled again) over maps of arity 1 to 4 with STRING, INT and DATE-free
keys, every key position taken as the counted one; the views' COUNT DISTINCTs are checked against DuckDB by
``test_sql_count_distinct_counts_vs_duckdb.py``, which runs this path on the native backend.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.native import native, skip_without_native

SQL = """CREATE STREAM R(a INT, b VARCHAR, c INT, d INT);
SELECT COUNT(DISTINCT c) AS dc FROM R;
SELECT a, COUNT(DISTINCT c) AS dc, COUNT(DISTINCT d) FILTER (WHERE c < 3) AS dd FROM R GROUP BY a;
SELECT a, b, COUNT(DISTINCT c) AS dc FROM R GROUP BY a, b;
SELECT a, b, c, COUNT(DISTINCT d) AS dd FROM R GROUP BY a, b, c"""


@pytest.fixture(autouse=True)
def _needs_native():
    skip_without_native()


rows = st.tuples(st.integers(0, 3), st.sampled_from(["x", "y", "zz"]), st.integers(0, 5), st.integers(-2, 2))
ops = st.lists(st.tuples(st.sampled_from(["ins", "ins", "del", "both"]), rows, st.integers(0, 99)),
               min_size=1, max_size=40)


@settings(max_examples=40, deadline=None)
@given(batches=st.lists(ops, min_size=1, max_size=6))
def test_slice_changes_in_c_equal_the_numpy_reading(batches):
    from boreas.m3.runtime.native.slicechanges import slice_changes, slice_changes_numpy

    rt = native(SQL)
    c = rt.native_maps()
    ints = {m.name for m in rt.program.maps if m.value_type == "INT"}
    live: list[tuple] = []
    seen = set()
    for batch in batches:
        events = []
        for op, row, pick in batch:
            if op == "del" and live:
                events.append(("R", -1, live.pop(pick % len(live))))
            else:
                events.append(("R", 1, row))
                live.append(row)
                if op == "both":  # in and out in one batch: its slice's count moves and comes back
                    events.append(("R", -1, live.pop()))
        rt.apply_batch(events)
        for name in c.map_no:
            if name not in ints:
                continue
            for at in range(c.arity[name]):
                got = slice_changes(c, name, at)
                assert got == slice_changes_numpy(c, name, at), (name, at)
                seen.add((c.arity[name], bool(got[0])))
        rt.changes()
    assert any(a >= 3 for a, moved in seen if moved) or not any(moved for _, moved in seen)
