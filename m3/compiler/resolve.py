"""Names of one SELECT resolved against its FROM clause: columns, functions of a column, constants, selections.

The front end (:mod:`.frontend`) handles statements and clauses; this module
translates the names and conditions inside them into the forms the
normaliser reads (aggregates and the arithmetic they take are
:mod:`.aggregates`, which resolves its names here):

* a column is ``(alias, column)``; a function of one (``YEAR(d)``,
  ``SUBSTRING(s, 1, 2)``) is a :class:`Computed`;
* a selection is a predicate of :mod:`.predicates` (comparisons of a column
  with a constant or with another column of a comparable type, or of
  arithmetic over columns: :mod:`.arithcmp`; AND, OR, TRUE, FALSE; NOT, IN,
  BETWEEN and LIKE are rewritten into those).

Constants are folded by :mod:`.constants` and must fit the column they are
compared with (a number for INT/FLOAT, a string for STRING, a date for
DATE): Python cannot order an ``int`` against a ``str``, so a mismatch would
otherwise fail in the runtime, at the first event.

Every node type read here is listed in :data:`.nodes.READS`; anything else
is a :class:`CompileError` naming the construct.

>>> import sqlglot
>>> from .examples import resolver_over, stream
>>> res = resolver_over(stream("R", a="INT", s="STRING"))
>>> res.predicate(sqlglot.parse_one("NOT (a BETWEEN 1 AND 2) AND s LIKE 'B%' AND a IN LIST (3)"))
('and', ('and', ('or', ('<', ('R', 'a'), 1), ('>', ('R', 'a'), 2)), ('and', ('>=', ('R', 's'), 'B'), ('<', ('R', 's'), 'C'))), ('=', ('R', 'a'), 3))
>>> res.operand(sqlglot.parse_one("SUBSTRING(s, 1, 2)")), res.column(sqlglot.parse_one("R.a"))
(Computed(fn='SUBSTRING', ref=('R', 's'), args=(1, 2)), ('R', 'a'))
>>> res.predicate(sqlglot.parse_one("a < 'x'"))
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: cannot compare INT column a with the string 'x'
"""

from __future__ import annotations

import datetime
import operator
from dataclasses import dataclass
from typing import Protocol

from sqlglot import exp

from ..ast import RelationDecl
from ..errors import CompileError
from ..functions import NULL_TESTS, check_call, result_type
from ..library import SQL_NAMES, typed_name
from .arithcmp import comparison as arith_comparison
from .arithcmp import is_arithmetic
from .casecmp import expand, expandable
from .casewhen import case_call
from .constants import NotConstant, fold, is_constant
from .libargs import LibCall, is_library_call, library_call
from .nodes import sql_of
from .predicates import FALSE, TRUE, in_list, like, negate
from .rangecmp import range_join

ColRef = tuple[str, str]  # (alias, column)


@dataclass(frozen=True)
class Computed:
    """A scalar function of one column (``EXTRACT(YEAR FROM d)``, ``SUBSTRING(p, 1, 2)``): a GROUP BY key or a
    compared value computed from the row.  The normaliser lifts it into a variable (:mod:`..functions`)."""

    fn: str  # a name of :data:`..functions.FUNCTIONS`
    ref: ColRef
    args: tuple[int | str, ...] = ()

    def __str__(self) -> str:
        return f"{self.fn}({', '.join([self.ref[1], *(repr(a) if isinstance(a, str) else str(a) for a in self.args)])})"


Operand = ColRef | Computed | LibCall
_PARTS = {"YEAR": "YEAR", "YEARS": "YEAR", "QUARTER": "QUARTER", "MONTH": "MONTH", "MONTHS": "MONTH",
          "DAY": "DAY", "DAYS": "DAY", "DOW": "DOW", "DAYOFWEEK": "DOW", "WEEKDAY": "DOW", "ISODOW": "ISODOW",
          "DOY": "DOY", "DAYOFYEAR": "DOY", "WEEK": "WEEK", "WEEKS": "WEEK", "WEEKOFYEAR": "WEEK"}
