"""A view's row evaluation compiled to one Python function per view: what ``row_value`` runs for every row.

Why: a general view (:mod:`.views`) is evaluated at every row a batch
changed, twice (before the batch and after, :mod:`.viewchanges`), and the
interpreter (:func:`.evaluate.value`) walks the expression tree per row:
an ``isinstance`` chain per node, a generator per map key, a dict of the
row's variables.  As the triggers are compiled once per program
(:mod:`.codegen`), a view's presence test, ``WHERE`` and value columns are
compiled once per view into the source of one function
``f(row, reader) -> (in the view, value)``: row variables are locals, a map
entry is one ``get(map, key)`` with the key a tuple display, and a map entry
or fold read twice at the same key (a presence test and the column reading
the same map; ``MIN`` and ``MAX`` of one group) is read once (a ``MIN``,
``MAX`` or ``COUNT`` of a slice's values as the reader's ``fold``: its count,
least and greatest, which after a batch a memo keeps, :mod:`.slicefolds`); an aggregate
over a map's entries at the row (``Over`` without ``WHERE``) is a loop over
them, but a ``SUM`` of each group's ``MIN`` or ``MAX`` (Nexmark q4's
``SUM(MAX(...) FOR G : rows[G, C])``) is the reader's ``fold_sum``, which
after a batch a memo answers (:mod:`.foldsums`).

What it does not compile it leaves to the interpreter, node by node, with the
same reader: a ``TOTAL``, an ``Over`` with a ``WHERE`` or reading no row
variable (the interpreter computes that once per reader), a fold with a
``WHERE``, and a view whose rows come from an aggregate's entries (its
presence is the ``present`` given).  Reads have no side effects, so reading
an entry the interpreter's short-circuit would have skipped changes no
result; the tests run every view shape through both (``tests/m3/test_viewcode.py``).

>>> from ..syntax import parse_program
>>> from .views import view_form
>>> p = parse_program('''DECLARE MAP n[A: INT] : INT; DECLARE MAP s[A: INT] : INT; DECLARE MAP mm[A: INT, B: INT] : INT;
... DECLARE VIEW v[a := A](avg := s[A] / n[A], lo := MIN(B : mm[A, B]), hi := MAX(B : mm[A, B])) WHERE n[A] > 1;''')
>>> src, _ = row_source(view_form(p, p.views[0]))
>>> print(src)
def row_value(row, reader):
    get = reader.get
    entries = reader.entries
    values = reader.values
    count = reader.count
    fold = reader.fold
    v0 = row[0]
    if v0 is None:
        return False, ZERO
    m0 = get('s', (v0,))
    m1 = get('n', (v0,))
    s0 = fold('mm', (v0, None), 1)
    if not (m0 or m1 or s0[0]):
        return False, ZERO
    if not ((1 < m1)):
        return False, ZERO
    return True, (divide(m0, m1), (s0[1] if s0[0] else 0), (s0[2] if s0[0] else 0))
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ..ast import Cmp, Const, Expr, MapRef, Var
from ..over import Over
from ..viewnodes import Arith, BoolOp, Fold
from .evaluate import Reader, divide, holds, items, value
from .foldsums import SumOfFolds
from .nanorder import greatest, greatest2, least, least2

RowValue = Callable[[tuple, Reader], tuple[bool, object]]
_ARITH = {"+": "+", "-": "-", "*": "*"}
_CMP = {"=": "==", "<>": "!=", "<": "<", "<=": "<="}


class _Source:
    """The function being written: its lines, its constants, and the map reads already made (name by key)."""

    def __init__(self, form: Any, names: dict[str, str] | None = None, indent: str = "    ",
                 parent: _Source | None = None):
        self.form = form
        self.names = names if names is not None else {name: f"v{i}" for i, name in enumerate(form.vars)}
        self.indent = indent
        self.lines: list[str] = []
        self.consts: dict[str, object] = parent.consts if parent is not None else {}
        self.count: dict[str, int] = parent.count if parent is not None else {}  # locals made, by kind (shared)
        self.reads: dict[tuple, str] = {}  # (kind, map, key source[, position]) -> the local holding it
        self.env = False  # whether some node is left to the interpreter (it reads the row as a dict)
        self.bound = parent.bound if parent is not None else False  # reads through accessors bound per reader
        self.accessors: dict[tuple, str] = parent.accessors if parent is not None else {}  # (how, map, at) -> local

    def local(self, kind: str) -> str:
        n = self.count.get(kind, 0)
        self.count[kind] = n + 1
        return f"{kind}{n}"

    def const(self, v: object) -> str:
        if type(v) is int:  # noqa: E721 - not a bool
            return repr(v)
        name = f"c{len(self.consts)}"
        self.consts[name] = v
        return name

    def arg(self, a: Expr) -> str | None:
        """A map key position's source: a row variable or a constant (None: neither, left to the interpreter)."""
        if isinstance(a, Var):
            return self.names.get(a.name)
        if isinstance(a, Const):
            return self.const(a.value)
        return None

    def accessor(self, how: str, name: str, at: int | None = None) -> str:
        """The local of one map's accessor bound once per reader (``reader.getter(map)``, ``.counter(map, at)``,
        ``.folder(map, at)``: :meth:`.evaluate.Reader.getter`), made once per function."""
        found = self.accessors.get((how, name, at))
        if found is None:
            found = self.accessors[(how, name, at)] = f"a{len(self.accessors)}"
        return found

    def read(self, kind: str, name: str, key: list[str], at: int | None = None) -> str:
        """The local holding one map read (a ``get``, or a fold's values at ``at``), written once."""
        display = _display(key)
        found = self.reads.get((kind, name, display, at))
        if found is None:
            found = self.local(kind)
            if kind == "n" and self.bound:  # a COUNT by the slice's bound positions, 0 where it is empty
                others = _display(key[:at] + key[at + 1:])  # type: ignore[operator]
                self.lines.append(f"{self.indent}{found} = {self.accessor('counter', name, at)}({others}, 0)")
            elif kind == "m" and self.bound:  # the map's accessor, bound once per reader, 0 where absent
                self.lines.append(f"{self.indent}{found} = {self.accessor('getter', name, at)}({display}, 0)")
            elif kind == "s" and self.bound:  # the fold the reader holds ready, else read (Reader.folder)
                held = self.accessor('folder', name, at)
                self.lines.append(f"{self.indent}{found} = {held}({display}) or {held}f({display})")
            elif kind == "m":
                self.lines.append(f"{self.indent}{found} = get({name!r}, {display})")
            elif kind == "n":  # a COUNT of a slice's values (one unbound position): the reader counts them
                self.lines.append(f"{self.indent}{found} = count({name!r}, {display}, {at})")
            elif kind == "s":  # (count, least, greatest) of a slice's values: after a batch, from a memo
                self.lines.append(f"{self.indent}{found} = fold({name!r}, {display}, {at})")
            elif key.count("None") == 1:  # one unbound position: the reader lists its values (an index's slice)
                self.lines.append(f"{self.indent}{found} = values({name!r}, {display}, {at})")
            else:
                read = f"items(entries({name!r}, {display}))"
                self.lines.append(f"{self.indent}{found} = [k[{at}] for k, n in {read} if n]")
            self.reads[(kind, name, display, at)] = found
        return found

    def interpreted(self, e: Expr, how: str) -> str:
        self.env = True
        return f"{how}({self.const(e)}, env, reader)"

    def expr(self, e: Expr) -> str:
        if isinstance(e, Const):
            return self.const(e.value)
        if isinstance(e, Var):
            return self.names[e.name] if e.name in self.names else self.interpreted(e, "value")
        if isinstance(e, MapRef):
            key = [self.arg(a) for a in e.args]
            return self.interpreted(e, "value") if None in key else self.read("m", e.name, key)
        if isinstance(e, Arith):
            a, b = self.expr(e.left), self.expr(e.right)
            if e.op in _ARITH:
                return f"({a} {_ARITH[e.op]} {b})"
            if e.op in ("LEAST", "GREATEST"):
                return f"{'least2' if e.op == 'LEAST' else 'greatest2'}({a}, {b})"
            return f"divide({a}, {b})"
        if isinstance(e, Fold) and e.cond is None and e.kind in ("MIN", "MAX", "COUNT", "SUM"):
            free = [i for i, a in enumerate(e.ref.args) if isinstance(a, Var) and a.name == e.var]
            key = ["None" if i in free else self.arg(a) for i, a in enumerate(e.ref.args)]
            if None not in key and len(free) == 1 and e.kind in ("MIN", "MAX", "COUNT"):
                read = (e.ref.name, _display(key), free[0])
                if e.kind != "COUNT" or ("s",) + read in self.reads:  # a fold's count, least and greatest
                    got = self.read("s", e.ref.name, key, free[0])
                    return f"{got}[0]" if e.kind == "COUNT" else f"({got}[{1 if e.kind == 'MIN' else 2}] " \
                        f"if {got}[0] else 0)"
                if ("f",) + read not in self.reads:  # no list of the values read
                    return self.read("n", e.ref.name, key, free[0])
            if None not in key:
                vals = self.read("f", e.ref.name, key, free[0])
                return {"MIN": f"(least({vals}) if {vals} else 0)", "MAX": f"(greatest({vals}) if {vals} else 0)",
                        "COUNT": f"len({vals})", "SUM": f"(sum({vals}) if {vals} else 0)"}[e.kind]
        if isinstance(e, Over):
            found = self.over(e)
            if found is not None:
                return found
        return self.interpreted(e, "value")

    def over(self, e: Over) -> str | None:
        """An aggregate over a map's entries at the row, as a loop over them (None: left to the interpreter:
        one with a ``WHERE``, one that reads no row variable, which the interpreter computes once per reader,
        or one whose expression the loop cannot compile)."""
        own = set(e.vars)
        if e.cond is not None or e.kind not in ("SUM", "COUNT", "MIN", "MAX") or own & set(self.names) or \
                not any(isinstance(a, Var) and a.name in self.names for a in e.ref.args):
            return None
        key = ["None" if isinstance(a, Var) and a.name in own else self.arg(a) for a in e.ref.args]
        if None in key:
            return None
        same = self.reads.get(("o", e))
        if same is not None:  # the same aggregate read twice (AVG's COUNT beside a HAVING's)
            return same
        one = key.count("None") == 1  # one own position: the reader lists (or counts) the slice's values there
        if one and e.kind == "COUNT":
            return self.read("n", e.ref.name, key, key.index("None"))
        if one and e.kind == "SUM" and (spec := sum_of_folds(e)) is not None:  # a memo's, after a batch
            out = self.local("o")
            # (both maps named, as every read here names its map: count_reads finds a map's reads in the source)
            self.lines.append(f"{self.indent}{out} = reader.fold_sum({e.ref.name!r}, {spec.fmap!r}, "
                              f"{_display(key)}, {self.const(spec)})")
            self.reads[("o", e)] = out
            return out
        binds: dict[str, tuple[str, int]] = {}  # own variable -> (its local, the key position it is read from)
        for i, a in enumerate(e.ref.args):  # an own variable at two positions: the last one's value
            if isinstance(a, Var) and a.name in own:
                binds[a.name] = (binds[a.name][0] if a.name in binds else self.local("w"), i)
        inner = _Source(self.form, {**self.names, **{x: w for x, (w, _) in binds.items()}},
                        self.indent + "        ", self)
        got = "1" if e.kind == "COUNT" else inner.expr(e.expr)
        if inner.env:
            return None
        out = self.local("o")
        self.lines.append(f"{self.indent}{out} = []")
        if one:
            (w, i), = binds.values()
            self.lines.append(f"{self.indent}for {w} in values({e.ref.name!r}, {_display(key)}, {i}):")  # the body
        else:
            self.lines.append(f"{self.indent}for k, n in items(entries({e.ref.name!r}, {_display(key)})):")
            self.lines.append(f"{self.indent}    if n:")
            self.lines.extend(f"{self.indent}        {w} = k[{i}]" for w, i in binds.values())
        self.lines.extend(inner.lines)
        self.lines.append(f"{self.indent}        {out}.append({got})")
        fold = {"MIN": "least", "MAX": "greatest"}.get(e.kind, "sum")  # (NaN above every number: .nanorder)
        self.reads[("o", e)] = found = f"({fold}({out}) if {out} else 0)"
        return found

    def cond(self, e: Expr) -> str:
        if isinstance(e, BoolOp) and e.op in ("AND", "OR", "NOT"):
            if e.op == "NOT":
                return f"(not {self.cond(e.args[0])})"
            parts = [self.cond(a) for a in e.args]
            return "(" + f" {e.op.lower()} ".join(parts) + ")" if parts else ("True" if e.op == "AND" else "False")
        if isinstance(e, Cmp) and e.op in _CMP:
            return f"({self.expr(e.left)} {_CMP[e.op]} {self.expr(e.right)})"
        return self.interpreted(e, "holds")


