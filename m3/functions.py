"""Scalar functions of a column that M3 computes from an event's row: ``YEAR(D)``, ``SUBSTRING(P, 1, 2)``, ...

Why: SQL groups by values computed from a column (TPC-H Q7-Q9 group by
``EXTRACT(YEAR FROM l_shipdate)``, Q22 by ``SUBSTRING(c_phone, 1, 2)``).
As DBToaster does, the compiler *lifts* such a value into a variable: a map
definition holds the factor ``{K = YEAR(D)}`` (1 where ``K`` is the year of
``D``: the sum over ``K`` is 1), so maps are keyed by the computed value, and
a trigger computes it from the event's row (``Q[YEAR(D)] += ...``, ``IF
SUBSTRING(P, 1, 2) = '13' THEN``).  Deltas stay first-order: the value is a
function of the event alone.

A call is ``NAME(X, c, ...)``: one variable (a column's value) then
constants (integers, or strings where the function takes a pattern or a
separator).  Semantics are DuckDB's for the SQL-standard functions, Flink
SQL's for the ones Nexmark reads (issue 34):

* ``YEAR``, ``QUARTER``, ``MONTH``, ``DAY`` of a DATE: INT; ``DOW`` (0 is
  Sunday), ``ISODOW`` (1 is Monday, 7 Sunday), ``DOY`` (1 to 366) and
  ``WEEK`` (the ISO 8601 week, 1 to 53: the week of the year's first
  Thursday is week 1);
* ``MOD(X, m)`` of an INT by a nonzero integer constant (SQL's ``a % m``):
  INT, with the sign of the dividend, as SQL and C truncate (``MOD(-7, 3)``
  is -1);
* ``DIV(X, d)`` of an INT or FLOAT by a nonzero integer constant (SQL's
  ``a / d``, a key ``GROUP BY a / 10``: :mod:`.compiler.arithkey`): FLOAT,
  as DuckDB divides (both sides as doubles, one correctly rounded division,
  so the value is the same bit for bit); ``DIV(X, d, m)`` is ``X * m / d``
  (SQL's ``a * m / d``: the product first, exact for INTs as DuckDB's BIGINT);
* ``SUBSTRING(S, start, length)`` (``length`` optional) of a STRING: the
  characters (code points) from position ``start`` (1-based, ``start >=
  1``), at most ``length`` of them (``length >= 0``);
* ``LOWER(S)``, ``UPPER(S)``: STRING (Python's full case mapping, as
  DuckDB's ``lower``/``upper`` for the characters Nexmark's data holds);
  ``CHAR_LENGTH(S)``: INT, the characters (code points);
* ``SPLIT_INDEX(S, 'sep', i)`` (Flink): the ``i``-th (0-based) piece of
  ``S`` split at ``sep``: STRING; ``''`` where Flink gives NULL (``i`` past
  the last piece: M3 has no NULLs);
* ``REGEXP_EXTRACT(S, 'regex', g)`` (Flink, ``g`` 1 if omitted): group
  ``g`` of the first match of a Java-compatible regular expression (Python's
  ``re``): STRING; ``''`` where Flink gives NULL (no match, or the group
  took no part in it) as a value; ``REGEXP_EXTRACT(...) IS [NOT] NULL``
  tests Flink's NULL exactly: it reads ``REGEXP_FOUND(S, 'regex', g)``, INT
  1 where Flink's value is not NULL, else 0 (:data:`NULL_TESTS`);
* event time, a DOUBLE (or INT) of milliseconds since the epoch (the form a
  Flink ``TIMESTAMP(3)`` takes in an ``m3`` box, bench/nexmark_queries.py),
  in UTC: ``HOUR(T)``, INT 0-23 (Flink's ``HOUR`` of a timestamp), and
  ``DATE_FORMAT(T, 'yyyy-MM-dd HH:mm:ss')`` (Flink's, Java's
  SimpleDateFormat letters ``yyyy``, ``MM``, ``dd``, ``HH``, ``mm``, ``ss``;
  other characters but letters stand for themselves): STRING;
* ``COUNT_CHAR(S, 'c')``: INT, how many times the character occurs in
  ``S`` (the Nexmark suite's Java UDF ``count_char``, q14);
* ``CASE_STRING(X, spec)``, ``CASE_INT``, ``CASE_FLOAT``: a CASE whose
  conditions and values read only ``X`` (:mod:`.casefn`).

The Python backend and the evaluation of map definitions call :func:`apply`
(the generated code inlines the same expressions, :data:`PYTHON`); the C
backend computes the date parts from the day number in C (``date_part``,
:mod:`.runtime.native.crt`) and takes a SUBSTRING's interned id from a
column the runtime computes with the batch's other columns (C strings are
interned ids; a substring is a string the intern table must hold).

>>> import datetime
>>> apply("YEAR", (datetime.date(1995, 3, 15),)), apply("QUARTER", (datetime.date(1995, 8, 1),))
(1995, 3)
>>> [apply(f, (datetime.date(2021, 1, 3),)) for f in ("DOW", "ISODOW", "DOY", "WEEK")]  # a Sunday, ISO week 53 of 2020
[0, 7, 3, 53]
>>> apply("SUBSTRING", ("13-555", 1, 2)), apply("SUBSTRING", ("é€x", 2)), apply("SUBSTRING", ("ab", 5, 1))
('13', '€x', '')
>>> [apply("MOD", (x, m)) for x, m in ((7, 3), (-7, 3), (7, -3), (-7, -3), (6, 3))]
[1, -1, 1, -1, 0]
>>> apply("DIV", (7, 2)), apply("DIV", (-7, 2)), apply("DIV", (1.5, 3)), check_call("DIV", ["FLOAT", 10])
(3.5, -3.5, 0.5, None)
>>> apply("DIV", (3, 100, 142)), apply("DIV", (0.1, 100, 142)) == 0.1 * 142 / 100
(4.26, True)
>>> check_call("MOD", ["INT", 0])
'MOD by 0 (it takes a nonzero integer constant)'
>>> check_call("SUBSTRING", ["STRING", 1, 2]), check_call("YEAR", ["DATE"])
(None, None)
>>> check_call("VEC_LENGTH", ["FLOAT", None, "INT"]), check_call("VEC_DOT", ["FLOAT"] * 3)
(None, 'VEC_DOT takes 6 numbers, not 3')
>>> check_call("SUBSTRING", ["STRING", 0, 2])
'SUBSTRING starts at a position >= 1, not 0'
>>> t = 1_700_000_000_123.0  # 2023-11-14 22:13:20.123 UTC
>>> apply("HOUR", (t,)), apply("DATE_FORMAT", (t, "yyyy-MM-dd")), apply("DATE_FORMAT", (t, "HH:mm"))
(22, '2023-11-14', '22:13')
>>> url = "https://www.nexmark.com/abc/de/f/item.htm?query=1&channel_id=7"
>>> [apply("SPLIT_INDEX", (url, "/", i)) for i in (3, 5, 9)], apply("REGEXP_EXTRACT", (url, "(&|^)channel_id=([^&]*)", 2))
(['abc', 'f', ''], '7')
>>> [apply("REGEXP_FOUND", (s, "(a)|(b)", 2)) for s in ("xb", "xa", "x")]  # a match whose group 2 took no part: NULL
[1, 0, 0]
>>> apply("LOWER", ("Apple",)), apply("UPPER", ("é",)), apply("CHAR_LENGTH", ("é€x",))
('apple', 'É', 3)
>>> check_call("SPLIT_INDEX", ["STRING", 3, "/"]), check_call("DATE_FORMAT", ["FLOAT", "yyyy-ww"])
("SPLIT_INDEX takes the constants (string, integer), not (3, '/')", "DATE_FORMAT pattern 'yyyy-ww': letters other than yyyy, MM, dd, HH, mm, ss")
>>> check_call("REGEXP_EXTRACT", ["STRING", "(a", 1])
"REGEXP_EXTRACT pattern '(a': missing ), unterminated subpattern at position 0"
"""

