"""A row publisher's batches as Arrow (client/row_batches.py, issue 30), checked against the node's row check.

Good rows become one Arrow batch that the node's decoding takes as exactly the
rows its row check would give, with the digest a publisher sending rows gave
the same batch; a batch with a bad row stays rows, so the node names it.
"""

from __future__ import annotations

import msgspec
from boreas.catalog.model import Field, FieldType, Schema
from boreas.client.row_batches import RowBatches
from boreas.wire.columns import decode
from boreas.wire.digests import rows_digest
from boreas.wire.prepared import Prepared
from boreas.wire.tuples import RowType
from hypothesis import given, settings
from hypothesis import strategies as st

EVERY = Schema("Every", (
    Field("b", FieldType.BYTE), Field("s", FieldType.SHORT), Field("i", FieldType.INT), Field("l", FieldType.LONG),
    Field("d", FieldType.DOUBLE), Field("name", FieldType.STRING, 4), Field("t", FieldType.TIMESTAMP),
    Field("maybe", FieldType.INT, nullable=True), Field("px", None, array="byte(0...1, 0...2)"),
    Field("v", None, array="double(0...*)"), Field("nick", FieldType.STRING, 3, nullable=True),
    Field("w", None, array="int(0...*)", nullable=True)))

every_row = st.tuples(
    st.integers(-128, 127), st.integers(-(2**15), 2**15 - 1), st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1), st.one_of(st.floats(allow_nan=False), st.integers(-(2**53), 2**53)),
    st.text(max_size=4), st.integers(0, 2**62), st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)),
    st.lists(st.lists(st.integers(-128, 127), min_size=3, max_size=3), min_size=2, max_size=2),
    st.lists(st.floats(allow_nan=False), max_size=3), st.one_of(st.none(), st.text(max_size=3)),
    st.one_of(st.none(), st.lists(st.integers(-(2**31), 2**31 - 1), max_size=3)),
).map(list)


@settings(max_examples=60, deadline=None)
@given(st.lists(every_row, min_size=1, max_size=20))
def test_good_rows_become_an_arrow_batch_the_node_takes_as_the_same_rows(rows):
    prepared = RowBatches(EVERY).prepare(rows)
    assert isinstance(prepared, Prepared) and len(prepared) == len(rows)
    columns, errors = decode(prepared.payload, EVERY)
    assert errors == [] and columns.rows() == RowType(EVERY).check(rows)[0]
    # the digest is the rows' as msgpack, what a publisher sending rows hashed: the same whichever carries them
    assert prepared.digest == rows_digest(msgspec.msgpack.encode(rows))


@settings(max_examples=30, deadline=None)
@given(st.lists(every_row, min_size=1, max_size=10), st.data())
def test_a_batch_with_a_bad_row_goes_as_rows_for_the_node_to_name(rows, data):
    at = data.draw(st.integers(0, len(rows) - 1))
    field = data.draw(st.sampled_from([("b", 128), ("name", "toolong"), ("i", None), ("px", [[1, 2, 3]])]))
    rows[at][[f.name for f in EVERY.fields].index(field[0])] = field[1]
    assert RowBatches(EVERY).prepare(rows) is rows
    _, errors = RowType(EVERY).check(rows)
    assert [(e.row, e.field) for e in errors] == [(at, field[0])]


def test_a_stream_with_a_single_field_keeps_sending_rows():
    """float32 would round what a row carries: such a stream's batches stay rows, as the node keeps them."""
    rows = [[1, 0.1]]
    assert RowBatches(Schema("S", (Field("k", FieldType.INT), Field("x", FieldType.SINGLE)))).prepare(rows) is rows


@settings(max_examples=30, deadline=None)
@given(st.lists(every_row, min_size=1, max_size=10))
def test_a_batch_null_in_every_row_of_its_nullable_fields_is_taken_whole(rows):
    """A nullable string or array NULL in every row has no longest value: the node takes the batch as it came
    (it threw on it once, and the publisher resent it for ever)."""
    for row in rows:
        row[7], row[10], row[11] = None, None, None
    prepared = RowBatches(EVERY).prepare(rows)
    assert isinstance(prepared, Prepared)
    columns, errors = decode(prepared.payload, EVERY)
    assert errors == [] and columns.rows() == RowType(EVERY).check(rows)[0]


def test_rows_are_cut_into_batches_by_count_mappings_by_name():
    batches = list(RowBatches(EVERY).cut([EVERY_ROW] * 3 + [dict(zip([f.name for f in EVERY.fields], EVERY_ROW))], 2))
    assert [len(b) for b in batches] == [2, 2]
    assert decode(batches[1].payload, EVERY)[0].rows() == RowType(EVERY).check([EVERY_ROW] * 2)[0]


EVERY_ROW = [1, 2, 3, 4, 5.0, "abcd", 6, None, [[1, 2, 3], [4, 5, 6]], [0.5], None, [7]]
