"""Parse M3 program text into the AST (``m3.ast``): a hand-written recursive-descent parser.

Grammar (Figure 1 of seed 001, plus declarations)::

    program   := item*
    item      := relation | map | view | trigger
    relation  := CREATE (STREAM|TABLE) NAME '(' NAME TYPE (',' NAME TYPE)* ')' ';'
    map       := DECLARE MAP NAME '[' [NAME ':' TYPE (',' ...)*] ']' ':' TYPE [':=' sum] ';'
    view      := DECLARE VIEW NAME '[' [vkey (',' vkey)*] ']' '(' [vcol (',' vcol)*] ')' [always] [WHERE vcond] ';'
    vkey      := NAME [':=' NAME] [INTERNAL]      -- key column [:= its variable] (all or none); INTERNAL:
                                                  -- a key no output row holds (a group column not selected)
                                                  -- ALWAYS (no keys): its one row while its maps are empty
    always    := ALWAYS [AT '[' INT, ... ']' (',' ...)*]  -- AT (keys): its rows at those keys, always there
    vcol      := NAME ':=' NAME ['/' NAME]        -- maps read positionally (views without variables)
               | NAME ':=' vexpr                  -- views that name their variables, or have no keys
    vexpr     := vterm (('+'|'-') vterm)*
    vterm     := vfactor (('*'|'/') vfactor)*
    vfactor   := NAME '[' NAME, ... ']' | FOLD '(' NAME ':' NAME '[' NAME, ... ']' ')' | val
               | '-' vfactor | '(' vexpr ')'
    FOLD      := MIN | MAX | SUM | COUNT
    vcond     := vand (OR vand)*;  vand := vnot (AND vnot)*
    vnot      := NOT vnot | '(' vcond ')' | vexpr (CMP | '>' | '>=') vexpr
    trigger   := ON ('+'|'-') NAME '(' [NAME (',' NAME)*] ')' DO '{' [stmt (';' stmt)* [';']] '}'
    stmt      := NAME '[' [val (',' val)*] ']' '+=' sum
    sum       := prod ('+' prod)*
    prod      := factor ('*' factor)*
    factor    := NAME '[' vals ']' | NAME '(' vals ')' | val | '(' sum ')'
               | IF prod CMP prod THEN sum ELSE 0 | '{' prod CMP prod '}'
    val       := NAME | ['-'] NUMBER | STRING | DATE STRING | FN '(' val (',' val)* ')'
    FN        := YEAR | QUARTER | MONTH | DAY | SUBSTRING  -- :mod:`.functions`; NAME '(' is an atom of a
                                                          -- relation declared by that name
    CMP       := '=' | '<>' | '<' | '<=' | LIKE | NOT LIKE     -- LIKE: a string var against a string constant

Keywords are case-insensitive, names case-sensitive, ``--`` starts a comment.
``WHERE``, ``AND``, ``OR``, ``NOT`` and the fold names are words only where a
view expects them (a variable may be called ``MIN``).
Sums and relation atoms are only allowed in map definitions (the checker says
so); errors carry ``line:col``.

>>> p = parse_program("CREATE STREAM R(A INT); ON +R(A) DO { m[A] += 2 * A; }")
>>> p.triggers[0].statements[0].target
MapRef(name='m', args=(Var(name='A'),))
"""

from __future__ import annotations

import datetime
import re

from .ast import (
    Call,
    CMP_OPS,
    TYPES,
    Cmp,
    Column,
    Const,
    Expr,
    IfThen,
    MapDecl,
    MapRef,
    Prod,
    Program,
    RelationDecl,
    RelAtom,
    Statement,
    Sum,
    Trigger,
    Val,
    Var,
)
from .errors import ParseError, Pos
from .functions import FUNCTIONS
from .library import VECTOR
from .viewsyntax import ViewParser