def sum_of_folds(e: Over) -> SumOfFolds | None:
    """``SUM(KIND(F : f[...]) FOR G : rows[...])`` as a :class:`.foldsums.SumOfFolds` (its sum kept per row after a
    batch): a ``MIN`` or ``MAX`` without ``WHERE`` of each group ``G``'s slice, every key position of both maps a
    variable, each once, ``f``'s being ``rows``' and the folded one; else None (the loop).

    >>> from ..syntax import parse_program
    >>> p = parse_program("DECLARE MAP r[G: INT, C: INT] : INT; DECLARE MAP f[C: INT, G: INT, P: INT] : INT;"
    ...                   " DECLARE VIEW v[c := C](s := SUM(MAX(P : f[C, G, P]) FOR G : r[G, C]));")
    >>> sum_of_folds(p.views[0].columns[0].expr)
    SumOfFolds(rows='r', at=0, fmap='f', fat=2, kind='MAX', own=1, links=((1, 0),))
    """
    f = e.expr
    if not isinstance(f, Fold) or f.cond is not None or f.kind not in ("MIN", "MAX") or len(e.vars) != 1:
        return None
    if not all(isinstance(a, Var) for a in e.ref.args + f.ref.args):
        return None
    group, rows, folded = e.vars[0], [a.name for a in e.ref.args], [a.name for a in f.ref.args]  # type: ignore
    if len(set(rows)) != len(rows) or len(set(folded)) != len(folded) or f.var in rows or group not in rows \
            or set(folded) != set(rows) | {f.var}:
        return None
    return SumOfFolds(e.ref.name, rows.index(group), f.ref.name, folded.index(f.var), f.kind, folded.index(group),
                      tuple((i, folded.index(x)) for i, x in enumerate(rows) if x != group))


