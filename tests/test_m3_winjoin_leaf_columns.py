"""A window join's raw leaf (a windowed stream read beside derived tables: Nexmark q7's ``bid B``) keeps only
the columns the stages above read (m3/compiler/winjoin.py ``_raw_leaf``): a STRING column nothing reads is
neither in the leaf's map key nor interned, and rows that only it told apart are still counted as many times as
they came, on both backends; a column named without its source keeps every column (nothing left out)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.m3.boxtype import infer_m3
from boreas.node.operators.m3windows import WindowedM3Operator
from boreas.node.operators.registry import DEFAULT_REGISTRY
from boreas.wire.columns import Columns, from_rows

A = Schema("ATuple", (Field("k", FieldType.INT), Field("v", FieldType.INT), Field("tag", FieldType.STRING),
                      Field("note", FieldType.STRING), Field("ts", FieldType.INT)))
QUALIFIED = ("SELECT B.k, B.v, B.tag, B.ts FROM A B JOIN (SELECT MAX(v) AS m, window_end AS e FROM "
             "TABLE(TUMBLE(TABLE A, DESCRIPTOR(ts), 10)) GROUP BY window_start, window_end) W ON B.v = W.m "
             "WHERE B.ts BETWEEN W.e - 10 AND W.e")
UNQUALIFIED = QUALIFIED.replace("B.tag", "tag")


def box(query: str, backend: str) -> WindowedM3Operator:
    text = f"CREATE STREAM A(k INT, v INT, tag VARCHAR, note VARCHAR, ts INT, WATERMARK FOR ts AS ts);\n{query}"
    b = Box("w", "m3", (InPort("A"),), ("Out",), (("sql", text), ("backend", backend)))
    op = DEFAULT_REGISTRY.build(b, [A], infer_m3(b, [A]))
    assert isinstance(op, WindowedM3Operator)
    return op


def rows(seed: int) -> list[tuple]:
    """Rows of three windows; many differ only in ``note`` (a new string each)."""
    rnd = random.Random(seed)
    return [(rnd.randrange(3), rnd.randrange(1, 4), rnd.choice("xy"), f"note-{i}", rnd.randrange(30))
            for i in range(120)]


def answer(fed: list[tuple]) -> Counter:
    """Each window's rows at its highest v, as many times as they came (SQL's bag), note left out."""
    out: Counter = Counter()
    for start in {t - t % 10 for *_, t in fed}:
        inside = [r for r in fed if start <= r[-1] < start + 10]
        top = max(v for _, v, *_ in inside)
        out.update((k, v, tag, t) for k, v, tag, _, t in inside if v == top)
    return out


def emitted(out) -> Counter:
    got: Counter = Counter()
    for _, batch in out:
        for row in (batch.rows() if isinstance(batch, Columns) else batch):
            got[tuple(row[:-1])] += int(row[-1])  # the last column is the row's count
    return got


@pytest.mark.parametrize("backend", ["python", "native"])
@pytest.mark.parametrize("as_columns", [False, True])
@pytest.mark.parametrize("seed", [1, 2])
def test_a_column_no_stage_reads_is_left_out_of_the_leaf(backend, as_columns, seed):
    op = box(QUALIFIED, backend)
    leaf = next(m for m in op.runtime.program.maps if any(k.name == "TAG" for k in m.keys))
    assert [k.name for k in leaf.keys if k.type == "STRING"] == ["TAG"]
    fed = rows(seed)
    batch = from_rows(fed, A) if as_columns else fed
    assert batch is not None
    got = emitted(op.process_from(0, batch, 0.0, ("A", "a", 1))) + emitted(op.end_of_input(0.1))
    assert got == answer(fed)
    native = op.runtime.native_maps()
    if native is not None:
        assert not any(s.startswith("note-") for s in native.ids.strings)


@pytest.mark.parametrize("backend", ["python", "native"])
def test_a_column_named_without_its_source_keeps_every_column(backend):
    op = box(UNQUALIFIED, backend)
    assert any(k.name == "NOTE" for m in op.runtime.program.maps for k in m.keys)
    fed = rows(3)
    got = emitted(op.process_from(0, fed, 0.0, ("A", "a", 1))) + emitted(op.end_of_input(0.1))
    assert got == answer(fed)


@pytest.mark.parametrize("backend", ["python", "native"])
def test_a_natural_join_keeps_the_columns_it_joins_on(backend):
    """A NATURAL JOIN names no column: its shared ``k`` stays in the leaf (left out, the stage joined on the
    window alone and counted each row once per ``k``)."""
    query = ("SELECT B.v, W.m FROM A B NATURAL JOIN (SELECT k, MAX(v) AS m, window_start, window_end FROM "
             "TABLE(TUMBLE(TABLE A, DESCRIPTOR(ts), 10)) GROUP BY k, window_start, window_end) W "
             "WHERE B.window_end = W.window_end")
    op = box(query, backend)
    fed = rows(4)
    top = {}
    for k, v, _, _, t in fed:
        top[k, t - t % 10] = max(v, top.get((k, t - t % 10), v))
    want = Counter((v, top[k, t - t % 10]) for k, v, _, _, t in fed)
    got = emitted(op.process_from(0, fed, 0.0, ("A", "a", 1))) + emitted(op.end_of_input(0.1))
    assert got == want
