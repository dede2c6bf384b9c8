r"""A Python regular expression as Arrow's RE2 runs it, for :mod:`.m3rows_exprs`' ``REGEXP_EXTRACT``.

M3 reads a pattern as Python's ``re`` does (``m3/functions.py``); Arrow's
``extract_regex`` runs RE2, which reads some syntax otherwise.  This module
rewrites a pattern whose meaning the two share (capturing groups named for
``extract_regex``) and refuses, as :class:`~.arrow_nodes.Unsupported`, the
syntax where they part: escapes other than ``\d \w \b`` and their
negations, ``(?`` groups, ``{,n}``, a ``[`` inside a character class (a POSIX
class in RE2, a character in Python), a quantified group (``(a*)+``: what
the group captures differs).  The view then keeps the row path.
"""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc

from .arrow_nodes import ARROW_ERRORS, Unsupported


class RE2Pattern:
    """A Python regular expression as RE2 runs it, its capturing groups named ``g1``, ``g2``, ... (Arrow's
    ``extract_regex`` reads named groups); :class:`Unsupported` for syntax whose meaning may differ."""

    _ESCAPES = set("dDwWbB")  # ASCII-equal in both (non-ASCII strings fall back); \s differs (\v, \x1c-\x1f)

    def __init__(self, pattern: str):
        out, groups, i, in_class = [], 0, 0, False
        while i < len(pattern):
            c = pattern[i]
            if c == "\\":
                nxt = pattern[i + 1:i + 2]
                if not nxt or (nxt.isalnum() and nxt not in self._ESCAPES):
                    raise Unsupported(f"regular expression {pattern!r}: escape \\{nxt}")
                out.append(pattern[i:i + 2])
                i += 2
                continue
            if in_class:
                if c == "[":  # ([[:digit:]]: a POSIX class in RE2, a "[" and a literal "]" in Python)
                    raise Unsupported(f"regular expression {pattern!r}: '[' inside a character class")
                in_class = c != "]" or out[-1] in ("[", "[^")
            elif c == "[":
                in_class = True
                if pattern[i + 1:i + 2] == "^":
                    out.append("[^")
                    i += 2
                    continue
            elif c == "(":
                if pattern[i + 1:i + 3] == "?:":
                    pass
                elif pattern[i + 1:i + 2] == "?":
                    raise Unsupported(f"regular expression {pattern!r}: a (? group")
                else:
                    groups += 1
                    out.append(f"(?P<g{groups}>")
                    i += 1
                    continue
            elif c == "{" and pattern[i + 1:i + 2] == ",":
                raise Unsupported(f"regular expression {pattern!r}: {{,n}}")
            elif c in "*+?{" and out and out[-1] == ")":  # ((a*)+: what the group captures differs in RE2)
                raise Unsupported(f"regular expression {pattern!r}: a quantified group")
            out.append(c)
            i += 1
        self.groups = groups
        self.pattern = "".join(out)
        try:
            re.compile(pattern)
            pc.extract_regex(pa.array([], pa.string()), self.pattern) if groups else None
        except (re.error, *ARROW_ERRORS) as exc:
            raise Unsupported(f"regular expression {pattern!r}: {exc}") from None
