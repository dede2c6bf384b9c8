"""Top-N and deduplication: ``ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...)`` filtered by its rank, read
before parsing.

Why before parsing: the calculus has no order, so a rank is no map.  The
shape Nexmark (q18, q19, q9) and Flink's docs use is a derived table that
numbers its rows, filtered by the number::

    SELECT cols FROM (SELECT ..., ROW_NUMBER() OVER (PARTITION BY p ORDER BY o DESC) AS rn FROM ...) [t]
    WHERE rn <= N            -- or rn < N+1, or rn = 1 (deduplication)

:func:`split_topn` cuts that statement into the inner query without its
``ROW_NUMBER`` item (an ordinary view: the ``m3`` box maintains it, with
deletions) and a :class:`TopN` that says how to rank the view's rows; the
box keeps the ranked rows per partition and emits the changes of the top N
(node/operators/m3topn.py, docs/m3.md "Top-N").  Every other use of a window
function (``RANK``, ``DENSE_RANK``, ``LAG``, an aggregate ``OVER``, a
``ROW_NUMBER`` filtered otherwise or selected without a filter) is refused by
name.

>>> text, topn = split_topn('''CREATE STREAM bid(a INT, b INT, p INT);
... SELECT a, p FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY a ORDER BY p DESC) AS r FROM bid) WHERE r <= 2''')
>>> print(text)
CREATE STREAM bid(a INT, b INT, p INT);
SELECT * FROM bid
>>> topn
TopN(partition=('a',), order=(('p', True),), limit=2, project=(('a', 'a'), ('p', 'p')), rank=None, counted=True, distinct=False, nulls_first=())
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from ..errors import CompileError

_STRING = re.compile(r"'(?:[^']|'')*'")
_WINDOWED = re.compile(r"\bOVER\s*\(", re.IGNORECASE)


@dataclass(frozen=True)
class TopN:
    """Rank a view's rows per ``partition`` by ``order`` (``(column, descending)``), ties by the whole row
    ascending, and keep the first ``limit``; out rows are ``project`` (``(out name, view column)``; a view
    column of None is the rank), ``rank`` the rank's name when it is selected."""

    partition: tuple[str, ...]
    order: tuple[tuple[str, bool], ...]
    limit: int
    project: tuple[tuple[str, str | None], ...] | None  # None: SELECT * (every view column, the rank last)
    rank: str | None
    #: the view has no aggregate of its own (subqueries' do not count): its last value is each row's multiplicity,
    #: not a column
    counted: bool = True
    #: ... and it has a GROUP BY: each group is one row, there while its count is positive (SQL's GROUP BY
    #: without aggregates is a DISTINCT)
    distinct: bool = False
    #: per ORDER BY column, whether its NULLs rank first (``NULLS FIRST`` written); empty: every column's NULLs
    #: rank last, DuckDB's default for ASC and DESC alike (the ties' columns: always last)
    nulls_first: tuple[bool, ...] = ()

    def nulls_first_at(self, k: int) -> bool:
        """Whether the NULLs of the ``k``-th ORDER BY column rank first."""
        return k < len(self.nulls_first) and self.nulls_first[k]


def _statements(text: str) -> list[tuple[int, int]]:
    """(start, end) of each ``;``-separated statement (strings blanked first)."""
    bare = _STRING.sub(lambda s: " " * len(s.group(0)), text)
    spans, last = [], 0
    for i, ch in enumerate(bare):
        if ch == ";":
            spans.append((last, i))
            last = i + 1
    spans.append((last, len(bare)))
    return spans


def _name(node: exp.Expression, inner: exp.Select, what: str) -> str:
    """The inner query's output column a PARTITION BY / ORDER BY expression is: the alias of an inner item
    written the same, else a column's own name."""
    for item in inner.expressions:
        if isinstance(item, exp.Alias) and item.this == node:
            return item.alias
    if isinstance(node, exp.Column):
        return node.name
    raise CompileError(f"ROW_NUMBER's {what} {node.sql()} is neither a column nor an item of its query; "
                       "select it in the derived table and rank by its name")


