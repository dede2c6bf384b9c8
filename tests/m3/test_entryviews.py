"""A view of rows whose changes are read off its map's journal (``m3/runtime/entryviews.py``): the same changes,
in the same order, as evaluating every changed row (``general_changes`` without it), and they rebuild the view.

The shapes are views of rows that are general views (an output column repeats a row variable, as Nexmark q9's
``A.id`` beside ``B.auction`` does), over a join and over one stream, with deletes and batches that put an
entry back as it was (INT columns, no NULLs: the harness draws none).
"""

from __future__ import annotations

import pytest
from boreas.m3 import Runtime, compile_sql
from boreas.m3.runtime import entryviews
from boreas.m3.runtime.views import view_form
from changes_check import changes_rebuild_view, events_of
from hypothesis import HealthCheck, given, settings
from m3_harness import scaled, workloads

SHAPES = {
    "join_rows": """CREATE STREAM auction(id INT, seller INT); CREATE STREAM bid(auction INT, bidder INT, price INT);
        SELECT A.id, A.seller, B.auction, B.bidder, B.price FROM auction A, bid B WHERE A.id = B.auction;""",
    "one_stream_rows": """CREATE STREAM bid(auction INT, bidder INT, price INT);
        SELECT bidder, price, bidder AS again FROM bid;""",
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_shapes_take_the_entry_path(shape):
    program = compile_sql(SHAPES[shape])
    general = [v for v in program.views if v.general]
    assert general and all(entryviews.entry_map(view_form(program, v)) for v in general)


def test_a_view_reading_two_maps_or_a_fold_is_not_an_entry_view():
    program = compile_sql("""CREATE STREAM bid(auction INT, bidder INT, price INT);
        SELECT auction, COUNT(DISTINCT bidder) AS n, MAX(price) AS hi FROM bid GROUP BY auction;""")
    assert all(entryviews.entry_map(view_form(program, v)) is None for v in program.views if v.general)
    having = compile_sql("""CREATE STREAM R(a INT, b INT);
        SELECT a, b, a AS a2, COUNT(*) AS n FROM R GROUP BY a, b HAVING COUNT(*) > 1;""")  # (a WHERE on the view)
    forms = [view_form(having, v) for v in having.views if v.general]
    assert forms and all(entryviews.entry_map(f) is None for f in forms)


@pytest.mark.parametrize("backend", ["python", "native"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_entry_changes_equal_the_rows_evaluated(shape, backend, monkeypatch):
    program = compile_sql(SHAPES[shape])
    relations = Runtime(program, backend="python").relations

    @settings(max_examples=scaled(10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(workloads(relations, max_batches=4, max_ops=10))
    def check(batches):
        runs = []
        for entry in (True, False):
            with monkeypatch.context() as m:
                if not entry:  # the reference: every changed row evaluated, before from the row memo or the maps
                    m.setattr("boreas.m3.runtime.viewchanges.entry_map", lambda form: None)
                rt, live, seen = Runtime(program, backend=backend), {r: [] for r in relations}, []
                for ops in batches:
                    events = events_of(ops, live)
                    rt.apply_batch(events + [(name, -w, row) for name, w, row in events[:1]] + events[:1])
                    seen.append(rt.changes())
                runs.append(seen)
        assert runs[0] == runs[1]

    check()


@pytest.mark.parametrize("backend", ["python", "native"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_entry_changes_rebuild_the_view(shape, backend):
    changes_rebuild_view(SHAPES[shape], backend, examples=8)
