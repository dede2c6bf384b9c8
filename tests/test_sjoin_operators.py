"""Borealis's sjoin and soutput (issue 35 item 2), fed by hand and behind an sunion.

The sjoin is a join of two changelogs (docs/operators.md, "Fault-tolerance
boxes"): after every batch, what it emitted, summed per row, must be the
row-at-a-time reference -- every pair of a left and a right row present
whose predicate holds and whose order values are within the windows, at the
product of the rows' weights -- however insertions and retractions on the
two sides are cut into batches and interleaved, and whether or not the box
was moved (``state()`` through msgpack) on the way.  Behind an sunion whose
in port goes silent, the sjoin's tentative pairs are retracted with their
rows, and the stable pairs stay.
"""

from __future__ import annotations

from collections import Counter

import msgspec
import pytest
from boreas.catalog.boxtypes import builtin_registry
from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.node.operators import OperatorError, build_operator
from boreas.wire.columns import weighted
from hypothesis import given, settings
from hypothesis import strategies as st
from support.changelog import changes, multiset

TRIVIAL = Schema("TrivialTuple", (Field("time", FieldType.INT), Field("join_attribute", FieldType.INT)))
SIZES = (3, 5)
PARAMS = (("predicate", "left.join_attribute = right.join_attribute"),
          ("left-order-by", "VALUES"), ("right-order-by", "VALUES"),
          ("left-order-on-field", "time"), ("right-order-on-field", "time"),
          ("left-buffer-size", str(SIZES[0])), ("right-buffer-size", str(SIZES[1])),
          ("out-field.0", "left.time"), ("out-field-name.0", "time1"),
          ("out-field.1", "right.time"), ("out-field-name.1", "time2"),
          ("out-field.2", "left.join_attribute"), ("out-field-name.2", "join_attribute"))


def sjoin(params=PARAMS):
    box = Box("j", "sjoin", (InPort("L"), InPort("R")), ("Join",), params)
    return box, builtin_registry().infer(box, [TRIVIAL, TRIVIAL])


def reference(left: Counter, right: Counter) -> Counter:
    """The pairs of the rows present: predicate, then the value windows, at the product of the weights."""
    out: Counter = Counter()
    for (lt, lk), lw in left.items():
        for (rt, rk), rw in right.items():
            near = rt - lt < SIZES[0] if lt <= rt else lt - rt < SIZES[1]
            if lk == rk and near:
                out[(lt, rt, lk)] += lw * rw
    return Counter({k: n for k, n in out.items() if n})


@st.composite
def histories(draw):
    """Changes (side, row, weight) on the two sides, each retraction of a row present then."""
    present: list[list[tuple]] = [[], []]
    out = []
    for _ in range(draw(st.integers(0, 40))):
        side = draw(st.integers(0, 1))
        if present[side] and draw(st.integers(0, 3)) == 0:
            row = present[side].pop(draw(st.integers(0, len(present[side]) - 1)))
            out.append((side, row, -1))
        else:
            row = (draw(st.integers(0, 20)), draw(st.integers(0, 3)))
            present[side].append(row)
            out.append((side, row, 1))
    return out


def feed(op, box, history, cuts, move_at=None):
    """The changes as batches (runs of one side, cut after the indexes in ``cuts``); after each, the net out and the
    reference agree."""
    emitted = []
    net = [Counter(), Counter()]
    i = 0
    while i < len(history):
        side = history[i][0]
        j = i + 1
        while j < len(history) and history[j][0] == side and j - 1 not in cuts:
            j += 1
        run = history[i:j]
        if move_at is not None and i >= move_at:
            state = msgspec.msgpack.decode(msgspec.msgpack.encode(op.state()))
            op = build_operator(box, [TRIVIAL, TRIVIAL], op.outputs)
            op.restore(state)
            move_at = None
        batch = weighted([r for _, r, _ in run], [w for _, _, w in run], TRIVIAL)
        emitted += [b for _, b in op.process(side, batch, 0.0)]
        for _, row, weight in run:
            net[side][row] += weight
        assert multiset(emitted) == reference(+net[0], +net[1])
        i = j
    return emitted


