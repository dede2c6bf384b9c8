"""A set UNION in FROM, read by a query that duplicate rows do not change, is read as its UNION ALL.

Why: a set union keeps a row while *some* branch has it, which a sum of the
branches cannot say -- except where the reader does not care how many
times a row occurs.  MIN and MAX, a DISTINCT aggregate (``COUNT(DISTINCT
v)``, ``SUM(DISTINCT v)``, ``AVG(DISTINCT v)``), ``SELECT DISTINCT`` and a
GROUP BY without aggregates read only *which* values occur, and their maps
already say so by multiplicity: a multiplicity map keyed by the value, or a
count per distinct row, that every branch's relations write into, a value
present while its count is above 0.  So ``A UNION B`` under such a query
is compiled exactly as ``A UNION ALL B`` (:mod:`.union` then sums the
branches' maps), and so is a DISTINCT inside a branch.  A view of rows that
selects every column of a set union and reads nothing else holds each of
its rows once: it is ``SELECT DISTINCT`` over the UNION ALL.  Derived tables
of rows between the query and the union (a filter, a projection) keep each
row's multiplicity, so the query decides through them too.

Everything else that reads a set union counts its rows (COUNT(*), SUM,
AVG, a view of rows over some of its columns or joined with a relation)
and is refused by name: the count of a row after duplicates are removed is
not a sum of the branches' counts, so no map of the branches maintains it
under deletes.  The same holds for a DISTINCT inside a UNION ALL branch.

>>> import sqlglot
>>> from .examples import PlainErrors
>>> u = "(SELECT a AS k, b AS v FROM R UNION SELECT DISTINCT d, e FROM S) t"
>>> bagged(sqlglot.parse_one(f"SELECT k, MAX(v) AS m FROM {u} GROUP BY k"), PlainErrors()).sql()
'SELECT k, MAX(v) AS m FROM (SELECT a AS k, b AS v FROM R UNION ALL SELECT d, e FROM S) AS t GROUP BY k'
>>> bagged(sqlglot.parse_one(f"SELECT k, v FROM {u} WHERE v > 1"), PlainErrors()).sql()
'SELECT DISTINCT k, v FROM (SELECT a AS k, b AS v FROM R UNION ALL SELECT d, e FROM S) AS t WHERE v > 1'
>>> bagged(sqlglot.parse_one(f"SELECT k, MIN(v) AS m FROM (SELECT k, v FROM {u} WHERE k > 0) x GROUP BY k"), PlainErrors()).sql()
'SELECT k, MIN(v) AS m FROM (SELECT k, v FROM (SELECT a AS k, b AS v FROM R UNION ALL SELECT d, e FROM S) AS t WHERE k > 0) AS x GROUP BY k'
>>> bagged(sqlglot.parse_one(f"SELECT k, SUM(v) AS s FROM {u} GROUP BY k"), PlainErrors())
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: unsupported UNION (SELECT a AS k, b AS v FROM R UNION SELECT DISTINCT d, e FROM S) here, under SUM(v): a set union removes duplicate rows, which SUM counts and no sum of the branches undoes under deletes; UNION ALL is supported, and UNION in FROM under MIN, MAX, DISTINCT aggregates, SELECT DISTINCT, GROUP BY without aggregates, or a view of every column of the union
"""

from __future__ import annotations

from sqlglot import exp

from .nodes import ancestors, sql_of
from .resolve import Positions

_READS_VALUES = "MIN, MAX, DISTINCT aggregates, SELECT DISTINCT, GROUP BY without aggregates"


def bagged(sel: exp.Select, ctx: Positions) -> exp.Select:
    """``sel`` (its CTEs inlined) with the set unions and branch DISTINCTs of the UNION in its FROM read as UNION
    ALL where its result does not depend on duplicates (module doc); ``sel`` itself when there are none; a
    :class:`..errors.CompileError` naming what counts the duplicates otherwise."""
    item, direct = _union_item(sel)
    if item is None:
        return sel
    sets = [n for n in _chain(item.this) if isinstance(n, exp.Union) and n.args.get("distinct") is not False]
    distincts = [b for b in _chain(item.this) if type(b) is exp.Select and b.args.get("distinct") is not None]
    if not sets and not distincts:
        return sel
    counter = _counts_duplicates(sel)
    every_row = counter is sel and direct and item.this in sets and _reads_every_column(sel, item)
    if counter is not None and not every_row:
        if sets:
            why = "a view of rows counts each row" if counter is sel else \
                f"a set union removes duplicate rows, which {_name(counter)} counts"
            raise ctx.error(f"unsupported UNION ({sql_of(sets[0])}) here, under {sql_of(counter)}: {why} and no sum "
                            f"of the branches undoes under deletes; UNION ALL is supported, and UNION in FROM under "
                            f"{_READS_VALUES}, or a view of every column of the union", sets[0])
        raise ctx.error(f"unsupported DISTINCT in a UNION ALL branch in FROM ({sql_of(distincts[0])}) under "
                        f"{sql_of(counter)}: it counts the rows the DISTINCT removes; DISTINCT branches only under "
                        f"{_READS_VALUES}", distincts[0])
    out = sel.copy()
    target, _ = _union_item(out)
    for n in _chain(target.this):
        if isinstance(n, exp.Union):
            n.set("distinct", False)
        elif type(n) is exp.Select:
            n.set("distinct", None)
    if every_row:
        out.set("distinct", exp.Distinct())
    return out


