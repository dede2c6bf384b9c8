"""Outer joins (``LEFT``, ``RIGHT``, ``FULL`` [OUTER] JOIN): the inner join plus the anti-join parts padded with NULLs.

Why parts (docs/m3.md, "Outer joins"): ``R LEFT JOIN S ON c`` is ``R JOIN S ON c`` plus the rows of ``R``
that match nothing, with NULL for every column of ``S``.  The runtime has no NULLs, so no NULL may reach a
map: each part is compiled as an ordinary query of its own (:func:`parts`), its padded columns replaced by
NULL on the tree and folded away with SQL's three-valued logic (:mod:`.padding`), and the view adds the
parts' aggregates when read (:func:`plan`, a :class:`.lifted.Plan`):

* the **inner part** is the inner join (first-order maps, as any join);
* the **anti part** is ``R`` with ``WHERE NOT EXISTS (SELECT * FROM S WHERE c)``: a nested subquery
  whose match count is kept per join key (:mod:`.nested`; *domain-bound per correlation key*).  A
  conjunct of ``c`` reading ``R`` alone (``ON r.b = s.b AND r.a > 1``) splits it in two: the rows of ``R``
  failing it, and those meeting it that match nothing;
* ``RIGHT`` is the mirror, ``FULL`` adds both anti parts (the first join of its FROM only); a chain
  (``R LEFT JOIN S ... LEFT JOIN T ...``) is one part per combination of matched and padded sides, a
  padded side never matching a later join on its (NULL) columns.  ON conditions go into the match count;
  WHERE conditions are applied to each part with the padded columns NULL, so a WHERE that rejects NULLs
  (``WHERE s.c > 1``) leaves the inner join alone, compiled as one (no plan).

Each aggregate is split per part at compile time: ``SUM``, ``COUNT`` and ``AVG`` (its sum over its count)
add across parts; over a padded part an argument that is NULL contributes nothing (SQL ignores NULLs).  A
group all of whose inputs are NULL reads 0, not NULL, as every aggregate of no rows in Boreas does today.
MIN and MAX are the least (greatest) of the parts that have a value (:func:`.outerview.extreme`), HAVING a condition
of the view over the parts' aggregates (:mod:`.outerhaving`).  A padded column read as a key (selected, grouped
by) is a constant key of the part that pads it, beside an indicator key (an internal key: reads show None where it
is 1), :mod:`.outerkeys`; MIN, MAX and HAVING over such a view too.  Refused by name: ``DISTINCT`` aggregates over
parts (but COUNT(DISTINCT) of one part's column), a padded key the ON condition equates with another key, or one
read in a value column outside an aggregate (HAVING reads it with its indicator).  An expression key (``+ - * %``,
``COALESCE``) is folded per part: NULL, a constant or a computed key there (:func:`.outerkeys.part_constants`).  A query reading nullable
columns shows SQL's NULLs instead of 0, each part rewritten over indicators
(:mod:`.outernulls`).

>>> import sqlglot
>>> from ..printer import format_view_expr
>>> from .examples import PlainErrors, stream
>>> rels = {"R": stream("R", a="INT", b="INT"),
...         "S": stream("S", b="INT", c="INT")}
>>> sel = sqlglot.parse_one("SELECT r.a, SUM(s.c) AS t, COUNT(*) AS n FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY r.a")
>>> p = plan(sel, rels, PlainErrors())
>>> [q.sql() for q in p.parts]  # doctest: +NORMALIZE_WHITESPACE
['SELECT r.a AS k0, SUM(s.c) AS c0, COUNT(*) AS c1 FROM R AS r, S AS s WHERE r.b = s.b GROUP BY r.a',
 'SELECT r.a AS k0, COUNT(*) AS c0 FROM R AS r WHERE NOT EXISTS(SELECT * FROM S AS s WHERE r.b = s.b) GROUP BY r.a']
>>> [(n, format_view_expr(e)) for n, e in p.columns], format_view_expr(p.where)
([('t', '#0.0[K0]'), ('n', '#0.1[K0] + #1.0[K0]')], '0 < #0.1[K0] + #1.0[K0]')
>>> p = plan(sqlglot.parse_one("SELECT s.c, COUNT(*) FROM R r LEFT JOIN S s ON r.b = s.b GROUP BY s.c"), rels, PlainErrors())
>>> p.keys, [q.sql() for q in p.parts]  # doctest: +NORMALIZE_WHITESPACE
(('c', 'c__null'), ['SELECT s.c AS k0, COUNT(*) AS c0 FROM R AS r, S AS s WHERE r.b = s.b GROUP BY s.c',
                    'SELECT COUNT(*) AS c0 FROM R AS r WHERE NOT EXISTS(SELECT * FROM S AS s WHERE r.b = s.b)'])
>>> [sorted((n, k.value) for n, k in q.meta["constants"].items()) for q in p.parts]  # (key position, constant)
[[(1, 0)], [(0, 0), (1, 1)]]
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

from sqlglot import exp

from ..ast import Cmp, Const, Expr, MapRef, Var
from ..nullable import indicator
from ..viewnodes import Arith, BoolOp
from .lifted import Plan, items_of
from .outerhaving import having_of, truth
from .outerview import Reader, column, components, may_be_null, numeric_extremes
from .outerkeys import keyable, padded_keys, part_constants, with_constants  # noqa: F401 (with_constants: the front end's)
from .outernulls import explicit, implied, lenient, not_true, null_columns, nullable_columns, reads_nullable
from .nodes import sql_of
from .nullscope import in_scope
from .padding import conjuncts, decide, fold, is_false, is_null, pad, qualify, refs
from .resolve import Positions, unparen

_OUTER = ("LEFT", "RIGHT", "FULL")


def is_outer(j: exp.Expression) -> bool:
    """Whether a join is an outer one (LEFT, RIGHT or FULL, OUTER or not)."""
    return type(j) is exp.Join and (str(j.args.get("side") or "").upper() in _OUTER or
                                    str(j.args.get("kind") or "").upper() == "OUTER")


def has_outer(sel: exp.Expression) -> bool:
    """Whether a SELECT itself (not a subquery of it) has an outer join."""
    return type(sel) is exp.Select and any(is_outer(j) for j in sel.args.get("joins") or [])


@dataclass
class _Part:
    """One combination of matched and padded sides: its FROM items, conditions and padded aliases."""

    items: list = field(default_factory=list)
    conds: list = field(default_factory=list)
    padded: set = field(default_factory=set)

    def copy(self) -> _Part:
        return _Part(list(self.items), list(self.conds), set(self.padded))

    def padding(self, alias: str) -> _Part:
        """This part with ``alias``'s columns NULL in its conditions so far (and in later ones: ``padded``)."""
        out = self.copy()
        out.padded.add(alias.lower())
        out.conds = [fold(pad(c.copy(), out.padded)) for c in out.conds]
        return out


