"""SQL ``LIKE`` as M3 evaluates it: the one comparison decided by matching a constant pattern, not by ordering.

Why a comparison of its own: exact and prefix patterns (``'abc'``,
``'abc%'``) compile to ``=`` and a range, which every part of M3 already
evaluates (and the C backend orders interned strings for); any other
pattern (``'%BRASS'``, ``'%green%'``, ``'a_c'``) has no such form, so M3
has ``{X LIKE 'p'}`` and ``{X NOT LIKE 'p'}`` with ``p`` a string constant.

Semantics are DuckDB's: ``%`` matches any sequence of characters, ``_``
exactly one character (a code point), everything else itself, case
sensitive; there is no default escape character, so a backslash is an
ordinary character.  No NULLs: ``NOT LIKE`` is the exact complement.

The Python backend and the evaluation of map definitions (:mod:`.runtime.initial`)
call :func:`like_matcher` (one compiled regular expression per pattern);
the C backend has its own matcher over the interned strings' UTF-8 bytes
(``str_like`` in :mod:`.runtime.native.crt`), tested against this one.

>>> like("STANDARD POLISHED BRASS", "%BRASS"), like("forest green", "%green%"), like("abc", "a_c")
(True, True, True)
>>> like("ab", "a_c"), like("a%c", "a\\\\%c"), like("A", "a"), like("", "%")
(False, False, False, True)
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from functools import lru_cache

from .ast import LIKE_OPS

COMPARE: dict[str, Callable[[object, object], bool]] = {
    "=": operator.eq, "<>": operator.ne, "<": operator.lt, "<=": operator.le,
    "LIKE": lambda value, pattern: like(value, pattern),
    "NOT LIKE": lambda value, pattern: not like(value, pattern),
}
"""Every comparison of the calculus and of trigger conditions: ``op -> (left, right) -> bool``."""

assert set(COMPARE) >= set(LIKE_OPS)


@lru_cache(maxsize=256)
def like_matcher(pattern: str) -> Callable[[str], re.Match | None]:
    """The ``fullmatch`` of a compiled regular expression equivalent to the LIKE pattern.

    >>> like_matcher("%a_")("xxab") is not None, like_matcher("%a_")("xxa") is not None
    (True, False)
    """
    parts = [".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in pattern]
    return re.compile("".join(parts), re.DOTALL).fullmatch


def like(value: str, pattern: str) -> bool:
    """Whether ``value LIKE pattern`` (module doc)."""
    return like_matcher(pattern)(value) is not None
