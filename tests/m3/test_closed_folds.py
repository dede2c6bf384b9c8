"""A closed window's MIN or MAX per row folded by numpy from the native dump (m3/runtime/closed_folds.py) against
the row path (the closed entries copied into a store and folded in Python): the same rows, values and order, on
random inserts and deletes, and on the Python backend (which has no dump: the row path)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boreas.m3 import Runtime
from boreas.m3.runtime import program as program_module

SHAPES = {
    "max per window": "SELECT window_start, window_end, MAX(price) AS top FROM bid GROUP BY window_start, window_end",
    "min per auction and window": "SELECT auction, window_end, MIN(price) AS low FROM bid "
                                  "GROUP BY auction, window_start, window_end",
}
STREAM = "CREATE STREAM bid(auction INT, price INT, window_start INT, window_end INT);\n"

rows = st.tuples(st.integers(0, 3), st.integers(-5, 40), st.sampled_from([0, 10, 20, 30]), st.sampled_from([1, -1]))


def fed(sql: str, backend: str, batches) -> Runtime:
    rt = Runtime(STREAM + sql, backend=backend)
    for batch in batches:
        for sign in (1, -1):
            part = [(a, p, w, w + 10) for a, p, w, s in batch if s == sign]
            if part:
                rt.apply_grouped([("bid", sign, part)])
    return rt


def closed_rows(rt: Runtime, bound: int, with_bounds: bool = True):
    """The view's rows of the windows ending at or before ``bound``, as a closing reads them."""
    ends = {m.name: [k.name for k in m.keys].index("WINDOW_END") for m in rt.program.maps}
    closed = {name: rt.entries_at_most(name, at, bound) for name, at in ends.items()}
    bounds = {name: (at, bound) for name, at in ends.items()} if with_bounds else None
    return rt.closed_rows("Q1", closed, ends, bounds)


@settings(max_examples=40, deadline=None)
@given(shape=st.sampled_from(sorted(SHAPES)), batches=st.lists(st.lists(rows, max_size=25), min_size=1, max_size=4),
       bound=st.sampled_from([10, 20, 40]))
def test_folded_from_the_dump_as_by_rows(shape, batches, bound):
    native, python = fed(SHAPES[shape], "native", batches), fed(SHAPES[shape], "python", batches)
    assert native.native_maps() is not None
    got = closed_rows(native, bound)
    assert got == closed_rows(native, bound, with_bounds=False)  # the row path on the same backend, in order
    assert sorted(got) == sorted(closed_rows(python, bound))


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_fold_does_not_go_row_by_row(shape, monkeypatch):
    """On the native backend the closed entries are neither decoded nor copied into a store for a MIN or MAX."""
    rt = fed(SHAPES[shape], "native", [[(a, p, w, 1) for a in range(3) for p in (3, 9) for w in (0, 10)]])

    def refused(*_):
        raise AssertionError("went row by row")

    monkeypatch.setattr(program_module, "general_rows", refused)
    monkeypatch.setattr(program_module, "closed_store", refused)
    ends = {m.name: [k.name for k in m.keys].index("WINDOW_END") for m in rt.program.maps}
    got = rt.closed_rows("Q1", {}, ends, {name: (at, 10) for name, at in ends.items()})
    want = [((0, 10), 9)] if shape == "max per window" else [((a, 10, 0), 3) for a in range(3)]  # (the internal window_start last)
    assert got == want