def _from_items(sel: exp.Select) -> list[exp.Expression]:
    from_ = sel.args.get("from_") or sel.args.get("from")
    return ([from_.this] if isinstance(from_, exp.From) else []) + \
        [j.this for j in sel.args.get("joins") or [] if isinstance(j, exp.Join)]


def _union_item(sel: exp.Select) -> tuple[exp.Subquery | None, bool]:
    """The UNION in ``sel``'s FROM, and whether it is directly there rather than under derived tables of rows (a
    filter and a projection keep each row's multiplicity, so what reads them reads the union's duplicates)."""
    for t in _from_items(sel):
        if type(t) is exp.Subquery and type(t.this) is exp.Union:
            return t, True
        if type(t) is exp.Subquery and type(t.this) is exp.Select and _of_rows(t.this):
            found, _ = _union_item(t.this)
            if found is not None:
                return found, False
    return None, False


def _of_rows(body: exp.Select) -> bool:
    return body.args.get("distinct") is None and body.args.get("group") is None and \
        body.args.get("having") is None and not any(e.find(exp.AggFunc) for e in body.expressions)


def _chain(u: exp.Expression) -> list[exp.Expression]:
    """The unions of a chain of unions and their branches (other set operations are left to :mod:`.union`)."""
    if type(u) is not exp.Union:
        return [u]
    return [u, *_chain(u.this), *_chain(u.expression)]


def _counts_duplicates(sel: exp.Select) -> exp.Expression | None:
    """What in ``sel`` depends on how many times a row occurs: the first aggregate of its SELECT list or HAVING
    that is not MIN, MAX or DISTINCT, or ``sel`` itself when it is a view of rows; None when nothing does.

    >>> import sqlglot
    >>> _counts_duplicates(sqlglot.parse_one("SELECT k, MIN(v), COUNT(DISTINCT v) FROM t GROUP BY k")) is None
    True
    >>> _counts_duplicates(sqlglot.parse_one("SELECT k, MIN(v) FROM t GROUP BY k HAVING COUNT(*) > 1")).sql()
    'COUNT(*)'
    >>> _counts_duplicates(sqlglot.parse_one("SELECT k FROM t WHERE v > (SELECT SUM(b) FROM S)")).sql()
    'SELECT k FROM t WHERE v > (SELECT SUM(b) FROM S)'
    """
    parts = [*sel.expressions, sel.args.get("having")]
    aggs = [n for p in parts if p is not None for n in p.walk() if isinstance(n, exp.AggFunc)
            and not any(isinstance(a, exp.Select) for a in ancestors(n, sel))]
    if not aggs:
        grouped = sel.args.get("distinct") is not None or sel.args.get("group") is not None
        return None if grouped else sel
    return next((a for a in aggs if not isinstance(a, (exp.Min, exp.Max)) and type(a.this) is not exp.Distinct), None)


def _name(agg: exp.Expression) -> str:
    return agg.key.upper() if isinstance(agg, exp.AggFunc) else sql_of(agg)


def _reads_every_column(sel: exp.Select, item: exp.Subquery) -> bool:
    """Whether ``sel`` reads nothing but ``item`` and selects each of its columns as itself (or ``*``)."""
    if sel.args.get("joins") or sel.args.get("group") is not None:
        return False
    alias = item.args.get("alias")
    columns = alias.args.get("columns") if isinstance(alias, exp.TableAlias) else None
    first = item.this
    while isinstance(first, exp.SetOperation):
        first = first.this
    if columns:
        names = {c.name.lower() for c in columns}
    elif type(first) is exp.Select and not any(e.find(exp.Star) for e in first.expressions):
        names = {e.alias_or_name.lower() for e in first.expressions}
    else:
        names = None
    own = {"", item.alias_or_name.lower()}
    selected = set()
    for e in sel.expressions:
        if isinstance(e, exp.Star) or type(e) is exp.Column and isinstance(e.this, exp.Star) and e.table.lower() in own:
            return True
        if type(e) is not exp.Column or e.table.lower() not in own:
            return False
        selected.add(e.name.lower())
    return names is not None and names <= selected
