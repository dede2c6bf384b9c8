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

DBToaster's vector functions take several numbers (:data:`VECTOR`): each
argument is arithmetic over columns of any of the joined relations (``+ - *``,
division by a constant), so the compiler lifts the call as a value of the
joined variables (:mod:`.compiler.libargs`).  All in doubles, as DBToaster's
``StandardFunctions.ml``:

* ``VEC_LENGTH(x, y, z)``: ``sqrt(x*x + y*y + z*z)``;
* ``VEC_DOT(x1, y1, z1, x2, y2, z2)``: ``x1*x2 + y1*y2 + z1*z2``;
* ``VECTOR_ANGLE(x1, y1, z1, x2, y2, z2)``: ``acos(dot / (|a| * |b|))`` (no
  clamping: a zero vector gives ``acos(NaN)``, and a rounding of the
  quotient beyond 1 for parallel vectors gives NaN too);
* ``DIHEDRAL_ANGLE(x1, ..., z4)`` of four points: with ``v1 = p2 - p1``,
  ``v2 = p3 - p2``, ``v3 = p4 - p3``, ``n1 = v1 x v2``, ``n2 = v2 x v3``,
  ``atan2(|v2| * (v1 . n2), n1 . n2)`` (``atan2(0, 0)`` is 0).

A value that is not a finite number (``VECTOR_ANGLE`` of a zero vector) is an
error of the event, as for the math above (DuckDB's ``acos`` of NaN is NaN):
the batch fails on both backends and nothing of it is applied.  ``HASH`` is
refused by name (:data:`SEVERAL_COLUMNS`).

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
>>> apply("VEC_LENGTH", (3, 4, 12)), apply("VEC_DOT", (1, 2, 3, 4, 5, 6)), apply("VECTOR_ANGLE", (1, 0, 0, 0, 2, 0))
(13.0, 32.0, 1.5707963267948966)
>>> apply("DIHEDRAL_ANGLE", (1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 1))
-1.5707963267948966
>>> apply("VECTOR_ANGLE", (0, 0, 0, 1, 0, 0))
Traceback (most recent call last):
...
ValueError: VECTOR_ANGLE(0, 0, 0, 1, 0, 0) is not a finite number
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


def vec_length(x: float, y: float, z: float) -> float:
    return math.sqrt(x * x + y * y + z * z)


def vec_dot(x1: float, y1: float, z1: float, x2: float, y2: float, z2: float) -> float:
    return x1 * x2 + y1 * y2 + z1 * z2


def vector_angle(x1: float, y1: float, z1: float, x2: float, y2: float, z2: float) -> float:
    """DBToaster's ``acos(dot / (|a| |b|))``; NaN where C's ``acos`` gives NaN (the caller refuses it)."""
    q = vec_dot(x1, y1, z1, x2, y2, z2) / (vec_length(x1, y1, z1) * vec_length(x2, y2, z2)) \
        if vec_length(x1, y1, z1) * vec_length(x2, y2, z2) != 0 else math.nan
    return math.acos(q) if -1 <= q <= 1 else math.nan


def _cross(a: tuple, b: tuple) -> tuple:
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def dihedral_angle(*p: float) -> float:
    """DBToaster's dihedral angle of four points (module doc)."""
    v1, v2, v3 = (tuple(p[3 * i + 3 + j] - p[3 * i + j] for j in range(3)) for i in range(3))
    n1, n2 = _cross(v1, v2), _cross(v2, v3)
    return math.atan2(vec_length(*v2) * vec_dot(*v1, *n2), vec_dot(*n1, *n2))


def _truncate(x: float | int) -> int:
    return int(x)  # toward zero, as C's (long)d; NaN and infinities raise


_MATH = {"COS": math.cos, "SIN": math.sin, "TAN": math.tan, "ACOS": math.acos, "ASIN": math.asin,
         "ATAN": math.atan, "SQRT": math.sqrt, "EXP": math.exp, "LN": math.log, "RADIANS": math.radians,
         "DEGREES": math.degrees}
_C_MATH = {"COS": "cos({})", "SIN": "sin({})", "TAN": "tan({})", "ACOS": "acos({})", "ASIN": "asin({})",
           "ATAN": "atan({})", "SQRT": "sqrt({})", "EXP": "exp({})", "LN": "log({})",
           "RADIANS": "({}) * (3.141592653589793 / 180.0)", "DEGREES": "({}) * (180.0 / 3.141592653589793)"}

#: the vector functions: name -> (how many numbers it takes, implementation); each argument is a value of the
#: joined variables, not a constant (:func:`..functions.check_call` checks them as such)
VECTOR: dict[str, tuple[int, Callable[..., float]]] = {
    "VEC_LENGTH": (3, vec_length), "VEC_DOT": (6, vec_dot), "VECTOR_ANGLE": (6, vector_angle),
    "DIHEDRAL_ANGLE": (12, dihedral_angle)}

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
    **{name: ("INT|FLOAT", "FLOAT", (n - 1,), _finite(name, lambda *a, fn=fn: fn(*map(float, a))))  # (doubles)
       for name, (n, fn) in VECTOR.items()},
}