def _display(key: list[str]) -> str:
    """A tuple display of key sources."""
    return "(" + ", ".join(key) + ("," if len(key) == 1 else "") + ")"


def _folds(form: Any) -> dict[tuple, str]:
    """The (map, key display, position) of every fold the view's columns and ``WHERE`` compile to, and how it
    reads the slice (``f``: its values listed, ``n``: counted)."""
    dry = _Source(form)
    if form.where is not None:
        dry.cond(form.where)
    for _, e in form.columns:
        dry.expr(e)
    return {r[1:]: r[0] for r in dry.reads if r[0] in ("f", "n", "s")}


def row_source(form: Any, bound: bool = False) -> tuple[str, dict[str, object]]:
    """The source of ``row_value(row, reader)`` for a view (a :class:`.views.ViewForm`) and its constants;
    ``bound``: of ``bind(reader) -> row_value(row)`` instead, each map's accessor taken from the reader once
    (:func:`compile_bound`)."""
    s = _Source(form)
    s.bound = bound
    head = ["def row_value(row, reader):", "    get = reader.get", "    entries = reader.entries",
            "    values = reader.values", "    count = reader.count", "    fold = reader.fold"]
    for i in range(len(form.vars)):
        s.lines.append(f"    v{i} = row[{i}]")
    if form.vars:
        s.lines.append("    if " + " or ".join(f"v{i} is None" for i in range(len(form.vars))) + ":")
        s.lines.append("        return False, ZERO")
    if form.source is not None:  # rows given by an aggregate's entries: the interpreter's presence test
        s.lines.append("    if not present(FORM, row, reader):")
        s.lines.append("        return False, ZERO")
    elif not form.constant:  # (a constant view reads no map: its one row is there where its WHERE holds)
        folded = _folds(form)
        tests = []
        for ref in form.outer or form.refs:
            key = ["None" if slot is None else f"v{slot}" for slot in ref.slots]
            at = ref.slots.index(None) if ref.slots.count(None) == 1 else None
            kind = folded.get((ref.map, _display(key), at)) if at is not None else None
            if kind is not None:  # a fold reads these entries (or counts them) anyway
                tests.append(s.read(kind, ref.map, key, at) + ("[0]" if kind == "s" else ""))
            elif None in ref.slots:
                tests.append(f"reader.has({ref.map!r}, {_display(key)})")
            else:
                tests.append(s.read("m", ref.map, key))
        if form.fixed:  # (an ALWAYS view's fixed rows: there whatever its maps hold)
            tests.insert(0, "row in FORM.fixed")
        s.lines.append(f"    if not ({' or '.join(tests) or 'False'}):")
        s.lines.append("        return False, ZERO")
    body_at = len(s.lines)
    if form.where is not None:
        test = s.cond(form.where)
        s.lines.append(f"    if not ({test}):")
        s.lines.append("        return False, ZERO")
    cols = [s.expr(e) for _, e in form.columns]
    s.lines.append("    return True, " + (cols[0] if len(cols) == 1 else "(" + ", ".join(cols) + ")"))
    if s.env:
        s.lines.insert(body_at, "    env = dict(zip(VARS, row))")
    if bound:
        head[0] = "def bind(reader):"
        head += [f"    {local}{f', {local}f' if how == 'folder' else ''} = reader.{how}({name!r}"
                 f"{'' if at is None else f', {at}'})" for (how, name, at), local in s.accessors.items()]
        return "\n".join(head + ["    def row_value(row):"] + ["    " + line for line in s.lines]
                         + ["    return row_value"]), s.consts
    return "\n".join(head + s.lines), s.consts