def _name(item: exp.Expression) -> str:
    return item.alias_or_name


def _anti(p: _Part, item: exp.Expression, on: list, side_aliases: set, maybe: frozenset) -> list[_Part]:
    """The parts of ``p`` where ``item`` matches nothing under ``on``: ``item`` padded, and either a conjunct
    of ``on`` reading the other side alone fails, or no row of ``item`` meets the rest (``maybe``: the
    nullable columns, whose presence a comparison with ``item`` needs: :func:`.outernulls.implied`)."""
    on = [c for c in (decide(fold(pad(c.copy(), p.padded))) for c in on) if type(c) is not exp.Boolean or is_false(c)]
    on += implied(exp.and_(*on), side_aliases, maybe) if maybe and on else []
    if any(is_false(c) for c in on):  # nothing can match (a padded column of an earlier join): every row padded
        return [p.padding(_name(item))]
    alone = [c for c in on if refs(c) <= side_aliases]
    rest = [c for c in on if c not in alone]
    out = []
    if alone:
        failing = p.padding(_name(item))
        failing.conds.append(fold(exp.not_(exp.and_(*[c.copy() for c in alone]))) if not maybe else
                             not_true(exp.and_(*[c.copy() for c in alone])))  # NULL fails too
        out.append(failing)
    matched = p.padding(_name(item))
    matched.conds += [c.copy() for c in alone]
    sub = exp.select("*").from_(item.copy())
    if rest:
        cond = decide(fold(exp.and_(*[c.copy() for c in rest])))
        if is_false(cond):  # nothing can match: every row of the other side is padded
            rest, sub = [], None
        elif type(cond) is not exp.Boolean:
            sub = sub.where(cond)
    if sub is not None:
        matched.conds.append(exp.not_(exp.Exists(this=sub)))
    out.append(matched)
    return out


