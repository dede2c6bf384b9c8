"""Borealis's revision boxes (issue 35 item 1): revisionfilter, revisionmap and revisionaggregate fed by hand.

Each is checked against a row-at-a-time reference of its documented
semantics (docs/operators.md, "Revision boxes"): a random history of
insertions, deletions and replacements (a Borealis REPLACEMENT of one field
is the old row at -1 and the new row at +1) is cut into batches anywhere,
and after every batch the net of what the box emitted (each row's weights
summed) must be the reference's answer over the rows present then.  A box
moved mid-stream (``state()`` through msgpack into a fresh operator) must
end where an unmoved one ends.
"""

from __future__ import annotations

from collections import Counter

import msgspec
import pyarrow as pa
import pytest
from boreas.catalog.boxtypes import builtin_registry
from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.node.operators import OperatorError, build_operator
from boreas.wire.columns import Columns, arrow_schema
from hypothesis import given, settings
from hypothesis import strategies as st
from support.changelog import changes, multiset

# The shape of the suite's revision tests: a quote's price at a time, and Borealis's revised_value field.
PACKET = Schema("PacketTuple", (Field("time", FieldType.INT), Field("quote", FieldType.STRING, 4),
                                Field("price", FieldType.INT), Field("revised_value", FieldType.STRING, 4)))
QUOTES = ("IBM", "SUN", "HP")


def revision_box(kind: str, params: dict[str, str], outputs: int = 1) -> tuple:
    box = Box("r", kind, (InPort("Packet"),), tuple(f"out{i}" for i in range(outputs)), tuple(params.items()))
    outs = builtin_registry().infer(box, [PACKET])
    return box, outs


def operator(kind: str, params: dict[str, str], outputs: int = 1):
    box, outs = revision_box(kind, params, outputs)
    return build_operator(box, [PACKET], outs)


rows = st.tuples(st.integers(-20, 40), st.sampled_from(QUOTES), st.integers(-50, 50), st.just(None))


@st.composite
def histories(draw) -> list[tuple[tuple, int]]:
    """A random history as (row, weight) changes, each deletion or replacement of a row present at the time."""
    present: list[tuple] = []
    out: list[tuple[tuple, int]] = []
    for _ in range(draw(st.integers(0, 40))):
        op = draw(st.sampled_from(("insert", "insert", "delete", "replace")))
        if op == "insert" or not present:
            row = draw(rows)
            present.append(row)
            out.append((row, 1))
            continue
        old = present.pop(draw(st.integers(0, len(present) - 1)))
        out.append((old, -1))
        if op == "replace":  # one field revised, as Borealis's REPLACEMENT tuple does
            field = draw(st.sampled_from((0, 2)))
            new = old[:field] + (draw(st.integers(-20, 50)),) + old[field + 1:]
            present.append(new)
            out.append((new, 1))
    return out


def cut(draw, n: int) -> list[int]:
    """Batch boundaries anywhere (an empty batch included)."""
    return sorted(draw(st.lists(st.integers(0, n), max_size=6))) + [n]


def batch(part: list[tuple[tuple, int]]) -> Columns:
    """A changelog batch of the packet stream."""
    target = arrow_schema(PACKET)
    columns = [pa.array([r[i] for r, _ in part], f.type) for i, f in enumerate(target)]
    return Columns(pa.RecordBatch.from_arrays(columns, schema=target),
                   weights=pa.array([w for _, w in part], pa.int64()))


def net(changes_: list[tuple[tuple, int]]) -> Counter:
    total: Counter = Counter()
    for row, w in changes_:
        total[row] += w
    return Counter({r: n for r, n in total.items() if n})


