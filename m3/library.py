"""DBToaster's standard function library: casts and math of a column (``CAST_INT(F)``, ``COS(A)``, ``POW(X, 2)``).

Why apart from :mod:`.functions`: those are SQL's and Flink's functions of a
column; these are the functions DBToaster's query suite calls by DBToaster's
names, with DBToaster's semantics where SQL has none, and a C form for the
native backend that checks its result (:func:`c_inline`).  :mod:`.functions`
merges them into its tables, so the compiler, the checker, the M3 text and both
runtimes treat them as any other call of a variable and constants (a lift
``{K = COS(A)}``, a value computed from the event's row).

Semantics (DuckDB is the oracle the tests compare with; where DBToaster's
differs from SQL's it is DBToaster's, and the DuckDB spelling is given):

* ``CAST_INT(x)``: of a FLOAT, truncated toward zero (C's ``(long)d``,
  DBToaster's ``cast_int_from_float``; DuckDB rounds a ``CAST(d AS BIGINT)``,
  ``CAST(TRUNC(d) AS BIGINT)`` truncates); of an INT, itself; of a STRING,
  C's ``atoi`` (:func:`atoi`: optional blanks, a sign and decimal digits,
  the rest ignored; 0 if there is no digit: DuckDB's ``CAST(s AS BIGINT)``
  where ``s`` is an integer).  The compiler names the string form ``ATOI``;
* ``CAST_FLOAT(x)``: of an INT or FLOAT, the double; of a STRING, C's
  ``atof`` of a decimal number (:func:`atof`, named ``ATOF``; ``inf``,
  ``nan`` and hexadecimal are not read: 0);
* ``CAST_DATE(s)``: of a STRING ``YYYY-MM-DD``, the date (named ``STR_DATE``);
  any other string is an error of the event (its batch fails), as the
  runtime has no NULL to give; of a DATE, itself;
* ``CAST_STRING(x)``: an INT in decimal, a FLOAT in the shortest form that
  reads back as the same double (DuckDB's ``CAST(d AS VARCHAR)``: ``0.1``,
  ``1.0``, ``1e+20``), a DATE as ``YYYY-MM-DD``; a STRING itself;
* ``COS``, ``SIN``, ``TAN``, ``ACOS``, ``ASIN``, ``ATAN``, ``SQRT``, ``EXP``,
  ``LN``, ``RADIANS``, ``DEGREES`` of an INT or FLOAT, and ``POW(x, c)`` of a
  numeric constant ``c``: FLOAT, the C library's value (the one DuckDB
  computes).  A value that is not a finite number (``SQRT`` of a negative,
  ``LN(0)``, ``ACOS(2)``, an ``EXP`` beyond a double) is an error of the
  event, as Python's :mod:`math` raises, where DuckDB gives NaN or raises: a
  NaN could not be a key (NaN equals nothing, so a delete would not find its
  insert).  The native backend checks each result and hands the batch to the
  Python backend, which raises.

DBToaster's vector functions of several columns (``VEC_LENGTH``,
``VECTOR_ANGLE``, ``DIHEDRAL_ANGLE``) are not functions of one variable and
are refused by name (:data:`SEVERAL_COLUMNS`).

>>> [apply(n, (x,)) for n, x in (("CAST_INT", -23.5), ("ATOI", " -12x"), ("ATOI", "x"), ("ATOF", "19.2e1z"))]
[-23, -12, 0, 192.0]
>>> apply("STR_DATE", ("1998-12-19",)), apply("CAST_STRING", (0.1,)), apply("CAST_STRING", (datetime.date(1998, 1, 2),))
(datetime.date(1998, 12, 19), '0.1', '1998-01-02')
>>> apply("POW", (3, 2)), apply("DEGREES", (math.pi,))
(9.0, 180.0)
>>> apply("SQRT", (-1.0,))
Traceback (most recent call last):
...
ValueError: SQRT(-1.0) is not a finite number
>>> typed_name("CAST_INT", "STRING"), typed_name("CAST_INT", "FLOAT"), typed_name("COS", "INT")
('ATOI', 'CAST_INT', 'COS')
>>> fold_call("CAST_INT", (23.5,)), fold_call("CAST_DATE", ("1998-12-19",)), fold_call("CAST_FLOAT", ("19.2",))
(23, datetime.date(1998, 12, 19), 19.2)
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Callable

_BLANKS = "[ \t\n\v\f\r]*"
_INT_PREFIX = re.compile(_BLANKS + r"[+-]?\d+")
_FLOAT_PREFIX = re.compile(_BLANKS + r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")


def atoi(s: str) -> int:
    """C's ``atoi``: the integer a string starts with (after blanks), else 0."""
    m = _INT_PREFIX.match(s)
    return int(m.group()) if m else 0


