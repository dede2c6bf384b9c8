"""An aggregate over the entries of a ``TOTAL`` that sums nothing away: over its map, under its condition.

Why: a grouped derived table (or a query's outer part) whose WHERE holds a
nested subquery compiles to maps and a ``TOTAL`` (:class:`..viewnodes.Total`):
its groups are the entries of ``m[G]`` at which the nested condition ``c``
holds when the view is read (``TOTAL( : m[G] WHERE c)``, a domain computed
at read time, not a map).  A query reading it by value ranges over those
groups, ``SUM(e FOR G : TOTAL( : m[G] WHERE c) WHERE d)``: in the calculus
an ``AggSum`` over a domain that is itself a selection of a map's domain,
``AggSum(G, Dom(m[G] * {c}) * {d} * e)``, which is the ``AggSum`` over
``m``'s domain under ``c AND d``, an :class:`..over.Over` of the general
kind (its condition may read other maps: the nested subquery's values,
maintained first-order as they are in any nested condition).  So the
groups need not be one map of their own (TPC-H Q11's variants with ``IN
(SELECT ...)`` in the derived table's WHERE; a view of rows whose WHERE
compares with a scalar subquery beside a scalar subquery in its SELECT
list).

A ``TOTAL`` that sums a variable away (``TOTAL(V : m[G, V] WHERE c)``: the
nested condition reads a column that is not a group column, so the maps are
keyed by it too) has the distinct ``G`` as its entries, while ``m``'s are the
``(G, V)`` pairs: MIN and MAX do not mind the repeats, so they range over the
pairs; SUM and COUNT range over the pairs whose ``V`` is the least at their
``G`` under ``c`` (``V = MIN(V2 FOR V2 : m[G, V2] WHERE c)``: one pair per
group), at a cost of the pairs of a group squared, a domain.  A ``TOTAL``
summing more variables than one away is left as it is (refused by name).  Its
``TRACK`` maps (which name the rows a nested map's change affects) are not
needed: an ``Over`` whose condition reads a map at fewer than the row's
variables is re-read whole by ``changes()`` (:func:`..over.rereads`).

>>> from ..ast import Cmp, Const, MapRef, Var
>>> from ..printer import format_view_expr
>>> from ..viewnodes import Total
>>> groups = Total((), MapRef("m", (Var("G"),)), Cmp("<", MapRef("v", ()), Var("G")), (MapRef("t", (Var("G"),)),))
>>> print(format_view_expr(over_entries(Over("SUM", Var("G"), ("G",), groups, Cmp(">", Var("G"), Const(1))))))
SUM(G FOR G : m[G] WHERE v[] < G AND G > 1)
>>> summed = Total(("V",), MapRef("m", (Var("G"), Var("V"))), Cmp("<", MapRef("v", ()), Var("V")))
>>> print(format_view_expr(over_entries(Over("MAX", Var("G"), ("G",), summed))))
MAX(G FOR G, V : m[G, V] WHERE v[] < V)
>>> print(format_view_expr(over_entries(Over("COUNT", Const(1), ("G",), summed))))
COUNT(1 FOR G, V : m[G, V] WHERE v[] < V AND V = MIN(V_ONE FOR V_ONE : m[G, V_ONE] WHERE v[] < V_ONE))
>>> two = Total(("V", "W"), MapRef("m", (Var("G"), Var("V"), Var("W"))))
>>> over_entries(Over("SUM", Const(1), ("G",), two)).ref is two
True
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace

from ..ast import Cmp, MapRef, Var
from ..over import Over, conjuncts
from ..viewnodes import BoolOp, Total


def over_entries(node: Over) -> Over:
    """``node`` over its ``TOTAL``'s map under the ``TOTAL``'s condition and its own, where that is exact."""
    total = node.ref
    if not isinstance(total, Total) or not isinstance(total.ref, MapRef):
        return node
    parts = conjuncts(total.cond) + conjuncts(node.cond)
    if total.vars and node.kind not in ("MIN", "MAX"):
        if len(total.vars) != 1:
            return node
        v = total.vars[0]
        one = f"{v}_ONE"
        least = Over("MIN", Var(one), (one,), _renamed(total.ref, v, one),
                     None if total.cond is None else _renamed(total.cond, v, one))
        parts.append(Cmp("=", Var(v), least))
    cond = None if not parts else parts[0] if len(parts) == 1 else BoolOp("AND", tuple(parts))
    return replace(node, vars=tuple(dict.fromkeys(node.vars + total.vars)), ref=total.ref, cond=cond)


def _renamed(e, old: str, new: str):
    """``e`` with variable ``old`` read as ``new`` (a tree of frozen dataclasses, rebuilt)."""
    if isinstance(e, tuple):
        return tuple(_renamed(x, old, new) for x in e)
    if isinstance(e, Var):
        return Var(new) if e.name == old else e
    if not is_dataclass(e) or isinstance(e, type):
        return e
    changed = {f.name: _renamed(getattr(e, f.name), old, new) for f in fields(e) if f.name != "pos"}
    if isinstance(e, (Over, Total)):
        changed["vars"] = tuple(new if x == old else x for x in e.vars)
    return replace(e, **changed)
