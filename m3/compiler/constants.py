"""Constant folding for the front end: a sqlglot expression without columns → its value, computed as DuckDB would.

Why here: users write constants as expressions (``0.06 - 0.01``, ``DATE
'1998-12-01' - INTERVAL '90' DAY``, ``EXTRACT(YEAR FROM DATE '1995-01-01')``)
where the calculus needs one value (a side of a comparison, an item of an IN
list, a factor of an aggregate).  Folding them once, before normalising,
keeps the calculus and the runtime free of constant expressions.

DuckDB's rules, not Python's, because a view must agree with the SQL it
came from:

* a literal with a decimal point is exact (``0.06 + 0.01`` is 0.07; binary
  floats give 0.06999999999999999, which flips a BETWEEN at its bound); it
  becomes a float only at the end;
* ``/`` is real division (DuckDB's ``/`` on integers gives a DOUBLE);
* a DATE plus or minus an INTERVAL of days, weeks, months, quarters or years
  is a date: DuckDB gives a TIMESTAMP at midnight, which compares with a DATE
  column exactly as the date does.  Months are added before days, and the
  day is clamped to the month's end (2020-01-31 + 1 month = 2020-02-29);
* DATE ± integer is a date, DATE - DATE the number of days between them.

>>> import sqlglot
>>> def value(sql, hint=None): return fold(sqlglot.parse_one("SELECT " + sql).expressions[0], hint)
>>> value("0.06 + 0.01"), value("(2 + 3) * -2"), value("1 / 4")
(0.07, -10, 0.25)
>>> value("DATE '1998-12-01' - INTERVAL '90' DAY"), value("DATE '2020-01-31' + INTERVAL 1 MONTH")
(datetime.date(1998, 9, 2), datetime.date(2020, 2, 29))
>>> value("EXTRACT(YEAR FROM DATE '1995-03-15')"), value("'1995-03-15'", "DATE"), value("'1995-03-15'")
(1995, datetime.date(1995, 3, 15), '1995-03-15')
>>> value("1 / 0")
Traceback (most recent call last):
...
boreas.m3.compiler.constants.NotConstant: division by zero in 1 / 0
"""

from __future__ import annotations

import calendar
import datetime
from dataclasses import dataclass
from decimal import Decimal

from sqlglot import exp

from ..library import SQL_NAMES, fold_call
from .nodes import sql_of

Value = int | float | str | datetime.date


class NotConstant(Exception):
    """The expression has no constant value; ``node`` is where (the front end turns this into a CompileError)."""

    def __init__(self, message: str, node: exp.Expression):
        super().__init__(message)
        self.message, self.node = message, node


@dataclass(frozen=True)
class Interval:
    """An INTERVAL as DuckDB keeps it: months and days apart (a month has no fixed number of days)."""

    months: int = 0
    days: int = 0

    def __neg__(self) -> Interval:
        return Interval(-self.months, -self.days)


_INTERVAL_UNITS = {"DAY": (0, 1), "WEEK": (0, 7), "MONTH": (1, 0), "QUARTER": (3, 0), "YEAR": (12, 0)}
_DATE_TYPES = {exp.DataType.Type.DATE}
_FLOAT_TYPES = {exp.DataType.Type.DOUBLE}  # not FLOAT (DuckDB: 32 bits) nor DECIMAL (rounds to its scale)
_INT_TYPES = {exp.DataType.Type.INT, exp.DataType.Type.BIGINT, exp.DataType.Type.SMALLINT, exp.DataType.Type.TINYINT}


def fold(e: exp.Expression, hint: str | None = None) -> Value:
    """The value of a constant expression: int, float, str or ``datetime.date``.

    ``hint`` is the type of the column the value is compared with: ``"DATE"``
    reads a string literal as a date, as DuckDB casts it.  Raises
    :class:`NotConstant` for anything else (a column, NULL, an unknown
    function, a bare INTERVAL).
    """
    v = _fold(e, hint)
    if isinstance(v, Interval):
        raise NotConstant(f"an INTERVAL is not a value ({sql_of(e)}; add it to a DATE)", e)
    return float(v) if isinstance(v, Decimal) else v


