"""Where the front end's errors point: the statements of a script with their offsets, and each node's line:col.

sqlglot keeps a token position on some nodes only; a node built by sqlglot
(``DATE '...'`` becomes a CAST) or by hand has none, so a node's position is
its first positioned token, stepped back over the keywords that lead it
(``NOT``, ``CASE``, ``JOIN``), or its parent's.
"""

from __future__ import annotations

import re

from sqlglot import exp
from sqlglot.errors import TokenError
from sqlglot.tokens import Tokenizer, TokenType

from ..errors import CompileError, Pos, pos_of_offset

_JOIN_WORDS = {"LEFT", "RIGHT", "FULL", "INNER", "OUTER", "CROSS", "NATURAL", "SEMI", "ANTI", "JOIN"}
_LEADING = {  # keywords that come before a construct's first positioned token
    exp.Select: {"SELECT", "("}, exp.Subquery: {"SELECT", "("}, exp.Join: _JOIN_WORDS, exp.Not: {"NOT"},
    exp.Cast: {"DATE", "CAST", "("}, exp.Union: {"SELECT"}, exp.Case: {"CASE", "WHEN"}, exp.If: {"IF", "("},
    exp.Interval: {"INTERVAL"}, exp.Extract: {"EXTRACT", "("}, exp.Null: {"NULL"},
}


class Ctx:
    """Position bookkeeping for one statement of the script."""

    def __init__(self, text: str, start: int, stmt: str):
        self.text, self.start, self.stmt = text, start, stmt

    def pos(self, node: exp.Expression | None) -> Pos | None:
        """Where a node starts: its first token with a position, stepped back over its leading keywords."""
        node = node if isinstance(node, exp.Expression) else None
        offsets = [n.meta["start"] for n in (node.walk() if node is not None else ()) if "start" in n.meta]
        keyword = _LEADING.get(type(node)) if not offsets else None
        while not offsets and node is not None and node.parent is not None:  # built by sqlglot: where its parent is
            node = node.parent
            offsets = [n.meta["start"] for n in node.walk() if "start" in n.meta]
        if not offsets:
            return pos_of_offset(self.text, self.start)
        offset = min(offsets)
        if keyword:  # the node's own keyword, if its parent holds one (INTERVAL, NULL)
            first = next((t for t in self.tokens() if t.start >= offset and t.text.upper() in keyword), None)
            return pos_of_offset(self.text, self.start + (first.start if first else offset))
        lead = _LEADING.get(type(node))
        if lead:
            tokens = [t for t in self.tokens() if t.start < offset]
            i = len(tokens)
            while i > 0 and tokens[i - 1].text.upper() in lead:
                i -= 1
                if tokens[i].text == "(":
                    break
            if i < len(tokens):
                offset = tokens[i].start
        return pos_of_offset(self.text, self.start + offset)

    def tokens(self):
        if not hasattr(self, "_tokens"):
            self._tokens = Tokenizer().tokenize(self.stmt)
        return self._tokens

    def keyword_pos(self, pattern: str) -> Pos:
        m = re.search(pattern, self.stmt, re.IGNORECASE)
        return pos_of_offset(self.text, self.start + (m.start() if m else 0))

    def error(self, message: str, node: exp.Expression | None = None, keyword: str | None = None):
        return CompileError(message, self.keyword_pos(keyword) if keyword else self.pos(node))


def split_statements(text: str) -> list[tuple[int, str]]:
    """The script's statements as ``(offset, text)``, split at top-level semicolons.

    >>> split_statements("SELECT 'a;b' FROM R; SELECT 2")
    [(0, "SELECT 'a;b' FROM R"), (21, 'SELECT 2')]

    Comments are no statements: one before a statement is left out of it, one alone is dropped.

    >>> split_statements("/* a note; */ CREATE STREAM R(a INT); /* SELECT 1; */")
    [(14, 'CREATE STREAM R(a INT)')]
    """
    try:
        tokens = Tokenizer().tokenize(text)
    except TokenError as e:
        raise CompileError(f"cannot tokenize SQL: {e}") from None
    out, begin, first = [], 0, None
    for t in tokens + [None]:
        if t is None or t.token_type == TokenType.SEMICOLON:
            end = len(text) if t is None else t.start
            if first is not None:  # a statement starts at its first token: comments before it, or alone, are no statement
                out.append((first, text[first:end].rstrip()))
            begin, first = end + 1, None
        elif first is None:
            first = t.start
    return out
