"""Pass 6b, views: a normalised query's columns and condition over its maps → the program's view declaration.

The maps of a query are those of :mod:`.columns`; the pipeline gives each
aggregate its map's name and the arguments that read it in the map's own
key order (a map shared with another query may order its keys differently).

A view whose columns are maps and AVG quotients read at its keys in the
maps' order, without condition and with each key once, is written as
before (``DECLARE VIEW Q1[a](total := Q1_total)``); any other names its key
variables and writes view expressions (:mod:`boreas.m3.runtime.views`)::

    DECLARE VIEW Q1[a := A](r := Q1_r_sum[A] / Q1_r_count[A], top := MAX(B : Q1_top[A, B]))
      WHERE 0 < Q1_r_count[A] AND 1 < Q1_r_count[A];

>>> from .frontend import parse_sql
>>> from .normalize import normalize
>>> from ..calculus import V
>>> rels, qs = parse_sql("CREATE STREAM R(a INT, b INT); SELECT a, SUM(b) AS s, AVG(b) AS v FROM R GROUP BY a")
>>> nq = normalize(rels, qs[0])
>>> A = V("A", "INT")
>>> [a.name for a in nq.aggregates]  # AVG's sum is SUM(b)
['s', 'v_count']
>>> from ..printer import format_view
>>> print(format_view(view_decl(nq, [("Q1_s", (A,)), ("Q1_v_count", (A,))])))
DECLARE VIEW Q1[a](s := Q1_s, v := Q1_s / Q1_v_count);
>>> rels, qs = parse_sql("CREATE STREAM R(a INT, b INT); SELECT DISTINCT b, a AS x, b FROM R")
>>> nq = normalize(rels, qs[0])
>>> print(format_view(view_decl(nq, [("Q1_rows", (V("A", "INT"), V("B", "INT")))])))
DECLARE VIEW Q1[b := B, x := A, b_1 := B](count := 1) WHERE 0 < Q1_rows[A, B];
"""

from __future__ import annotations

from ..ast import Call, Cmp, Const, Expr, MapRef, Program, Var, ViewColumn, ViewDecl, variables, walk
from ..library import VECTOR
from ..viewnodes import Arith, BoolOp, Fold, Total
from ..correlated import correlations
from ..over import Over, rereads
from ..calculus import V
from ..printer import format_view_expr
from .normalize import NormalQuery

Ref = tuple[str, tuple[V, ...]]  # (map name, the variables that read it, in the map's key order)


def view_decl(nq: NormalQuery, refs: list[Ref]) -> ViewDecl:
    """The view of a normalised query whose aggregate i is read as ``refs[i]``."""
    plain = _plain(nq, refs)
    if plain is not None:
        return ViewDecl(nq.name, nq.key_names, plain)
    total = None
    if nq.nested is not None:  # outer aggregates are summed where the nested condition holds
        total = _condition(nq.nested, nq, refs)
    columns = tuple(ViewColumn(name, expr=_expr(c, nq, refs, total)) for name, c in nq.columns)
    where = None if nq.where is None else _condition(nq.where, nq, refs, total)
    return ViewDecl(nq.name, nq.key_names, columns, tuple(v.name for v in nq.key_vars), where)


def _plain(nq: NormalQuery, refs: list[Ref]) -> tuple[ViewColumn, ...] | None:
    """Columns of maps and quotients read at the keys in order (the view form without variables), or None."""
    if nq.where is not None or nq.nested is not None or len(set(nq.key_vars)) != len(nq.key_vars):
        return None
    keys = tuple(nq.key_vars)
    out = []
    for name, c in nq.columns:
        if isinstance(c, tuple) and c[0] == "map" and refs[c[1]][1] == keys:
            out.append(ViewColumn(name, refs[c[1]][0]))
        elif (isinstance(c, tuple) and c[0] == "avg" and refs[c[1]][1] == keys and refs[c[2]][1] == keys):
            out.append(ViewColumn(name, refs[c[1]][0], refs[c[2]][0]))
        else:
            return None
    return tuple(out)


def _ref(i: int, refs: list[Ref]) -> MapRef:
    name, args = refs[i]
    return MapRef(name, tuple(Var(v.name) for v in args))


