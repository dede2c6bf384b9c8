"""Parse the view declarations of M3 program text (the ``view`` rules of :mod:`.syntax`'s grammar).

A view without named key variables reads its maps positionally (``v[a](s :=
m, avg := s / c)``); a view that names them (``v[a := A]``) writes its
columns as view expressions and may have a ``WHERE`` condition, evaluated
when the view is read (:mod:`.runtime.views`); ``TOTAL(K : m[A, K] WHERE
cond)`` sums the entries of ``m`` at the row whose ``K`` meets ``cond``
(nested subqueries)::

    DECLARE VIEW Q1[a := A](r := s[A] / n[A], lo := MIN(X : t[A, X])) WHERE 1 < n[A] AND NOT s[A] = 0;

A key column marked ``INTERNAL`` (``v[s, b INTERNAL]``) is a key of the
view's rows that no output row holds (:attr:`.ast.ViewDecl.internal`).
``ALWAYS`` after a keyless view's columns keeps its one row while its maps are empty (:attr:`.ast.ViewDecl.always`);
``ALWAYS AT [0], [1]`` after a keyed view's, its rows at those keys (:attr:`.ast.ViewDecl.fixed`).
``INTERNAL``, ``WHERE``, ``AND``, ``OR``, ``NOT`` and the fold names are words only where
a view expects them, so a variable may be called ``MIN``.  A mixin of the
program parser (:class:`.syntax._Parser`), which provides the token helpers.

>>> from .syntax import parse_program
>>> v = parse_program("DECLARE VIEW v[k := K](x := -(m[K] - 1) / 2) WHERE NOT (m[K] > 0 OR K = 'a');").views[0]
>>> v.columns[0].expr
Arith(op='/', left=Arith(op='*', left=Const(value=-1), right=Arith(op='-', left=MapRef(name='m', args=(Var(name='K'),)), right=Const(value=1))), right=Const(value=2))
>>> v.where
BoolOp(op='NOT', args=(BoolOp(op='OR', args=(Cmp(op='<', left=Const(value=0), right=MapRef(name='m', args=(Var(name='K'),))), Cmp(op='=', left=Var(name='K'), right=Const(value='a')))),))
>>> parse_program("DECLARE VIEW v[k := K](n := GREATEST(m[K] - n[K], 0));").views[0].columns[0].expr.op
'GREATEST'
>>> parse_program("DECLARE VIEW v[a, internal INTERNAL](s := m);").views[0].internal
('internal',)
>>> from .printer import format_view
>>> format_view(parse_program("DECLARE VIEW v[](n := m[] + 1) ALWAYS WHERE m[] < 3;").views[0])
'DECLARE VIEW v[](n := m[] + 1) ALWAYS WHERE m[] < 3;'
>>> parse_program("DECLARE VIEW v[b := B INTERNAL](n := m[B]) ALWAYS AT [0], [1];").views[0].fixed
((0,), (1,))
>>> t = parse_program("DECLARE VIEW v[g := G](s := TOTAL(K : o[G, K] WHERE 0 < n[K] TRACK t[G, K]));").views[0].columns[0].expr
>>> t.vars, t.cond, t.track
(('K',), Cmp(op='<', left=Const(value=0), right=MapRef(name='n', args=(Var(name='K'),))), (MapRef(name='t', args=(Var(name='G'), Var(name='K'))),))
"""

from __future__ import annotations

from .ast import CMP_OPS, Cmp, Const, Expr, MapRef, ViewColumn, ViewDecl
from .viewnodes import EXTREMES, FOLDS, Arith, BoolOp, Fold, Total
from .errors import ParseError
from .over import Over


def _describe(t) -> str:
    return "end of input" if t.kind == "eof" else repr(t.text)