def _limit(where: exp.Expression | None, rank: str) -> int:
    """N of ``rank <= N``, ``rank < N + 1`` or ``rank = 1``."""
    shapes = {exp.LTE: 0, exp.LT: -1, exp.EQ: 0}
    if where is not None:
        cond = where.this
        for kind, shift in shapes.items():
            if (isinstance(cond, kind) and isinstance(cond.this, exp.Column) and cond.this.name.lower() == rank.lower()
                    and isinstance(cond.expression, exp.Literal) and cond.expression.is_int):
                n = int(cond.expression.name) + shift
                if kind is exp.EQ and n != 1:
                    break
                if n < 1:
                    raise CompileError(f"{cond.sql()} keeps no row")
                return n
    raise CompileError(f"a ROW_NUMBER() column ({rank}) is only read filtered as WHERE {rank} <= N or "
                       f"WHERE {rank} = 1 in the query around its derived table (top-N, deduplication)")


def _topn(statement: str) -> tuple[str, TopN]:
    """The inner query's SQL and the :class:`TopN` of one statement that ranks by ``ROW_NUMBER``."""
    try:
        outer = sqlglot.parse_one(statement)
    except sqlglot.errors.ParseError as exc:
        raise CompileError(f"cannot read the query around ROW_NUMBER: {exc}") from None
    windows = list(outer.find_all(exp.Window))
    names = sorted({type(w.this).__name__.upper() for w in windows if not isinstance(w.this, exp.RowNumber)})
    if names:
        raise CompileError(f"window function {', '.join(names)} OVER (...) is not supported; an m3 view ranks "
                           "by ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...) filtered by rank <= N only")
    source = outer.args.get("from") or outer.args.get("from_")
    inner = source.this.this if source is not None and isinstance(source.this, exp.Subquery) else None
    if (not isinstance(outer, exp.Select) or not isinstance(inner, exp.Select) or len(windows) != 1
            or windows[0].find_ancestor(exp.Select) is not inner or outer.args.get("joins")
            or any(outer.args.get(k) for k in ("group", "having", "order", "limit", "distinct"))):
        raise CompileError("ROW_NUMBER() is supported as SELECT ... FROM (SELECT ..., ROW_NUMBER() OVER "
                           "(PARTITION BY ... ORDER BY ...) AS rn FROM ...) WHERE rn <= N (one derived table, "
                           "no join, grouping or order around it)")
    window = windows[0]
    item = window.parent
    if not isinstance(item, exp.Alias) or item.parent is not inner:
        raise CompileError("ROW_NUMBER() OVER (...) must be a named item of its query (... AS rn)")
    rank = item.alias
    if window.args.get("spec") is not None:
        raise CompileError("ROW_NUMBER() OVER (...) takes no frame (ROWS/RANGE)")
    order = window.args.get("order")
    if order is None:
        raise CompileError("ROW_NUMBER() OVER (...) needs an ORDER BY: the rank is by it")
    partition = tuple(_name(p, inner, "PARTITION BY") for p in window.args.get("partition_by") or ())
    ordering = tuple((_name(o.this, inner, "ORDER BY"), bool(o.args.get("desc"))) for o in order.expressions)
    nulls = _nulls_first(statement)
    limit = _limit(outer.args.get("where"), rank)
    item.pop()
    project: list[tuple[str, str | None]] = []
    star = False
    for e in outer.expressions:
        if isinstance(e, exp.Star):
            star = True
        elif isinstance(e, exp.Column) or (isinstance(e, exp.Alias) and isinstance(e.this, exp.Column)):
            column = e.this if isinstance(e, exp.Alias) else e
            project.append((e.alias_or_name, None if column.name.lower() == rank.lower() else column.name))
        else:
            raise CompileError(f"the query around ROW_NUMBER selects columns of its derived table; {e.sql()} "
                               "is more (compute it inside)")
    if star and project:
        raise CompileError("the query around ROW_NUMBER selects * or named columns, not both")
    shown = rank if star else next((out for out, col in project if col is None), None)
    own = any(agg.find_ancestor(exp.Select) is inner for agg in inner.find_all(exp.AggFunc))
    grouped = bool(inner.args.get("group"))
    return inner.sql(), TopN(partition, ordering, limit, None if star else tuple(project), shown,
                             counted=not own, distinct=grouped and not own,
                             nulls_first=nulls if any(nulls) else ())