def parts(sel: exp.Select, relations: dict, ctx: Positions) -> list[exp.Select]:
    """``sel`` (an outer join in its FROM) as the SELECTs of its parts, inner joins only, padded columns NULL
    and folded (module doc); a part whose WHERE is false or NULL is left out."""
    sel = qualify(sel.copy(), relations)
    numeric_extremes(sel, relations, ctx)
    maybe = nullable_columns(sel, relations)  # (alias, column) where it reads one (:mod:`.outernulls`)
    items = items_of(sel)
    for t in items:
        if type(t) is not exp.Table:
            raise ctx.error(f"unsupported outer join with a derived table ({sql_of(t)}): only relations", t)
        if not any(n.lower() == t.name.lower() for n in relations):
            raise ctx.error(f"unknown relation {t.name} (relations: {', '.join(relations) or 'none declared'})", t)
    columns = {t.alias_or_name.lower(): {c.name.lower() for n, r in relations.items() if n.lower() == t.name.lower()
                                         for c in r.columns} for t in items}
    for col in sel.find_all(exp.Column):  # a padded column is folded away: it must exist all the same
        known = columns.get(col.table.lower())
        if known is not None and not isinstance(col.this, exp.Star) and col.name.lower() not in known and \
                col.find_ancestor(exp.Select) is sel:
            raise ctx.error(f"unknown column {col.name} of {col.table}", col)
    todo = [_Part([items[0]])]
    seen = {_name(items[0]).lower()}
    for i, j in enumerate(sel.args.get("joins") or []):
        item, on = j.this, conjuncts(j.args.get("on"))
        side = str(j.args.get("side") or "").upper() or ("FULL" if is_outer(j) else "")
        alias = _name(item).lower()
        if side in ("RIGHT", "FULL") and i > 0:
            raise ctx.error(f"unsupported {side} JOIN after another join ({sql_of(j)}): only the first join of a "
                            "FROM may be RIGHT or FULL (write the relations the other way round)", j)
        kept = ([set(seen)] if side in ("LEFT", "FULL") else []) + ([{alias}] if side in ("RIGHT", "FULL") else [])
        bad = next((c for k in kept if (c := lenient(j.args.get("on"), k, maybe)) is not None), None) if maybe else None
        if bad is not None:
            raise ctx.error(f"unsupported ON condition {sql_of(bad)} of a {side} JOIN over a nullable column of its "
                            "preserved side: it may be TRUE where that column is NULL (COALESCE, CASE, IS, OR), and "
                            "the preserved rows are not split on its presence inside the match (compare the column "
                            "itself)", bad)
        nxt = []
        for p in todo:
            inner = p.copy()
            inner.items.append(item)
            inner.conds += [fold(pad(c.copy(), p.padded)) for c in on]
            nxt.append(inner)
            if side in ("LEFT", "FULL"):
                nxt += _anti(p, item, on, set(seen), maybe)
            if side in ("RIGHT", "FULL"):
                first = p.items[0]
                for q in _anti(_Part([item]), first, on, {alias}, maybe):
                    nxt.append(replace(q, items=[item] + q.items[1:]))
        todo = nxt
        seen.add(alias)
    out = []
    where = sel.args.get("where")
    for p in todo:
        present = {_name(t).lower() for t in p.items}
        conds = [c.copy() for c in p.conds] + ([pad(where.this.copy(), p.padded)] if where is not None else [])
        cond = decide(fold(exp.and_(*conds), present, maybe)) if conds else exp.true()
        if is_false(cond):
            continue
        s = sel.copy()
        s.set("joins", None)
        s.set("where", None)
        s.set("from_" if "from_" in s.args else "from", exp.From(this=p.items[0].copy()))  # (sqlglot's key)
        for it in p.items[1:]:
            s.append("joins", exp.Join(this=it.copy()))
        if type(cond) is not exp.Boolean:
            s.set("where", exp.Where(this=cond))
        s.set("expressions", [fold(pad(e.copy(), p.padded), present, maybe) for e in s.expressions])
        s.meta.update(padded=p.padded, present=present, original=sel, maybe=maybe)  # what :func:`plan` reads
        out.append(s)
    return out


