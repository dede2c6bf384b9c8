"""A UNION ALL of aggregated queries: each branch a part grouped by its keys and a constant branch key.

Why: SQL's ``SELECT a, SUM(b) ... GROUP BY a UNION ALL SELECT c, COUNT(*) ... GROUP BY c`` holds one row per
(branch, group): a key may occur once per branch, so the branches' maps cannot be added (as :mod:`.union` adds
views of rows).  In the calculus each branch is an aggregate query of its own (a *part*, compiled from the
general rules, :mod:`.lifted`) with one more group variable bound to a constant, ``{BR = i}`` (the constant
key of :mod:`.outerkeys`, put back by :func:`.outerkeys.with_constants`); the view is keyed by the branches'
key columns and the branch key (internal: no output row holds it), and reads value column ``j`` as the sum of
the parts' ``#i.j`` at its row, of which only branch ``BR``'s has entries.  A hidden ``COUNT(*)`` per part says
where a group has rows (a SUM of 0 is no map entry), and each part's value is multiplied by ``LEAST(rows, 1)``, 0
at another branch's rows (a constant term, ``SUM(a) - 1``, is not added there).  Cost: that of the parts
(first-order for SUM/COUNT/AVG, domain-bound for MIN/MAX), one more key column.

Refused by name: branches without GROUP BY (SQL's one row of each over no rows), a branch whose GROUP BY
columns are not exactly its selected non-aggregate items, items that are keys in one branch and values in
another, HAVING, DISTINCT, ORDER BY or LIMIT in a branch.

>>> import sqlglot
>>> from .examples import PlainErrors
>>> from ..printer import format_view_expr
>>> p = plan(sqlglot.parse_one("SELECT a, SUM(b) AS s FROM R GROUP BY a UNION ALL SELECT c, COUNT(*) FROM S GROUP BY c"),
...          PlainErrors())
>>> [s.sql() for s in p.parts], p.keys, p.internal
(['SELECT a, SUM(b) AS c0, COUNT(*) AS c1 FROM R GROUP BY a', 'SELECT c, COUNT(*) AS c0, COUNT(*) AS c1 FROM S GROUP BY c'], ('a', '__branch'), ('__branch',))
>>> format_view_expr(p.columns[0][1])
'#0.0[A, BRANCH] * LEAST(#0.1[A, BRANCH], 1) + #1.0[A, BRANCH] * LEAST(#1.1[A, BRANCH], 1)'
>>> format_view_expr(p.where)
'0 < #0.1[A, BRANCH] + #1.1[A, BRANCH]'
"""

from __future__ import annotations

import functools

from sqlglot import exp

from ..ast import Cmp, Const, MapRef, Var
from ..viewnodes import Arith
from .lifted import Plan
from .nodes import sql_of
from .outerkeys import ConstKey
from .resolve import Positions
from .setparts import key_variables, output_names

BRANCH = "__branch"  # the internal key: which branch a row is of


def _leaves(u: exp.Expression) -> list[exp.Expression]:
    if isinstance(u, exp.Union) and u.args.get("distinct") is False:
        return _leaves(u.this) + _leaves(u.expression)
    return [u]


def _aggregated(s: exp.Expression) -> bool:
    return type(s) is exp.Select and any(isinstance(n, exp.AggFunc) for e in s.expressions for n in e.walk())


#: What a UNION node of such a statement may hold: its two sides (a LIMIT, OFFSET or ORDER BY of the union is
#: left to :mod:`.union`, which refuses it by name).
_UNION_PARTS = frozenset({"this", "expression", "distinct"})


def _bare(u: exp.Expression) -> bool:
    return not isinstance(u, exp.Union) or (
        all(k in _UNION_PARTS or v in (None, False, [], "") for k, v in u.args.items())
        and _bare(u.this) and _bare(u.expression))


def aggregated_union(sel: exp.Expression) -> bool:
    """Whether ``sel`` is a UNION ALL statement (no WITH, LIMIT, OFFSET or ORDER BY of its own) whose branches
    are all aggregated queries."""
    leaves = _leaves(sel)
    return len(leaves) > 1 and _bare(sel) and all(map(_aggregated, leaves))


def plan(sel: exp.Expression, ctx: Positions) -> Plan:
    """The parts (one per branch, with the constant branch key) and the view over them (module doc)."""
    branches = _leaves(sel)
    names = output_names(branches[0])
    keyed = [not any(isinstance(n, exp.AggFunc) for n in e.walk()) for e in branches[0].expressions]
    key_names = [n for n, k in zip(names, keyed) if k]
    key_vars = tuple(key_variables(key_names + [BRANCH.strip("_")]))
    row = tuple(Var(v) for v in key_vars)
    parts, sums = [], []
    for i, b in enumerate(branches):
        for arg in ("having", "distinct", "order", "limit", "offset"):
            if b.args.get(arg):
                raise ctx.error(f"unsupported {arg.upper()} in a UNION ALL branch of aggregated queries {sql_of(b)}", b)
        group = b.args.get("group")
        if len(b.expressions) != len(names):
            raise ctx.error(f"UNION ALL branches select {len(names)} and {len(b.expressions)} columns", b)
        items = [e.this if type(e) is exp.Alias else e for e in b.expressions]
        keys = [x for x, k in zip(items, keyed) if k]
        if group is None or any(isinstance(n, exp.AggFunc) for x in keys for n in x.walk()) or \
                any(not any(isinstance(n, exp.AggFunc) for n in x.walk()) for x, k in zip(items, keyed) if not k) or \
                sorted(g.sql() for g in group.expressions) != sorted(x.sql() for x in keys):
            raise ctx.error(f"unsupported UNION ALL branch of aggregated queries {sql_of(b)}: each branch grouped by "
                            "exactly its selected columns, at the same places (a key may occur once per branch)", b)
        values = [x for x, k in zip(items, keyed) if not k] + [exp.Count(this=exp.Star())]
        part = b.copy()
        named = [exp.alias_(v.copy(), f"c{j}") for j, v in enumerate(values)]
        part.set("expressions", [x.copy() for x in keys] + named)
        part.set("group", exp.Group(expressions=[x.copy() for x in keys]))
        part.meta["constants"] = {len(keys): ConstKey(i, "INT", len(keys))}  # (:func:`.outerkeys.with_constants`)
        parts.append(part)
        rows = MapRef(f"#{i}.{len(values) - 1}", row)  # its COUNT(*): 0 at another branch's rows, where a constant
        mine = Arith("LEAST", rows, Const(1))  # term of this branch's value (SUM(a) - 1) must not be added
        sums.append([Arith("*", MapRef(f"#{i}.{j}", row), mine) for j in range(len(values) - 1)] + [rows])
    total = [functools.reduce(lambda a, b: Arith("+", a, b), [s[j] for s in sums]) for j in range(len(sums[0]))]
    columns = tuple((n, t) for n, t in zip([n for n, k in zip(names, keyed) if not k], total))
    return Plan(tuple(parts), tuple(key_names) + (BRANCH,), key_vars, columns, Cmp("<", Const(0), total[-1]),
                internal=(BRANCH,))



