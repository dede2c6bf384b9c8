"""A UNION ALL branch's GROUP BY items it does not select: internal keys of the view, a slot per branch.

Why: ``SELECT SUM(b) AS s FROM R GROUP BY a UNION ALL SELECT COUNT(*) FROM S GROUP BY c`` holds one row per
group of each branch, its rows the groups' values (two groups of equal sums are two rows).  The view is keyed by
the groups as the single query ``SELECT SUM(b) FROM R GROUP BY a`` is (its GROUP BY columns internal keys, never
in an output row): here each branch's groups have keys of their own, so every branch gets its own *slots* among
the view's internal keys, after the selected keys, and every other branch's part holds its constant there (each
type's zero, the padded-key lift ``{K = 0}`` of :mod:`.outerkeys`).  A row of branch ``i`` is then read at its
own group's keys, the other parts read 0 there, and the rest is :mod:`.setagg`'s UNION ALL.  A UNION, INTERSECT
or EXCEPT of such branches compares the values themselves, a value lifted into a key bound once per branch,
which is not built (:meth:`.setbranch.Branch.of` refuses it by name).

Cost: the parts' own (first-order for SUM/COUNT/AVG, domain-bound for MIN/MAX), one more key column per hidden
group column of every branch.

>>> import sqlglot
>>> from .examples import PlainErrors
>>> from ..ast import Column, RelationDecl
>>> from .setbranch import Branch
>>> rels = {"R": RelationDecl("R", "STREAM", (Column("a", "INT"), Column("b", "STRING")))}
>>> leaves = [sqlglot.parse_one(q) for q in ("SELECT SUM(a) AS s FROM R GROUP BY b", "SELECT COUNT(*) FROM R GROUP BY a")]
>>> branches = [Branch.of(x, 1, PlainErrors(), "UNION ALL") for x in leaves]
>>> hidden_slots(branches, leaves, 0, rels, PlainErrors())
['__g0_0', '__g1_0']
>>> [{k: str(c) for k, c in b.pad.items()} for b in branches]
[{1: '0'}, {0: "''"}]
>>> branches[1].part(1).sql(), branches[1].part(1).meta["constants"][2]
('SELECT a, COUNT(*) AS c0, COUNT(*) AS c1 FROM R GROUP BY a', ConstKey(value=1, type='INT', slot=2))
"""

from __future__ import annotations

from sqlglot import exp

from ..ast import RelationDecl
from ..nullable import SUFFIX, ZERO
from .neverequal import column_types
from .nodes import sql_of
from .outerkeys import ConstKey
from .resolve import Positions, unparen
from .setbranch import Branch

_INT_ARITH = (exp.Add, exp.Sub, exp.Mul, exp.Neg, exp.Paren, exp.Identifier)  # (a column's name a node)


def hidden_slots(branches: list[Branch], leaves: list[exp.Expression], base: int,
                 relations: dict[str, RelationDecl], ctx: Positions) -> list[str]:
    """The names of the view's hidden-key slots (branch by branch, after the ``base`` keys before them); each
    branch's :attr:`~.setbranch.Branch.pad` set to the constants of the other branches' slots."""
    names: list[str] = []
    types: list[str] = []
    owner: list[int] = []
    for i, (b, leaf) in enumerate(zip(branches, leaves)):
        for j, g in enumerate(b.hidden):
            names.append(f"__g{i}_{j}")
            types.append(_type(g, leaf, relations, ctx))
            owner.append(i)
    for i, b in enumerate(branches):
        b.pad = {base + p: ConstKey(ZERO[t], t, base + p) for p, t in enumerate(types) if owner[p] != i}
    return names


def _type(g: exp.Expression, leaf: exp.Expression, relations: dict[str, RelationDecl], ctx: Positions) -> str:
    """The type of a hidden key: a column's declared one (a nullable column's indicator an INT), an arithmetic
    of INT columns and integers INT; another expression refused by name (its zero is not known here)."""
    g = unparen(g)
    types = column_types(leaf, relations) if type(leaf) is exp.Select else {}
    if type(g) is exp.Column:
        if g.name.endswith(SUFFIX):
            return "INT"
        found = types.get((g.table.lower(), g.name.lower()))
        if found is not None:
            return found
    elif all(type(n) in _INT_ARITH or type(n) is exp.Literal and not n.is_string and n.this.isdigit()
             or type(n) is exp.Column and types.get((n.table.lower(), n.name.lower())) == "INT" for n in g.walk()):
        return "INT"
    raise ctx.error(f"unsupported UNION ALL branch of aggregated queries grouped by {sql_of(g)}, which it does not "
                    "select: a column or an arithmetic of INT columns only (its type gives the other branches' "
                    "constant there)", leaf)
