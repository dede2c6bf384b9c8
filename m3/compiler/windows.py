"""Refusing event-time window table functions (``TABLE(TUMBLE(...))``, ``HOP``, ``SESSION``, ``CUMULATE``).

Why: Nexmark's windowed queries are written in Flink SQL's window table
functions, which sqlglot does not parse: left to the parser, a user reads
``SQL syntax error: Expecting )`` and looks for a typo.  Event time in views
is issue 34's work; until then such a statement is refused before parsing,
by name, at the call's line and column.

>>> refuse_windows("SELECT 1 FROM R", "SELECT 1 FROM R", 0)
>>> sql = "SELECT a\\nFROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(t), INTERVAL '10' SECOND))"
>>> refuse_windows(sql, sql, 0)
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: event-time windows (TUMBLE/HOP/SESSION) are not supported yet: issue 34 (TUMBLE(...) here) (at line 2, col 12)
>>> refuse_windows("SELECT 'hop(' AS s FROM R", "SELECT 'hop(' AS s FROM R", 0)
"""

from __future__ import annotations

import re

from ..errors import CompileError, pos_of_offset

_WINDOW = re.compile(r"\b(TUMBLE|HOP|SESSION|CUMULATE)\s*\(", re.IGNORECASE)
_STRING = re.compile(r"'(?:[^']|'')*'")


def refuse_windows(text: str, stmt: str, start: int) -> None:
    """Raise a :class:`..errors.CompileError` at the first window table function of ``stmt`` (which starts at
    offset ``start`` of the script ``text``); string literals do not count."""
    bare = _STRING.sub(lambda m: " " * len(m.group(0)), stmt)
    m = _WINDOW.search(bare)
    if m is not None:
        raise CompileError(f"event-time windows (TUMBLE/HOP/SESSION) are not supported yet: issue 34 "
                           f"({m.group(1).upper()}(...) here)", pos_of_offset(text, start + m.start()))
