"""Borealis's aurorajoin (issue 35): against a reference of AuroraJoinQBox's documented semantics.

A reference (below, over the whole history: a buffer is the other side's
tuples since the last one its trims dropped) gives, for each arriving
tuple, the pairs it makes; the box, fed the same tuples in batches cut
anywhere and moved mid-stream (``state()`` through msgpack), must emit
exactly those, in order.  The suite's shape (``1=1``, ``up-size`` 5,
``down-size`` 3, by VALUES) is worked by hand.
"""

from __future__ import annotations

import msgspec
import pytest
from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.boxtypes import builtin_registry
from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.m3.boxtype import box_types
from boreas.node.operators import build_operator
from hypothesis import given, settings
from hypothesis import strategies as st

LEFT = Schema("InputTuple1", (Field("time1", FieldType.INT), Field("value1", FieldType.INT)))
RIGHT = Schema("InputTuple2", (Field("time2", FieldType.INT), Field("value2", FieldType.INT)))


def aurorajoin(by: str, down: int, up: int, predicate: str = "left.value1 = right.value2"):
    params = [("predicate", predicate), ("down-size", str(down)), ("up-size", str(up)),
              ("left-order-by", by), ("right-order-by", by),
              ("left-order-on-field", "time1"), ("right-order-on-field", "time2")]
    box = Box("j", "aurorajoin", (InPort("Input1"), InPort("Input2")), ("Out",), tuple(params))
    return box, builtin_registry().infer(box, [LEFT, RIGHT])


def reference(history, by: str, sizes: tuple[int, int]) -> list[tuple]:
    """Each arriving tuple: into its side's list; the other side's oldest kept tuples dropped while too many (TUPLES)
    or too old for it (VALUES, a null one dropped); then paired with the other side's kept tuples, oldest first."""
    kept: list[list[tuple]] = [[], []]
    out = []
    for side, row in history:
        other = 1 - side
        kept[side].append(row)
        if by == "TUPLES":
            kept[other] = kept[other][max(0, len(kept[other]) - sizes[other]):]
        elif row[0] is not None:
            while kept[other] and (kept[other][0][0] is None or row[0] - kept[other][0][0] > sizes[other]):
                kept[other].pop(0)
        for partner in kept[other]:
            left, right = (row, partner) if side == 0 else (partner, row)
            if left[1] == right[1]:
                out.append(left + right)
    return out


histories = st.lists(st.tuples(st.integers(0, 1), st.tuples(st.one_of(st.none(), st.integers(0, 30)),
                                                                st.integers(0, 2))), max_size=40)


@settings(max_examples=60, deadline=None)
@given(histories, st.sampled_from(("VALUES", "TUPLES")), st.integers(0, 6), st.integers(0, 6),
       st.sets(st.integers(0, 40)), st.integers(0, 40))
def test_aurorajoin_matches_the_reference_cut_anywhere_and_moved(history, by, down, up, cuts, move_at):
    box, outs = aurorajoin(by, down, up)
    op = build_operator(box, [LEFT, RIGHT], outs)
    got = []
    i = 0
    while i < len(history):
        side = history[i][0]
        j = i + 1
        while j < len(history) and history[j][0] == side and j - 1 not in cuts:
            j += 1
        if i >= move_at:
            state = msgspec.msgpack.decode(msgspec.msgpack.encode(op.state()))
            op = build_operator(box, [LEFT, RIGHT], outs)
            op.restore(state)
            move_at = len(history)
        got += [row for _, rows in op.process(side, [r for _, r in history[i:j]], 0.0) for row in rows]
        i = j
    assert got == reference(history, by, (down, up))


def test_the_suite_shape_pairs_each_tuple_with_the_other_side_near_it():
    box, outs = aurorajoin("VALUES", 3, 5, predicate="1=1")
    op = build_operator(box, [LEFT, RIGHT], outs)
    assert op.process(1, [(1, 10), (6, 11)], 0.0) == []
    assert op.process(0, [(7, 1)], 0.0) == [(0, [(7, 1, 6, 11)])]  # (1,10) is more than up-size 5 behind 7
    assert op.process(1, [(12, 12)], 0.0) == []  # (7,1) is more than down-size 3 behind 12


def test_an_aurorajoin_diagram_is_accepted_and_timeout_refused():
    text = """<borealis><input stream="A" schema="L"/><input stream="B" schema="R"/>
      <schema name="L"><field name="t" type="int"/></schema><schema name="R"><field name="u" type="int"/></schema>
      <box name="j" type="aurorajoin"><in stream="A"/><in stream="B"/><out stream="J"/>
        <parameter name="predicate" value="left.t = right.u"/><parameter name="up-size" value="5"/>
        <parameter name="down-size" value="3"/><parameter name="left-order-by" value="VALUES"/>
        <parameter name="right-order-by" value="VALUES"/><parameter name="left-order-on-field" value="t"/>
        <parameter name="right-order-on-field" value="u"/>TIMEOUT</box></borealis>"""
    planned = plan_submission(Catalog(), [read_document(text.replace("TIMEOUT", ""), "app.xml")], box_types())
    assert planned.ok, planned.problems
    refused = plan_submission(Catalog(), [read_document(
        text.replace("TIMEOUT", '<parameter name="timeout" value="2"/>'), "app.xml")], box_types())
    problems = [str(p) for p in refused.problems]
    assert len(problems) == 1 and problems[0].startswith("app.xml:3: /borealis/box: ")
    assert "parameter 'timeout' is not supported for an aurorajoin yet" in problems[0]


@pytest.mark.parametrize("missing", ["left-order-on-field", "right-order-on-field"])
def test_a_values_buffer_needs_both_order_fields(missing):
    box, _ = aurorajoin("VALUES", 3, 5)
    box = Box(box.name, box.type, box.inputs, box.outputs, tuple(p for p in box.params if p[0] != missing))
    with pytest.raises(ValueError, match=f"needs parameter '{missing}'"):
        builtin_registry().infer(box, [LEFT, RIGHT])
