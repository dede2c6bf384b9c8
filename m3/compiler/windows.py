"""Refusing the window table functions Boreas does not run (``CUMULATE``), or meets out of place, by name and why.

Why: sqlglot parses no window table function; ``TUMBLE``, ``HOP`` and
``SESSION`` are read before parsing (:mod:`.windowfn`), and whatever window call is left
would reach the parser and read ``SQL syntax error: Expecting )``, sending
the user looking for a typo.  So it is refused before parsing, by name, at
the call's line and column, with the reason.

>>> refuse_windows("SELECT 1 FROM R", "SELECT 1 FROM R", 0)
>>> sql = "SELECT a\\nFROM TABLE(CUMULATE(TABLE bid, DESCRIPTOR(t), 5, 10))"
>>> refuse_windows(sql, sql, 0)
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: CUMULATE windows are not supported: not implemented; HOP with a slide of the step gives the same windows' rows apart (at line 2, col 12)
>>> refuse_windows("SELECT 'hop(' AS s FROM R", "SELECT 'hop(' AS s FROM R", 0)
"""

from __future__ import annotations

import re

from ..errors import CompileError, pos_of_offset

_WINDOW = re.compile(r"\b(TUMBLE|HOP|SESSION|CUMULATE)\s*\(", re.IGNORECASE)
_STRING = re.compile(r"'(?:[^']|'')*'")
_WHY = {
    "SESSION": "write it as FROM TABLE(SESSION(TABLE name [PARTITION BY column, ...], DESCRIPTOR(column), gap))",
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
        what = "windows are not supported" if name == "CUMULATE" else "is only read in FROM"
        raise CompileError(f"{name} {what}: {_WHY[name]}", pos_of_offset(text, start + m.start()))
