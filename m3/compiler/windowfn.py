"""Event-time windows in SQL: Flink's window table functions and ``WATERMARK FOR``, read before parsing.

Why before parsing: sqlglot parses neither ``TABLE(TUMBLE(TABLE bids,
DESCRIPTOR(ts), INTERVAL '10' SECOND))`` nor a ``WATERMARK FOR`` clause.
Neither needs the calculus either: a window table function is its relation
with two more columns, ``window_start`` and ``window_end`` (INT, the event
time's unit), one row per window the row falls in; a query groups by them
like any column.  So :func:`rewrite` replaces each call by its relation's
name (padded to the call's length, so error positions after it still point
into the user's text), adds the two columns to the relation, and returns the
:class:`Window` it read; the ``m3`` box assigns each arriving row its windows
before the maps see it (node/operators/m3windows.py) and closes windows as
the watermark passes their end.

A ``WATERMARK FOR col AS col - INTERVAL '5' SECOND`` item in a ``CREATE
STREAM`` column list is removed and returned as a :class:`Watermark`.

``SESSION`` is read the same way (its arguments by :mod:`.sessionfn`):
its rows are held per key until their session closes, then folded in with
the session's final bounds.  ``CUMULATE`` is refused by name (:mod:`.windows`).

>>> text, windows, marks = rewrite('''CREATE STREAM B(a INT, ts INT, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND);
... SELECT a, window_start, COUNT(*) AS n FROM TABLE(TUMBLE(TABLE B, DESCRIPTOR(ts), INTERVAL '10' SECOND)) w
... GROUP BY a, window_start, window_end''')
>>> print(text)  # doctest: +NORMALIZE_WHITESPACE
CREATE STREAM B(a INT, ts INT, window_start INT, window_end INT);
SELECT a, window_start, COUNT(*) AS n FROM B w
GROUP BY a, window_start, window_end
>>> windows, marks
((Window(relation='B', time='ts', size=10000, slide=10000),), (Watermark(relation='B', column='ts', delay=5000),))
>>> windows[0].assign(25_000)
[20000]
>>> Window("B", "ts", 10, 5).assign(12)
[10, 5]
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from boreas.catalog.watermarks import interval_ms

from ..ast import Column, RelationDecl
from ..errors import CompileError, pos_of_offset
from .sessiongroup import group_sessions
from .sessionfn import Session, read_session

#: The columns a window table function adds to its relation, in this order.
WINDOW_COLUMNS = ("window_start", "window_end")

_CALL = re.compile(r"\bTABLE\s*\(\s*(TUMBLE|HOP|SESSION)\s*\(", re.IGNORECASE)
_STRING = re.compile(r"'(?:[^']|'')*'")
_TABLE_ARG = re.compile(r"^\s*TABLE\s+([A-Za-z_][A-Za-z0-9_]*)\s*$", re.IGNORECASE)
_DESCRIPTOR = re.compile(r"^\s*DESCRIPTOR\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$", re.IGNORECASE)
_WATERMARK = re.compile(r",\s*WATERMARK\s+FOR\s+([A-Za-z_][A-Za-z0-9_]*)\s+AS\s+([A-Za-z_][A-Za-z0-9_]*)"
                        r"(?:\s*-\s*(INTERVAL\s*'[^']*'\s*[A-Za-z]+|\d+))?\s*(?=\))", re.IGNORECASE)
_CREATE = re.compile(r"\bCREATE\s+STREAM\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(", re.IGNORECASE)


@dataclass(frozen=True)
class Window:
    """One window table function: rows of ``relation`` fall in windows ``[start, start + size)`` by their
    ``time`` column, a window starting at every multiple of ``slide`` (TUMBLE: ``slide == size``)."""

    relation: str
    time: str
    size: int
    slide: int

    def assign(self, t: int | float) -> list[int]:
        """The starts of the windows an event time falls in, latest first."""
        whole = math.floor(t)
        last = whole - whole % self.slide
        out = []
        start = last
        while start > t - self.size:
            out.append(start)
            start -= self.slide
        return out


@dataclass(frozen=True)
class Watermark:
    """``WATERMARK FOR column AS column - delay``: the stream's event time can be ``delay`` behind its newest."""

    relation: str
    column: str
    delay: int


