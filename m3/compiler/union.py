"""UNION ALL: a query over a union is the sum of the same query over each branch, map by map.

Why this is exact and stays first-order: every map of a query is a sum
over rows (a SUM, a COUNT, a multiplicity per value for MIN/MAX/DISTINCT, a
count per distinct row for a view of rows), and a sum over the rows of
``A UNION ALL B`` is the sum over ``A`` plus the sum over ``B``.  So each
branch is compiled as its own query, and the maps' definitions are added
term by term (:func:`merge`): one map per aggregate, maintained by the
triggers of every branch's relations, the view unchanged.

Two places are accepted:

* **In FROM**: ``SELECT k, SUM(v) FROM (SELECT a AS k, c AS v FROM R UNION ALL
  SELECT d, e FROM S) u GROUP BY k`` (also through a CTE) is the outer query
  once per branch (:func:`split`), each then flattened (:mod:`.derived`); a
  derived table of rows over a union (``FROM (SELECT k, v FROM (... UNION ALL
  ...) t WHERE ...) x``, a CTE reading a CTE) is split as the union it reads.
  Any aggregate the outer query has works (MIN/MAX and DISTINCT read the
  summed multiplicity maps).
* **As the statement**: ``SELECT a, b FROM R UNION ALL SELECT d, e FROM S``,
  a UNION ALL of views of rows (no aggregates, GROUP BY or DISTINCT): the
  view counts each distinct row over both branches (:func:`statement_branches`).
  A UNION ALL of aggregated queries is not this module's: its result may hold
  one key twice (a row per branch), which a view keyed by its group cannot;
  with every branch grouped it is a view over parts keyed by a branch key too
  (:mod:`.setagg`), else refused here.

Branches pair their columns by position (names from the first, as SQL),
which must have the same types.  ``UNION`` without ALL is accepted as the
statement, of views of rows: every branch becomes ``SELECT DISTINCT``, their
row counts still summed into one map, and the view holds each row whose
count is above 0 once (:func:`statement_branches`); in FROM it is read as its
UNION ALL by a query that duplicates do not change (MIN, MAX, DISTINCT:
:mod:`.setunion`, called by :func:`split`) and refused under anything else
(a set's rows are not a sum), and so are ``INTERSECT``, ``EXCEPT`` and an
aggregated branch in FROM.  A statement with a subquery in a branch's WHERE
is a view over its branches as parts (:mod:`.setparts`).

>>> import sqlglot
>>> from .examples import PlainErrors
>>> sel = sqlglot.parse_one("SELECT k, SUM(v) AS s FROM (SELECT a AS k, b AS v FROM R UNION ALL SELECT b, a FROM S) u GROUP BY k")
>>> [b.sql() for b in split(sel, PlainErrors())]
['SELECT k, SUM(v) AS s FROM (SELECT a AS k, b AS v FROM R) AS u(k, v) GROUP BY k', 'SELECT k, SUM(v) AS s FROM (SELECT b, a FROM S) AS u(k, v) GROUP BY k']
>>> sel = sqlglot.parse_one("SELECT k, SUM(v) AS s FROM (SELECT k, v FROM (SELECT a AS k, b AS v FROM R "
...                        "UNION ALL SELECT b, a FROM S) u WHERE v > 0) x GROUP BY k")
>>> [b.sql() for b in split(sel, PlainErrors())]  # a derived table of rows over a union: split as the union
['SELECT k, SUM(v) AS s FROM (SELECT k, v FROM (SELECT a AS k, b AS v FROM R) AS u(k, v) WHERE v > 0) AS x(k, v) GROUP BY k', 'SELECT k, SUM(v) AS s FROM (SELECT k, v FROM (SELECT b, a FROM S) AS u(k, v) WHERE v > 0) AS x(k, v) GROUP BY k']
>>> [b.sql() for b in statement_branches(sqlglot.parse_one("SELECT a FROM R UNION ALL SELECT b FROM S UNION ALL SELECT c FROM T"), PlainErrors())]
['SELECT a FROM R', 'SELECT b FROM S', 'SELECT c FROM T']
>>> statement_branches(sqlglot.parse_one("SELECT a, COUNT(*) FROM R GROUP BY a UNION ALL SELECT b, 1 FROM S"), PlainErrors())
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: unsupported UNION ALL of aggregated queries (SELECT a, COUNT(*) FROM R GROUP BY a): a key may occur once per branch, a view holds one row per key (aggregate over a UNION ALL in FROM instead)
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from ..calculus import Agg, V, substitute
from ..errors import CompileError
from .columns import Aggregate
from .derived import inline_ctes
from .nodes import sql_of
from .resolve import Positions
from .setunion import bagged

_UNION_ARGS = frozenset({"this", "expression", "distinct", "with_", "with"})


def _branches(u: exp.Expression, ctx: Positions, distinct: bool = False) -> list[exp.Expression]:
    """The branches of a chain of UNION ALLs, in order (a set operation of another kind is refused by name);
    ``distinct``: the chain is under a UNION statement, whose set semantics make every union in it one."""
    if not isinstance(u, exp.SetOperation):
        return [u]
    if type(u) is not exp.Union:
        raise ctx.error(f"unsupported {type(u).__name__.upper()} ({sql_of(u)}) here: INTERSECT and EXCEPT only as the "
                        "statement, of views of rows, and not mixed with UNION", u)
    if u.args.get("distinct") is not False and not distinct:
        raise ctx.error(f"unsupported UNION ({sql_of(u)}) here: a set union removes duplicate rows, which no sum "
                        "undoes under deletes; UNION ALL is supported, and UNION as the statement (of views of rows)",
                        u)
    for arg, value in u.args.items():
        if arg not in _UNION_ARGS and value not in (None, False, [], ""):
            raise ctx.error(f"unsupported {arg.rstrip('_').upper()} of UNION ALL ({sql_of(u)})", u)
    if u.args.get("with_") or u.args.get("with"):
        raise ctx.error(f"unsupported WITH inside a UNION ALL branch ({sql_of(u)}): put it before the statement", u)
    return _branches(u.this, ctx, distinct) + _branches(u.expression, ctx, distinct)


def split(sel: exp.Select, ctx: Positions) -> list[exp.Select]:
    """``sel`` once per branch of each UNION ALL in its FROM (CTEs inlined first); ``[sel]`` when there is none."""
    if not any(isinstance(n, exp.SetOperation) for n in sel.walk()):
        return [sel]
    sel = sel.copy()
    inline_ctes(sel, ctx)
    sel = bagged(sel, ctx)  # a set UNION read by MIN, MAX, DISTINCT: its UNION ALL (:mod:`.setunion`)
    from_ = sel.args.get("from_") or sel.args.get("from")
    items = ([from_.this] if isinstance(from_, exp.From) else []) + \
        [j.this for j in sel.args.get("joins") or [] if isinstance(j, exp.Join)]
    pos = next((i for i, t in enumerate(items) if type(t) is exp.Subquery and isinstance(t.this, exp.SetOperation)),
               None)
    if pos is not None:
        branches = _branches(items[pos].this, ctx)
    else:  # a derived table of rows over a UNION ALL is the union of the derived table over each branch
        pos = next((i for i, t in enumerate(items) if type(t) is exp.Subquery and _over_union(t.this)), None)
        if pos is None:
            return [sel]
        branches = split(items[pos].this, ctx)
    out = []
    for b in branches:
        if type(b) is exp.Select and _aggregated(b):
            raise ctx.error(f"unsupported aggregated UNION ALL branch in FROM ({sql_of(b)}): each branch is "
                            "flattened into the query that reads the union (aggregate over the union instead)", b)
    first = branches[0]
    names = [e.alias_or_name for e in first.expressions] if type(first) is exp.Select else []
    alias = items[pos].args.get("alias")
    if type(alias) is exp.TableAlias and not alias.args.get("columns") and names and \
            not any(isinstance(e, exp.Star) or isinstance(e.this, exp.Star) for e in first.expressions):
        alias.set("columns", [exp.to_identifier(n) for n in names])  # a union's columns are its first branch's
    for branch in branches:
        copy = sel.copy()
        f = copy.args.get("from_") or copy.args.get("from")
        target = ([f.this] if isinstance(f, exp.From) else [])
        target += [j.this for j in copy.args.get("joins") or [] if isinstance(j, exp.Join)]
        target[pos].set("this", branch.copy())
        out += split(copy, ctx)
    return out


def statement_branches(u: exp.Expression, ctx: Positions) -> list[exp.Select]:
    """The branches of a UNION ALL or UNION statement: views of rows only (module doc).

    A UNION (without ALL) at the top is a set: every branch becomes ``SELECT
    DISTINCT``, so the branches' row counts are still summed into one map and
    the view holds each row whose count is above 0, once.  Unions inside it
    are sets too (a set union of anything is a set), so any mix is accepted
    under a UNION; under a UNION ALL, a UNION is refused.
    """
    w = u.args.get("with_") or u.args.get("with")
    body = u.copy()
    body.set("with_" if "with_" in body.args else "with", None)
    distinct = isinstance(body, exp.Union) and body.args.get("distinct") is not False
    kind = "UNION" if distinct else "UNION ALL"
    branches = _branches(body, ctx, distinct)
    for b in branches:
        if type(b) is not exp.Select:
            raise ctx.error(f"unsupported {kind} branch {sql_of(b)} (a SELECT)", b)
        if _aggregated(b):
            raise ctx.error(f"unsupported {kind} of aggregated queries ({sql_of(b)}): a key may occur once per "
                            f"branch, a view holds one row per key (aggregate over a UNION ALL in FROM instead)", b)
        if b.args.get("distinct") is not None and not distinct:
            raise ctx.error(f"unsupported DISTINCT in a UNION ALL branch ({sql_of(b)}): the view counts rows over "
                            "all branches", b)
        if distinct:
            b.set("distinct", exp.Distinct())
        if w is not None:
            b.set("with_" if "with_" in b.args else "with", w.copy())
    return branches


def _over_union(body: exp.Expression) -> bool:
    """Whether a derived table is a SELECT of rows (no aggregates, DISTINCT or LIMIT) over a UNION ALL in its FROM:
    its rows are then the sum of its rows over each branch, so it is split as the union itself."""
    return type(body) is exp.Select and not _aggregated(body) and body.args.get("distinct") is None and \
        not body.args.get("limit") and any(type(t) is exp.Subquery and isinstance(t.this, exp.SetOperation)
                                           for t in body.find_all(exp.Subquery))


def _aggregated(b: exp.Select) -> bool:
    """Whether a branch groups or aggregates: its rows are then not a sum of its relations' rows."""
    return b.args.get("group") is not None or b.args.get("having") is not None or \
        any(isinstance(n, exp.AggFunc) for e in b.expressions for n in e.walk())