from __future__ import annotations

import functools
import math
import re
import time
from collections.abc import Callable

from .casefn import case_value, check_spec
from .library import CONSTANT_TYPES as _LIBRARY_CONSTANTS
from .library import LIBRARY, VECTOR


def _mod(x: int, m: int) -> int:
    """SQL's remainder: the sign of the dividend (``MOD(-7, 3)`` is -1), as C's ``%`` (truncating division)."""
    r = abs(x) % abs(m)
    return -r if x < 0 else r


def _substring(s: str, start: int, length: int | None = None) -> str:
    return s[start - 1:] if length is None else s[start - 1:start - 1 + length]


_DATE_LETTERS = {"yyyy": "%Y", "MM": "%m", "dd": "%d", "HH": "%H", "mm": "%M", "ss": "%S"}
_DATE_TOKEN = re.compile("|".join(_DATE_LETTERS) + "|[A-Za-z]+|[^A-Za-z]+")


@functools.lru_cache(maxsize=64)
def _strftime_pattern(pattern: str) -> str | None:
    """A Java date pattern as ``time.strftime``'s, or None if it has letters other than the supported ones."""
    out = []
    for tok in _DATE_TOKEN.findall(pattern):
        if tok in _DATE_LETTERS:
            out.append(_DATE_LETTERS[tok])
        elif tok[0].isalpha():
            return None
        else:
            out.append(tok.replace("%", "%%"))
    return "".join(out)


def _date_format(ms: float, pattern: str) -> str:
    return _format_second(math.floor(ms / 1000), pattern)