def _close_paren(bare: str, start: int) -> int:
    """The offset of the ``)`` closing the ``(`` before ``start``."""
    depth = 1
    for i in range(start, len(bare)):
        if bare[i] == "(":
            depth += 1
        elif bare[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _split_args(args: str) -> list[str]:
    parts, depth, last = [], 0, 0
    for i, ch in enumerate(args):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(args[last:i])
            last = i + 1
    parts.append(args[last:])
    return parts


def _window_of(text: str, bare: str, m: re.Match) -> tuple[Window | Session, int]:
    """The window of one call at ``m``, and the offset just after it."""
    kind = m.group(1).upper()
    inner_end = _close_paren(bare, m.end())
    outer_end = _close_paren(bare, inner_end + 1) if inner_end >= 0 else -1
    pos = pos_of_offset(text, m.start())
    if outer_end < 0 or bare[inner_end + 1:outer_end].strip():
        raise CompileError(f"{kind}(...) is not closed as TABLE({kind}(...))", pos)
    args = _split_args(text[m.end():inner_end])
    if kind == "SESSION":
        try:
            return read_session(args), outer_end + 1
        except ValueError as exc:
            raise CompileError(str(exc), pos) from None
    want = 3 if kind == "TUMBLE" else 4
    form = ("TUMBLE(TABLE name, DESCRIPTOR(column), size)" if kind == "TUMBLE"
            else "HOP(TABLE name, DESCRIPTOR(column), slide, size)")
    if len(args) != want:
        raise CompileError(f"{kind} takes {want} arguments: {form} (an offset is not supported)", pos)
    table, column = _TABLE_ARG.match(args[0]), _DESCRIPTOR.match(args[1])
    if table is None or column is None:
        raise CompileError(f"{kind}'s arguments are {form}", pos)
    try:
        sizes = [interval_ms(a, f"{kind}'s interval") for a in args[2:]]
    except ValueError as exc:
        raise CompileError(str(exc), pos) from None
    size, slide = (sizes[0], sizes[0]) if kind == "TUMBLE" else (sizes[1], sizes[0])
    if size <= 0 or slide <= 0:
        raise CompileError(f"{kind}'s intervals must be positive", pos)
    return Window(table.group(1), column.group(1), size, slide), outer_end + 1


def _watermarks(text: str) -> tuple[str, list[Watermark]]:
    """``text`` without its ``WATERMARK FOR`` items, and what they said."""
    marks: list[Watermark] = []
    out, last = [], 0
    for m in _WATERMARK.finditer(text):
        create = None
        for c in _CREATE.finditer(text, 0, m.start()):
            create = c
        pos = pos_of_offset(text, m.start())
        if create is None:
            raise CompileError("WATERMARK FOR belongs in a CREATE STREAM column list", pos)
        if m.group(1).lower() != m.group(2).lower():
            raise CompileError(f"WATERMARK FOR {m.group(1)} AS must subtract a delay from {m.group(1)} itself", pos)
        try:
            delay = interval_ms(m.group(3), "watermark delay") if m.group(3) else 0
        except ValueError as exc:
            raise CompileError(str(exc), pos) from None
        marks.append(Watermark(create.group(1), m.group(1), delay))
        out.append(text[last:m.start()])
        last = m.end()
    out.append(text[last:])
    return "".join(out), marks


def _add_columns(text: str, relation: str) -> str:
    """``text`` with the window columns appended to ``relation``'s ``CREATE STREAM`` (if it declares it)."""
    for c in _CREATE.finditer(text):
        if c.group(1).lower() == relation.lower():
            end = _close_paren(_STRING.sub(lambda s: " " * len(s.group(0)), text), c.end())
            if end >= 0:
                return text[:end] + "".join(f", {name} INT" for name in WINDOW_COLUMNS) + text[end:]
    return text


def rewrite(text: str) -> tuple[str, tuple[Window | Session, ...], tuple[Watermark, ...]]:
    """``text`` with its window table functions read as their relations (the window columns added to its
    ``CREATE STREAM``, if any) and its ``WATERMARK FOR`` items removed; the windows and watermarks."""
    text, marks = _watermarks(group_sessions(text))
    bare = _STRING.sub(lambda s: " " * len(s.group(0)), text)
    windows: list[Window | Session] = []
    out, last = [], 0
    for m in _CALL.finditer(bare):
        if m.start() < last:
            continue
        window, end = _window_of(text, bare, m)
        if windows and window != windows[0] and window.relation.lower() == windows[0].relation.lower():
            raise CompileError(f"stream {window.relation} is read through two different windows; a box reads a "
                               f"stream through one window (use one box per window)", pos_of_offset(text, m.start()))
        if window not in windows:
            windows.append(window)
        span = text[m.start():end]
        out.append(text[last:m.start()] + window.relation + re.sub(r"[^\n]", " ", span)[len(window.relation):])
        last = end
    out.append(text[last:])
    text = "".join(out)
    for window in windows:
        text = _add_columns(text, window.relation)
    return text, tuple(windows), tuple(marks)


def windowed_relations(streams: tuple[RelationDecl, ...],
                       windows: tuple[Window | Session, ...]) -> tuple[RelationDecl, ...]:
    """The relations a script reads by name (an ``m3`` box's in streams), each windowed one with the window
    columns; a window over a relation that is not there, or over a column that is not a number, is refused.

    >>> r = RelationDecl("B", "STREAM", (Column("ts", "INT"),))
    >>> [c.name for c in windowed_relations((r,), (Window("B", "ts", 10, 10),))[0].columns]
    ['ts', 'window_start', 'window_end']
    """
    by_name = {w.relation.lower(): w for w in windows}
    out = []
    for r in streams:
        w = by_name.get(r.name.lower())
        if w is not None:
            out.append(RelationDecl(r.name, r.kind, r.columns + tuple(Column(n, "INT") for n in WINDOW_COLUMNS)))
        else:
            out.append(r)
    return tuple(out)


def check_window(window: Window | Session, columns: tuple[tuple[str, str], ...]) -> int:
    """The position of the window's time column among its relation's ``columns`` (``(name, type)``, the
    window columns last); a :class:`ValueError` saying why when it has none or it is not a number (or a
    session's ``PARTITION BY`` names no column)."""
    names = {name.lower() for name, _ in columns[:-len(WINDOW_COLUMNS)]}
    for column in getattr(window, "partition", ()):
        if column.lower() not in names:
            raise ValueError(f"SESSION's PARTITION BY {column} names no column of {window.relation}")
    for i, (name, kind) in enumerate(columns[:-len(WINDOW_COLUMNS)]):
        if name.lower() == window.time.lower():
            if kind not in ("INT", "FLOAT"):
                raise ValueError(f"the event time column {name} of a window over {window.relation} is {kind}; "
                                 "it must be a number (milliseconds, say)")
            return i
        if name.lower() in WINDOW_COLUMNS:
            raise ValueError(f"relation {window.relation} already has a column {name}, which its window adds")
    raise ValueError(f"DESCRIPTOR({window.time}) names no column of {window.relation}")
