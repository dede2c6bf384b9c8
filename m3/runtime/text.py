"""A box's program text, M3 or SQL, as a :class:`~m3.ast.Program`.

Why a module of its own: both the runtime (given text) and the m3 box type
(m3/boxtype.py, compiling a box's text before it builds a runtime) need the
one rule that tells M3 text from SQL.
"""

from __future__ import annotations

import re

from ..ast import Program
from ..syntax import parse_program


def program_from_text(text: str) -> Program:
    """M3 text, or SQL (CREATE STREAM ... SELECT ...) compiled to M3."""
    if re.search(r"^\s*(ON\s+[+-]|DECLARE\s+MAP)", text, re.IGNORECASE | re.MULTILINE):
        return parse_program(text)
    from ..compiler.pipeline import compile_sql  # the compiler builds on the runtime's package: imported on use

    return compile_sql(text)