def plan(sel: exp.Select, relations: dict, ctx: Positions, rename: list[str] = ()) -> Plan | exp.Select:
    """The outer-join query ``sel`` as a plan over its parts, or, where only the inner join is left (a WHERE
    rejecting NULLs), that SELECT itself (module doc); ``rename``: the view's column names, if it gives them.
    A tree built by hand with a field of the wrong kind (a string where a condition stands) is refused, not a
    crash."""
    try:
        return _plan(sel, relations, ctx, rename)
    except (AttributeError, TypeError, KeyError, IndexError, ValueError) as bad:
        raise ctx.error(f"malformed query with an outer join ({type(bad).__name__}: {bad})", sel) from None


def _plan(sel: exp.Select, relations: dict, ctx: Positions, rename: list[str]) -> Plan | exp.Select:
    for key in ("having", "distinct", "order", "limit", "offset"):
        if sel.args.get(key) and key in ("limit", "offset"):
            raise ctx.error(f"unsupported {key.upper()} in a query with an outer join", sel.args[key])
    ps = parts(sel, relations, ctx)
    if not ps:
        raise ctx.error("an outer join whose WHERE never holds (every part is empty)", sel)
    maybe = ps[0].meta["maybe"]
    if len(ps) == 1 and not ps[0].meta["padded"] and not maybe:
        return ps[0]
    q = ps[0].meta["original"]
    kind = next(str(j.args.get("side") or "FULL").upper() for j in q.args.get("joins") or [] if is_outer(j))
    keys, values = _outputs(q, ctx)
    sides = {a for p in ps for a in p.meta["padded"]}
    shown = keys
    scope = {a: cols for a, (cols, _) in in_scope(q, relations).items()}  # HAVING's names bound as DuckDB's
    having = having_of(q, shown, values, scope, ctx)  # read over the parts' aggregates (:mod:`.outerhaving`)
    read = values + ([("HAVING", having)] if having is not None else [])
    keys = keys + padded_keys(keys, read, sides, maybe, relations, q, kind, ctx)  # indicators beside: :mod:`.outerkeys`
    found = components(read, lambda x: may_be_null(x, sides) or reads_nullable(x, maybe), ctx, every=bool(maybe)) \
        + [exp.Count(this=exp.Star())]  # the last: the rows, which make a group
    comps = list({c.sql(): c for c in reversed(found)}.values())[::-1]  # one part column per distinct aggregate
    index = {id(c): next(n for n, d in enumerate(comps) if d.sql() == c.sql()) for c in found}
    key_vars = tuple(f"K{i}" for i in range(len(keys)))
    row = tuple(Var(v) for v in key_vars)
    selects, placed = [], []  # per part: its SELECT, and per component its placeholder (or None: NULL there)
    for i, p in enumerate(ps):
        folded = [fold(pad(k.copy(), p.meta["padded"]), p.meta["present"], maybe) if k is not None and
                  type(k) is not exp.Column else k for _, k in keys]  # an expression key as this part reads it
        constants = part_constants(keys, len(shown), p.meta["padded"], relations, q, folded)
        grouped = [(n, folded[n]) for n, (_, k) in enumerate(keys) if n not in constants]
        seen: dict[str, int] = {}
        for n, k in grouped:
            if n < len(shown) and seen.setdefault(k.sql(), n) != n:
                raise ctx.error(f"unsupported GROUP BY over an outer join: {sql_of(keys[seen[k.sql()]][1])} and "
                                f"{sql_of(keys[n][1])} are the same key ({sql_of(k)}) in one of its parts; group "
                                "by one of them", q)
        items = [exp.alias_(k.copy(), f"k{n}") for n, k in grouped]
        where_at: list = []
        for c in comps:
            arg = c.this if not isinstance(c.this, exp.Star) else None
            arg = fold(pad(arg.copy(), p.meta["padded"]), p.meta["present"], maybe) if arg is not None else None
            if type(arg) is exp.Distinct and len(arg.expressions) == 1:  # COUNT(DISTINCT x): x NULL, none counted
                arg = arg if not is_null(arg.expressions[0]) else arg.expressions[0]
            if arg is not None and (is_null(arg) or (type(c) is exp.Sum and arg == exp.Literal.number(0))):
                where_at.append(None)
                continue
            comp = c.copy()
            if arg is not None:
                comp.set("this", arg)
            where_at.append(MapRef(f"#{i}.{len(items) - len(grouped)}", row))
            items.append(exp.alias_(comp, f"c{len(items) - len(grouped)}"))
        s = p.copy()
        s.set("expressions", items)
        s.set("group", exp.Group(expressions=[k.copy() for _, k in grouped]) if grouped else None)
        s.set("order", None)
        s.set("distinct", None)
        s.set("having", None)
        s = explicit(s, relations, ctx) if maybe else s
        s.meta["constants"] = constants  # put back by :func:`.outerkeys.with_constants`
        selects.append(s)
        placed.append(where_at)

    for n, c in enumerate(comps):  # COUNT(DISTINCT x): the distinct values of a union of parts do not add
        if c.meta.get("one_part") and sum(pl[n] is not None for pl in placed) > 1:
            raise ctx.error(f"unsupported {sql_of(c)} over an outer join reading rows of several of its parts (the "
                            "matched and the padded rows: their distinct values do not add): COUNT(DISTINCT) of a "
                            "column of the side that is padded", c)

    def total(n: int) -> Expr:
        found = [pl[n] for pl in placed if pl[n] is not None]
        return functools.reduce(lambda a, b: Arith("+", a, b), found) if found else Const(0)

    rows = total(index[id(found[-1])])
    nulls = {x: key_vars[n] for n, (x, _) in enumerate(keys) if n >= len(shown)}  # a key's indicator key
    reader = Reader(index, total, [k for _, k in keys], key_vars, ctx, lambda n: [pl[n] for pl in placed], nulls)
    names = [n for n, _ in shown] + [n for n, _ in values]
    if rename:
        if len(rename) != len(names):
            raise ctx.error(f"the view names {len(rename)} columns, its query selects {len(names)}", sel)
        names = list(rename)
    where = Cmp("<", Const(0), rows)
    if having is not None:
        where = BoolOp("AND", (where, truth(having, reader)))
    if maybe:  # SQL's NULLs shown (:mod:`.outernulls`)
        return Plan(tuple(selects), *null_columns(names, shown, keys, key_vars, values, reader, rows)[:-1], where)
    columns = [column(v, reader) if v is not None else Const(1) for _, v in values]
    names = names[:len(shown)] + [indicator(names[i]) for i, _ in keys[len(shown):]] + names[len(shown):]
    return Plan(tuple(selects), tuple(names[:len(keys)]), key_vars, tuple(zip(names[len(keys):], columns)), where)