def merge(name: str, branches: list) -> tuple:
    """One query's aggregates from its branches' (:class:`.normalize.NormalQuery`, all but the first renamed
    into the first's variables): ``(aggregates, key_vars of the first)``; the rest of the first is the query's.

    Branch ``i``'s map keys are paired with the first's by position; its other
    variables get fresh names, so its terms sum over their own rows.
    """
    base = branches[0]
    taken = {v.name for a in base.aggregates for t in a.agg.terms for v in t.vars()} | \
        {k.name for a in base.aggregates for k in a.agg.keys if isinstance(k, V)}
    aggregates = list(base.aggregates)
    for nq in branches[1:]:
        if nq.nested is not None or base.nested is not None:
            raise CompileError(f"unsupported subquery in WHERE of a UNION ALL branch in view {name}")
        if len(nq.key_vars) != len(base.key_vars):
            raise CompileError(f"UNION ALL branches of view {name} select {len(base.key_vars)} and "
                               f"{len(nq.key_vars)} columns")
        mapping: dict[V, V] = {}
        pairs = list(zip(nq.key_vars, base.key_vars))
        if len(nq.aggregates) != len(aggregates):
            raise CompileError(f"UNION ALL branches of view {name} differ in their aggregates")
        for mine, theirs in zip(nq.aggregates, aggregates):
            pairs += list(zip(mine.agg.keys, theirs.agg.keys))
        for v, w in pairs:
            if not isinstance(v, V) or not isinstance(w, V) or v.type != w.type:
                raise CompileError(f"UNION ALL branches of view {name}: a {getattr(w, 'type', w)} column beside a "
                                   f"{getattr(v, 'type', v)} one (cast one side)")
            if mapping.setdefault(v, w) != w:
                raise CompileError(f"UNION ALL branches of view {name} equate different columns (one selects a "
                                   "joined column twice)")
        if len(set(mapping.values())) != len(mapping):
            raise CompileError(f"UNION ALL branches of view {name} equate different columns (one selects a "
                               "joined column twice)")
        if _renamed(nq.columns, mapping) != base.columns or _renamed(nq.where, mapping) != base.where:
            raise CompileError(f"UNION ALL branches of view {name} differ in their columns")
        rename = branch_renaming(nq.aggregates, mapping, taken)
        aggregates = [Aggregate(theirs.name, Agg(theirs.agg.keys, theirs.agg.terms +
                                                 tuple(substitute(t, rename) for t in mine.agg.terms)), theirs.folded)
                      for mine, theirs in zip(nq.aggregates, aggregates)]
    return tuple(aggregates)