def compile_row(form: Any, present: Callable[[Any, tuple, Reader], bool]) -> RowValue:
    """``row_value`` of a view compiled (``present``: the interpreter's presence test, for a view whose rows
    come from an aggregate's entries)."""
    src, consts = row_source(form)
    scope: dict[str, object] = {"ZERO": form.zero, "VARS": form.vars, "FORM": form, "present": present,
                                "items": items, "divide": divide, "value": value, "holds": holds, "least": least,
                                "greatest": greatest, "least2": least2, "greatest2": greatest2, **consts}
    exec(compile(src, f"<view {form.name}>", "exec"), scope)  # noqa: S102 - our own generated source
    return scope["row_value"]  # type: ignore[return-value]


def compile_bound(form: Any, present: Callable[[Any, tuple, Reader], bool]) -> Callable[[Reader], Callable]:
    """``bind(reader) -> row_value(row)``: :func:`compile_row` with each map's accessor (a ``get``, a ``COUNT``
    of a slice, a slice's fold) taken from the reader once, not looked up by map name per read: what
    ``changes()`` runs over a batch's rows after it (:func:`.viewchanges.general_changes`).  Same results as
    :func:`compile_row` through the same reader (``tests/m3/test_viewcode.py``)."""
    src, consts = row_source(form, bound=True)
    scope: dict[str, object] = {"ZERO": form.zero, "VARS": form.vars, "FORM": form, "present": present,
                                "items": items, "divide": divide, "value": value, "holds": holds, "least": least,
                                "greatest": greatest, "least2": least2, "greatest2": greatest2, **consts}
    exec(compile(src, f"<view {form.name}, bound>", "exec"), scope)  # noqa: S102 - our own generated source
    return scope["bind"]  # type: ignore[return-value]


