"""The native runtime's string intern table stays bounded on a stream of nearly unique strings (issue 34).

Why: the C maps hold a STRING key as its id in the runtime's intern table
(m3/runtime/native/codes.py ``Interner``).  That table only grew: every
distinct string a box ever saw kept its id and its Python ``str`` after the
entries holding it were gone (rows deleted, closed windows dropped), so on an
unbounded stream of nearly unique strings (Nexmark q7's ``extra``, a window
join keyed by a string) memory grew without bound.  Here views keyed by
strings new in every batch, whose entries are deleted again (a SQL view with
inserts then deletes; a windowed ``m3`` box whose windows close), must keep
the table within a small multiple of the strings still live plus the
compaction floor, lowered for the test, while every view stays equal to
DuckDB (tests/m3/m3_harness.py) -- also across a snapshot and restore and a
move to another runtime after a compaction, and for views that order strings
(a condition ``A < 'm'``, ``MIN``/``MAX`` of a string).
"""

from __future__ import annotations

import pytest

from boreas.m3 import Runtime, compile_sql
from boreas.m3.runtime.native.codes import Compactor

import m3_harness
from m3_harness import Harness

FLOOR = 64  # the compaction floor for these tests (the runtime's is 65,536)
NEW_PER_BATCH, BATCHES, KEEP = 24, 40, 2  # strings new in each batch; batches; batches a row stays live

SQL = """CREATE STREAM R(A STRING, B INT);
SELECT A, SUM(B) AS total, COUNT(*) AS n FROM R GROUP BY A;
SELECT B, COUNT(*) AS n FROM R WHERE A < 'm' GROUP BY B;
SELECT B, MIN(A) AS lo, MAX(A) AS hi FROM R GROUP BY B"""


def string_batches() -> list[list[tuple]]:
    """Batches inserting strings new in each (half before ``'m'``, half after, a few constant ones repeating) and
    deleting the rows inserted ``KEEP`` batches before (the harness deletes the oldest live row by index 0)."""
    batches = []
    for b in range(BATCHES):
        ops: list[tuple] = [("ins", "R", (f"{'a' if i % 2 else 'z'}{b:03d}_{i}", i % 5)) for i in range(NEW_PER_BATCH)]
        ops += [("ins", "R", ("m", 7)), ("ins", "R", ("k", 7))]
        if b >= KEEP:
            ops += [("del", "R", 0)] * (NEW_PER_BATCH + 2)
        batches.append(ops)
    return batches


def live_bound() -> int:
    """The table's size allowed: constants and the strings of the live rows (``KEEP + 1`` batches' at most),
    twice over (the growth allowed between compactions), plus the floor and one batch's new strings."""
    live = (KEEP + 1) * NEW_PER_BATCH + 8
    return 2 * live + FLOOR + NEW_PER_BATCH


@pytest.fixture
def small_floor(monkeypatch):
    monkeypatch.setattr(Compactor, "FLOOR", FLOOR)
    monkeypatch.setattr(m3_harness, "BACKEND", "native")


def table_size(rt) -> int:
    native = rt.native_maps()
    assert native is not None, rt.backend_reason
    return len(native.ids.strings)


def test_deleted_strings_leave_the_intern_table_and_the_views_match_duckdb(small_floor):
    rt = Harness(SQL).run(string_batches(), delete_all=False)
    assert rt.backend == "native"
    assert table_size(rt) <= live_bound(), f"{table_size(rt)} strings interned, {BATCHES * NEW_PER_BATCH} seen"
    assert len(rt.native_maps().ids) == table_size(rt)  # the dict and the list are one table
    assert rt.native_maps().compactor.done >= 2


def test_restore_and_moves_after_a_compaction(small_floor):
    """After each compaction the state restores into the same runtime and moves to either backend."""
    moves = {i: backend for i, backend in zip(range(10, BATCHES, 7), ["python", "native"] * 5)}
    h = Harness(SQL)
    rt = h.run(string_batches()[:BATCHES - 1], delete_all=False)
    assert rt.native_maps().compactor.done
    state = rt.state()
    rt.restore(state)  # onto itself: the C maps rebuilt from the mirror, the table kept
    assert sorted(rt.view("Q1").items()) == sorted(Harness(SQL).run(string_batches()[:BATCHES - 1],
                                                                     delete_all=False).view("Q1").items())
    again = h.run(string_batches(), moves=moves)  # compares with DuckDB after every batch and move; deletes all
    assert again.entries() == 0