def is_constant(e: exp.Expression) -> bool:
    """Whether an expression reads no column and no aggregate (so :func:`fold` may give its value).

    >>> import sqlglot
    >>> is_constant(sqlglot.parse_one("1 + 2")), is_constant(sqlglot.parse_one("a + 2"))
    (True, False)
    """
    return not any(isinstance(n, (exp.Column, exp.AggFunc, exp.Star, exp.Select)) for n in e.walk())


def add_months(d: datetime.date, months: int) -> datetime.date:
    """DuckDB's ``date + INTERVAL n MONTH``: the same day, clamped to the last day of the month.

    >>> add_months(datetime.date(2020, 1, 31), 1), add_months(datetime.date(1995, 3, 15), -15)
    (datetime.date(2020, 2, 29), datetime.date(1993, 12, 15))
    """
    m = d.month - 1 + months
    year, month = d.year + m // 12, m % 12 + 1
    return datetime.date(year, month, min(d.day, calendar.monthrange(year, month)[1]))


def parse_date(text: str, node: exp.Expression) -> datetime.date:
    """A DATE literal's value (ISO ``YYYY-MM-DD``)."""
    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        raise NotConstant(f"invalid DATE literal {text!r}", node) from None


def _fold(e: exp.Expression, hint: str | None):
    if isinstance(e, exp.Paren):
        return _fold(e.this, hint)
    if type(e) is exp.Literal:
        return _literal(e, hint)
    if type(e) is exp.Neg:
        v = _fold(e.this, None)
        if isinstance(v, (int, float, Decimal, Interval)):
            return -v
        raise NotConstant(f"cannot negate {sql_of(e.this)}", e)
    if type(e) in (exp.Cast, exp.TsOrDsToDate, exp.Date):
        return _cast(e)
    if type(e) in (exp.Add, exp.Sub, exp.Mul, exp.Div):
        return _binary(e, _fold(e.this, hint), _fold(e.expression, hint))
    if type(e) is exp.Interval:
        return _interval(e)
    if type(e) is exp.Extract:
        return _extract(e)
    if type(e) is exp.Anonymous and str(e.this).upper() in SQL_NAMES:  # CAST_INT(23.5): DBToaster's (..library)
        return _library(e)
    if isinstance(e, exp.Null):
        raise NotConstant("unsupported NULL (the M3 runtime has no NULLs)", e)
    if isinstance(e, exp.Column):
        raise NotConstant(f"column {sql_of(e)} where a constant is expected", e)
    raise NotConstant(f"unsupported expression {type(e).__name__.upper()} ({sql_of(e)}) where a constant is expected", e)


def _literal(e: exp.Literal, hint: str | None):
    text = str(e.this)
    if e.is_string:
        return parse_date(text, e) if hint == "DATE" else text
    try:
        if any(ch in text for ch in "eE"):
            return float(text)
        return Decimal(text) if "." in text else int(text)
    except (ValueError, ArithmeticError):  # decimal.InvalidOperation is an ArithmeticError
        raise NotConstant(f"invalid number {text!r}", e) from None


def _cast(e: exp.Expression):
    to = e.args.get("to") if type(e) is exp.Cast else None
    target = exp.DataType.Type.DATE if to is None else to.this
    v = _fold(e.this, None)
    if target in _DATE_TYPES:
        if isinstance(v, datetime.date):
            return v
        if isinstance(v, str):
            return parse_date(v, e)
    elif target in _FLOAT_TYPES and isinstance(v, (int, float, Decimal)):
        return float(v)
    elif target in _INT_TYPES and isinstance(v, int):
        return v
    raise NotConstant(f"unsupported CAST of {sql_of(e.this)} to {target.value if hasattr(target, 'value') else target}", e)


