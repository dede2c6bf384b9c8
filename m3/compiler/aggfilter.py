"""``AGG(...) FILTER (WHERE c)``: an aggregate over the rows of its group that meet ``c``, and those only.

Why a rule of its own: Nexmark's q15-q17 count each group's bids per price
rank (``count(*) filter (where price < 10000)``) and its distinct bidders
per rank (``count(distinct bidder) filter (where ...)``) in one view.  The
condition belongs to the one aggregate, not to the query's WHERE: the other
aggregates of the group still see every row.

* ``SUM``, ``COUNT`` and ``AVG`` of arithmetic: the argument becomes ``CASE
  WHEN c THEN x END`` (``COUNT(*)``: ``THEN 1``), which these skip where it
  is NULL, exactly SQL's FILTER; the map is the same sum map, its terms
  multiplied by ``c`` (first-order: ``c`` is a condition on the event's
  row).
* ``COUNT(DISTINCT x)``, ``SUM(DISTINCT x)``, ``AVG(DISTINCT x)``, ``MIN(x)``
  and ``MAX(x)``: the multiplicity map keyed by the group and ``x`` counts
  the rows that meet ``c`` only (:class:`Filtered` as the argument,
  :mod:`.columns`); a value none of whose rows meets ``c`` has no entry, so
  the count, sum or extreme of the map's keys is over the filtered rows.
  Still first-order per event (the event's row updates one entry), and the
  read costs what the unfiltered aggregate's costs.  Of a GROUP BY column it
  is refused (unfiltered it is the column itself; filtered it needs the
  row-count map of the condition: write ``COUNT(*) FILTER (WHERE c) > 0``).

>>> import sqlglot
>>> from .examples import resolver_over, stream
>>> res = resolver_over(stream("R", a="INT", s="STRING"))
>>> filtered_aggregate(res, sqlglot.parse_one("SELECT COUNT(*) FILTER (WHERE a < 3) FROM R").expressions[0])
('COUNT', ('case', ((('<', ('R', 'a'), 3), 1),), None))
>>> filtered_aggregate(res, sqlglot.parse_one("SELECT COUNT(DISTINCT s) FILTER (WHERE a >= 3) FROM R").expressions[0])
('COUNT DISTINCT', Filtered(ref=('R', 's'), predicate=('>=', ('R', 'a'), 3)))
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from .aggregates import aggregate
from .nodes import sql_of
from .resolve import ColRef, Computed, Resolver

FOLDED_KINDS = ("MIN", "MAX", "COUNT DISTINCT", "SUM DISTINCT", "AVG DISTINCT")


@dataclass(frozen=True)
class Filtered:
    """The argument of a filtered multiplicity-map aggregate: its column and the condition its rows meet."""

    ref: ColRef | Computed
    predicate: tuple


def is_filtered_aggregate(e: exp.Expression) -> bool:
    """Whether ``e`` is ``AGG(...) FILTER (WHERE ...)``."""
    return type(e) is exp.Filter and isinstance(e.this, exp.AggFunc)


def filtered_aggregate(res: Resolver, node: exp.Filter) -> tuple[str, object]:
    """``(kind, argument)`` as :func:`.aggregates.aggregate`'s, the condition inside the argument (module doc)."""
    where = node.expression
    if type(where) is not exp.Where:
        raise res.ctx.error(f"unsupported FILTER ({sql_of(node)}): FILTER (WHERE condition)", node)
    kind, arg = aggregate(res, node.this)
    predicate = res.predicate(where.this)
    if kind in FOLDED_KINDS:
        return kind, Filtered(arg, predicate)
    if kind == "COUNT":  # COUNT(*) and COUNT(column) count rows (no NULLs): the rows meeting the condition
        arg = 1
    return kind, ("case", ((predicate, arg),), None)


def rows_read(agg: tuple) -> tuple | None:
    """The COUNT of the rows an aggregate view expression reads where SQL's is NULL over none of them, or None.

    Why: a SUM/AVG/MIN/MAX under FILTER (or a SUM/AVG of a CASE without ELSE) reads no row in a group whose rows
    all miss its condition: SQL's value is NULL there, and a comparison with it in HAVING is not TRUE, either
    way round (:func:`.viewexpr.having` compares only where this COUNT is > 0; docs/m3.md "FILTER")."""
    kind, arg = agg[1], agg[2]
    if kind in ("MIN", "MAX") and isinstance(arg, Filtered):
        return ("agg", "COUNT", ("case", ((arg.predicate, 1),), None))
    if kind in ("SUM", "AVG") and isinstance(arg, tuple) and arg and arg[0] == "case" and arg[2] is None \
            and all(v is not None for _, v in arg[1]):
        return ("agg", "COUNT", ("case", tuple((p, 1) for p, _ in arg[1]), None))
    return None
