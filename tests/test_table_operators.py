"""Borealis's table boxes (issue 35 item 3): insert, update, delete, select and joinstatic over one table, by hand.

A random interleaving of tuples for the four boxes is applied one tuple at
a time by a reference written from the documented semantics
(docs/operators.md, "Table boxes"), and by the operators sharing one table (the five boxes of
the same table)
with the tuples cut into batches anywhere; each box's output and the
table's rows must agree.  A table's boxes moved mid-stream (``state()``
through msgpack into fresh operators) must end where unmoved ones end.
"""

from __future__ import annotations

import functools

import msgspec
import pytest
from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.model import Box, InPort
from boreas.catalog.table_params import bind
from boreas.catalog.validate import stream_schemas
from boreas.m3.boxtype import box_types
from boreas.node.operators import OperatorError, build_operator
from boreas.node.operators.table_rows import KeyedRows
from hypothesis import given, settings
from hypothesis import strategies as st

APP = """<borealis>
  <schema name="Row"><field name="k" type="int"/><field name="v" type="int"/><field name="w" type="int"/></schema>
  <schema name="Ask"><field name="k" type="int"/><field name="v" type="int"/></schema>
  <input stream="Put" schema="Row"/><input stream="Bump" schema="Ask"/><input stream="Drop" schema="Ask"/>
  <input stream="Read" schema="Ask"/>
  <table name="T" schema="Row"><key field="k"/></table>
  <box name="put" type="insert"><in stream="Put"/><access table="T"/><out stream="PutDone"/>
    <parameter name="sql" value="insert into T values (k, v, w * 2)"/>
    <parameter name="pass-input" value="1"/></box>
  <box name="bump" type="update"><in stream="Bump"/><access table="T"/>
    <parameter name="sql" value="update T set T.v = T.v + input.v, w = input.k where T.k == input.k or T.w &lt; input.v"/></box>
  <box name="drop" type="delete"><in stream="Drop"/><access table="T"/><out stream="Gone"/><out stream="DropIn"/>
    <parameter name="sql" value="delete from T where T.v &gt; input.v and T.k &lt;&gt; input.k"/>
    <parameter name="pass-deletions" value="1"/><parameter name="pass-input" value="1"/></box>
  <box name="read" type="select"><in stream="Read"/><access table="T"/><out stream="Found"/><out stream="Missed"/>
    <parameter name="sql" value="select v, T.k from T where T.k == input.k or T.v == input.v"/>
    <parameter name="pass-on-no-results" value="1"/></box>
  <box name="pair" type="joinstatic"><in stream="Read"/><access table="T"/><out stream="Paired"/>
    <parameter name="predicate" value="right.k = left.k or right.v &gt; left.v"/>
    <parameter name="out-field.0" value="left.k * 10 + right.w"/><parameter name="out-field-name.0" value="kw"/>
    <parameter name="out-field.1" value="right.v"/><parameter name="out-field-name.1" value="v"/></box>
</borealis>"""

BOXES = ("put", "bump", "drop", "read", "pair")


@functools.cache
def planned() -> tuple[Catalog, dict]:
    plan = plan_submission(Catalog(), [read_document(APP, "app.xml")], box_types())
    assert not plan.problems
    return plan.catalog, stream_schemas(plan.catalog, box_types())


def operators() -> dict:
    """The four boxes' operators, sharing one table's rows as a node shares them."""
    catalog, schemas = planned()
    ops = {}
    for name in BOXES:
        box = bind(catalog.boxes[name], catalog)
        ops[name] = build_operator(box, [schemas[p.stream] for p in box.inputs], [schemas[s] for s in box.outputs])
    rows = KeyedRows(ops["put"].key_indexes)
    for op in ops.values():
        op.attach(rows)
    return ops


OUTS = ("put", "drop.0", "drop.1", "read.0", "read.1", "pair")


# -- the reference: one tuple at a time, from the documented semantics ------------------------------