def _expr(c, nq: NormalQuery, refs: list[Ref], total: Expr | None = None) -> Expr:
    """A column expression as a view expression; ``total``: the nested condition, under which an outer
    aggregate is read as ``TOTAL(extra keys : map WHERE total)``."""
    if not isinstance(c, tuple):
        return Const(c)
    kind = c[0]
    if kind == "map":
        if total is not None and c[1] < nq.outer_count:
            return Total(tuple(v.name for v in nq.extra_keys), _ref(c[1], refs), total,
                         tuple(_ref(i, refs) for i in nq.tracks))
        return _ref(c[1], refs)
    if kind == "avg":
        return Arith("/", _expr(("map", c[1]), nq, refs, total), _expr(("map", c[2]), nq, refs, total))
    if kind == "range":  # a subquery correlated by a comparison: its map summed over the range (:mod:`.nested`)
        return Total(tuple(v.name for v in c[2]), _ref(c[1], refs), _condition(c[3], nq, refs))
    if kind == "fold":
        folded = nq.aggregates[c[2]].folded
        assert folded is not None
        if total is not None and c[2] < nq.outer_count:  # the values that meet the nested condition
            return Fold(c[1], folded.name, _ref(c[2], refs), total, tuple(_ref(i, refs) for i in nq.tracks))
        return Fold(c[1], folded.name, _ref(c[2], refs))
    if kind == "var":
        return Var(c[1].name)
    return Arith(kind, _expr(c[1], nq, refs, total), _expr(c[2], nq, refs, total))


def cost_class(v: ViewDecl, program: Program | None = None) -> tuple[str, str]:
    """``(class, why)``: how a view's per-event cost grows — ``first-order`` (independent of the database: each
    event updates maps by lookups and loops over the entries it joins with) or ``domain-bound`` (a fold reads
    the distinct values of a group, or a comparison between columns loops over a map's entries and tests each:
    the statements of ``program`` that maintain the view's maps, directly or through the maps they read).
    A view of a nested subquery is domain-bound: its ``TOTAL`` reads the distinct values of the columns the
    nested condition reads; ``domain-bound per correlation key`` when its only such cost is TOTALs correlated by
    equalities, which the runtime keeps per key (:mod:`..correlated`): a batch reads the keys it wrote.  So is one whose maps an event updates at every group, looping over a whole map
    (a cross product; a HAVING subquery's maps kept per group, :func:`.nested.having_subqueries`).

    >>> from ..syntax import parse_program
    >>> p = parse_program("DECLARE VIEW v[a := A](x := m[A] / n[A], lo := MIN(B : t[A, B]));")
    >>> cost_class(p.views[0])
    ('domain-bound', 'MIN over t: each changed row reads the distinct values of its group (cost grows with their number, not with the database)')
    """
    if not v.maps and not v.keys:  # SELECT 1 AS a WHERE 2 > 3 (:mod:`.constrow`)
        return "constant", "reads no relation: its one row (or none) is fixed, no map, no statement"
    folds = [n for c in v.columns if c.expr is not None for n in walk(c.expr) if isinstance(n, Fold)]
    if v.where is not None:
        folds += [n for n in walk(v.where) if isinstance(n, Fold)]
    totals = [n for c in v.columns if c.expr is not None for n in walk(c.expr) if isinstance(n, Total)]
    totals += [n for n in walk(v.where) if isinstance(n, Total)] if v.where is not None else []
    split = {id(c.total): c for c in correlations(v)}  # kept per correlation key by the runtime (:mod:`..correlated`)
    totals = [t for t in totals if id(t) not in split]
    reasons = []
    if split:
        what = ", ".join(dict.fromkeys(f"{c.total.ref.name} per ({', '.join(c.keys)})" for c in split.values()))
        reasons.append(f"nested subquery correlated by equalities: each row's sum of {what} is kept per correlation "
                       "key, and a batch recomputes only the keys it wrote, each over its own entries (cost grows with "
                       "the entries of one key, not with the number of keys); the maps themselves are first-order")
    if totals:
        what = ", ".join(dict.fromkeys(f"{t.ref.name} over ({', '.join(t.vars)})" for t in totals))
        reasons.append(f"nested subquery: each changed row sums {what}, testing the nested condition at each "
                       "distinct value (cost grows with that domain, not with the database); the maps themselves "
                       "are first-order")
    if folds:
        what = ", ".join(dict.fromkeys(f"{f.kind} over {f.ref.name}" for f in folds))
        reasons.append(f"{what}: each changed row reads the distinct values of its group (cost grows with their "
                       "number, not with the database)")
    found = [n for e in [c.expr for c in v.columns] + [v.where] if e is not None for n in walk(e) if isinstance(n, Over)]
    scalars = [o for o in found if not o.vars and o.cond is None and isinstance(o.expr, MapRef) and not o.expr.args]
    overs = [o for o in found if all(o is not x for x in scalars)]  # scalars: SUM(v[] FOR : groups[K]), selectsub
    if scalars:
        reasons.append(f"a scalar subquery's value read at each row (beside {', '.join(dict.fromkeys(o.ref.name for o in scalars))}): "
                       "the maps are first-order; a batch that changes the subquery changes every row, re-read whole")
    if overs:
        what = ", ".join(dict.fromkeys(o.ref.name for o in overs))
        keyed = " (a key that is an inner aggregate's value, or groups read apart from the row: a batch that " \
            "changes them re-reads every row)" if rereads(v) else ""
        reasons.append(f"an aggregate of a grouped derived table's values over {what}: reading a changed row "
                       f"aggregates the derived table's groups{keyed} (cost grows with their number, not with the "
                       "rows); the maps themselves are first-order")
    looped = _loop_guarded(v, program) if program is not None else []
    guarded = [text for text, call in looped if not call]
    calls = [text for text, call in looped if call]
    if calls:
        reasons.append(f"a library function of several relations' columns ({', '.join(calls)}) is computed per entry "
                       "of the map over the other side, keyed by the columns it reads (cost grows with that map's "
                       "entries at the join key, not with the whole database)")
    if guarded:
        reasons.append(f"a comparison between columns ({', '.join(guarded)}) loops over a map's entries at each "
                       "event and tests each (cost grows with that map, not with the whole database)")
    scans = _full_scans(v, program) if program is not None else []
    if scans:
        reasons.append(f"an event of {', '.join(dict.fromkeys(r for r, _ in scans))} updates "
                       f"{', '.join(dict.fromkeys(m for _, m in scans))} at every group, looping over a whole map "
                       "(no key bound by the event: a cross product, or a HAVING subquery's map per group; cost grows "
                       "with the number of groups, not with the whole database)")
    if reasons:
        per_key = split and len(reasons) == 1  # nothing but TOTALs kept per key
        return ("domain-bound per correlation key" if per_key else "domain-bound", "; ".join(reasons))
    why = "each event updates maps by lookups and loops over the entries it joins with; a row is read by one " \
          "lookup per map"
    return ("first-order", why)