class ViewParser:
    """``DECLARE VIEW`` and view expressions; the token helpers (``peek``, ``take``, ``at``, ``expect``, ``name``,
    ``comma_list``, ``val``) come from the parser this is mixed into."""

    def view_decl(self) -> ViewDecl:
        start = self.expect("DECLARE")
        self.expect("VIEW")
        name = self.name("a view name")
        self.expect("[")

        def key():
            n = self.name("a key column name")
            var = None
            if self.at(":="):
                self.take()
                var = self.name("a variable").text
            hidden = self.peek().kind == "name" and self.peek().text.upper() == "INTERNAL"
            if hidden:
                self.take()
            return n.text, var, hidden

        marked = self.comma_list("]", key)
        internal = tuple(k for k, _, hidden in marked if hidden)
        keys = [(k, v) for k, v, _ in marked]
        named = [v for _, v in keys if v is not None]
        if named and len(named) != len(keys):
            raise ParseError("name the variable of every key column of the view or of none", start.pos)
        self.expect("(")

        def column():
            n = self.name("a view column name")
            self.expect(":=")
            if not named and self._plain_column():
                num = self.name("a map name").text
                den = None
                if self.at("/"):
                    self.take()
                    den = self.name("a map name").text
                return ViewColumn(n.text, num, den, pos=n.pos)
            if keys and not named:
                t = self.peek()
                raise ParseError("a view column that is an expression needs the view's key variables "
                                 "(DECLARE VIEW v[k := K, ...])", t.pos)
            return ViewColumn(n.text, expr=self.vexpr(), pos=n.pos)

        cols = self.comma_list(")", column)
        always = self.peek().kind == "name" and self.peek().text.upper() == "ALWAYS"  # (ast.ViewDecl.always)
        fixed: tuple[tuple, ...] = ()
        if always:
            self.take()
            if keys:  # (its rows at fixed keys: ``ALWAYS AT [0], [1]``)
                at = self.peek()
                if not (at.kind == "name" and at.text.upper() == "AT"):
                    raise ParseError("ALWAYS of a view with keys names its rows: ALWAYS AT [k, ...], ...", at.pos)
                if not named:
                    raise ParseError("a view ALWAYS AT its rows needs its key variables (DECLARE VIEW v[k := K, ...])",
                                     at.pos)
                self.take()
                fixed = self._fixed_rows(len(keys))
        where = None
        if self.peek().kind == "name" and self.peek().text.upper() == "WHERE":
            if keys and not named:
                raise ParseError("a view with a WHERE condition needs its key variables (DECLARE VIEW v[k := K, ...])",
                                 self.peek().pos)
            self.take()
            where = self.vcond()
        self.expect(";")
        return ViewDecl(name.text, tuple(k for k, _ in keys), cols, tuple(named), where, internal, always,
                        fixed, pos=start.pos)

    def _fixed_rows(self, width: int) -> tuple[tuple, ...]:
        """``[k, ...], ...``: an ALWAYS view's fixed output keys (integers)."""
        rows = []
        while True:
            self.expect("[")
            row = self.comma_list("]", self._int)
            if len(row) != width:
                raise ParseError(f"an ALWAYS row names {len(row)} keys, the view has {width}", self.peek().pos)
            rows.append(row)
            if not self.at(","):
                return tuple(rows)
            self.take()

    def _int(self) -> int:
        neg = self.at("-")
        if neg:
            self.take()
        t = self.take()
        if t.kind != "number" or not t.text.isdigit():
            raise ParseError("an ALWAYS row's key is an integer", t.pos)
        return -int(t.text) if neg else int(t.text)

    def _plain_column(self) -> bool:
        """Whether a view column is ``m`` or ``m / n`` (maps read positionally), by looking ahead."""
        if self.peek().kind != "name":
            return False
        after = self.peek(1).text
        if after in (",", ")"):
            return True
        return after == "/" and self.peek(2).kind == "name" and self.peek(3).text in (",", ")")

    # -- view expressions ----------------------------------------------------
    def vexpr(self) -> Expr:
        e = self.vterm()
        while self.at("+") or self.at("-"):
            op = self.take()
            e = Arith(op.text, e, self.vterm(), pos=op.pos)
        return e

    def vterm(self) -> Expr:
        e = self.vfactor()
        while self.at("*") or self.at("/"):
            op = self.take()
            e = Arith(op.text, e, self.vfactor(), pos=op.pos)
        return e

    def vfactor(self) -> Expr:
        t = self.peek()
        if t.kind == "name" and self.peek(1).text == "[":
            return self.map_ref()
        if t.kind == "name" and t.text.upper() == "TOTAL" and self.peek(1).text == "(":
            return self.total()
        if t.kind == "name" and t.text.upper() in EXTREMES and self.peek(1).text == "(":  # LEAST(a, b)
            self.take()
            self.take()
            left = self.vexpr()
            self.expect(",")
            right = self.vexpr()
            self.expect(")")
            return Arith(t.text.upper(), left, right, pos=t.pos)
        if t.kind == "name" and t.text.upper() in FOLDS and self.peek(1).text == "(" and \
                not (self.peek(2).kind == "name" and self.peek(3).text == ":"):
            return self.over()
        if t.kind == "name" and t.text.upper() in FOLDS and self.peek(1).text == "(":
            self.take()
            self.take()
            var = self.name("the folded variable").text
            self.expect(":")
            ref = self.map_ref()
            cond, track = self.condition_and_track()
            self.expect(")")
            return Fold(t.text.upper(), var, ref, cond, track, pos=t.pos)
        if self.at("("):
            self.take()
            inner = self.vexpr()
            self.expect(")")
            return inner
        if self.at("-") and self.peek(1).kind != "number":
            self.take()
            return Arith("*", Const(-1, pos=t.pos), self.vfactor(), pos=t.pos)
        return self.val()

    def over(self) -> Over:
        """``SUM(e FOR K, ... : m[G, K] WHERE cond)``: an aggregate of a value over a map's entries (:mod:`.over`)."""
        t = self.take()
        self.expect("(")
        e = self.vexpr()
        if not self._word("FOR"):
            raise ParseError(f"expected FOR (or a variable and ':') in {t.text.upper()}(...) but found "
                             f"{_describe(self.peek())}", self.peek().pos)
        self.take()
        names: list[str] = []
        while not self.at(":"):
            names.append(self.name("a variable the aggregate ranges over").text)
            if not self.at(":"):
                self.expect(",")
        self.expect(":")
        ref = self.map_ref()
        cond = None
        if self._word("WHERE"):
            self.take()
            cond = self.vcond()
        self.expect(")")
        return Over(t.text.upper(), e, tuple(names), ref, cond, pos=t.pos)

    def total(self) -> Total:
        """``TOTAL(K, Q : m[G, K, Q] WHERE cond)``: a conditional sum over a map's entries (nested subqueries)."""
        t = self.take()
        self.expect("(")
        names: list[str] = []
        while not self.at(":"):
            names.append(self.name("a summed-over variable").text)
            if not self.at(":"):
                self.expect(",")
        self.expect(":")
        ref = self.map_ref()
        cond, track = self.condition_and_track()
        self.expect(")")
        return Total(tuple(names), ref, cond, track, pos=t.pos)

    def condition_and_track(self) -> tuple[Expr | None, tuple[MapRef, ...]]:
        """A TOTAL's or a fold's ``[WHERE cond] (TRACK m[...])*``."""
        cond = None
        if self._word("WHERE"):
            self.take()
            cond = self.vcond()
        track = []
        while self._word("TRACK"):
            self.take()
            track.append(self.map_ref())
        return cond, tuple(track)

    def map_ref(self) -> MapRef:
        t = self.name("a map name")
        self.expect("[")
        return MapRef(t.text, self.comma_list("]", self.val), pos=t.pos)

    def _word(self, word: str) -> bool:
        t = self.peek()
        return t.kind == "name" and t.text.upper() == word

    def vcond(self) -> Expr:
        first = self.peek()
        args = [self.vand()]
        while self._word("OR"):
            self.take()
            args.append(self.vand())
        return args[0] if len(args) == 1 else BoolOp("OR", tuple(args), pos=first.pos)

    def vand(self) -> Expr:
        first = self.peek()
        args = [self.vnot()]
        while self._word("AND"):
            self.take()
            args.append(self.vnot())
        return args[0] if len(args) == 1 else BoolOp("AND", tuple(args), pos=first.pos)

    def vnot(self) -> Expr:
        t = self.peek()
        if self._word("NOT") and not (self.peek(1).kind == "op" and self.peek(1).text not in ("(", "-")):
            self.take()
            return BoolOp("NOT", (self.vnot(),), pos=t.pos)
        if self.at("("):  # a parenthesised condition, or an expression that starts with '('
            saved = self.i
            try:
                self.take()
                inner = self.vcond()
                self.expect(")")
                if not (self.peek().kind == "op" and self.peek().text in CMP_OPS + (">", ">=", "+", "-", "*", "/")):
                    return inner
            except ParseError:
                pass
            self.i = saved
        left = self.vexpr()
        op = self.peek()
        if op.kind != "op" or op.text not in CMP_OPS + (">", ">="):
            raise ParseError(f"expected a comparison ({', '.join(CMP_OPS)}, >, >=) but found {_describe(op)}", op.pos)
        self.take()
        right = self.vexpr()
        if op.text in (">", ">="):
            return Cmp("<" if op.text == ">" else "<=", right, left, pos=t.pos)
        return Cmp(op.text, left, right, pos=t.pos)