class Reference:
    def __init__(self) -> None:
        self.table: dict[int, tuple] = {}  # key k -> (k, v, w), in the order keys entered
        self.out: dict[str, list] = {name: [] for name in OUTS}

    def apply(self, box: str, t: tuple) -> None:
        if box == "put":
            k, v, w = t
            self.table[k] = (k, v, w * 2)
            self.out["put"].append(t)
        elif box == "bump":
            k, v = t
            for row in [r for r in self.table.values() if r[0] == k or r[2] < v]:
                if self.table.get(row[0]) != row:
                    continue  # taken by a row of this update that moved onto its key
                new = (row[0], row[1] + v, k)
                self.table[row[0]] = new
        elif box == "drop":
            k, v = t
            gone = [r for r in self.table.values() if r[1] > v and r[0] != k]
            for row in gone:
                del self.table[row[0]]
            self.out["drop.0"] += gone
            self.out["drop.1"].append(t)
        elif box == "pair":
            k, v = t
            self.out["pair"] += [(k * 10 + r[2], r[1]) for r in self.table.values() if r[0] == k or r[1] > v]
        else:
            k, v = t
            found = [(r[1], r[0]) for r in self.table.values() if r[0] == k or r[1] == v]
            self.out["read.0"] += found
            if not found:
                self.out["read.1"].append(t)


small = st.integers(-3, 3)
events = st.lists(st.one_of(
    st.tuples(st.just("put"), st.tuples(small, small, small)),
    st.tuples(st.sampled_from(("bump", "drop", "read", "pair")), st.tuples(small, small))), max_size=40)


def run(ops: dict, history: list, cuts: list[bool]) -> dict[str, list]:
    """Feed ``history`` in batches: a batch ends where the box changes or a cut says so."""
    out: dict[str, list] = {name: [] for name in OUTS}
    batch: list[tuple] = []
    for i, (box, t) in enumerate(history):
        batch.append(t)
        last = i + 1 == len(history) or history[i + 1][0] != box or cuts[i % len(cuts)]
        if last:
            for port, rows in ops[box].process(0, batch, 0.0):
                out[box if box in ("put", "bump", "pair") else f"{box}.{port}"] += rows
            batch = []
    return out


@settings(max_examples=60, deadline=None)
@given(events, st.lists(st.booleans(), min_size=1, max_size=8))
def test_table_boxes_match_a_row_at_a_time_reference_however_batches_are_cut(history, cuts):
    ref = Reference()
    for box, t in history:
        ref.apply(box, t)
    ops = operators()
    assert run(ops, history, cuts) == ref.out
    assert ops["read"].rows.rows() == list(ref.table.values())


@settings(max_examples=25, deadline=None)
@given(events, events)
def test_a_tables_boxes_moved_mid_stream_end_where_unmoved_ones_end(before, after):
    stay = operators()
    run(stay, before + after, [False])
    moving = operators()
    run(moving, before, [False])
    states = {name: msgspec.msgpack.decode(msgspec.msgpack.encode(op.state())) for name, op in moving.items()}
    moved = operators()
    for name in ("read", "put", "bump", "drop", "pair"):  # restored in any order: the table is restored once
        moved[name].restore(states[name])
    moved_out = run(moved, after, [False])
    assert moved["drop"].rows.rows() == stay["drop"].rows.rows()
    fresh = operators()
    run(fresh, before, [False])
    assert moved_out == run(fresh, after, [False])


def test_the_newest_copy_of_a_table_wins_when_its_boxes_arrive_one_by_one():
    source = operators()
    source["put"].process(0, [(1, 1, 1)], 0.0)
    first = source["put"].state()  # the insert box leaves first ...
    source["bump"].process(0, [(1, 5)], 0.0)  # ... the update box changes the table before it leaves too
    target = operators()
    target["put"].restore(first)
    target["bump"].restore(source["bump"].state())
    target["read"].restore(first)  # an older copy changes nothing
    assert target["read"].process(0, [(1, 0)], 0.0) == [(0, [(6, 1)])]


def test_a_box_without_its_tables_declaration_is_refused_when_built():
    box = Box("s", "select", (InPort("R"),), ("O",), (("sql", "select * from T"),), access=("T",))
    schema = planned()[0].schemas["Ask"]
    with pytest.raises(OperatorError, match="accesses table 'T', which is not declared with its schema"):
        build_operator(box, [schema], [schema])