#: the constants' types of the library's functions that take constants (POW's exponent: any number)
CONSTANT_TYPES: dict[str, tuple] = {"POW": ((int, float),)}

#: the SQL names (as DBToaster spells them, and sqlglot's node names for the math) -> the library's
SQL_NAMES = {**{n: n for n in ("CAST_INT", "CAST_FLOAT", "CAST_DATE", "CAST_STRING", "ATOI", "ATOF", *_MATH, "POW",
                                *VECTOR)},
             "POWER": "POW", "DATE_FROM_STRING": "CAST_DATE"}

#: the argument type that names another function (the string forms need a column the runtime computes in C)
_TYPED = {("CAST_INT", "STRING"): "ATOI", ("CAST_FLOAT", "STRING"): "ATOF", ("CAST_DATE", "STRING"): "STR_DATE"}

#: DBToaster's functions of several columns, refused by name
SEVERAL_COLUMNS = frozenset({"HASH"})

#: the calls the native backend computes inline in C (:func:`c_inline`); the others are columns the runtime
#: computes with the batch (ATOI, ATOF, STR_DATE, CAST_STRING: C holds a string as its interned id)
C_INLINE = frozenset({"CAST_INT", "CAST_FLOAT", "CAST_DATE", "POW", *_MATH, *VECTOR})


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


def _c_len(v: list[str]) -> str:
    return f"sqrt({v[0]} * {v[0]} + {v[1]} * {v[1]} + {v[2]} * {v[2]})"


def _c_dot(a: list[str], b: list[str]) -> str:
    return f"({a[0]} * {b[0]} + {a[1]} * {b[1]} + {a[2]} * {b[2]})"


def _c_cross(a: list[str], b: list[str]) -> list[str]:
    return [f"({a[1]} * {b[2]} - {a[2]} * {b[1]})", f"({a[2]} * {b[0]} - {a[0]} * {b[2]})",
            f"({a[0]} * {b[1]} - {a[1]} * {b[0]})"]


def c_vector(name: str, args: list[str], target: int) -> str:
    """The C of a vector function (:data:`VECTOR`) of the C values ``args``, in the operations' order of the
    Python form (so both give the same double); a value that is not finite returns ``RT_OVERFLOW`` as
    :func:`c_inline` does.

    >>> c_vector("VEC_LENGTH", ["v_X", "1.0", "v_Z"], 2)
    '({ double a0_ = (double)(v_X), a1_ = (double)(1.0), a2_ = (double)(v_Z); double r_ = sqrt(a0_ * a0_ + a1_ * a1_ + a2_ * a2_); if (__builtin_expect(!isfinite(r_), 0)) { rt->ovf_map = (2); return RT_OVERFLOW; } r_; })'
    """
    a = [f"a{i}_" for i in range(len(args))]
    binds = ", ".join(f"{n} = (double)({x})" for n, x in zip(a, args))
    pre = ""
    if name == "VEC_LENGTH":
        value = _c_len(a)
    elif name == "VEC_DOT":
        value = _c_dot(a[:3], a[3:])
    elif name == "VECTOR_ANGLE":
        pre = f" double d_ = {_c_len(a[:3])} * {_c_len(a[3:])}; double q_ = d_ != 0.0 ? {_c_dot(a[:3], a[3:])} / d_ : NAN;"
        value = "(q_ >= -1.0 && q_ <= 1.0 ? acos(q_) : NAN)"
    else:  # DIHEDRAL_ANGLE of four points
        v = [[f"({a[3 * i + 3 + j]} - {a[3 * i + j]})" for j in range(3)] for i in range(3)]
        vs = [[f"w{i}{j}_" for j in range(3)] for i in range(3)]
        pre = " double " + ", ".join(f"{vs[i][j]} = {v[i][j]}" for i in range(3) for j in range(3)) + ";"
        n1, n2 = _c_cross(vs[0], vs[1]), _c_cross(vs[1], vs[2])
        pre += f" double n1x_ = {n1[0]}, n1y_ = {n1[1]}, n1z_ = {n1[2]}, n2x_ = {n2[0]}, n2y_ = {n2[1]}, n2z_ = {n2[2]};"
        m1, m2 = ["n1x_", "n1y_", "n1z_"], ["n2x_", "n2y_", "n2z_"]
        value = f"atan2({_c_len(vs[1])} * {_c_dot(vs[0], m2)}, {_c_dot(m1, m2)})"
    bail = f"{{ rt->ovf_map = ({target}); return RT_OVERFLOW; }}"
    return f"({{ double {binds};{pre} double r_ = {value}; if (__builtin_expect(!isfinite(r_), 0)) {bail} r_; }})"