_PART_FUNCTIONS = {exp.Year: "YEAR", exp.Quarter: "QUARTER", exp.Month: "MONTH", exp.Day: "DAY",
                   exp.DayOfWeek: "DOW", exp.DayOfWeekIso: "ISODOW", exp.DayOfYear: "DOY", exp.WeekOfYear: "WEEK",
                   exp.Hour: "HOUR", exp.Lower: "LOWER", exp.Upper: "UPPER", exp.Length: "CHAR_LENGTH"}
_BY_NAME = ("SPLIT_INDEX", "DATE_FORMAT", "COUNT_CHAR")  # Flink's (and its suite's UDF), Anonymous to sqlglot

_CMP = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
_PY_CMP = {"=": operator.eq, "<>": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
           ">=": operator.ge}


class Positions(Protocol):
    """Where the front end's errors point (:class:`.positions.Ctx`)."""

    def error(self, message: str, node: exp.Expression | None = None) -> CompileError: ...


def unparen(e: exp.Expression) -> exp.Expression:
    while type(e) is exp.Paren:
        e = e.this
    return e


class Resolver:
    """Resolves column names against the FROM clause and translates conditions (see module doc)."""

    def __init__(self, tables: list[tuple[str, str]], relations: dict[str, RelationDecl], ctx: Positions):
        self.tables, self.relations, self.ctx = tables, relations, ctx

    # -- names and constants ------------------------------------------------
    def _hits(self, col: exp.Column) -> list[ColRef]:
        name, qual = col.name.lower(), col.table.lower()
        return [(a, c.name) for a, r in self.tables if (not qual or a.lower() == qual)
                for c in self.relations[r].columns if c.name.lower() == name]

    def has_column(self, col: exp.Column) -> bool:
        """Whether a column name resolves to some FROM column (GROUP BY prefers a column to an alias)."""
        return bool(self._hits(col))

    def column(self, col: exp.Expression) -> ColRef:
        if type(col) is not exp.Column or isinstance(col.this, exp.Star):
            raise self.ctx.error(f"expected a column, found {sql_of(col)}", col)
        if col.args.get("db") or col.args.get("catalog"):
            raise self.ctx.error(f"unsupported qualified column {sql_of(col)} (write alias.column)", col)
        hits = self._hits(col)
        if not hits:
            raise self.ctx.error(f"unknown column {sql_of(col)}", col)
        if len(hits) > 1:
            raise self.ctx.error(f"ambiguous column {sql_of(col)} (qualify it with a table alias)", col)
        return hits[0]

    def star(self, node: exp.Expression) -> list[ColRef]:
        """The columns ``*`` (every FROM relation's, in FROM order) or ``alias.*`` stands for."""
        if type(node) is exp.Column:
            if node.args.get("db") or node.args.get("catalog"):
                raise self.ctx.error(f"unsupported qualified column {sql_of(node)} (write alias.*)", node)
            qual = node.table.lower()
            tables = [(a, r) for a, r in self.tables if a.lower() == qual]
            if not tables:
                raise self.ctx.error(f"unknown relation {node.table} in {sql_of(node)}", node)
        else:
            tables = self.tables
        return [(a, c.name) for a, r in tables for c in self.relations[r].columns]

    def col_type(self, ref: Operand) -> str:
        if isinstance(ref, LibCall):
            return result_type(ref.fn)
        if isinstance(ref, Computed):
            return result_type(ref.fn)
        rel = dict(self.tables)[ref[0]]
        return next(c.type for c in self.relations[rel].columns if c.name == ref[1])

    def _is_int(self, col: exp.Column) -> bool:
        """Whether ``col`` names one INT column (:mod:`.casecmp` clears a division only over integers)."""
        hits = self._hits(col)
        return len(hits) == 1 and self.col_type(hits[0]) == "INT"

    def computed(self, e: exp.Expression) -> Computed | LibCall | None:
        """A scalar function of a column (``EXTRACT(YEAR FROM d)``, ``YEAR(d)``, ``SUBSTRING(p, 1, 2)``), or
        None when ``e`` is not one of those functions; refused when it is one of them of something else."""
        e = unparen(e)
        kind = type(e)
        if kind is exp.Extract:
            unit = e.this.name.upper() if isinstance(e.this, exp.Expression) else str(e.this).upper()
            fn, arg, args = _PARTS.get(unit), e.expression, ()
            if fn is None and not is_constant(e):
                raise self.ctx.error(f"unsupported EXTRACT({unit} FROM a column) ({sql_of(e)}): of a column, only "
                                     "YEAR, QUARTER, MONTH, DAY, DOW, ISODOW, DOY and WEEK", e)
        elif kind in _PART_FUNCTIONS:
            fn, arg, args = _PART_FUNCTIONS[kind], e.this, ()
        elif kind is exp.Substring:
            fn, arg = "SUBSTRING", e.this
            if e.args.get("zero_start"):
                raise self.ctx.error(f"unsupported zero-based SUBSTRING ({sql_of(e)})", e)
            bounds = [e.args.get("start")] + ([e.args["length"]] if e.args.get("length") is not None else [])
            if bounds[0] is None or not all(is_constant(b) for b in bounds):
                raise self.ctx.error(f"unsupported SUBSTRING ({sql_of(e)}): its start and length are constants", e)
            args = tuple(self.constant(b) for b in bounds)
        elif kind is exp.RegexpExtract:  # Flink's third argument is the group (sqlglot's default reads a position)
            fn, arg, bounds = "REGEXP_EXTRACT", e.this, [e.expression, e.args.get("position") or e.args.get("group")]
            args = self._constants(e, [b for b in bounds if b is not None])
        elif kind is exp.Anonymous and e.name.upper() in _BY_NAME and e.expressions:
            fn, arg = e.name.upper(), e.expressions[0]
            args = self._constants(e, e.expressions[1:])
        elif is_library_call(e):  # VEC_LENGTH(p.x - q.x, ...): of several numbers (:mod:`.libargs`)
            return None if is_constant(e) else library_call(self, e)
        elif kind is exp.Anonymous and e.name.upper() in SQL_NAMES and e.expressions:  # CAST_INT(f), COS(a)
            fn, arg = SQL_NAMES[e.name.upper()], e.expressions[0]  # (:mod:`..library`, spelled by :mod:`.libcalls`)
            args = self._constants(e, e.expressions[1:])
        elif kind is exp.Case:  # of one column: a function of it (:mod:`.casewhen`)
            found = case_call(self, e)
            return None if found is None else Computed(*found)
        elif kind is exp.Mod:  # MOD(a, m), a % m
            fn, arg = "MOD", e.this
            if not is_constant(e.expression):
                raise self.ctx.error(f"unsupported MOD ({sql_of(e)}): its divisor is a nonzero integer constant", e)
            args = (self.constant(e.expression),)
        else:
            return None
        if fn is None or is_constant(e):
            return None
        if type(unparen(arg)) is not exp.Column:
            raise self.ctx.error(f"unsupported {sql_of(e)}: a function of a column, not of {sql_of(arg)}", e)
        ref = self.column(unparen(arg))
        fn = typed_name(fn, self.col_type(ref))  # CAST_INT of a STRING is ATOI
        problem = check_call(fn, [self.col_type(ref), *args])
        if problem is not None:
            raise self.ctx.error(f"{problem} ({sql_of(e)})", e)
        return Computed(fn, ref, args)

    def _constants(self, e: exp.Expression, args: list[exp.Expression]) -> tuple:
        """A function's arguments after its column: constants, folded."""
        if not all(is_constant(a) for a in args):
            raise self.ctx.error(f"unsupported {sql_of(e)}: a function of a column and constants", e)
        return tuple(self.constant(a) for a in args)

    def operand(self, e: exp.Expression) -> Operand:
        """A column, or a scalar function of one (:meth:`computed`)."""
        return self.computed(e) or self.column(e)

    def is_operand(self, e: exp.Expression) -> bool:
        """Whether ``e`` is a column or a scalar function of one (the side of a comparison with a constant)."""
        return type(e) is exp.Column or self.computed(e) is not None

    def constant(self, e: exp.Expression):
        """A constant's value, folded (:func:`.constants.fold`)."""
        try:
            return fold(e)
        except NotConstant as nc:
            raise self.ctx.error(nc.message, nc.node) from None

    def against(self, col: exp.Expression, e: exp.Expression):
        """``(column, value)`` for a column (or a function of one) compared with a constant that fits its type."""
        ref = self.operand(col)
        t = self.col_type(ref)
        if not is_constant(e):
            raise self.ctx.error(f"unsupported comparison of column {sql_of(col)} with {sql_of(e)} "
                                 "(compare a column with a constant or another column)", e)
        try:
            v = fold(e, t)
        except NotConstant as nc:
            raise self.ctx.error(nc.message, nc.node) from None
        if not _fits(t, v):
            what = f"{t} value {ref}" if isinstance(ref, Computed) else f"{t} column {ref[1]}"
            raise self.ctx.error(f"cannot compare {what} with {value_phrase(v)}", e)
        return ref, v

    # -- selections -----------------------------------------------------------
    def _never_null(self, e: exp.Is) -> tuple:
        """``c IS NULL`` of a column declared without NULL: FALSE (``IS NOT NULL``: its negation, TRUE).

        A nullable column's is read from its indicator (:mod:`.threevalued`, first); one without an indicator
        never holds NULL, as DuckDB's ``NOT NULL`` column does not.
        """
        col = unparen(e.this)
        if type(e.expression) is not exp.Null or type(col) is not exp.Column or isinstance(col.this, exp.Star):
            raise self.ctx.error(f"unsupported IS ({sql_of(e)}): of a column, IS [NOT] NULL", e)
        alias, name = self.column(col)
        if self.has_column(exp.column(f"{name}__null", alias)):
            raise self.ctx.error(f"unsupported IS [NOT] NULL of nullable column {sql_of(col)} here", e)
        return FALSE

    def predicate(self, e: exp.Expression) -> tuple:
        e = unparen(e)
        kind = type(e)
        if kind is exp.And:
            return ("and", self.predicate(e.this), self.predicate(e.expression))
        if kind is exp.Or:
            return ("or", self.predicate(e.this), self.predicate(e.expression))
        if kind is exp.Not:
            return negate(self.predicate(e.this))
        if kind is exp.Boolean:
            return TRUE if e.this else FALSE
        if kind is exp.Between:
            if not (self.is_operand(unparen(e.this)) and is_constant(e.args["low"]) and is_constant(e.args["high"])):
                return range_join(self, e)  # e.salary BETWEEN g.lower_bound AND g.upper_bound (:mod:`.rangecmp`)
            col = self._subject(e, "BETWEEN")
            (ref, low), (_, high) = self.against(col, e.args["low"]), self.against(col, e.args["high"])
            return ("and", (">=", ref, low), ("<=", ref, high))
        if kind is exp.In:
            return self._in(e)
        if kind is exp.Like:
            col = self._subject(e, "LIKE")
            if self.col_type(self.operand(col)) != "STRING":
                raise self.ctx.error(f"LIKE on {self.col_type(self.operand(col))} column {sql_of(col)} "
                                     "(LIKE matches strings)", e)
            ref, pattern = self.against(col, e.expression)
            p = like(ref, pattern)
            return negate(p) if e.args.get("negate") else p
        if kind is exp.Is and type(e.expression) is exp.Null and self.is_operand(unparen(e.this)):
            f = self.operand(unparen(e.this))  # F(...) IS NULL of a function with NULLs: G(...) = 0
            if isinstance(f, Computed) and f.fn in NULL_TESTS:
                return ("=", Computed(NULL_TESTS[f.fn], f.ref, f.args), 0)
        if kind is exp.Is:
            return self._never_null(e)
        if expandable(e):  # a CASE over several columns compared: the OR of its branches (:mod:`.casecmp`)
            return self.predicate(expand(e, self._is_int))
        op = _CMP.get(kind)
        if op is None:
            raise self.ctx.error(f"unsupported condition {kind.__name__.upper()} ({sql_of(e)})", e)
        left, right = unparen(e.this), unparen(e.expression)
        if is_arithmetic(left) or is_arithmetic(right):  # a.price - b.price > 1000 (:mod:`.arithcmp`)
            return arith_comparison(self, op, left, right, e)
        if self.is_operand(left) and self.is_operand(right):  # a theta condition (an equi-join conjunct is
            a, b = self.operand(left), self.operand(right)     # taken by the front end before this), or a
            ta, tb = self.col_type(a), self.col_type(b)        # function of a column against a column
            if ({ta, tb} - {"INT", "FLOAT"}) and ta != tb:
                what = ["column" if type(x) is exp.Column else "value" for x in (left, right)]
                raise self.ctx.error(f"cannot compare {ta} {what[0]} {sql_of(left)} with {tb} {what[1]} "
                                     f"{sql_of(right)}", e)
            return (op, a, b)
        if self.is_operand(left) and is_constant(right):
            ref, v = self.against(left, right)
            return (op, ref, v)
        if type(left) is exp.Column:
            ref, v = self.against(left, right)
            return (op, ref, v)
        if self.is_operand(right):
            ref, v = self.against(right, left)
            return (op, v, ref)
        if is_constant(left) and is_constant(right):
            a, b = self.constant(left), self.constant(right)
            if _kind(a) != _kind(b):
                raise self.ctx.error(f"cannot compare {value_phrase(a)} with {value_phrase(b)} ({sql_of(e)})", e)
            return TRUE if _PY_CMP[op](a, b) else FALSE
        raise self.ctx.error(f"unsupported condition {sql_of(e)} (compare a column with a constant or another column)", e)

    def _subject(self, e: exp.Expression, what: str) -> exp.Expression:
        col = unparen(e.this)
        if not self.is_operand(col):
            raise self.ctx.error(f"unsupported {what} on {sql_of(col)} (only on a column)", e)
        return col

    def _in(self, e: exp.In) -> tuple:
        if e.args.get("query") is not None:
            raise self.ctx.error("unsupported subquery (IN (SELECT ...))", e)
        if e.args.get("unnest") is not None:
            raise self.ctx.error(f"unsupported IN UNNEST ({sql_of(e)})", e)
        items = list(e.expressions)
        field = e.args.get("field")
        if field is not None:
            if type(field) is not exp.List:
                raise self.ctx.error(f"unsupported IN {sql_of(field)} (only a list of constants)", e)
            items += field.expressions
        if not items:
            raise self.ctx.error(f"IN with an empty list ({sql_of(e)})", e)
        col = self._subject(e, "IN")
        return in_list(self.operand(col), [self.against(col, item)[1] for item in items])


def _fits(ctype: str, v) -> bool:
    if ctype in ("INT", "FLOAT"):
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if ctype == "STRING":
        return isinstance(v, str)
    return isinstance(v, datetime.date)


def _kind(v) -> str:
    return "STRING" if isinstance(v, str) else "DATE" if isinstance(v, datetime.date) else "NUMBER"


def value_phrase(v) -> str:
    """How an error message names a constant (``the string 'x'``, ``a DATE``, ``a number``)."""
    if isinstance(v, str):
        return f"the string {v!r}"
    if isinstance(v, datetime.date):
        return "a DATE"
    return "a number"