def _binary(e: exp.Expression, a, b):
    numeric = (int, float, Decimal)
    op = type(e)
    if isinstance(a, numeric) and isinstance(b, numeric):
        if op is exp.Div:
            if b == 0:
                raise NotConstant(f"division by zero in {sql_of(e)}", e)
            return float(a) / float(b)
        if isinstance(a, float) or isinstance(b, float):
            a, b = float(a), float(b)
        return a + b if op is exp.Add else a - b if op is exp.Sub else a * b
    try:
        if op is exp.Add:
            if isinstance(a, datetime.date) or isinstance(b, datetime.date):
                d, x = (a, b) if isinstance(a, datetime.date) else (b, a)
                return _shift(d, x, e)
            if isinstance(a, Interval) and isinstance(b, Interval):
                return Interval(a.months + b.months, a.days + b.days)
        if op is exp.Sub:
            if isinstance(a, datetime.date) and isinstance(b, datetime.date):
                return (a - b).days
            if isinstance(a, datetime.date) and isinstance(b, (int, Interval)):
                return _shift(a, -b, e)
            if isinstance(a, Interval) and isinstance(b, Interval):
                return Interval(a.months - b.months, a.days - b.days)
        if op is exp.Mul and isinstance(a, (int, Interval)) and isinstance(b, (int, Interval)):
            i, n = (a, b) if isinstance(a, Interval) else (b, a)
            if isinstance(i, Interval) and isinstance(n, int):
                return Interval(i.months * n, i.days * n)
    except (OverflowError, ValueError):
        raise NotConstant(f"date out of range in {sql_of(e)}", e) from None
    raise NotConstant(f"unsupported constant arithmetic {sql_of(e)} (operands {_kind(a)} and {_kind(b)})", e)


def _shift(d: datetime.date, x, e: exp.Expression) -> datetime.date:
    if isinstance(x, bool) or not isinstance(x, (int, Interval)):
        raise NotConstant(f"unsupported constant arithmetic {sql_of(e)} (a DATE plus {_kind(x)})", e)
    if isinstance(x, int):
        return d + datetime.timedelta(days=x)
    return add_months(d, x.months) + datetime.timedelta(days=x.days)


def _kind(v) -> str:
    if isinstance(v, Interval):
        return "INTERVAL"
    if isinstance(v, datetime.date):
        return "DATE"
    return "a string" if isinstance(v, str) else "a number"


def _interval(e: exp.Interval) -> Interval:
    unit = e.args.get("unit")
    name = (unit.name if isinstance(unit, exp.Expression) else str(unit or "")).upper()
    name = name.removesuffix("S")
    if name not in _INTERVAL_UNITS:
        raise NotConstant(f"unsupported INTERVAL unit {name or '(none)'} (only DAY, WEEK, MONTH, QUARTER, YEAR)", e)
    amount = e.this
    text = str(amount.this) if isinstance(amount, exp.Literal) else None
    if text is None or not text.lstrip("-").isdigit():
        raise NotConstant(f"unsupported INTERVAL amount {sql_of(amount) if amount is not None else '(none)'} "
                          f"(an integer number of {name}S)", e)
    months, days = _INTERVAL_UNITS[name]
    return Interval(months * int(text), days * int(text))


_EXTRACT = {
    "YEAR": lambda d: d.year, "QUARTER": lambda d: (d.month - 1) // 3 + 1, "MONTH": lambda d: d.month,
    "DAY": lambda d: d.day, "DOY": lambda d: d.timetuple().tm_yday, "DAYOFYEAR": lambda d: d.timetuple().tm_yday,
    "DOW": lambda d: d.isoweekday() % 7, "DAYOFWEEK": lambda d: d.isoweekday() % 7, "ISODOW": lambda d: d.isoweekday(),
    "WEEK": lambda d: d.isocalendar()[1],
}


def _library(e: exp.Anonymous):
    values = tuple(float(v) if isinstance(v, Decimal) else v for v in (_fold(a, None) for a in e.expressions))
    try:
        return fold_call(str(e.this).upper(), values)
    except (ValueError, OverflowError) as err:
        raise NotConstant(f"cannot compute {sql_of(e)}: {err}", e) from None


def _extract(e: exp.Extract) -> int:
    unit = e.this.name.upper() if isinstance(e.this, exp.Expression) else str(e.this).upper()
    if unit not in _EXTRACT:
        raise NotConstant(f"unsupported EXTRACT unit {unit} (only {', '.join(_EXTRACT)})", e)
    d = _fold(e.expression, "DATE")
    if not isinstance(d, datetime.date):
        raise NotConstant(f"EXTRACT from {sql_of(e.expression)}, which is not a DATE", e)
    return _EXTRACT[unit](d)
