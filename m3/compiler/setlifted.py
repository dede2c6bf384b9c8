"""A UNION of grouped aggregated queries whose rows are values: the values lifted into keys, one lift per part.

Why: ``SELECT SUM(b) AS d FROM R GROUP BY a UNION SELECT SUM(a) FROM R GROUP BY b`` holds each *value* once,
whichever group or branch gives it, so the view is keyed by the value itself (and by the selected keys beside
it, if any).  DBToaster writes it as a union of lifted maps, ``Q[D] = Sum_A rows0[A] * (D ^= d0[A]) + Sum_B
rows1[B] * (D ^= d1[B])`` read for existence; here each branch is a part grouped by all of its GROUP BY columns
(:mod:`.setbranch`), and the view's row ``D`` is there where some branch has a group whose values are ``D``::

    WHERE 0 < COUNT(1 FOR G0 : rows0[K, G0] WHERE D = d0[K, G0] AND <its HAVING>)
       OR 0 < COUNT(1 FOR G1 : rows1[K, G1] WHERE D = d1[K, G1] AND <its HAVING>)

``D`` is lifted (:func:`boreas.m3.over.lifts`): bound per disjunct by that part's aggregate, the view's rows are
the values each part's entries give (:func:`boreas.m3.over.lift_sources`), each a row once.  A branch that
selects all its GROUP BY columns is the same with no variable of its own.  Over nullable columns (a NULL value
or key, which a lifted key does not hold) it is refused by name.

Cost: the parts' own (first-order for SUM/COUNT/AVG, domain-bound for MIN/MAX); reading the view visits every
entry of every part (the values are keys no map holds), and ``changes()`` re-reads it after a batch.

>>> import sqlglot
>>> from .examples import PlainErrors
>>> from ..printer import format_view_expr
>>> from .setbranch import Branch, flat_bool
>>> leaves = [sqlglot.parse_one(q) for q in ("SELECT SUM(b) AS d FROM R GROUP BY a", "SELECT COUNT(*) FROM S GROUP BY c")]
>>> p = plan_union([Branch.of(x, 1, PlainErrors(), "UNION") for x in leaves], [], ["d"], PlainErrors())
>>> [s.sql() for s in p.parts], p.keys, p.columns
(['SELECT a, SUM(b) AS c0, COUNT(*) AS c1 FROM R GROUP BY a', 'SELECT c, COUNT(*) AS c0, COUNT(*) AS c1 FROM S GROUP BY c'], ('d',), (('count', Const(value=1)),))
>>> print(format_view_expr(p.where))
0 < COUNT(1 FOR G0_0 : #0.1[G0_0] WHERE 0 < #0.1[G0_0] AND D = #0.0[G0_0]) OR 0 < COUNT(1 FOR G1_0 : #1.1[G1_0] WHERE 0 < #1.1[G1_0] AND D = #1.0[G1_0])
"""

from __future__ import annotations

from ..ast import Cmp, Const, Var
from ..over import Over
from .lifted import Plan
from .nodes import sql_of
from .resolve import Positions
from .setbranch import Branch, flat_bool
from .setparts import key_variables


def plan_union(branches: list[Branch], key_names: list[str], value_names: list[str], ctx: Positions) -> Plan:
    """The view over the branches' parts (module doc): keyed by the selected keys and the values."""
    for b in branches:
        if b.flagged or b.nonnull:
            raise ctx.error(f"unsupported UNION of aggregated queries grouped by columns they do not select over "
                            f"nullable columns ({sql_of(b.select)}): a NULL value is no lifted key (docs/m3.md, "
                            "\"NULLs\")", b.select)
    key_vars = tuple(key_variables(key_names + value_names))
    row = tuple(Var(v) for v in key_vars[:len(key_names)])
    values = [Var(v) for v in key_vars[len(key_names):]]
    disjuncts = []
    for i, b in enumerate(branches):
        own = tuple(f"G{i}_{j}" for j in range(len(b.hidden)))
        at = row + tuple(Var(x) for x in own)
        cond = [b.condition(i, at, ctx)] + [Cmp("=", v, b.value(i, at, j)) for j, v in enumerate(values)]
        count = Over("COUNT", Const(1), own, b.rows(i, at), flat_bool("AND", cond))
        disjuncts.append(Cmp("<", Const(0), count))
    return Plan(tuple(b.part(None) for b in branches), tuple(key_names + value_names), key_vars,
                (("count", Const(1)),), flat_bool("OR", disjuncts))