def branch_renaming(aggregates, mapping: dict[V, V], taken: set[str]) -> dict[V, V]:
    """``mapping`` (a branch's key variables to the first branch's) plus a fresh name, not in ``taken``, for
    each other variable of the branch's ``aggregates``, so its terms range over their own rows.

    >>> from ..calculus import Atom, Term
    >>> a, b, c = V("A", "INT"), V("B", "INT"), V("C", "INT")
    >>> agg = Aggregate("rows", Agg((b,), (Term(1, (Atom("S", (b, c)),), (), ()),)))
    >>> sorted((k.name, v.name) for k, v in branch_renaming([agg], {b: a}, {"A", "C"}).items())
    [('B', 'A'), ('C', 'C_2')]
    """
    fresh: dict[V, V] = {}
    for a in aggregates:
        for t in a.agg.terms:
            for v in t.vars():
                if v not in mapping and v not in fresh:
                    n, candidate = 2, v.name
                    while candidate in taken:
                        candidate, n = f"{v.name}_{n}", n + 1
                    taken.add(candidate)
                    fresh[v] = V(candidate, v.type)
    return {**fresh, **mapping}


def merged(base, branches: list):
    """``base`` (the first branch's :class:`.normalize.NormalQuery`) with every branch's terms in its maps."""
    return replace(base, aggregates=merge(base.name, [base] + branches))


def _renamed(x, mapping: dict[V, V]):
    if isinstance(x, V):
        return mapping.get(x, x)
    if isinstance(x, tuple):
        return tuple(_renamed(y, mapping) for y in x)
    return x