KEYWORDS = {"ON", "DO", "IF", "THEN", "ELSE", "CREATE", "STREAM", "TABLE", "DECLARE", "MAP", "VIEW", "DATE"}
TYPE_ALIASES = {
    "INT": "INT", "INTEGER": "INT", "BIGINT": "INT", "SMALLINT": "INT", "TINYINT": "INT",
    "FLOAT": "FLOAT", "DOUBLE": "FLOAT", "REAL": "FLOAT", "DECIMAL": "FLOAT", "NUMERIC": "FLOAT",
    "STRING": "STRING", "VARCHAR": "STRING", "TEXT": "STRING", "CHAR": "STRING",
    "DATE": "DATE",
}

_TOKEN = re.compile(
    r"""(?P<ws>\s+|--[^\n]*)
      |(?P<number>\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\d+)
      |(?P<name>[A-Za-z_][A-Za-z0-9_]*)
      |(?P<string>'(?:[^']|'')*')
      |(?P<op>:=|\+=|<>|<=|>=|[-+*/=<>()\[\]{},;:])""",
    re.VERBOSE,
)


class _Tok:
    __slots__ = ("kind", "pos", "text")

    def __init__(self, kind: str, text: str, pos: Pos):
        self.kind, self.text, self.pos = kind, text, pos

    def __repr__(self) -> str:
        return f"{self.kind}:{self.text}"


def tokenize(text: str) -> list[_Tok]:
    """Split text into tokens (kinds: number, name, keyword, string, op, eof)."""
    out: list[_Tok] = []
    i, line, line_start = 0, 1, 0
    while i < len(text):
        m = _TOKEN.match(text, i)
        if not m:
            raise ParseError(f"unexpected character {text[i]!r}", Pos(line, i - line_start + 1))
        kind = m.lastgroup
        tok_text = m.group()
        pos = Pos(line, i - line_start + 1)
        if kind != "ws":
            if kind == "name" and tok_text.upper() in KEYWORDS:
                kind, tok_text = "keyword", tok_text.upper()
            out.append(_Tok(kind, tok_text, pos))
        newlines = tok_text.count("\n")
        if newlines:
            line += newlines
            line_start = i + tok_text.rfind("\n") + 1
        i = m.end()
    out.append(_Tok("eof", "", Pos(line, i - line_start + 1)))
    return out