def atof(s: str) -> float:
    """C's ``atof`` of a decimal number: the number a string starts with (after blanks), else 0.0."""
    m = _FLOAT_PREFIX.match(s)
    return float(m.group()) if m else 0.0


def str_date(s: str) -> datetime.date:
    """A ``YYYY-MM-DD`` string's date; anything else raises (the runtime has no NULL to give)."""
    m = _DATE.fullmatch(s)
    if m is None:
        raise ValueError(f"CAST_DATE({s!r}): not a date YYYY-MM-DD")
    return datetime.date(*map(int, m.groups()))


def cast_string(x: object) -> str:
    """A value as DuckDB's ``CAST(x AS VARCHAR)`` writes it (a double: its shortest round-trip form)."""
    if isinstance(x, float):
        return repr(x)
    return x.isoformat() if isinstance(x, datetime.date) else str(x)


def _finite(name: str, fn: Callable[..., float]) -> Callable[..., float]:
    """``fn`` raising ``ValueError`` where its value is not a finite number (the C form checks the same)."""
    def call(*args):
        try:
            v = fn(*args)
        except (ValueError, OverflowError):
            v = math.nan
        if not math.isfinite(v):
            raise ValueError(f"{name}({', '.join(map(repr, args))}) is not a finite number")
        return v
    return call


def _truncate(x: float | int) -> int:
    return int(x)  # toward zero, as C's (long)d; NaN and infinities raise


_MATH = {"COS": math.cos, "SIN": math.sin, "TAN": math.tan, "ACOS": math.acos, "ASIN": math.asin,
         "ATAN": math.atan, "SQRT": math.sqrt, "EXP": math.exp, "LN": math.log, "RADIANS": math.radians,
         "DEGREES": math.degrees}
_C_MATH = {"COS": "cos({})", "SIN": "sin({})", "TAN": "tan({})", "ACOS": "acos({})", "ASIN": "asin({})",
           "ATAN": "atan({})", "SQRT": "sqrt({})", "EXP": "exp({})", "LN": "log({})",
           "RADIANS": "({}) * (3.141592653589793 / 180.0)", "DEGREES": "({}) * (180.0 / 3.141592653589793)"}

#: name -> (argument type, result type, numbers of constants, implementation), as :data:`.functions.FUNCTIONS`
LIBRARY: dict[str, tuple[str, str, tuple[int, ...], Callable]] = {
    "CAST_INT": ("INT|FLOAT", "INT", (0,), _truncate),
    "ATOI": ("STRING", "INT", (0,), atoi),
    "CAST_FLOAT": ("INT|FLOAT", "FLOAT", (0,), float),
    "ATOF": ("STRING", "FLOAT", (0,), atof),
    "CAST_DATE": ("DATE", "DATE", (0,), lambda d: d),
    "STR_DATE": ("STRING", "DATE", (0,), str_date),
    "CAST_STRING": ("INT|FLOAT|DATE|STRING", "STRING", (0,), cast_string),
    **{name: ("INT|FLOAT", "FLOAT", (0,), _finite(name, fn)) for name, fn in _MATH.items()},
    "POW": ("INT|FLOAT", "FLOAT", (1,), _finite("POW", lambda x, c: math.pow(x, c))),
}

