"""A windowed ``m3`` box's memory on a long stream: closed windows leave no state, unread strings are not interned.

Why: issue 34's target is Boreas's memory flat from 10M to 50M Nexmark
events.  ``bench/nexmark.py --memory`` found q8 (persons and auctions by
TUMBLE window, reading ids and names) flat in map entries but not in RSS:
1.89x from 2M to 10M events, 1.4 GB at 50M.  The native backend interned
every STRING column of every row it was fed -- e-mail addresses, credit
cards, item names and descriptions, distinct per event and read by nothing
-- and its intern table is never emptied.  Here a box of that shape is fed
many windows of rows whose unread string is new in every row: after they
close, its map entries are those of the open window only (both backends),
the native intern table holds the strings the query reads only, and the
names it does read still come out right.
"""

from __future__ import annotations

import pytest

from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.m3.boxtype import infer_m3
from boreas.node.operators.m3windows import WindowedM3Operator
from boreas.node.operators.registry import DEFAULT_REGISTRY
from boreas.wire.columns import Columns, from_rows

PERSON = Schema("PersonTuple", (Field("id", FieldType.INT), Field("name", FieldType.STRING, 20),
                                Field("mail", FieldType.STRING, 40), Field("ts", FieldType.LONG)))
SQL = ("CREATE STREAM Person(id INT, name STRING, mail STRING, ts INT, WATERMARK FOR ts AS ts - 0);\n"
       "SELECT id, name, window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE Person, DESCRIPTOR(ts), "
       "INTERVAL '10' MILLISECOND)) GROUP BY id, name, window_start, window_end")
NAMES = ("Peter Shultz", "Kate Abrams", "Luke White")
WINDOWS, PER_WINDOW = 60, 30


def build(backend: str) -> WindowedM3Operator:
    box = Box("q8ish", "m3", (InPort("Person"),), ("Out",), (("sql", SQL), ("backend", backend)))
    op = DEFAULT_REGISTRY.build(box, [PERSON], infer_m3(box, [PERSON]))
    assert isinstance(op, WindowedM3Operator) and op.backend == backend
    return op


def window_rows(w: int) -> list[tuple]:
    """Window ``w``'s persons: ids repeating, names from three, an e-mail address new in every row."""
    return [(i % 7, NAMES[i % 3], f"person{w}x{i}@mail{w * PER_WINDOW + i}.com", w * 10 + i % 10)
            for i in range(PER_WINDOW)]


@pytest.mark.parametrize("backend", ["python", "native"])
def test_closed_windows_leave_no_state_and_unread_strings_are_not_interned(backend):
    op = build(backend)
    emitted, entries = [], []
    for w in range(WINDOWS):
        out = op.process_from(0, from_rows(window_rows(w), PERSON), float(w), ("Person", "gen", w))
        emitted.extend(r for _, batch in out for r in (batch.rows() if isinstance(batch, Columns) else batch))
        entries.append(op.state_entries())
    one_window = max(entries[:2])  # the first window open, nothing closed yet
    assert one_window > 0 and max(entries) <= 2 * one_window  # bounded: the open window (and the one closing)
    emitted.extend(r for _, batch in op.end_of_input(float(WINDOWS)) for r in
                   (batch.rows() if isinstance(batch, Columns) else batch))
    assert op.state_entries() == 0
    want: dict[tuple, int] = {}
    for w in range(WINDOWS):
        for i, name, _, _ in window_rows(w):
            want[(i, name, w * 10)] = want.get((i, name, w * 10), 0) + 1
    assert sorted(emitted) == sorted((*k, n) for k, n in want.items())  # the names read come out whole
    native = op.runtime.native_maps()
    if backend == "native":
        assert native is not None
        mails = [s for s in native.ids.strings if "@" in s]
        assert mails == []  # read by nothing: never interned (were WINDOWS * PER_WINDOW)
        assert set(NAMES) <= set(native.ids.strings) and len(native.ids.strings) < 3 * len(NAMES) + 10


def test_a_read_string_column_of_the_same_stream_is_still_interned_and_emitted():
    """The same stream with ``mail`` read (grouped by): its values reach the view as ever."""
    box = Box("mails", "m3", (InPort("Person"),), ("Out",), (("sql", SQL.replace("id, name,", "id, mail,").replace(
        "GROUP BY id, name,", "GROUP BY id, mail,")), ("backend", "native")))
    op = DEFAULT_REGISTRY.build(box, [PERSON], infer_m3(box, [PERSON]))
    rows = window_rows(0)
    op.process_from(0, from_rows(rows, PERSON), 0.0, ("Person", "gen", 0))
    out = op.end_of_input(1.0)
    got = sorted(r for _, batch in out for r in (batch.rows() if isinstance(batch, Columns) else batch))
    assert got == sorted((i, mail, 0, 1) for i, _, mail, _ in rows)


@pytest.mark.parametrize("backend", ["python", "native"])
def test_a_string_read_after_a_nullable_column_is_not_blanked(backend):
    """A nullable column before the strings: the program's relation carries its indicator column, the port does
    not; a string the query reads (grouped by, or in WHERE) reaches it whole (read by position, ``name`` was
    blanked and ``mail`` kept: one group ``''``)."""
    from boreas.node.operators.m3box import M3Operator

    person = Schema("P", (Field("id", FieldType.INT, nullable=True), *PERSON.fields[1:3], Field("ts", FieldType.INT)))
    rows = [(1, "Kate", "k@x.com", 1), (2, "Luke", "l@y.org", 2), (1, "Kim", "m@x.com", 3), (3, "Kate", "q@z.net", 15)]
    for sql, want in [
        ("SELECT name, COUNT(*) AS n FROM Person GROUP BY name", [("Kate", 2), ("Kim", 1), ("Luke", 1)]),
        ("SELECT id, COUNT(*) AS n FROM Person WHERE mail LIKE '%x.com' GROUP BY id", [(1, 2)]),
    ]:
        text = "CREATE STREAM Person(id INT NULL, name STRING, mail STRING, ts INT);\n" + sql
        box = Box("p", "m3", (InPort("Person"),), ("Out",), (("sql", text), ("backend", backend)))
        op = DEFAULT_REGISTRY.build(box, [person], infer_m3(box, [person]))
        assert isinstance(op, M3Operator)
        out = op.process(0, from_rows(rows, person), 0.0)
        got = sorted(r for _, batch in out for r in (batch.rows() if isinstance(batch, Columns) else batch))
        assert got == sorted(want), sql
