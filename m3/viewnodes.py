"""The view language's own nodes: arithmetic over aggregates, folds, boolean conditions and ``TOTAL``.

Why apart from :mod:`.ast`: triggers and map definitions (Figure 1 of seed
001) never hold these; only a view column or a view's ``WHERE`` does, read
when the view is read (:mod:`.runtime.evaluate`).  Each node lists its
sub-expressions in ``children()``, which :func:`.ast.walk` follows, as it
does for :class:`.over.Over`.

>>> from .ast import Var, walk
>>> [type(n).__name__ for n in walk(Arith("+", Var("A"), MapRef("m", (Var("A"),))))]
['Arith', 'Var', 'MapRef', 'Var']
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .ast import Expr, MapRef
from .errors import Pos


@dataclass(frozen=True)
class Arith:
    """``a op b`` in a view column, op in ``+ - * /``: arithmetic over map values, computed when the view is read;
    or ``LEAST(a, b)``, ``GREATEST(a, b)`` (op ``LEAST``, ``GREATEST``: a bag intersection's or difference's
    count, min(count1, count2) and max(count1 - count2, 0), :mod:`.compiler.setops`).

    ``/`` is float division; by zero it gives ``inf`` or ``-inf`` (as DuckDB does), and 0 / 0 is 0 (an AVG
    of no rows: SQL's NULL).
    """

    op: str
    left: Expr
    right: Expr
    pos: Pos | None = field(default=None, compare=False, repr=False, kw_only=True)

    def children(self) -> tuple[Expr, ...]:
        """The sub-expressions :func:`.ast.walk` visits."""
        return (self.left, self.right)


FOLDS = ("MIN", "MAX", "SUM", "COUNT")
EXTREMES = ("LEAST", "GREATEST")  # :class:`Arith`'s two-argument functions


@dataclass(frozen=True)
class Fold:
    """``MIN(X : m[A, X])`` in a view: over the entries of ``m`` whose other keys are the row's, MIN, MAX or
    SUM of ``X``, or their COUNT (a multiplicity map keyed by value: MIN/MAX, COUNT(DISTINCT x), DISTINCT).

    ``cond`` and ``track`` as :class:`Total`'s (``COUNT(X : m[A, X] WHERE n[X] = 0 TRACK t[A, X])``): only the
    entries whose ``X`` meets a nested subquery's condition are folded, so a COUNT DISTINCT (MIN, MAX) of the
    column a nested condition reads is the fold of the values that pass it (TPC-H Q16: the suppliers not in
    the complaints subquery), and the tracking maps name the rows a change of the nested maps affects.
    """

    kind: str
    var: str
    ref: MapRef
    cond: Expr | None = None
    track: tuple[MapRef, ...] = ()
    pos: Pos | None = field(default=None, compare=False, repr=False, kw_only=True)

    def children(self) -> tuple[Expr, ...]:
        """The sub-expressions :func:`.ast.walk` visits: the map, the condition, the tracking maps."""
        return (self.ref,) + (() if self.cond is None else (self.cond,)) + self.track


@dataclass(frozen=True)
class BoolOp:
    """``a AND b``, ``a OR b`` (two or more args) or ``NOT a`` (one) over view conditions."""

    op: str
    args: tuple[Expr, ...]
    pos: Pos | None = field(default=None, compare=False, repr=False, kw_only=True)

    def children(self) -> tuple[Expr, ...]:
        """The sub-expressions :func:`.ast.walk` visits."""
        return self.args


@dataclass(frozen=True)
class Total:
    """``TOTAL(K, Q : m[G, K, Q] WHERE cond)`` in a view: the sum of the entries of ``m`` at the row (``vars``
    free) at which ``cond`` holds, ``cond`` reading the row's variables, the entry's ``vars`` and other maps.

    Why: a nested subquery (``WHERE x < (SELECT AVG(y) FROM S WHERE S.k = R.k)``) is maintained as first-order
    maps, the outer aggregate keyed additionally by the columns the nested condition reads (``K``, ``Q``) and
    the inner aggregates keyed by the correlation columns; the view sums the outer entries whose condition
    holds when it is read, at a cost proportional to the distinct ``(K, Q)`` of the row (a domain), not to
    the database.

    ``track``: ``TRACK t[G, K]`` names maps keyed by the row's variables and
    the nested maps' keys whose entries change whenever a nested map's entry
    at ``K`` does (the nested rows joined with the outer ones).  A nested map
    keyed by ``K`` alone does not say which rows its change affects; a
    tracking map's changed entries do, so the batch's changed rows are found
    from the journals of the maps the view reads, as for every view.
    """

    vars: tuple[str, ...]
    ref: MapRef
    cond: Expr | None = None
    track: tuple[MapRef, ...] = ()  # maps read only to find the rows a batch changed (see :attr:`.ast.ViewDecl.maps`)
    pos: Pos | None = field(default=None, compare=False, repr=False, kw_only=True)

    def children(self) -> tuple[Expr, ...]:
        """The sub-expressions :func:`.ast.walk` visits: the map, the condition, the tracking maps."""
        return (self.ref,) + (() if self.cond is None else (self.cond,)) + self.track
