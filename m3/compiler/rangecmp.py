"""BETWEEN whose bounds are not constants: a range join, ``e.salary BETWEEN g.lower_bound AND g.upper_bound``.

Why a module of its own: the resolver (:mod:`.resolve`) reads ``x BETWEEN
low AND high`` with constant bounds as two comparisons with constants; with
a bound that reads a column (of another relation: a salary grade's range, a
time window ``r.t BETWEEN s.t - 5 AND s.t``) it is what SQL defines it to
be, ``x >= low AND x <= high``, two comparisons of columns (or arithmetic
over them, :mod:`.arithcmp`) that the resolver reads as any others.

Cost class (docs/m3.md): each side is a comparison between columns of two
relations, so a trigger of one relation loops over the entries of the other
relation's map that are keyed by the compared columns (an employee's event
over the grades keyed by their bounds, a grade's event over the salaries):
*domain-bound*, the work per event grows with the number of distinct values
of the other side's compared columns.  Deltas stay first-order.

>>> import sqlglot
>>> from .resolve import Resolver
>>> from .examples import PlainErrors, stream
>>> e = stream("E", salary="FLOAT")
>>> g = stream("G", lo="FLOAT", hi="FLOAT")
>>> res = Resolver([("e", "E"), ("g", "G")], {"E": e, "G": g}, PlainErrors())
>>> res.predicate(sqlglot.parse_one("salary BETWEEN lo AND hi"))
('and', ('>=', ('e', 'salary'), ('g', 'lo')), ('<=', ('e', 'salary'), ('g', 'hi')))
>>> res.predicate(sqlglot.parse_one("salary NOT BETWEEN lo AND hi + 1"))
('or', ('<', ('e', 'salary'), ('g', 'lo')), ('>', ('e', 'salary'), ('arith', ('+', ('g', 'hi'), 1))))
>>> res.predicate(sqlglot.parse_one("3 BETWEEN lo AND 5"))
('and', ('>=', 3, ('g', 'lo')), ('true',))
"""

from __future__ import annotations

from typing import Protocol

from sqlglot import exp



class Resolver(Protocol):
    """What this module asks of :class:`.resolve.Resolver` (which imports this module: no import back)."""

    def predicate(self, e: exp.Expression) -> tuple: ...


def range_join(res: Resolver, e: exp.Between) -> tuple:
    """``x BETWEEN low AND high`` as ``x >= low AND x <= high`` (module doc), each read by the resolver."""
    x = e.this
    low = exp.GTE(this=x.copy(), expression=e.args["low"].copy())
    high = exp.LTE(this=x.copy(), expression=e.args["high"].copy())
    return ("and", res.predicate(low), res.predicate(high))