def _full_scans(v: ViewDecl, program: Program) -> list[tuple[str, str]]:
    """``(relation, map)`` for each statement on a map the view reads that loops over a whole map: a map read
    at loop variables only (no event variable or constant narrows it to a slice)."""
    found = []
    for t in program.triggers:
        for s in t.statements:
            if s.target.name not in v.maps:
                continue
            if any(isinstance(n, MapRef) and n.args and all(isinstance(a, Var) and a.name not in t.vars for a in n.args)
                   for n in walk(s.expr)):
                found.append((t.relation, s.target.name))
    return found


def _loop_guarded(v: ViewDecl, program: Program) -> list[tuple[str, bool]]:
    """The loop guards (conditions over loop variables) of the statements that maintain the view's maps, and the
    vector functions (:data:`..library.VECTOR`) they compute of loop variables: ``(text, whether a call)``."""
    needed, todo, found = set(v.maps), list(v.maps), []
    while todo:
        name = todo.pop()
        for t in program.triggers:
            for s in t.statements:
                if s.target.name != name:
                    continue
                for node in walk(s.expr):
                    call = isinstance(node, Call) and node.fn in VECTOR
                    if (isinstance(node, Cmp) or call) and not set(variables(node)) <= set(t.vars):
                        text = (f"{format_view_expr(node)}", call)
                        if text not in found:
                            found.append(text)
                    if isinstance(node, MapRef) and node.name not in needed:
                        needed.add(node.name)
                        todo.append(node.name)
    return found


_SWAP = {">": "<", ">=": "<="}


def _condition(p, nq: NormalQuery, refs: list[Ref], total: Expr | None = None) -> Expr:
    p = _decided(p)
    if p == ("true",):
        return Cmp("=", Const(0), Const(0))
    if p == ("false",):
        return Cmp("=", Const(0), Const(1))
    if p[0] in ("and", "or"):
        op = p[0].upper()
        args: list[Expr] = []
        for x in (p[1], p[2]):
            inner = _condition(x, nq, refs, total)
            args += inner.args if isinstance(inner, BoolOp) and inner.op == op else [inner]
        return BoolOp(op, tuple(args))
    left, right = _expr(p[1], nq, refs, total), _expr(p[2], nq, refs, total)
    if p[0] in _SWAP:
        return Cmp(_SWAP[p[0]], right, left)
    return Cmp(p[0], left, right)


def _decided(p):
    """TRUE and FALSE folded out of AND and OR (HAVING TRUE AND ..., WHERE-style constants)."""
    if p[0] not in ("and", "or"):
        return p
    a, b = _decided(p[1]), _decided(p[2])
    unit, zero = (("true",), ("false",)) if p[0] == "and" else (("false",), ("true",))
    if zero in (a, b):
        return zero
    if a == unit:
        return b
    return a if b == unit else (p[0], a, b)