def _nulls_first(statement: str) -> tuple[bool, ...]:
    """Per ORDER BY column of the statement's one ``ROW_NUMBER``, whether ``NULLS FIRST`` is written.

    Why a second parse: sqlglot's default dialect fills in an ORDER BY's null order as NULLs sort small
    (``a`` reads as ``a NULLS FIRST``), so what was written is lost; DuckDB's dialect, whose default is
    NULLS LAST for ASC and DESC (the box's), reads it as written.

    >>> _nulls_first("SELECT * FROM (SELECT *, ROW_NUMBER() OVER (ORDER BY a, b DESC NULLS FIRST, c NULLS LAST) "
    ...              "AS r FROM t) WHERE r <= 1")
    (False, True, False)
    """
    try:
        window = next(sqlglot.parse_one(statement, read="duckdb").find_all(exp.Window))
    except (sqlglot.errors.ParseError, StopIteration):  # (read by the default dialect already: not expected)
        raise CompileError("cannot read ROW_NUMBER's ORDER BY (its NULLS FIRST / NULLS LAST)") from None
    return tuple(bool(o.args.get("nulls_first")) for o in window.args["order"].expressions)


def split_topn(text: str) -> tuple[str, TopN | None]:
    """``text`` with its top-N statement (if any) replaced by the inner query, and the :class:`TopN`; a text
    with more than one query beside a top-N, or a window function in another shape, is refused."""
    bare = _STRING.sub(lambda s: " " * len(s.group(0)), text)
    if not _WINDOWED.search(bare):
        return text, None
    spans = [(s, e) for s, e in _statements(text) if text[s:e].strip()]
    ranked = [(s, e) for s, e in spans if _WINDOWED.search(bare[s:e])]
    queries = [(s, e) for s, e in spans if not re.match(r"\s*CREATE\b", bare[s:e], re.IGNORECASE)]
    if len(ranked) > 1 or len(queries) > 1:
        raise CompileError("a box with a ROW_NUMBER() top-N has that one query (put other views in other boxes)")
    start, end = ranked[0]
    lead = len(text[start:end]) - len(text[start:end].lstrip())
    inner, topn = _topn(text[start:end])
    return text[:start + lead] + inner + text[end:], topn


def ranked_sql(inner: str, topn: TopN, columns: tuple[str, ...]) -> str:
    """The top-N as plain SQL with Boreas's order made total: ``ROW_NUMBER`` over the inner query (the view,
    whose ``columns`` are given) ordered by the ORDER BY columns, then every view column ascending, as the box
    ranks ties, each column's NULL order written out (NULLS LAST unless the top-N says NULLS FIRST); what a
    SQL engine (DuckDB, in the tests and the benchmark) runs to check a box.

    >>> ranked_sql("SELECT * FROM bid", TopN(("a",), (("p", True),), 2, None, "rn"), ("a", "p"))
    'SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY "a" ORDER BY "p" DESC NULLS LAST, "a" NULLS LAST, "p" NULLS LAST) AS "rn" FROM (SELECT * FROM bid) AS _v) AS _r WHERE "rn" <= 2'
    """
    def q(name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    partition = f"PARTITION BY {', '.join(q(c) for c in topn.partition)} " if topn.partition else ""
    order = ", ".join([q(c) + (" DESC" if desc else "") + (" NULLS FIRST" if topn.nulls_first_at(k) else " NULLS LAST")
                       for k, (c, desc) in enumerate(topn.order)] + [q(c) + " NULLS LAST" for c in columns])
    rank = topn.rank or "_rank"
    shown = "*" if topn.project is None else ", ".join(
        f"{q(rank if col is None else col)} AS {q(name)}" for name, col in topn.project)
    return (f"SELECT {shown} FROM (SELECT *, ROW_NUMBER() OVER ({partition}ORDER BY {order}) AS {q(rank)} "
            f"FROM ({inner}) AS _v) AS _r WHERE {q(rank)} <= {topn.limit}")
