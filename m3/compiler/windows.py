"""Refusing the window table functions Boreas does not run (``SESSION``, ``CUMULATE``), by name and why.

Why: sqlglot parses no window table function; ``TUMBLE`` and ``HOP`` are
read before parsing (:mod:`.windowfn`), and whatever window call is left
would reach the parser and read ``SQL syntax error: Expecting )``, sending
the user looking for a typo.  So it is refused before parsing, by name, at
the call's line and column, with the reason.

>>> refuse_windows("SELECT 1 FROM R", "SELECT 1 FROM R", 0)
>>> sql = "SELECT a\\nFROM TABLE(SESSION(TABLE bid, DESCRIPTOR(t), INTERVAL '10' SECOND))"
>>> refuse_windows(sql, sql, 0)
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: SESSION windows are not supported: a session's bounds move as rows arrive (two sessions merge into one), which a view keyed by a fixed window_start cannot hold; use TUMBLE or HOP (at line 2, col 12)
>>> refuse_windows("SELECT 'hop(' AS s FROM R", "SELECT 'hop(' AS s FROM R", 0)
"""

from __future__ import annotations

import re

from ..errors import CompileError, pos_of_offset

_WINDOW = re.compile(r"\b(TUMBLE|HOP|SESSION|CUMULATE)\s*\(", re.IGNORECASE)
_STRING = re.compile(r"'(?:[^']|'')*'")
_WHY = {
    "SESSION": "a session's bounds move as rows arrive (two sessions merge into one), which a view keyed by a "
               "fixed window_start cannot hold; use TUMBLE or HOP",
    "CUMULATE": "not implemented; HOP with a slide of the step gives the same windows' rows apart",
    "TUMBLE": "write it as FROM TABLE(TUMBLE(TABLE name, DESCRIPTOR(column), size))",
    "HOP": "write it as FROM TABLE(HOP(TABLE name, DESCRIPTOR(column), slide, size))",
}


def refuse_windows(text: str, stmt: str, start: int) -> None:
    """Raise a :class:`..errors.CompileError` at the first window table function left in ``stmt`` (which starts
    at offset ``start`` of the script ``text``); string literals do not count."""
    bare = _STRING.sub(lambda m: " " * len(m.group(0)), stmt)
    m = _WINDOW.search(bare)
    if m is not None:
        name = m.group(1).upper()
        what = "windows are not supported" if name in ("SESSION", "CUMULATE") else "is only read in FROM"
        raise CompileError(f"{name} {what}: {_WHY[name]}", pos_of_offset(text, start + m.start()))
