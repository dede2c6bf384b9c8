"""Reading a view: its rows and values, computed from its maps when the view is read.

A view's value columns are maps, quotients of maps (AVG) or *view
expressions* (:class:`~boreas.m3.viewnodes.Arith` over map entries, folds, key
variables and constants), and a general view keeps only the rows meeting its
``WHERE`` (HAVING, DISTINCT).  Nothing of this is maintained by triggers:
the triggers maintain the maps (each aggregate is its own map), and the view
is evaluated at the rows being read, so arithmetic over aggregates, HAVING
and MIN/MAX cost nothing per event.  This module finds a view's rows (and
the rows a batch changed); :mod:`.evaluate` computes an expression at a row.

* **Rows.**  A view's *row variables* are its distinct key variables (a
  view without named variables: one per key column, positionally).  Its rows
  are the values of the row variables at which some map the view reads has an
  entry (for a fold's map: an entry whose other keys are the row's) and at
  which ``WHERE`` holds.  An output key column shows its variable's value, so
  two columns may show one variable (``SELECT *`` over an equi-join).  A view without keys that reads no map
  (``SELECT 1 AS a WHERE 2 > 3``: a *constant view*) has its one row where ``WHERE`` holds, from the start.
* **Values.**  A map entry that is absent is 0.  ``MIN(X : m[K, X])`` is the
  least ``X`` among the entries of ``m`` at the row (a *multiplicity map*:
  how many rows have that value; an entry exists while some row has it), MAX
  the greatest, SUM their sum, COUNT their number (COUNT(DISTINCT x)); a fold
  over no entry is 0.  ``/`` divides as floats and gives ``inf``/``nan`` by
  zero (as DuckDB does); the AVG quotient ``s / c`` gives 0 where ``c`` is 0.
* **Nested subqueries.**  ``TOTAL(K : m[A, K] WHERE cond)`` sums the
  entries of ``m`` at the row whose ``K`` meets ``cond`` (which reads the
  nested subqueries' maps at ``K``): its cost is the number of distinct
  ``K`` in the row's group.  A nested map keyed by ``K`` alone names no
  row; its ``TRACK`` maps (keyed by the row and ``K``) change with it and
  name the rows a batch affects.  A fold takes ``WHERE`` and ``TRACK`` too
  (``COUNT(K : m[A, K] WHERE n[K] = 0 TRACK t[A, K])``): it folds the values
  that meet the condition.
* **Cost.**  A map entry is one lookup; a fold reads one index slice (the
  runtime keeps an index on the row's positions of every folded map,
  :func:`view_index_specs`): its cost is the number of distinct values in the
  row's group, not the size of the database.

Readers: the runtime reads its store; :func:`read_view` reads any function
``entries(map, pattern) -> {key: value} or [(key, value)]`` (``None`` in a
pattern = any value), e.g. a stable snapshot.

>>> from ..syntax import parse_program
>>> p = parse_program('''CREATE STREAM R(A INT, B INT);
... DECLARE MAP n[A: INT] : INT; DECLARE MAP s[A: INT] : INT; DECLARE MAP mm[A: INT, B: INT] : INT;
... DECLARE VIEW v[a := A, a2 := A](avg := s[A] / n[A], top := MAX(B : mm[A, B])) WHERE n[A] > 1;''')
>>> maps = {"n": {(1,): 2, (2,): 1}, "s": {(1,): 7, (2,): 4}, "mm": {(1, 3): 1, (1, 4): 1, (2, 4): 1}}
>>> def entries(name, pattern):
...     return {k: v for k, v in maps[name].items() if all(p is None or p == x for p, x in zip(pattern, k))}
>>> read_view(p, p.views[0], entries)
{(1, 1): (3.5, 4)}
>>> read_view(p, p.views[0], entries, (2,))
{}
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from operator import itemgetter

from ..ast import Expr, MapRef, Program, Var, ViewDecl, walk
from ..viewnodes import Arith, Fold, Total
from ..over import Over, lift_sources, lifts
from .evaluate import Entries, Reader, holds, items, value
from .exprtypes import expr_type
from .viewcode import compile_bound, compile_row


@dataclass(frozen=True)
class Ref:
    """One map reference of a view: for each key position, the row variable it holds (None: the folded one)."""

    map: str
    slots: tuple[int | None, ...]
    width: int | None = None  # the number of row variables, when the slots may not cover them all

    def pattern(self, row: tuple) -> tuple:
        """The key pattern of this map at a row (the folded position free)."""
        return self._pattern(row)

    def row_of(self, key: tuple) -> tuple:
        """The row an entry of this map belongs to (None where the map's key does not say: a nested
        subquery's map keyed by correlation columns; such a row is never in the view, see :func:`row_value`)."""
        return self._row_of(key)

    @property
    def rows_of(self):
        """:meth:`row_of` as a function, to ``map`` over a batch's keys with no method call per key."""
        return self._row_of

    @cached_property
    def _pattern(self):
        """:meth:`pattern` made once per ref (it runs for every row a batch changed, twice): an ``itemgetter``
        when every position is bound."""
        slots = self.slots
        if None in slots:
            return lambda row: tuple([None if s is None else row[s] for s in slots])
        if len(slots) < 2:  # itemgetter gives a tuple of two or more
            return (lambda row: (row[slots[0]],)) if slots else (lambda row: ())
        return itemgetter(*slots)

    @cached_property
    def _row_of(self):
        """:meth:`row_of` made once per ref (it runs for every key a batch wrote): an ``itemgetter`` when the key
        names every row variable; else the loop (a variable the key holds twice takes its last position's value).

        >>> Ref("m", (1, 0, None)).row_of((5, 6, 7)), Ref("m", (0, None), 2).row_of((5, 6))
        ((6, 5), (5, None))
        """
        slots = self.slots
        width = sum(1 for s in slots if s is not None) if self.width is None else self.width
        at = {s: i for i, s in enumerate(slots) if s is not None}  # row variable -> key position (the last)
        if sorted(at) == list(range(width)) and width:
            if width == 1:
                only = at[0]
                return lambda key: (key[only],)
            return itemgetter(*(at[s] for s in range(width)))

        def row_of(key: tuple) -> tuple:
            out = [None] * width
            for s, x in zip(slots, key):
                if s is not None:
                    out[s] = x
            return tuple(out)
        return row_of

    @property
    def bound(self) -> tuple[int, ...]:
        """The key positions a row binds (what a fold reads an index on)."""
        return tuple(i for i, s in enumerate(self.slots) if s is not None)


@dataclass(frozen=True)
class ViewForm:
    """A view in one shape for reading: row variables, output keys, value expressions, condition, refs."""

    name: str
    vars: tuple[str, ...]
    types: tuple[str, ...]
    out: tuple[int, ...]  # output key column -> row variable
    columns: tuple[tuple[str, Expr], ...]
    where: Expr | None
    refs: tuple[Ref, ...]  # every map reference, once
    folds: tuple[Ref, ...]  # the refs read by a fold or a TOTAL (an index on their bound positions)
    outer: tuple[Ref, ...] = ()  # the refs whose entries make a row present (not those of a TOTAL's condition)
    lifted: tuple[tuple[int, Expr], ...] = ()  # row variables bound by values (:mod:`..over`): (slot, expression)
    source: Over | None = None  # the aggregate whose entries bind them: the view's rows come from its entries
    more: tuple[tuple[Over, tuple[tuple[int, Expr], ...]], ...] = ()  # other sources (:func:`..over.lift_sources`)
    always: bool = False  # a keyless view's one row present while its maps are empty (:attr:`.ast.ViewDecl.always`)
    fixed: frozenset[tuple] = frozenset()  # an ALWAYS view's rows present whatever its maps hold (``ALWAYS AT``)

    @property
    def constant(self) -> bool:
        """A view that reads no map and has no keys (``SELECT 1 AS a``), or one marked ``ALWAYS``: its one row is
        always present (where its WHERE holds)."""
        return (not self.refs or self.always) and not self.vars and self.source is None

    def key_of(self, row: tuple) -> tuple:
        """The output key of a row."""
        return self._key_of(row)

    @cached_property
    def _key_of(self):
        """:meth:`key_of` made once per view (it runs for every row that changed)."""
        out = self.out
        if len(out) == 1:
            only = out[0]
            return lambda row: (row[only],)
        return itemgetter(*out) if out else (lambda row: ())

    def row_pattern(self, pattern: tuple) -> tuple | None:
        """An output-key pattern as a row pattern; None when it binds one variable to two values."""
        row: list = [None] * len(self.vars)
        for i, want in zip(self.out, pattern):
            if want is None:
                continue
            if row[i] is not None and row[i] != want:
                return None
            row[i] = want
        return tuple(row)

    @cached_property
    def evaluate(self):
        """:func:`row_value` compiled for this view (:mod:`.viewcode`), made at its first row."""
        return compile_row(self, present)

    @cached_property
    def bind(self):
        """``bind(reader) -> row_value(row)``: :attr:`evaluate` with the maps' accessors taken from the reader
        once (:func:`.viewcode.compile_bound`), for a batch's rows through one reader."""
        return compile_bound(self, present)

    @property
    def zero(self):
        """The value of a row that is not in the view (what ``changes()`` reports for a removed row)."""
        return 0 if len(self.columns) == 1 else (0,) * len(self.columns)


def view_form(program: Program, v: ViewDecl) -> ViewForm:
    """The view in reading shape (a view without named variables reads its maps positionally)."""
    if v.key_vars or not v.keys:
        names = tuple(dict.fromkeys(v.key_vars))
        out = tuple(names.index(x) for x in v.key_vars)
    else:
        names = tuple(f"_{i}" for i in range(len(v.keys)))
        out = tuple(range(len(v.keys)))
    row = [Var(n) for n in names]
    columns = []
    for c in v.columns:
        if c.expr is not None:
            columns.append((c.name, c.expr))
        elif c.denominator is None:
            columns.append((c.name, MapRef(c.numerator or "", tuple(row))))
        else:
            columns.append((c.name, Arith("/", MapRef(c.numerator or "", tuple(row)),
                                          MapRef(c.denominator, tuple(row)))))
    refs: dict[Ref, None] = {}
    folds: dict[Ref, None] = {}
    inner: set[int] = set()  # ids of the map references inside a TOTAL's condition
    types: dict[str, str] = {}
    exprs = [x for _, x in columns] + ([v.where] if v.where is not None else [])
    for e in exprs:
        for node in walk(e):
            if isinstance(node, (Total, Fold)):  # a condition's maps and tracking maps: not what makes a row present
                inner.update(id(n) for x in ((node.cond,) if node.cond is not None else ()) + node.track
                             for n in walk(x) if isinstance(n, MapRef))
    outer: dict[Ref, None] = {}
    for e in exprs:
        for node in walk(e):
            if isinstance(node, MapRef):
                ref = _ref(node, names)
                refs[ref] = None
                if id(node) not in inner:
                    outer[ref] = None
                for s, k in zip(ref.slots, program.map(node.name).keys):
                    if s is not None:
                        types.setdefault(names[s], k.type)
            if isinstance(node, (Fold, Total)):
                folds[_ref(node.ref, names)] = None
    bound = {names[s] for ref in outer for s in ref.slots if s is not None}
    found = lifts(v, bound)
    sources = lift_sources(v, bound)
    source = sources[0][0] if sources else None
    if source is not None:
        found = {x: (e, source) for x, e in sources[0][1].items()}
    if source is not None:
        over_types = {a.name: k.type for a, k in zip(source.ref.args, program.map(source.ref.name).keys)
                      if isinstance(a, Var)}
        for x, (e, _) in found.items():
            types[x] = expr_type(e, program, {**over_types, **types})
    return ViewForm(v.name, names, tuple(types.get(n, "INT") for n in names), out, tuple(columns), v.where,
                    tuple(refs), tuple(folds), tuple(outer), tuple((names.index(x), e) for x, (e, _) in found.items()),
                    source, tuple((o, tuple((names.index(x), e) for x, e in b.items())) for o, b in sources[1:]),
                    v.always, frozenset(_fixed_row(out, len(names), k) for k in v.fixed if v.always))


def _fixed_row(out: tuple[int, ...], width: int, key: tuple) -> tuple:
    """An ``ALWAYS AT`` output key as a row (every row variable an output key: :mod:`..compiler.setagg`)."""
    row: list = [None] * width
    for i, x in zip(out, key):
        row[i] = x
    return tuple(row)


def _ref(ref: MapRef, names: tuple[str, ...]) -> Ref:
    slots = tuple(names.index(a.name) if isinstance(a, Var) and a.name in names else None for a in ref.args)
    covered = {s for s in slots if s is not None}
    return Ref(ref.name, slots, None if len(covered) == len(names) else len(names))


def view_index_specs(program: Program) -> dict[str, list[tuple[int, ...]]]:
    """For each map a view folds or sums (a fold, a TOTAL), the key positions bound where it is read (the
    runtime keeps an index on them): the row's variables, and inside a TOTAL's condition also the variables
    the enclosing TOTAL sums over (a subquery's subquery, TPC-H Q20), so each reads one slice, not the map."""
    out: dict[str, list[tuple[int, ...]]] = {}
    for v in program.views:
        exprs = [c.expr for c in v.columns if c.expr is not None] + ([v.where] if v.where is not None else [])
        for node in (n for e in exprs for n in walk(e)):
            if isinstance(node, (Fold, Total, Over)):
                own = {node.var} if isinstance(node, Fold) else set(node.vars)
                bound = tuple(i for i, a in enumerate(node.ref.args) if not (isinstance(a, Var) and a.name in own))
                if bound and len(bound) < len(node.ref.args) and bound not in out.setdefault(node.ref.name, []):
                    out[node.ref.name].append(bound)
    return {k: pos for k, pos in out.items() if pos}


def present(form: ViewForm, row: tuple, reader: Reader) -> bool:
    """Whether some map the view reads has an entry at the row (its condition aside; not a TOTAL's condition);
    with lifted variables, whether an entry of the source aggregate's map gives the row."""
    if form.source is not None:
        return row in _lifted_rows(form, row, reader)
    if form.constant or row in form.fixed:
        return True
    for ref in form.outer or form.refs:
        if None in ref.slots:
            if reader.has(ref.map, ref.pattern(row)):
                return True
        elif reader.get(ref.map, ref.pattern(row)):
            return True
    return False


def row_value(form: ViewForm, row: tuple, reader: Reader) -> tuple[bool, object]:
    """``(in the view, value)`` of a row; the value is :attr:`ViewForm.zero` for a row not in the view (as is a
    row a nested subquery's map names only in part, :meth:`Ref.row_of`): the view's compiled function."""
    return form.evaluate(row, reader)


def interpreted_row_value(form: ViewForm, row: tuple, reader: Reader) -> tuple[bool, object]:
    """:func:`row_value` by the interpreter (:mod:`.evaluate`): the reference :mod:`.viewcode` is tested against."""
    if None in row or not present(form, row, reader):
        return False, form.zero
    env = dict(zip(form.vars, row))
    if form.where is not None and not holds(form.where, env, reader):
        return False, form.zero
    values = [value(e, env, reader) for _, e in form.columns]
    return True, values[0] if len(values) == 1 else tuple(values)


def candidate_rows(form: ViewForm, entries: Entries, pattern: tuple = ()) -> list[tuple]:
    """The rows some map of the view has an entry at, matching an output-key pattern (each once, in order)."""
    row_pat = form.row_pattern(tuple(pattern))
    if row_pat is None:
        return []
    if form.constant:  # its one row (if WHERE holds)
        return [()]
    if form.source is not None:
        return [r for r in _lifted_rows(form, row_pat, _reader_of(entries))
                if all(p is None or p == x for p, x in zip(row_pat, r))]
    rows: dict[tuple, None] = dict.fromkeys(r for r in sorted(form.fixed)
                                            if all(p is None or p == x for p, x in zip(row_pat, r)))
    for ref in form.outer or form.refs:
        map_pat = tuple(None if s is None else row_pat[s] for s in ref.slots)
        for key, _ in items(entries(ref.map, map_pat)):
            rows[ref.row_of(key)] = None
    return list(rows)


def _reader_of(entries: Entries) -> Reader:
    def get(name: str, key: tuple):
        found = items(entries(name, key))
        return found[0][1] if found else 0

    return Reader(get, entries)


def _lifted_rows(form: ViewForm, row_pat: tuple, reader: Reader) -> dict[tuple, None]:
    """The rows the source aggregate's entries give at a row pattern: its map's row variables from each entry,
    the lifted ones computed there (``C = cnt[K]``: each value the inner groups' counts take)."""
    env0 = {n: row_pat[form.vars.index(n)] for n in form.vars if row_pat[form.vars.index(n)] is not None}
    rows: dict[tuple, None] = {}
    for o, lifted in ((form.source, form.lifted),) + form.more:  # (several: a union of lifted maps)
        slots = [(i, a.name) for i, a in enumerate(o.ref.args) if isinstance(a, Var)]
        pattern = tuple(env0.get(a.name) if isinstance(a, Var) else a.value for a in o.ref.args)
        for k, n in items(reader.entries(o.ref.name, pattern)):
            if not n:
                continue
            env = {**env0, **{name: k[i] for i, name in slots}}
            row = [env.get(x) for x in form.vars]
            for slot, e in lifted:
                row[slot] = env[form.vars[slot]] = value(e, env, reader)
            rows[tuple(row)] = None
    return rows


def read_view(program: Program, v: ViewDecl, entries: Entries, pattern: tuple = ()) -> dict[tuple, object]:
    """The view's rows matching an output-key pattern, ``{key: value}``, read through ``entries`` alone."""
    form = view_form(program, v)

    def get(name: str, key: tuple):
        found = items(entries(name, key))
        return found[0][1] if found else 0

    reader = Reader(get, entries)
    out = {}
    for row in candidate_rows(form, entries, pattern):
        inside, found = row_value(form, row, reader)
        if inside:
            out[form.key_of(row)] = found
    return out


def same(a, b) -> bool:
    """Equal values, NaN equal to NaN (a quotient 0/0 that stays 0/0 has not changed).

    >>> same(float("nan"), float("nan")), same((1, 2.0), (1, 2)), same(0, 1)
    (True, True, False)
    """
    if isinstance(a, tuple):  # (a value's columns compared in one loop, NaN looked for only where unequal)
        if not isinstance(b, tuple) or len(a) != len(b):
            return False
        for x, y in zip(a, b):  # (a column's NaN tested inline: no call per changed row's first unequal column)
            if x != y and not (isinstance(x, float) and isinstance(y, float) and x != x and y != y) and \
                    not (isinstance(x, tuple) and same(x, y)):
                return False
        return True
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))
