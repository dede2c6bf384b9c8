"""Lookup joins: ``JOIN t FOR SYSTEM_TIME AS OF s.col AS x ON ...`` reads ``t`` as it is when a row arrives.

Why a pass of its own: a lookup join is an ordinary join whose view takes
the *other* relations' deltas only.  A row of the stream is joined with the
table's contents when it arrives; a later insert into (or delete from) the
table does not revise the rows already joined, as it would in an ordinary
``m3`` join.  In DBToaster's terms the table's triggers still maintain the
maps over the table alone (what the stream's deltas read), but not the maps
that join it with anything else: :func:`maintained` says which (relation,
map) pairs get a trigger statement, and :func:`.pipeline.maintain` asks it.

The ``AS OF`` column is ignored: the join is by processing time (the state
when the row is processed), Flink's ``PROCTIME()`` lookup join; ``PROCTIME()``
itself reads as ``0`` (it has no value a view could keep).  The text is
rewritten before parsing (as :mod:`.windowfn` rewrites window functions),
keeping every other character where it was so that error positions hold.

>>> text, tables = rewrite("SELECT B.a, S.v FROM (SELECT *, PROCTIME() AS p FROM R) B "
...                        "JOIN T FOR SYSTEM_TIME AS OF B.p AS S ON B.a = S.k")
>>> tables
('T',)
>>> " ".join(text.split())
'SELECT B.a, S.v FROM (SELECT *, 0 AS p FROM R) B JOIN T AS S ON B.a = S.k'
"""

from __future__ import annotations

import re

from ..ast import RelationDecl
from ..errors import CompileError, pos_of_offset

_STRING = re.compile(r"'(?:[^']|'')*'")
_AS_OF = re.compile(r"\bFOR\s+SYSTEM_TIME\s+AS\s+OF\b", re.IGNORECASE)
_JOINED = re.compile(r"\bJOIN\s+(\"[^\"]+\"|\w+)\s*$", re.IGNORECASE)
_NAME = r'(?:"[^"]+"|[A-Za-z_]\w*)'
_COLUMN = re.compile(rf"\s*({_NAME}(?:\s*\.\s*{_NAME})?)(?![\w(])")
_PROCTIME = re.compile(r"\bPROCTIME\s*\(\s*\)", re.IGNORECASE)


def _blank(span: str) -> str:
    """``span`` as spaces, its newlines kept (positions after it stay where they were)."""
    return re.sub(r"[^\n]", " ", span)


def rewrite(text: str) -> tuple[str, tuple[str, ...]]:
    """``text`` with each ``FOR SYSTEM_TIME AS OF <column>`` removed and ``PROCTIME()`` read as ``0``; the
    tables joined that way (each once), which :func:`check_tables` checks against the declared relations.

    A ``FOR SYSTEM_TIME AS OF`` not right after ``JOIN <table>``, or whose time is not a column, is refused:

    >>> rewrite("SELECT * FROM T FOR SYSTEM_TIME AS OF 5")
    Traceback (most recent call last):
    ...
    boreas.m3.errors.CompileError: FOR SYSTEM_TIME AS OF: a lookup join is JOIN <table> FOR SYSTEM_TIME AS OF <column> [AS alias] ON ... (a relation after FROM, a subquery or a time expression is not a lookup join) (at line 1, col 17)
    """
    bare = _STRING.sub(lambda s: " " * len(s.group(0)), text)
    tables: list[str] = []
    out, last = [], 0
    for m in _AS_OF.finditer(bare):
        joined = _JOINED.search(bare, 0, m.start())
        col = _COLUMN.match(bare, m.end())
        if joined is None or col is None or col.group(1).upper() in ("AS", "ON"):
            raise CompileError("FOR SYSTEM_TIME AS OF: a lookup join is JOIN <table> FOR SYSTEM_TIME AS OF "
                               "<column> [AS alias] ON ... (a relation after FROM, a subquery or a time "
                               "expression is not a lookup join)", pos_of_offset(text, m.start()))
        name = joined.group(1).strip('"')
        if name.lower() not in (t.lower() for t in tables):
            tables.append(name)
        out.append(text[last:m.start()] + _blank(text[m.start():col.end()]))
        last = col.end()
    out.append(text[last:])
    rewritten = "".join(out)
    rewritten = _PROCTIME.sub(lambda p: "0" + " " * (len(p.group(0)) - 1), rewritten)
    return rewritten, tuple(tables)


def check_tables(tables: tuple[str, ...], relations: tuple[RelationDecl, ...]) -> tuple[str, ...]:
    """The lookup tables as the relations declare them (their declared names); one not declared is refused.

    >>> from ..ast import Column
    >>> check_tables(("t",), (RelationDecl("T", "TABLE", (Column("k", "INT"),)),))
    ('T',)
    >>> check_tables(("U",), ())
    Traceback (most recent call last):
    ...
    boreas.m3.errors.CompileError: FOR SYSTEM_TIME AS OF reads U, which is not a declared relation or in stream (a lookup join reads a CREATE TABLE or a stream the box reads)
    """
    names = {r.name.lower(): r.name for r in relations}
    for t in tables:
        if t.lower() not in names:
            raise CompileError(f"FOR SYSTEM_TIME AS OF reads {t}, which is not a declared relation or in stream "
                               f"(a lookup join reads a CREATE TABLE or a stream the box reads)")
    return tuple(names[t.lower()] for t in tables)


def maintained(relation: str, reads: frozenset[str] | set[str], tables: tuple[str, ...]) -> bool:
    """Whether a map reading ``reads`` gets statements in ``relation``'s triggers: not when ``relation`` is a
    lookup table and the map joins it with another relation (the join reads the table as it is; its changes
    revise nothing already joined), yes otherwise (a map over the table alone is what lookups read).

    >>> maintained("T", {"T", "R"}, ("T",)), maintained("T", {"T"}, ("T",)), maintained("R", {"T", "R"}, ("T",))
    (False, True, True)
    """
    return relation not in tables or not (set(reads) - {relation})
