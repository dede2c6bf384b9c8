"""The intern ids of an Arrow string column found in C (m3/runtime/native/crt_strings.py ``StringIndex``) against the
runtime's intern table itself (``Interner``, a dict): the same ids, the same strings interned in the same order,
over arrays with offsets, repeats, empty and non-ASCII strings, strings interned by the dict alone between lookups
(a row batch's), and the table replaced (a compaction); and an ``m3`` box fed columns of strings new in every batch,
compacting, against the same box fed rows, on both backends."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.native import native, skip_without_native

from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.m3.boxtype import infer_m3
from boreas.m3.runtime.native.codes import Compactor, Interner
from boreas.node.operators.registry import DEFAULT_REGISTRY
from boreas.wire.columns import Columns, from_rows

word = st.sampled_from(["", "a", "b", "é", "日本", "a/b/c", "x" * 40, "a\x00b"]) | st.text(max_size=6)
step = st.one_of(
    st.tuples(st.just("column"), st.lists(word, max_size=30), st.integers(0, 3)),  # an array, sliced from an offset
    st.tuples(st.just("dict"), st.lists(word, max_size=5), st.just(0)),  # strings interned by the dict alone
    st.tuples(st.just("compact"), st.just([]), st.just(0)),  # the table replaced by its last half
)


@settings(max_examples=60, deadline=None)
@given(st.lists(step, max_size=12))
def test_ids_found_in_c_are_the_tables(steps):
    skip_without_native()
    nat = native("CREATE STREAM R(a STRING); SELECT a, COUNT(*) AS n FROM R GROUP BY a").native_maps()
    reference = Interner()
    reference.update(nat.ids)
    reference.strings[:] = nat.ids.strings
    for what, words, at in steps:
        try:
            words = [w for w in words if w.encode("utf-8")]  # (a lone surrogate is no Arrow string: st.text's)
        except UnicodeEncodeError:
            continue
        if what == "column":
            array = pa.array(["pad"] * at + words, pa.string()).slice(at)
            got = nat.index.ids_of(array)
            assert list(got) == [reference[w] for w in words]
        elif what == "dict":
            assert [nat.ids[w] for w in words] == [reference[w] for w in words]
        else:
            kept = nat.ids.strings[len(nat.ids.strings) // 2:]
            nat.ids.replace(kept)
            reference.replace(kept)
        assert nat.ids.strings == reference.strings and dict(nat.ids) == dict(reference)
    assert nat.index.working


BID = Schema("BidTuple", (Field("k", FieldType.STRING), Field("v", FieldType.INT)))


def test_a_box_fed_columns_of_new_strings_compacting_holds_the_python_backends_view(monkeypatch):
    """Strings new in every batch, deleted again two batches later (the table compacts at a floor of 16), every
    third batch fed as rows (interned by the dict alone): the native box's view (a column's ids found in C) is
    the Python backend's after every batch."""
    skip_without_native()
    monkeypatch.setattr(Compactor, "FLOOR", 16)
    text = "CREATE STREAM Bid(k STRING, v INT); SELECT k, SUM(v) AS total, COUNT(*) AS n FROM Bid GROUP BY k"
    ops = {}
    for backend in ("python", "native"):
        box = Box("s", "m3", (InPort("Bid"),), ("Out",), (("sql", text), ("backend", backend)))
        ops[backend] = DEFAULT_REGISTRY.build(box, [BID], infer_m3(box, [BID]))
    assert ops["native"].runtime.backend == "native"
    for b in range(12):
        rows = [(f"s{b}_{i}", i) for i in range(10)] + [("same", 1), ("日本", 2)]
        old = [(f"s{b - 2}_{i}", i) for i in range(10)] if b >= 2 else []
        for op in ops.values():
            op.process(0, rows if b % 3 == 2 else from_rows(rows, BID), 0.0)
            if old:
                op.process(0, Columns(from_rows(old, BID).batch, weights=pa.array([-1] * len(old), pa.int64())), 0.0)
        assert ops["native"].runtime.view("Q1") == ops["python"].runtime.view("Q1")
    assert ops["native"].runtime.native_maps().compactor.done >= 1