def run(op, history: list[tuple[tuple, int]], bounds: list[int], reference, move_at: int | None = None,
        fresh=None) -> None:
    """Feed ``history`` cut at ``bounds``; after each batch the net out per port must be ``reference``'s."""
    emitted: dict[int, list] = {}
    start = 0
    for i, end in enumerate(bounds):
        if i == move_at:
            saved = msgspec.msgpack.decode(msgspec.msgpack.encode(op.state()))
            op = fresh()
            op.restore(saved)
        for port, out in op.process(0, batch(history[start:end]), 0.0):
            assert isinstance(out, Columns) and out.weights is not None, "a revision box writes a changelog"
            emitted.setdefault(port, []).append(out)
        start = end
        want = reference(net(history[:end]))
        got = {port: multiset(batches) for port, batches in emitted.items()}
        assert {p: c for p, c in got.items() if c} == {p: c for p, c in want.items() if c}


# -- revisionfilter ---------------------------------------------------------------------------

FILTER = {"expression.0": "price > 20", "expression.1": "price > 0", "pass-on-false-port": "1",
          "processing-mode": "UPSTREAM", "anchor": "PacketCP"}


def filter_reference(present: Counter) -> dict[int, Counter]:
    out: dict[int, Counter] = {0: Counter(), 1: Counter(), 2: Counter()}
    for row, n in present.items():
        out[0 if row[2] > 20 else 1 if row[2] > 0 else 2][row] += n
    return out


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_revisionfilter_routes_each_revision_as_the_filter_routes_rows(data):
    history = data.draw(histories())
    run(operator("revisionfilter", FILTER, 3), history, cut(data.draw, len(history)), filter_reference)


# -- revisionmap ----------------------------------------------------------------------------

MAP = {"expression.0": "quote", "output-field-name.0": "quote", "inverse.0": "quote",
       "expression.1": "time", "output-field-name.1": "time", "inverse.1": "time",
       "expression.2": "price * 2 + 1", "output-field-name.2": "price", "inverse.2": "(price - 1) / 2",
       "processing-mode": "DOWNSTREAM", "anchor": "ResultCP"}


def map_reference(present: Counter) -> dict[int, Counter]:
    out: Counter = Counter()
    for (time, quote, price, _), n in present.items():
        out[(quote, time, price * 2 + 1, None)] += n
    return {0: out}


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_revisionmap_maps_each_revision_and_appends_a_null_revised_value(data):
    history = data.draw(histories())
    run(operator("revisionmap", MAP), history, cut(data.draw, len(history)), map_reference)


# -- revisionaggregate ---------------------------------------------------------------------------


def aggregate_params(size: int, advance: int) -> dict[str, str]:
    return {"aggregate-function.0": "sum(price)", "aggregate-function.1": "count()",
            "aggregate-function.2": "avg(price)", "aggregate-function.3": "min(price)",
            "aggregate-function.4": "max(price)", "window-size-by": "VALUES", "window-size": str(size),
            "advance": str(advance), "order-by": "FIELD", "order-on-field": "time", "group-by": "quote",
            "processing-mode": "UPSTREAM", "anchor": "PacketCP"}


