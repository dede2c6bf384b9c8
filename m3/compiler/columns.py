"""Pass 2, second half: a query's value columns and HAVING as expressions over its maps (read when the view is read).

Every aggregate of a query becomes its own map, as in DBToaster: the
triggers maintain the maps, and arithmetic over aggregates, HAVING and
MIN/MAX are computed from the maps at the rows being read (the runtime's
:mod:`~boreas.m3.runtime.views`), so they cost nothing per event.

* ``SUM``/``COUNT`` of arithmetic: one sum map keyed by the group (the
  normaliser's :class:`~boreas.m3.calculus.Agg`); ``AVG``: a SUM map and a
  COUNT map, read as their quotient.  The same aggregate twice (``COUNT(*)``
  in SELECT and HAVING) is one map.
* ``MIN(x)``, ``MAX(x)``, ``COUNT(DISTINCT x)``, ``SUM(DISTINCT x)``,
  ``AVG(DISTINCT x)``: one *multiplicity map* keyed by the group and ``x``
  (how many rows have that value); read as the least / greatest key, the
  number of keys, their sum, or sum / number.  Deleting a row decrements
  its value's count; at 0 the entry goes, so the next least value is the
  MIN: correct under deletes with nothing recomputed.  When ``x`` is itself
  a group column the aggregate is ``x`` (or 1 for COUNT DISTINCT).
* A group column in an expression is the row's key variable.
* ``HAVING p``: the view keeps the rows where ``p`` holds.
* Rows.  A view's rows are where one of its maps has an entry.  A view of
  maps and AVGs keeps the convention that a group whose aggregates are all 0
  may be absent (a value 0 reads as "no row").  Any other view holds exactly
  the groups that have rows: if none of its maps counts every row of the
  group (COUNT(*), a multiplicity map), its condition gets ``rows > 0``,
  ``rows`` the group's COUNT(*) map — so ``HAVING SUM(x) = 0``, ``SUM(x) +
  1`` and ``SELECT DISTINCT`` (a column ``count`` that is 1) see groups
  whose sums are 0.

Column expressions: ``("map", i)`` (aggregate i at the row), ``("avg", i,
j)``, ``("fold", kind, i)`` (MIN, MAX, SUM or COUNT over aggregate i's last
key), ``("var", V)``, constants, ``(op, a, b)`` with op in ``+ - * /``.  The
condition is a predicate of :mod:`.predicates` over them.

>>> from .frontend import parse_sql
>>> from .normalize import normalize
>>> rels, qs = parse_sql('''CREATE STREAM R(a INT, b INT);
...   SELECT a, SUM(b) / COUNT(*) AS r, MAX(b) AS top FROM R GROUP BY a HAVING COUNT(*) > 1''')
>>> nq = normalize(rels, qs[0])
>>> [(x.name, str(x.agg)) for x in nq.aggregates]
[('r_sum', 'AggSum([A], R(A, B) * B)'), ('r_count', 'AggSum([A], R(A, B))'), ('top', 'AggSum([A, B], R(A, B))')]
>>> nq.columns, nq.where
((('r', ('/', ('map', 0), ('map', 1))), ('top', ('fold', 'MAX', 2))), ('>', ('map', 1), 1))
>>> rels, qs = parse_sql("CREATE STREAM R(a INT, b INT); SELECT a, SUM(b) + 1 AS s FROM R GROUP BY a HAVING SUM(b) < 2")
>>> nq = normalize(rels, qs[0])
>>> [x.name for x in nq.aggregates], nq.where
(['s_sum', 'rows'], ('and', ('>', ('map', 1), 0), ('<', ('map', 0), 2)))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..calculus import Agg, V
from ..errors import CompileError
from .aggfilter import Filtered
from .nulls import nonnull
from .predicates import conj

_FOLDED = {"MIN": "MIN", "MAX": "MAX", "COUNT DISTINCT": "COUNT", "SUM DISTINCT": "SUM"}


@dataclass(frozen=True)
class Aggregate:
    """One map of a query: its name (after the view's), its definition; a multiplicity map's last key is folded."""

    name: str
    agg: Agg
    folded: V | None = None


MakeAgg = Callable[[object, V | None, bool], Agg]
"""``(arithmetic, folded variable or None, count) -> definition``: the sum of the arithmetic (count: of the rows
where it is not NULL) per group (and folded value)."""


class _Builder:
    def __init__(self, var: dict, keys: tuple[V, ...], make: MakeAgg):
        self.var, self.keys, self.make = var, keys, make
        self.aggregates: list[Aggregate] = []
        self.seen: dict[tuple, int] = {}
        self.exact = False  # some map counts every row of the group (COUNT(*), a multiplicity map)

    def add(self, name: str, expr, folded: V | None = None, count: bool = False) -> int:
        key = (repr(expr), folded, count)
        self.exact = self.exact or (folded is not None and expr == 1) or (count and nonnull(expr) == 1)
        if key not in self.seen:
            self.seen[key] = len(self.aggregates)
            self.aggregates.append(Aggregate(name, self.make(expr, folded, count), folded))
        return self.seen[key]

    def column(self, x, name: str, whole: bool):
        """A view expression (:mod:`.viewexpr`) as a column expression; ``whole``: it is the column itself."""
        if isinstance(x, tuple) and x and x[0] == "col":
            return ("var", self.var[x[1]])
        if isinstance(x, tuple) and x and x[0] == "agg":
            return self.aggregate(x[1], x[2], name if whole else f"{name}_{x[1].lower().replace(' ', '_')}")
        if isinstance(x, tuple) and x and x[0] == "neg":
            return ("*", -1, self.column(x[1], name, False))
        if isinstance(x, tuple) and len(x) == 3 and x[0] in ("+", "-", "*", "/", "GREATEST", "LEAST"):
            return (x[0], self.column(x[1], name, False), self.column(x[2], name, False))
        return x

    def aggregate(self, kind: str, arg, name: str):
        if kind in ("SUM", "COUNT"):
            return ("map", self.add(name, arg, count=kind == "COUNT"))
        if kind == "AVG":
            return ("avg", self.add(f"{name}_sum", arg), self.add(f"{name}_count", arg, count=True))
        counted = 1  # a multiplicity map counts the rows per value; FILTER: those meeting its condition
        if isinstance(arg, Filtered):
            counted = ("case", ((arg.predicate, 1),), None)
        v = self.var[arg.ref if isinstance(arg, Filtered) else arg]
        if kind == "AVG DISTINCT":
            return ("/", self.aggregate("SUM DISTINCT", arg, name), self.aggregate("COUNT DISTINCT", arg, name))
        if v in self.keys:  # MIN(x) grouped by x is x: one value per group
            if isinstance(arg, Filtered):
                raise CompileError(f"unsupported {kind} of GROUP BY column {arg.ref[1]} with FILTER (write "
                                   "COUNT(*) FILTER (WHERE ...) > 0)")
            return 1 if kind == "COUNT DISTINCT" else ("var", v)
        return ("fold", _FOLDED[kind], self.add(name if kind in ("MIN", "MAX") else f"{name}_values", counted, v))

    def condition(self, p):
        if p[0] in ("and", "or"):
            return (p[0], self.condition(p[1]), self.condition(p[2]))
        if len(p) == 1:  # TRUE / FALSE
            return p
        return (p[0], self.column(p[1], "having", False), self.column(p[2], "having", False))


def view_columns(q, var: dict, keys: tuple[V, ...], make: MakeAgg,
                 rows: bool = False) -> tuple[tuple[Aggregate, ...], tuple, object]:
    """``(aggregates, columns, condition)`` of a resolved query (:class:`.frontend.SqlQuery`); see module doc.
    ``rows``: the condition always reads the group's COUNT(*) map (a query with nested subqueries: its rows
    are where the count of the rows meeting the nested condition is > 0)."""
    b = _Builder(var, keys, make)
    columns = tuple((name, b.column(x, name, True)) for name, x in q.columns)
    having = b.condition(q.having) if q.having is not None else None
    plain = having is None and all(isinstance(c, tuple) and c[0] in ("map", "avg") for _, c in columns)
    where = having
    # rows are where the group has rows, not where some sum is non-zero; an ALWAYS view's one row is always
    if (rows or (not plain and not b.exact)) and not q.always:
        rows = ("map", b.add("rows", 1, count=True))
        where = conj([(">", rows, 0)] + ([having] if having is not None else []))
    if not b.aggregates:
        raise CompileError(f"query {q.name} reads no relation data")
    return tuple(b.aggregates), columns, where


def _reads_map(c) -> bool:
    if not isinstance(c, tuple) or not c:
        return False
    if c[0] in ("map", "avg", "fold"):
        return True
    return c[0] != "var" and any(_reads_map(x) for x in c[1:])