#: the constants' types of the library's functions that take constants (POW's exponent: any number)
CONSTANT_TYPES: dict[str, tuple] = {"POW": ((int, float),)}

#: the SQL names (as DBToaster spells them, and sqlglot's node names for the math) -> the library's
SQL_NAMES = {**{n: n for n in ("CAST_INT", "CAST_FLOAT", "CAST_DATE", "CAST_STRING", "ATOI", "ATOF", *_MATH, "POW")},
             "POWER": "POW", "DATE_FROM_STRING": "CAST_DATE"}

#: the argument type that names another function (the string forms need a column the runtime computes in C)
_TYPED = {("CAST_INT", "STRING"): "ATOI", ("CAST_FLOAT", "STRING"): "ATOF", ("CAST_DATE", "STRING"): "STR_DATE"}

#: DBToaster's functions of several columns, refused by name
SEVERAL_COLUMNS = frozenset({"VEC_LENGTH", "VEC_DOT", "VECTOR_ANGLE", "DIHEDRAL_ANGLE", "HASH"})

#: the calls the native backend computes inline in C (:func:`c_inline`); the others are columns the runtime
#: computes with the batch (ATOI, ATOF, STR_DATE, CAST_STRING: C holds a string as its interned id)
C_INLINE = frozenset({"CAST_INT", "CAST_FLOAT", "CAST_DATE", "POW", *_MATH})


def typed_name(name: str, arg_type: str | None) -> str:
    """The library function a SQL call of ``name`` of a column of ``arg_type`` is."""
    return _TYPED.get((name, arg_type), name)


def apply(name: str, args: tuple) -> object:
    """The function's value at ``args`` (the column's value, then the constants)."""
    return LIBRARY[name][3](*args)


def fold_call(sql_name: str, values: tuple) -> object:
    """A call of constants only, folded (``CAST_INT(23.5)`` is 23); raises ``ValueError`` if the library has no
    such function of such a constant."""
    name = SQL_NAMES[sql_name]
    if not values:
        raise ValueError(f"{sql_name} takes an argument")
    kind = {str: "STRING", int: "INT", float: "FLOAT", datetime.date: "DATE"}.get(type(values[0]))
    name = typed_name(name, kind)
    want, _, counts, _ = LIBRARY[name]
    if kind is None or kind not in want.split("|") or len(values) - 1 not in counts:
        raise ValueError(f"{sql_name} of {', '.join(map(repr, values))}")
    return apply(name, values)


def c_inline(name: str, x: str, x_type: str, consts: tuple, target: int) -> str:
    """The C of a call computed inline (``x``: the C of its variable).  A math value that is not a finite number,
    a FLOAT beyond int64 cast to INT: the trigger returns ``RT_OVERFLOW``, so the batch runs on the Python
    backend, which raises (module doc).

    >>> c_inline("CAST_INT", "v_A", "INT", (), 0), c_inline("CAST_FLOAT", "v_A", "INT", (), 0)
    ('(v_A)', '((double)(v_A))')
    >>> c_inline("POW", "v_X", "FLOAT", (2,), 3)
    '({ double r_ = pow((double)(v_X), 2.0); if (__builtin_expect(!isfinite(r_), 0)) { rt->ovf_map = (3); return RT_OVERFLOW; } r_; })'
    """
    bail = f"{{ rt->ovf_map = ({target}); return RT_OVERFLOW; }}"
    if name in ("CAST_INT", "CAST_DATE"):
        if x_type != "FLOAT":
            return f"({x})"
        return (f"({{ double c_ = (double)({x}); if (__builtin_expect(!(c_ >= -9223372036854775808.0 && "
                f"c_ < 9223372036854775808.0), 0)) {bail} (int64_t)c_; }})")
    if name == "CAST_FLOAT":
        return f"((double)({x}))"
    value = f"pow((double)({x}), {float(consts[0])!r})" if name == "POW" else _C_MATH[name].format(f"(double)({x})")
    return f"({{ double r_ = {value}; if (__builtin_expect(!isfinite(r_), 0)) {bail} r_; }})"