def aggregate_reference(size: int, advance: int):
    """Per quote and window [s, s + size), s a multiple of advance: the functions over the rows present."""

    def reference(present: Counter) -> dict[int, Counter]:
        held: dict[tuple, list[int]] = {}
        for (time, quote, price, _), n in present.items():
            assert n > 0
            for k in range((time - size) // advance + 1, time // advance + 1):
                if k * advance <= time < k * advance + size:
                    held.setdefault((quote, k * advance), []).extend([price] * n)
        out: Counter = Counter()
        for (quote, start), prices in held.items():
            out[(quote, start, sum(prices), len(prices), sum(prices) / len(prices), min(prices), max(prices),
                 None)] += 1
        return {0: out}

    return reference


@settings(max_examples=30, deadline=None)
@given(st.data(), st.integers(1, 6), st.integers(1, 6))
def test_revisionaggregate_nets_to_the_aggregate_of_the_rows_present(data, size, advance):
    history = data.draw(histories())
    run(operator("revisionaggregate", aggregate_params(size, advance)), history, cut(data.draw, len(history)),
        aggregate_reference(size, advance))


@settings(max_examples=25, deadline=None)
@given(st.data(), st.integers(1, 6), st.integers(1, 6))
def test_revisionaggregate_moved_mid_stream_ends_where_an_unmoved_one_ends(data, size, advance):
    history = data.draw(histories())
    bounds = cut(data.draw, len(history))
    params = aggregate_params(size, advance)
    run(operator("revisionaggregate", params), history, bounds, aggregate_reference(size, advance),
        move_at=data.draw(st.integers(0, len(bounds) - 1)), fresh=lambda: operator("revisionaggregate", params))


def test_a_replacement_is_emitted_as_the_old_result_retracted_and_the_new_one_inserted():
    """Borealis's upstream test, as a changelog: a late price revision revises the window's sum and only it."""
    agg = operator("revisionaggregate", {"aggregate-function.0": "sum(price)", "window-size-by": "VALUES",
                                         "window-size": "5", "advance": "5", "order-by": "FIELD",
                                         "order-on-field": "time", "group-by": "quote"})
    plain = [(1, "IBM", 10, None), (2, "IBM", 15, None), (7, "IBM", 4, None)]
    first = agg.process(0, plain, 0.0)  # a publisher's plain batch: insertions
    assert sorted(changes(first[0][1])) == [(("IBM", 0, 25, None), 1), (("IBM", 5, 4, None), 1)]
    revised = agg.process(0, batch([((2, "IBM", 15, None), -1), ((2, "IBM", 20, None), 1)]), 0.0)
    assert changes(revised[0][1]) == [(("IBM", 0, 25, None), -1), (("IBM", 0, 30, None), 1)]
    deleted = agg.process(0, batch([((7, "IBM", 4, None), -1)]), 0.0)
    assert changes(deleted[0][1]) == [(("IBM", 5, 4, None), -1)]


def test_plain_input_is_read_as_insertions_whatever_form_it_comes_in():
    params = aggregate_params(4, 2)
    rows_ = [(t, q, p, None) for t, q, p in [(0, "IBM", 3), (3, "SUN", 9), (1, "IBM", -2), (5, "IBM", 7)]]
    target = arrow_schema(PACKET)
    plain_columns = Columns(pa.RecordBatch.from_arrays(
        [pa.array([r[i] for r in rows_], f.type) for i, f in enumerate(target)], schema=target))
    outs = [multiset([out for _, out in operator("revisionaggregate", params).process(0, given_, 0.0)])
            for given_ in (rows_, plain_columns, batch([(r, 1) for r in rows_]))]
    assert outs[0] == outs[1] == outs[2] == aggregate_reference(4, 2)(Counter(rows_))[0]


@pytest.mark.parametrize("params, message", [
    ({"processing-mode": "SIDEWAYS"}, "'processing-mode'='SIDEWAYS' must be UPSTREAM or DOWNSTREAM"),
    ({"window-size-by": "TUPLES"}, "windows by TUPLES count rows as they arrive"),
    ({"aggregate-function.0": "lastval(price)"}, "depends on the order rows arrived in"),
    ({"timeout": "3"}, "parameter 'timeout' has no meaning here"),
])
def test_revisionaggregate_refuses_what_a_revision_cannot_mean(params, message):
    box = Box("agg1", "revisionaggregate", (InPort("Packet"),), ("out",),
              tuple({**aggregate_params(5, 3), **params}.items()))
    with pytest.raises(ValueError, match="revisionaggregate box 'agg1'") as caught:
        builtin_registry().infer(box, [PACKET])
    assert message in str(caught.value)
    with pytest.raises(OperatorError, match=message.replace("(", r"\(")):
        out = Schema("o", (Field("quote", FieldType.STRING), Field("time", FieldType.INT),
                           Field("agg_0", FieldType.INT), Field("revised_value", FieldType.STRING)))
        build_operator(box, [PACKET], [out])
