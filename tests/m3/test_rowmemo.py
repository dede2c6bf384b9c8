"""The memo of a general view's rows (``m3/runtime/rowmemo.py``): ``changes()`` reads a changed row's value
before the batch there, and reports exactly what evaluating it again reports.

The reference is the same program in a runtime that keeps no memo (a
subclass of ``Runtime``, as a partition member is, evaluates every changed
row before and after).  Random batches of inserts and deletes over views of
Nexmark q15/q16/q17's shapes (``COUNT(DISTINCT ...) FILTER``, ``SUM`` and
``COUNT`` over a group, ``MIN``/``MAX``, a ``HAVING`` that moves rows in and
out), with groups emptied and refilled, ``restore()`` of another runtime's
state at the same version, ``load()``, and (native) batches whose changes
nobody asked for: after every batch both runtimes report the same rows.
"""

from __future__ import annotations

import pytest
from boreas.m3 import Runtime, compile_sql
from boreas.m3.runtime import views
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from m3_harness import Unmemoized, changed_rows, scaled

STREAM = "CREATE STREAM bid(auction INT, bidder INT, price INT, channel INT);\n"
SHAPES = {
    "q16_distinct_filters": STREAM + """SELECT channel, COUNT(*) AS n, COUNT(*) FILTER (WHERE price < 5) AS low,
        COUNT(DISTINCT bidder) AS bidders, COUNT(DISTINCT bidder) FILTER (WHERE price < 5) AS low_bidders,
        COUNT(DISTINCT auction) FILTER (WHERE price >= 5) AS high_auctions FROM bid GROUP BY channel""",
    "q17_min_max_sum": STREAM + """SELECT auction, COUNT(*) AS n, MIN(price) AS lo, MAX(price) AS hi,
        SUM(price) AS total, AVG(price) AS mean FROM bid GROUP BY auction""",
    "having_distinct": STREAM + """SELECT channel, COUNT(DISTINCT bidder) AS bidders, SUM(price) AS total
        FROM bid GROUP BY channel HAVING COUNT(DISTINCT auction) > 1""",
}


@st.composite
def batches(draw, max_batches: int = 8, max_ops: int = 8):
    """Batches of ``("ins", row)``, ``("del", i)``, ``("empty", channel)`` (every live row of a channel deleted,
    refilled by a later insert), ``("restore",)``, ``("load",)`` and ``("unasked",)`` (changes not read)."""
    out = []
    small = st.integers(0, 3)
    for _ in range(draw(st.integers(1, max_batches))):
        kind = draw(st.integers(0, 9))
        if kind == 0:
            out.append([("restore",)])
        elif kind == 1:
            out.append([("load",)])
        elif kind == 2:
            out.append([("unasked",)])
        else:
            ops = []
            for _ in range(draw(st.integers(1, max_ops))):
                op = draw(st.integers(0, 5))
                if op == 0:
                    ops.append(("del", draw(st.integers(0, 30))))
                elif op == 1:
                    ops.append(("empty", draw(small)))
                else:
                    ops.append(("ins", (draw(small), draw(small), draw(st.integers(0, 9)), draw(small))))
            out.append(ops)
    return out


def _events(live: list, ops: list) -> list:
    events = []
    for op in ops:
        if op[0] == "ins":
            live.append(op[1])
            events.append(("bid", 1, op[1]))
        elif op[0] == "del" and live:
            events.append(("bid", -1, live.pop(op[1] % len(live))))
        elif op[0] == "empty":
            gone = [r for r in live if r[3] == op[1]]
            live[:] = [r for r in live if r[3] != op[1]]
            events.extend(("bid", -1, r) for r in gone)
    return events


@pytest.mark.parametrize("backend", ["python", "native"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_changes_with_the_memo_equal_changes_evaluated_again(shape, backend):
    program = compile_sql(SHAPES[shape])

    @settings(max_examples=scaled(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(batches())
    def check(workload):
        rt, ref = Runtime(program, backend=backend), Unmemoized(program, backend=backend)
        live: list = []
        for ops in workload:
            if ops[0][0] == "restore":  # another runtime's maps at the same version: the memo must not survive
                other = Unmemoized(program, backend="python")
                other.apply_batch([("bid", 1, (9, 9, 1, 0)), ("bid", 1, (8, 9, 7, 1))])
                while other.version < rt.version:
                    other.apply_batch([])
                live[:] = [(9, 9, 1, 0), (8, 9, 7, 1)]
                rt.restore(other.state())
                ref.restore(other.state())
                continue
            if ops[0][0] == "load":  # the maps replaced by a query over existing rows
                rt.load({"bid": list(live)})
                ref.load({"bid": list(live)})
                continue
            if ops[0][0] == "unasked":  # a batch whose changes nobody reads (native: the memo falls behind)
                events = _events(live, [("ins", (1, 2, 3, 1))])
                rt.apply_batch(events)
                ref.apply_batch(events)
                continue
            events = _events(live, ops)
            rt.apply_batch(events)
            ref.apply_batch(events)
            assert changed_rows(rt) == changed_rows(ref)
        assert rt.view(program.views[0].name) == ref.view(program.views[0].name)

    check()


@pytest.mark.parametrize("backend", ["python", "native"])
def test_a_changed_row_is_evaluated_once_where_the_memo_has_it(backend, monkeypatch):
    """The memo is what answers "before": one evaluation per changed row (after), where without it two."""
    program = compile_sql(SHAPES["q16_distinct_filters"])
    counted = {"n": 0}
    compiled: dict[int, object] = {}

    def counting(form):  # ViewForm.evaluate, every row it evaluates counted (``changes()`` reads it once a batch)
        evaluate = compiled.setdefault(id(form), views.compile_row(form, views.present))

        def run(row, reader):
            counted["n"] += 1
            return evaluate(row, reader)
        return run

    def counting_bound(form):  # ViewForm.bind (the rows after the batch, through one reader): each row counted
        evaluate = compiled.setdefault(id(form), views.compile_row(form, views.present))

        def bind(reader):
            def run(row):
                counted["n"] += 1
                return evaluate(row, reader)
            return run
        return bind

    for cls, per_row in ((Runtime, 1), (Unmemoized, 2)):
        rt = cls(program, backend=backend)
        rt.apply_batch([("bid", 1, (1, 1, 1, 0)), ("bid", 1, (2, 2, 7, 1))])
        rt.changes()
        monkeypatch.setattr(views.ViewForm, "evaluate", property(counting))
        monkeypatch.setattr(views.ViewForm, "bind", property(counting_bound))
        counted["n"] = 0
        rt.apply_batch([("bid", 1, (3, 3, 2, 0)), ("bid", -1, (2, 2, 7, 1))])  # channel 0 changes, 1 empties
        assert len(rt.changes()["Q1"]) == 2
        assert counted["n"] == 2 * per_row, cls.__name__
        monkeypatch.undo()