@settings(max_examples=60, deadline=None)
@given(histories(), st.sets(st.integers(0, 40)))
def test_sjoin_matches_the_reference_after_every_batch(history, cuts):
    box, outs = sjoin()
    feed(build_operator(box, [TRIVIAL, TRIVIAL], outs), box, history, cuts)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(histories(), st.sets(st.integers(0, 40)), st.integers(0, 40))
def test_a_moved_sjoin_goes_on_as_if_it_had_not_moved(history, cuts, at):
    box, outs = sjoin()
    feed(build_operator(box, [TRIVIAL, TRIVIAL], outs), box, history, cuts, move_at=at)


def test_behind_an_sunion_tentative_pairs_leave_with_their_rows():
    """Port 1 is silent past its max-delay: port 0's row goes out tentative and pairs with port 1's older row; the
    silent port's next row in a later bucket makes the bucket stable, and the tentative pair is retracted."""
    union = Box("u", "sunion", (InPort("A"), InPort("B")), ("C", "L", "R"),
                (("interval", "10"), ("max-delay.0", "1000"), ("max-delay.1", "1000"), ("order-on-field", "time")))
    u_outs = builtin_registry().infer(union, [TRIVIAL, TRIVIAL])
    su = build_operator(union, [TRIVIAL, TRIVIAL], u_outs)
    box, outs = sjoin()
    join = build_operator(box, [TRIVIAL, TRIVIAL], outs)
    joined: list[tuple[tuple, int]] = []

    def through(emitted) -> None:  # the sunion's data ports 1 and 2 feed the sjoin's left and right
        for port, batch in emitted:
            if port:
                joined.extend(c for _, b in join.process(port - 1, batch, 0.0) for c in changes(b))

    through(su.process(1, [(1, 7)], 0.0) + su.process(1, [(12, 8)], 0.0) + su.process(0, [(2, 7)], 0.0))
    assert joined == []  # bucket 0 waits for port 0 to pass it
    through(su.poll(1.0))  # port 0 silent past its max-delay
    assert joined == [((2, 1, 7), 1)]  # tentative: the union's tentative rows made it
    through(su.process(0, [(15, 8)], 2.0))  # port 0 past bucket 0: it is stable; bucket 1 waited long enough
    net: Counter = Counter()
    for row, weight in joined:
        net[row] += weight
    assert ((2, 1, 7), -1) in joined  # the tentative pair was retracted with its rows ...
    assert +net == Counter({(2, 1, 7): 1, (15, 12, 8): 1})  # ... and made again, stable; bucket 1's tentative


def test_soutput_passes_rows_with_their_weights():
    box = Box("o", "soutput", (InPort("U"),), ("C", "O"), ())
    outs = builtin_registry().infer(box, [TRIVIAL])
    op = build_operator(box, [TRIVIAL], outs)
    assert [(p, changes(b)) for p, b in op.process(0, [(1, 2)], 0.0)] == [(1, [((1, 2), 1)])]
    signed = weighted([(1, 2)], [-1], TRIVIAL)
    assert [(p, changes(b)) for p, b in op.process(0, signed, 0.0)] == [(1, [((1, 2), -1)])]


@pytest.mark.parametrize("param, value, why", [
    ("left-order-by", "TUPLES", "a TUPLES buffer counts rows as they arrive"),
    ("rightjoin", "false", "probes from one side only"),
    ("timeout", "5", "drops rows by when they arrived"),
])
def test_sjoin_refuses_what_a_retraction_cannot_undo(param, value, why):
    params = tuple((n, v) for n, v in PARAMS if n != param) + ((param, value),)
    box = Box("j", "sjoin", (InPort("L"), InPort("R")), ("Join",), params)
    with pytest.raises(OperatorError, match=why):
        build_operator(box, [TRIVIAL, TRIVIAL], [TRIVIAL])