@pytest.mark.parametrize("backend", ["python", "native"])
def test_a_windowed_box_keyed_by_unique_strings_stays_bounded(backend, monkeypatch):
    """A TUMBLE box grouped by a string new in every row: its windows close, their strings leave the table."""
    from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
    from boreas.m3.boxtype import infer_m3
    from boreas.node.operators.m3windows import WindowedM3Operator
    from boreas.node.operators.registry import DEFAULT_REGISTRY
    from boreas.wire.columns import Columns, from_rows

    monkeypatch.setattr(Compactor, "FLOOR", FLOOR)
    bid = Schema("BidTuple", (Field("auction", FieldType.INT), Field("extra", FieldType.STRING, 40),
                              Field("ts", FieldType.LONG)))
    sql = ("CREATE STREAM Bid(auction INT, extra STRING, ts INT, WATERMARK FOR ts AS ts - 0);\n"
           "SELECT extra, window_start, COUNT(*) AS n, MAX(auction) AS top FROM TABLE(TUMBLE(TABLE Bid, "
           "DESCRIPTOR(ts), INTERVAL '10' MILLISECOND)) GROUP BY extra, window_start, window_end")
    box = Box("q7ish", "m3", (InPort("Bid"),), ("Out",), (("sql", sql), ("backend", backend)))
    op = DEFAULT_REGISTRY.build(box, [bid], infer_m3(box, [bid]))
    assert isinstance(op, WindowedM3Operator) and op.backend == backend
    windows, per_window = 50, 20

    def rows(w: int) -> list[tuple]:
        return [(i % 3, f"x{w}-{i // 2}", w * 10 + i % 10) for i in range(per_window)]

    emitted, sizes = [], []
    for w in range(windows):
        out = op.process_from(0, from_rows(rows(w), bid), float(w), ("Bid", "gen", w))
        emitted.extend(r for _, batch in out for r in (batch.rows() if isinstance(batch, Columns) else batch))
        if backend == "native":
            sizes.append(len(op.runtime.native_maps().ids.strings))
    emitted.extend(r for _, batch in op.end_of_input(float(windows)) for r in
                   (batch.rows() if isinstance(batch, Columns) else batch))
    want: dict[tuple, list] = {}
    for w in range(windows):
        for auction, extra, _ in rows(w):
            n, top = want.get((extra, w * 10), (0, auction))
            want[(extra, w * 10)] = (n + 1, max(top, auction))
    assert sorted(emitted) == sorted((*k, *v) for k, v in want.items())
    if backend == "native":
        assert max(sizes) <= 2 * (2 * per_window + 8) + FLOOR + per_window, sizes
        assert op.runtime.native_maps().compactor.done >= 2


@pytest.mark.parametrize("keys", [2, 8])
def test_a_map_emptied_while_its_mirror_lags_is_read_right_after_a_compaction(keys, monkeypatch):
    """Every row deleted while nobody reads the maps (their pending keys are codes of the old table), then a
    batch that compacts: the emptied maps' pending keys are read again, not decoded against the new table (the
    deleted rows came back, or a read failed with IndexError)."""
    monkeypatch.setattr(Compactor, "FLOOR", 2)
    sql = ("CREATE STREAM R(A STRING, B INT);\nCREATE STREAM S(A STRING, C INT);\n"
           "SELECT R.A, SUM(R.B * S.C) AS t FROM R JOIN S ON R.A = S.A GROUP BY R.A")
    native, python = Runtime(compile_sql(sql), backend="native"), Runtime(compile_sql(sql), backend="python")
    rows = [(f"k{i}", i + 1) for i in range(keys)]
    for batch in ([("R", 1, rows), ("S", 1, rows)], "read", [("R", -1, rows), ("S", -1, rows)],
                  [("R", 1, [("zz", 2)])], [("R", 1, [("yy", 2)])]):
        if batch == "read":
            native.state()  # (the mirror in sync with the maps; from here on it lags)
            continue
        for rt in (native, python):
            rt.apply_grouped(batch)
    assert native.native_maps().compactor.done >= 1
    def maps(rt):
        return {name: sorted(entries) for name, entries in rt.state()["maps"].items()}
    assert maps(native) == maps(python)
