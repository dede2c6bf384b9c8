"""Flink's older session group window (``GROUP BY k, SESSION(t, gap)`` with ``SESSION_START``/``SESSION_END``),
read as the ``SESSION`` window table function.

Why: Nexmark's q11 (bench/nexmark_queries.py, the suite's own text) is
written in this form, which Flink still runs; it means the same as
``FROM TABLE(SESSION(TABLE r PARTITION BY k, DESCRIPTOR(t), gap))`` grouped
by ``k, window_start, window_end`` (the session's key is the query's other
GROUP BY columns).  So :func:`group_sessions` rewrites the text into that
form before :mod:`.windowfn` reads it, and nothing else changes.  Its other
GROUP BY items must be plain columns (they are the session's key), and the
query reads one relation.

>>> print(group_sessions("SELECT B.bidder, count(*) AS n, SESSION_START(B.ts, INTERVAL '10' SECOND) AS s, "
...                      "SESSION_END(B.ts, INTERVAL '10' SECOND) AS e FROM bid B "
...                      "GROUP BY B.bidder, SESSION(B.ts, INTERVAL '10' SECOND)"))
SELECT B.bidder, count(*) AS n, B.window_start AS s, B.window_end AS e FROM TABLE(SESSION(TABLE bid PARTITION BY bidder, DESCRIPTOR(ts), INTERVAL '10' SECOND)) B GROUP BY B.bidder, B.window_start, B.window_end
>>> group_sessions("SELECT a FROM r")
'SELECT a FROM r'
"""

from __future__ import annotations

import re

from ..errors import CompileError, pos_of_offset

_STRING = re.compile(r"'(?:[^']|'')*'")
_GROUPED = re.compile(r"\bGROUP\s+BY\b(?P<items>[^;]*?)(?P<call>\bSESSION\s*\()", re.IGNORECASE)
_BOUND = re.compile(r"\bSESSION_(START|END)\s*\(", re.IGNORECASE)
_ARGS = re.compile(r"^\s*(?:([A-Za-z_][A-Za-z0-9_]*)\s*\.\s*)?([A-Za-z_][A-Za-z0-9_]*)\s*,(.+)$", re.DOTALL)
_COLUMN = re.compile(r"^\s*(?:[A-Za-z_][A-Za-z0-9_]*\s*\.\s*)?([A-Za-z_][A-Za-z0-9_]*)\s*$")
_FROM = re.compile(r"\bFROM\s+([A-Za-z_][A-Za-z0-9_]*)(\s+(?:AS\s+)?([A-Za-z_][A-Za-z0-9_]*))?", re.IGNORECASE)
_CLAUSE = re.compile(r"^(WHERE|GROUP|HAVING|ORDER|LIMIT|UNION|JOIN|INNER|LEFT|RIGHT|FULL|CROSS|ON)$", re.IGNORECASE)


def _call_end(bare: str, start: int) -> int:
    """The offset just after the ``)`` closing the ``(`` before ``start``."""
    depth = 1
    for i in range(start, len(bare)):
        depth += (bare[i] == "(") - (bare[i] == ")")
        if depth == 0:
            return i + 1
    return -1


def group_sessions(text: str) -> str:
    """``text`` with a statement grouped by ``SESSION(t, gap)`` written with the ``SESSION`` table function."""
    bare = _STRING.sub(lambda s: " " * len(s.group(0)), text)
    m = _GROUPED.search(bare)
    if m is None:
        return text
    pos = pos_of_offset(text, m.start())
    end = _call_end(bare, m.end())
    args = _ARGS.match(text[m.end():end - 1]) if end > 0 else None
    if args is None:
        raise CompileError("a session group window is GROUP BY ..., SESSION(column, gap)", pos)
    qualifier, time, gap = args.group(1), args.group(2), args.group(3).strip()
    stmt = bare.rfind(";", 0, m.start()) + 1
    source = _FROM.search(bare, stmt, m.start())
    rest = bare[source.start(1) + len(source.group(1)):m.start()] if source is not None else ""
    if source is None or re.search(r"^\s*(?:AS\s+)?[A-Za-z0-9_]*\s*,|\bJOIN\b", rest, re.IGNORECASE):
        raise CompileError("a session group window reads one relation (FROM name [alias])", pos)
    alias = source.group(3) if source.group(3) and not _CLAUSE.match(source.group(3)) else None
    if qualifier is not None and qualifier.lower() not in {source.group(1).lower(), (alias or "").lower()}:
        raise CompileError(f"SESSION({qualifier}.{time}, ...) names no relation of the query", pos)
    keys = []
    for item in filter(str.strip, m.group("items").split(",")):
        column = _COLUMN.match(item)
        if column is None:
            raise CompileError(f"a session group window's other GROUP BY items are its key, plain columns: "
                               f"{item.strip()!r}", pos)
        keys.append(column.group(1))
    prefix = f"{qualifier}." if qualifier else ""
    partition = f" PARTITION BY {', '.join(keys)}" if keys else ""
    call = f"TABLE(SESSION(TABLE {source.group(1)}{partition}, DESCRIPTOR({time}), {gap}))"
    after_name = source.start(1) + len(source.group(1))
    out = (text[:source.start(1)] + call + text[after_name:m.start("call")]
           + f"{prefix}window_start, {prefix}window_end" + text[end:])
    return _bound_columns(out)


def _bound_columns(text: str) -> str:
    """``SESSION_START(...)``/``SESSION_END(...)`` as the ``window_start``/``window_end`` columns."""
    while True:
        bare = _STRING.sub(lambda s: " " * len(s.group(0)), text)
        m = _BOUND.search(bare)
        if m is None:
            return text
        end = _call_end(bare, m.end())
        args = _ARGS.match(text[m.end():end - 1]) if end > 0 else None
        if args is None:
            raise CompileError(f"SESSION_{m.group(1).upper()} takes (column, gap)", pos_of_offset(text, m.start()))
        prefix = f"{args.group(1)}." if args.group(1) else ""
        text = text[:m.start()] + f"{prefix}window_{m.group(1).lower()}" + text[end:]