def _outputs(q: exp.Select, ctx: Positions) -> tuple[list, list]:
    """``(keys, values)``: the key columns ``(name, column)`` and value columns ``(name, expression)`` of an
    outer-join query (a view of rows: every selected column a key, and its count; DISTINCT: 1)."""
    sel_items = list(q.expressions)
    aggregated = q.args.get("group") is not None or any(isinstance(n, exp.AggFunc) for e in sel_items
                                                        for n in e.walk())
    named = [(e.alias_or_name, unparen(e.this if type(e) is exp.Alias else e)) for e in sel_items]
    if not aggregated:
        for _, e in named:
            if type(e) is not exp.Column:
                raise ctx.error(f"unsupported expression {sql_of(e)} in a view of rows over an outer join "
                                "(columns only)", e)
        return named, [("count", None if q.args.get("distinct") is not None else exp.Count(this=exp.Star()))]
    groups = []
    for g in (q.args["group"].expressions if q.args.get("group") is not None else []):
        g = unparen(g)
        if type(g) is exp.Literal and g.is_int:
            g = named[int(g.name) - 1][1]
        elif type(g) is exp.Column and not g.table:
            g = next((e for n, e in named if n.lower() == g.name.lower()), g)
        if type(g) is not exp.Column and not keyable(g):
            raise ctx.error(f"unsupported GROUP BY {sql_of(g)} over an outer join (columns, and + - * % and "
                            "COALESCE over them)", g)
        groups.append(g)
    keys, values = [], []
    for n, e in named:
        if any(e == g for g in groups):
            keys.append((n, e))
        else:
            values.append((n, e))
    if len(keys) != len(groups):
        raise ctx.error("unsupported GROUP BY column not selected over an outer join: select it", q)
    return keys, values