class _Parser(ViewParser):
    def __init__(self, text: str):
        self.relations: set[str] = set()  # declared so far: ``NAME(...)`` is their atom, not a function call
        self.toks = tokenize(text)
        self.i = 0

    # -- token helpers -------------------------------------------------
    def peek(self, ahead: int = 0) -> _Tok:
        return self.toks[min(self.i + ahead, len(self.toks) - 1)]

    def at(self, text: str) -> bool:
        t = self.peek()
        return t.kind in ("op", "keyword") and t.text == text

    def take(self) -> _Tok:
        t = self.peek()
        self.i += 1
        return t

    def expect(self, text: str) -> _Tok:
        t = self.peek()
        if not self.at(text):
            raise ParseError(f"expected {text!r} but found {_describe(t)}", t.pos)
        return self.take()

    def name(self, what: str) -> _Tok:
        t = self.peek()
        if t.kind != "name":
            raise ParseError(f"expected {what} but found {_describe(t)}", t.pos)
        return self.take()

    def comma_list(self, close: str, item):
        items = []
        if not self.at(close):
            items.append(item())
            while self.at(","):
                self.take()
                items.append(item())
        self.expect(close)
        return tuple(items)

    # -- declarations --------------------------------------------------
    def program(self) -> Program:
        rels, maps, views, trigs = [], [], [], []
        while self.peek().kind != "eof":
            t = self.peek()
            if self.at("CREATE"):
                rels.append(self.relation())
            elif self.at("DECLARE") and self.peek(1).text == "MAP":
                maps.append(self.map_decl())
            elif self.at("DECLARE") and self.peek(1).text == "VIEW":
                views.append(self.view_decl())
            elif self.at("ON"):
                trigs.append(self.trigger())
            else:
                raise ParseError(f"expected CREATE, DECLARE MAP, DECLARE VIEW or ON but found {_describe(t)}", t.pos)
        return Program(tuple(rels), tuple(maps), tuple(views), tuple(trigs))

    def type_name(self) -> str:
        t = self.peek()
        if t.kind not in ("name", "keyword") or t.text.upper() not in TYPE_ALIASES:
            raise ParseError(f"expected a type ({', '.join(TYPES)}) but found {_describe(t)}", t.pos)
        self.take()
        return TYPE_ALIASES[t.text.upper()]

    def relation(self) -> RelationDecl:
        start = self.expect("CREATE")
        kind = self.peek()
        if not (self.at("STREAM") or self.at("TABLE")):
            raise ParseError(f"expected STREAM or TABLE but found {_describe(kind)}", kind.pos)
        self.take()
        name = self.name("a relation name")
        self.expect("(")

        def column():
            n = self.name("a column name")
            return Column(n.text, self.type_name(), pos=n.pos)

        cols = self.comma_list(")", column)
        self.expect(";")
        self.relations.add(name.text)
        return RelationDecl(name.text, kind.text, cols, pos=start.pos)

    def map_decl(self) -> MapDecl:
        start = self.expect("DECLARE")
        self.expect("MAP")
        name = self.name("a map name")
        self.expect("[")

        def key():
            n = self.name("a key name")
            self.expect(":")
            return Column(n.text, self.type_name(), pos=n.pos)

        keys = self.comma_list("]", key)
        self.expect(":")
        vtype = self.type_name()
        definition = None
        if self.at(":="):
            self.take()
            definition = self.sum()
        self.expect(";")
        return MapDecl(name.text, keys, vtype, definition, pos=start.pos)

    def trigger(self) -> Trigger:
        start = self.expect("ON")
        sign_tok = self.peek()
        if not (self.at("+") or self.at("-")):
            raise ParseError(f"expected '+' or '-' (insert or delete event) but found {_describe(sign_tok)}", sign_tok.pos)
        self.take()
        rel = self.name("a relation name")
        self.expect("(")
        names = self.comma_list(")", lambda: self.name("an event variable").text)
        self.expect("DO")
        self.expect("{")
        stmts = []
        while not self.at("}"):
            stmts.append(self.statement())
            if not self.at("}"):
                self.expect(";")
        self.expect("}")
        return Trigger(rel.text, 1 if sign_tok.text == "+" else -1, names, tuple(stmts), pos=start.pos)

    def statement(self) -> Statement:
        name = self.name("a map name")
        self.expect("[")
        args = self.comma_list("]", self.key)
        self.expect("+=")
        return Statement(MapRef(name.text, args, pos=name.pos), self.sum(), pos=name.pos)

    # -- expressions ---------------------------------------------------
    def sum(self) -> Expr:
        first = self.peek()
        terms = [self.prod()]
        while self.at("+"):
            self.take()
            terms.append(self.prod())
        return terms[0] if len(terms) == 1 else Sum(tuple(terms), pos=first.pos)

    def prod(self) -> Expr:
        first = self.peek()
        factors = [self.factor()]
        while self.at("*"):
            self.take()
            factors.append(self.factor())
        return factors[0] if len(factors) == 1 else Prod(tuple(factors), pos=first.pos)

    def factor(self) -> Expr:
        t = self.peek()
        if t.kind == "name" and self.peek(1).text == "[":
            self.take()
            self.take()
            return MapRef(t.text, self.comma_list("]", self.key), pos=t.pos)
        if t.kind == "name" and self.peek(1).text == "(" and (t.text in self.relations or t.text not in FUNCTIONS):
            self.take()
            self.take()
            return RelAtom(t.text, self.comma_list(")", self.val), pos=t.pos)
        if self.at("("):
            self.take()
            inner = self.sum()
            self.expect(")")
            return inner
        if self.at("IF"):
            self.take()
            cond = self.comparison(t)
            self.expect("THEN")
            then = self.sum()
            self.expect("ELSE")
            zero = self.peek()
            if not (zero.kind == "number" and float(zero.text) == 0):
                raise ParseError(f"expected ELSE 0 (M3 conditions are IF ... THEN e ELSE 0) but found {_describe(zero)}", zero.pos)
            self.take()
            return IfThen(cond, then, pos=t.pos)
        if self.at("{"):
            self.take()
            cond = self.comparison(t)
            self.expect("}")
            return cond
        return self.val()

    def comparison(self, start: _Tok) -> Cmp:
        left = self.prod()
        op = self.peek()
        like = self._like_op()
        if like is not None:
            pattern = self.peek()
            if pattern.kind != "string":
                raise ParseError(f"expected a string pattern after {like} but found {_describe(pattern)}", pattern.pos)
            return Cmp(like, left, self.val(), pos=start.pos)
        if op.kind != "op" or op.text not in CMP_OPS + (">", ">="):
            raise ParseError(f"expected a comparison ({', '.join(CMP_OPS)}) but found {_describe(op)}", op.pos)
        self.take()
        right = self.prod()
        if op.text in (">", ">="):  # a > b is b < a: keep the canonical operators of Figure 1
            return Cmp("<" if op.text == ">" else "<=", right, left, pos=start.pos)
        return Cmp(op.text, left, right, pos=start.pos)

    def _like_op(self) -> str | None:
        """``LIKE`` or ``NOT LIKE`` (taken), or None (:mod:`.like`)."""
        t, after = self.peek(), self.peek(1)
        if t.kind == "name" and t.text.upper() == "LIKE":
            self.take()
            return "LIKE"
        if t.kind == "name" and t.text.upper() == "NOT" and after.kind == "name" and after.text.upper() == "LIKE":
            self.take()
            self.take()
            return "NOT LIKE"
        return None

    def key(self) -> Expr:
        """A map's argument: a value, or arithmetic over values (``Q[A + B]``: a computed key, which the checker
        allows where it is computed from the event's row or a loop's entry)."""
        return self.sum()

    def val(self) -> Val:
        t = self.peek()
        if t.kind == "name" and t.text in FUNCTIONS and self.peek(1).text == "(":
            self.take()
            self.take()
            args = self.comma_list(")", self.key if t.text in VECTOR else self.val)  # (numbers: arithmetic too)
            return Call(t.text, args, pos=t.pos)
        if t.kind == "name":
            self.take()
            return Var(t.text, pos=t.pos)
        if t.kind == "number" or (self.at("-") and self.peek(1).kind == "number"):
            negative = self.at("-")
            if negative:
                self.take()
            num = self.take().text
            value: int | float = float(num) if any(c in num for c in ".eE") else int(num)
            return Const(-value if negative else value, pos=t.pos)
        if t.kind == "string":
            self.take()
            return Const(t.text[1:-1].replace("''", "'"), pos=t.pos)
        if self.at("DATE"):
            self.take()
            s = self.peek()
            if s.kind != "string":
                raise ParseError(f"expected a date string after DATE but found {_describe(s)}", s.pos)
            self.take()
            try:
                return Const(datetime.date.fromisoformat(s.text[1:-1]), pos=t.pos)
            except ValueError:
                raise ParseError(f"invalid DATE literal {s.text}", s.pos) from None
        raise ParseError(f"expected a variable or constant but found {_describe(t)}", t.pos)


def _describe(t: _Tok) -> str:
    return "end of input" if t.kind == "eof" else repr(t.text)


def parse_program(text: str) -> Program:
    """Parse a whole M3 program; raises :class:`ParseError` with line:col."""
    return _Parser(text).program()


def parse_expr(text: str) -> Expr:
    """Parse one expression (a sum of products).

    >>> parse_expr("2 * m[A, 'x'] * IF A < 3 THEN B ELSE 0")
    Prod(factors=(Const(value=2), MapRef(name='m', args=(Var(name='A'), Const(value='x'))), IfThen(cond=Cmp(op='<', left=Var(name='A'), right=Const(value=3)), then=Var(name='B'))))
    """
    p = _Parser(text)
    e = p.sum()
    if p.peek().kind != "eof":
        raise ParseError(f"unexpected {_describe(p.peek())} after expression", p.peek().pos)
    return e
