"""A CASE whose WHEN arms read one column and whose ELSE reads another, outside an aggregate: a UNION ALL of two.

Why: Nexmark q21 labels each bid by its channel and, for the other
channels, by an id its URL carries (``CASE WHEN lower(channel) = 'apple'
THEN '0' ... ELSE REGEXP_EXTRACT(url, ...) END``).  A CASE of one column is
a function of it (:mod:`.casewhen`); this one reads two, ``channel`` and
``url``, so it is no function of one column's value.  But its rows split by
its conditions: a row one of the WHEN conditions holds for takes the value
of the WHEN arms, a CASE of ``channel`` alone (the last arm's value as its
ELSE, never reached); any other row takes the ELSE, a value of ``url``.  So
the view of rows is the UNION ALL of the query with the first value and the
WHERE ``c1 OR ... OR cn`` added, and of the query with the ELSE's value and
``NOT (c1 OR ... OR cn)`` added, each branch a view with a computed key.

Exact because the WHEN arms' column is NOT NULL: a NULL condition takes the
ELSE in a CASE, where ``NOT (NULL)`` would drop the row, so a CASE over a
nullable column (one declared ``NULL``: ``<column>__null``, m3/nullable.py)
is left as it is (and refused by :mod:`.casewhen`).  Only a query without
aggregates, GROUP BY or DISTINCT (a view of rows: the union is then its
multiset sum), one such CASE per query.

>>> import sqlglot
>>> q = sqlglot.parse_one("SELECT a, CASE WHEN LOWER(s) = 'x' THEN '0' WHEN s = 'y' THEN '1' ELSE t END AS c FROM R")
>>> print(split_case(q, {}).sql())
SELECT a, CASE WHEN LOWER(s) = 'x' THEN '0' WHEN s = 'y' THEN '1' ELSE '1' END AS c FROM R WHERE (LOWER(s) = 'x' OR s = 'y') UNION ALL SELECT a, t AS c FROM R WHERE NOT (LOWER(s) = 'x' OR s = 'y')
>>> split_case(sqlglot.parse_one("SELECT CASE WHEN s = 'x' THEN 1 ELSE 0 END FROM R"), {}).sql()  # one column
"SELECT CASE WHEN s = 'x' THEN 1 ELSE 0 END FROM R"
"""

from __future__ import annotations

from sqlglot import exp

from ..ast import RelationDecl
from ..nullable import indicator


def _columns(e: exp.Expression) -> set[str]:
    return {c.name.lower() for c in e.find_all(exp.Column)}


def _nullable(relations: dict[str, RelationDecl]) -> set[str]:
    """The names of the declared relations' nullable columns (lower case)."""
    return {c.name.lower() for r in relations.values() for c in r.columns
            if any(d.name == indicator(c.name) for d in r.columns)}


def _split(case: exp.Case, relations: dict[str, RelationDecl]) -> tuple[exp.Expression, exp.Expression,
                                                                          exp.Expression] | None:
    """(the WHEN arms' value, the condition they cover, the ELSE's value) of a CASE of the shape, or None."""
    ifs, default = case.args.get("ifs") or [], case.args.get("default")
    if case.this is not None or default is None or not ifs:
        return None
    arms = set().union(*(_columns(b.this) | _columns(b.args["true"]) for b in ifs))
    if len(arms) != 1 or not _columns(default) - arms or arms & _nullable(relations):
        return None
    covered = exp.or_(*(b.this.copy() for b in ifs), copy=False)
    when = exp.Case(ifs=[b.copy() for b in ifs], default=ifs[-1].args["true"].copy())
    return when, exp.Paren(this=covered), default.copy()


def split_case(sel: exp.Expression, relations: dict[str, RelationDecl]) -> exp.Expression:
    """``sel`` as the UNION ALL of its two branches (module doc), or unchanged when it has no CASE of the shape."""
    if type(sel) is not exp.Select or sel.args.get("group") or sel.args.get("distinct") or \
            sel.find(exp.AggFunc) is not None:
        return sel
    for i, item in enumerate(sel.expressions):
        case = item.this if type(item) is exp.Alias else item
        found = _split(case, relations) if type(case) is exp.Case else None
        if found is None:
            continue
        when, covered, otherwise = found
        branches = []
        for value, where in ((when, covered), (otherwise, exp.Not(this=covered.copy()))):
            branch = sel.copy()
            target = branch.expressions[i]
            (target.this if type(target) is exp.Alias else target).replace(value.copy())
            branches.append(branch.where(where, copy=False))
        return exp.Union(this=branches[0], expression=branches[1], distinct=False)
    return sel