def count_reads(form: Any) -> dict[str, int]:
    """The maps a view's compiled ``row_value`` reads only as a ``COUNT`` of a slice's values (a ``COUNT
    DISTINCT``'s multiplicity map), each with the one position its reads leave unbound: what a native runtime
    may keep as counts alone, with no Python mirror (:mod:`.slicecounts`).  None where any node is left to the
    interpreter or the rows come from an aggregate (those read maps through the reader by other means).

    >>> from ..syntax import parse_program
    >>> from .views import view_form
    >>> p = parse_program('''DECLARE MAP n[A: INT] : INT; DECLARE MAP d[A: INT, B: INT] : INT;
    ... DECLARE MAP e[A: INT, B: INT] : INT;
    ... DECLARE VIEW v[a := A](n := n[A], d := COUNT(B : d[A, B]), e := MAX(B : e[A, B]));''')
    >>> count_reads(view_form(p, p.views[0]))
    {'d': 1}
    """
    src, _ = row_source(form)
    if form.source is not None or "env = dict(" in src:
        return {}
    found: dict[str, int] = {}
    for ref in form.refs:
        name = repr(ref.map)
        ats = set(re.findall(r"count\(" + re.escape(name) + r", \([^()]*\), (\d+)\)", src))
        if len(ats) == 1 and src.count(name) == len(re.findall(r"count\(" + re.escape(name) + ", ", src)):
            found[ref.map] = int(ats.pop())
    return found