@functools.lru_cache(maxsize=4096)
def _format_second(second: int, pattern: str) -> str:
    """Events in order share their second: formatting it once per second makes a column of them cheap."""
    return time.strftime(_strftime_pattern(pattern), time.gmtime(second))


def _hour(ms: float) -> int:
    return int(ms // 3_600_000) % 24


def _split_index(s: str, sep: str, i: int) -> str:
    parts = s.split(sep)
    return parts[i] if 0 <= i < len(parts) else ""


@functools.lru_cache(maxsize=64)
def _regex(pattern: str) -> re.Pattern:
    return re.compile(pattern)


def _regexp_extract(s: str, pattern: str, group: int = 1) -> str:
    m = _regex(pattern).search(s)
    return (m.group(group) or "") if m is not None else ""


def _regexp_found(s: str, pattern: str, group: int = 1) -> int:
    m = _regex(pattern).search(s)
    return int(m is not None and m.group(group) is not None)


#: name -> (argument type of the variable, result type, number of constants allowed, implementation);
#: the argument type "INT|FLOAT" takes either
FUNCTIONS: dict[str, tuple[str, str, tuple[int, ...], Callable]] = {
    "YEAR": ("DATE", "INT", (0,), lambda d: d.year),
    "QUARTER": ("DATE", "INT", (0,), lambda d: (d.month - 1) // 3 + 1),
    "MONTH": ("DATE", "INT", (0,), lambda d: d.month),
    "DAY": ("DATE", "INT", (0,), lambda d: d.day),
    "DOW": ("DATE", "INT", (0,), lambda d: d.isoweekday() % 7),
    "ISODOW": ("DATE", "INT", (0,), lambda d: d.isoweekday()),
    "DOY": ("DATE", "INT", (0,), lambda d: d.timetuple().tm_yday),
    "WEEK": ("DATE", "INT", (0,), lambda d: d.isocalendar()[1]),
    "SUBSTRING": ("STRING", "STRING", (1, 2), _substring),
    "MOD": ("INT", "INT", (1,), _mod),
    "DIV": ("INT|FLOAT", "FLOAT", (1, 2), lambda x, d, m=1: x * m / d),
    "LOWER": ("STRING", "STRING", (0,), str.lower),
    "UPPER": ("STRING", "STRING", (0,), str.upper),
    "CHAR_LENGTH": ("STRING", "INT", (0,), len),
    "SPLIT_INDEX": ("STRING", "STRING", (2,), _split_index),
    "REGEXP_EXTRACT": ("STRING", "STRING", (1, 2), _regexp_extract),
    "REGEXP_FOUND": ("STRING", "INT", (1, 2), _regexp_found),
    "HOUR": ("INT|FLOAT", "INT", (0,), _hour),
    "DATE_FORMAT": ("INT|FLOAT", "STRING", (1,), _date_format),
    "COUNT_CHAR": ("STRING", "INT", (1,), lambda s, c: s.count(c)),
    **{f"CASE_{t}": ("INT|FLOAT|STRING", t, (1,), lambda x, spec: case_value(x, spec, apply))
       for t in ("STRING", "INT", "FLOAT")},
    **LIBRARY,  # DBToaster's casts and math (:mod:`.library`)
}

#: the constants' types of the functions whose constants are not all integers
_CONSTANT_TYPES: dict[str, tuple[type, ...]] = {"SPLIT_INDEX": (str, int), "REGEXP_EXTRACT": (str, int),
                                                "REGEXP_FOUND": (str, int),
                                                "DATE_FORMAT": (str,), "COUNT_CHAR": (str,), "CASE_STRING": (str,),
                                                "CASE_INT": (str,), "CASE_FLOAT": (str,), **_LIBRARY_CONSTANTS}

#: the implementations generated Python code calls by name (``_fn_SPLIT_INDEX(v_U, '/', 3)``)
NAMESPACE: dict[str, Callable] = {f"_fn_{name}": FUNCTIONS[name][3] for name in _CONSTANT_TYPES.keys() | {"HOUR"} | LIBRARY.keys()}


def _call(name: str) -> Callable[..., str]:
    return lambda x, *consts: f"_fn_{name}({', '.join([x, *map(repr, consts)])})"


#: name -> a Python expression template (``{0}`` the variable, ``{1}``, ``{2}`` the constants) for generated code
PYTHON: dict[str, Callable[..., str]] = {
    "YEAR": lambda x: f"{x}.year",
    "QUARTER": lambda x: f"(({x}.month + 2) // 3)",
    "MONTH": lambda x: f"{x}.month",
    "DAY": lambda x: f"{x}.day",
    "DOW": lambda x: f"({x}.isoweekday() % 7)",
    "ISODOW": lambda x: f"{x}.isoweekday()",
    "DOY": lambda x: f"{x}.timetuple().tm_yday",
    "WEEK": lambda x: f"{x}.isocalendar()[1]",
    "SUBSTRING": lambda x, start, length=None: f"{x}[{start - 1}:]" if length is None
    else f"{x}[{start - 1}:{start - 1 + length}]",
    "MOD": lambda x, m: f"({x} % {abs(m)} if {x} >= 0 else -(-{x} % {abs(m)}))",
    "DIV": lambda x, d, m=1: f"({x} / {d})" if m == 1 else f"({x} * {m} / {d})",
    "LOWER": lambda x: f"{x}.lower()",
    "UPPER": lambda x: f"{x}.upper()",
    "CHAR_LENGTH": lambda x: f"len({x})",
    **{name: _call(name) for name in (*_CONSTANT_TYPES, "HOUR", *LIBRARY)},
    **{name: (lambda *a, name=name: f"_fn_{name}({', '.join(map(str, a))})") for name in VECTOR},  # (code of values)
}


#: A function whose value is NULL for some arguments (Flink's) -> the INT function that is 1 where it is not:
#: ``F(...) IS NULL`` reads ``G(...) = 0`` (the value itself reads NULL as a type's zero, ``''``)
NULL_TESTS = {"REGEXP_EXTRACT": "REGEXP_FOUND"}


def result_type(name: str) -> str:
    """The M3 type a function's value has.

    >>> result_type("MONTH"), result_type("SUBSTRING")
    ('INT', 'STRING')
    """
    return FUNCTIONS[name][1]


def apply(name: str, args: tuple) -> object:
    """The function's value at ``args`` (the column's value, then the constants)."""
    return FUNCTIONS[name][3](*args)


def check_call(name: str, args: list) -> str | None:
    """What is wrong with a call (``args``: the variable's M3 type, or None if unknown, then the constants), or
    None when it is well formed."""
    if name not in FUNCTIONS:
        return f"unknown function {name} (one of {', '.join(FUNCTIONS)})"
    want, _, counts, _ = FUNCTIONS[name]
    if name in VECTOR:  # numbers computed from the joined variables, not constants (:mod:`.library`)
        if len(args) != VECTOR[name][0]:
            return f"{name} takes {VECTOR[name][0]} numbers, not {len(args)}"
        bad = next((a for a in args if a not in (None, "INT", "FLOAT")), None)
        return None if bad is None else f"{name} of a {bad} (it takes numbers)"
    kinds = _CONSTANT_TYPES.get(name, (int,) * max(counts))
    if not args or len(args) - 1 not in counts:
        return f"{name} takes a variable and {' or '.join(map(str, counts))} constant(s)"
    if args[0] is not None and args[0] not in want.split("|"):
        return f"{name} of a {args[0]} (it takes a {' or '.join(want.split('|'))})"
    consts = args[1:]
    if any(isinstance(c, bool) or not isinstance(c, k) for c, k in zip(consts, kinds)):
        if kinds == (int,) * len(kinds):
            return f"{name} takes integer constants after its variable"
        names = ", ".join({str: "string", int: "integer"}.get(k, "number") for k in kinds)
        return f"{name} takes the constants ({names}), not ({', '.join(map(repr, consts))})"
    return _check_constants(name, consts)


def _check_constants(name: str, consts: list) -> str | None:
    """What is wrong with a call's constants once their types are right."""
    if name == "DATE_FORMAT" and _strftime_pattern(consts[0]) is None:
        return f"DATE_FORMAT pattern {consts[0]!r}: letters other than {', '.join(_DATE_LETTERS)}"
    if name in ("REGEXP_EXTRACT", "REGEXP_FOUND"):
        try:
            groups = _regex(consts[0]).groups
        except re.error as err:
            return f"REGEXP_EXTRACT pattern {consts[0]!r}: {err}"
        if len(consts) > 1 and not 0 <= consts[1] <= groups:
            return f"{name} group {consts[1]} of a pattern with {groups} group(s)"
    if name.startswith("CASE_"):
        return check_spec(consts[0], apply)
    if name == "COUNT_CHAR" and len(consts[0]) != 1:
        return f"COUNT_CHAR counts one character, not {consts[0]!r}"
    if name == "SPLIT_INDEX" and (consts[0] == "" or consts[1] < 0):
        return "SPLIT_INDEX takes a nonempty separator and an index >= 0"
    if name == "SUBSTRING" and consts[0] < 1:
        return f"SUBSTRING starts at a position >= 1, not {consts[0]}"
    if name == "MOD" and consts[0] == 0:
        return "MOD by 0 (it takes a nonzero integer constant)"
    if name == "DIV" and consts[0] == 0:
        return "DIV by 0 (it takes a nonzero integer constant)"
    if name == "SUBSTRING" and len(consts) == 2 and consts[1] < 0:
        return f"SUBSTRING takes a length >= 0, not {consts[1]}"
    return None

