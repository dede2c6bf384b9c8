"""C values and conditions for the native backend's generated triggers.

Why apart from :mod:`.ctrigger`: how an M3 value looks in C (its type, a
constant's literal, a key column's bits, a checked product, a guard) is one
concern, asked for by every statement; how a trigger's loops and updates are
laid out is another.  :class:`Gen` holds the state both share while one
module is generated.

Values in C: INT and DATE (a day number, ``date.toordinal()``) and STRING
(an id from the runtime's intern table) are ``int64_t``; FLOAT is ``double``.
Keys are arrays of ``int64_t`` (a FLOAT key column holds the double's bits).

INT arithmetic is checked: a product of two INT values is ``CK_MUL``, a sum
of INT scalar terms ``CK_ADD``, and the map update adds with a check (see
:mod:`.crt`).  On overflow the trigger returns ``RT_OVERFLOW`` and the
runtime re-runs the batch on the Python backend, whose ints do not
overflow.  Products are folded left to right as Python evaluates them, so a
mixed product checks its INT prefix and then multiplies doubles.  There is
no subtraction: a delete's ``-1 *`` is a checked product too.

>>> import datetime
>>> from ...syntax import parse_program
>>> g = Gen(parse_program("CREATE STREAM R(A INT);"), {})
>>> g.value(Prod((Var("A"), Const(2), Var("X"))), {"A": "INT", "X": "FLOAT"})
('((CK_MUL(v_A, INT64_C(2), -1) * v_X))', 'FLOAT')
>>> g.value(Call("YEAR", (Var("D"),)), {"D": "DATE"}), g.value(Const(datetime.date(1, 1, 2)), {})
(('date_part(v_D, 0)', 'INT'), ('INT64_C(2)', 'DATE'))
>>> g.cond(Cmp("<", Var("S"), Const("b")), {"S": "STRING"}), g.strings, g.string_order
('(str_cmp(rt, v_S, INT64_C(0)) < 0)', ['b'], True)
>>> g.value(Call("HOUR", (Var("T"),)), {"T": "FLOAT"})[0]
'((((int64_t)floor((double)(v_T) / 3600000.0)) % 24 + 24) % 24)'
>>> g.cond(Cmp("<>", Var("A"), Const(1.5)), {"A": "FLOAT"})
'(v_A != 1.5)'
"""

from __future__ import annotations

import datetime

from ...ast import LIKE_OPS, Call, Cmp, Const, Expr, Prod, Program, Sum, Var
from ...functions import result_type
from ...library import C_INLINE, VECTOR, c_inline, c_vector

_COPS = {"=": "==", "<>": "!=", "<": "<", "<=": "<="}
DATE_PARTS = {"YEAR": 0, "QUARTER": 1, "MONTH": 2, "DAY": 3, "DOW": 4, "ISODOW": 5, "DOY": 6,
              "WEEK": 7}  # crt's date_part(day, part)
INLINE_CALLS = frozenset(DATE_PARTS) | {"MOD", "DIV", "HOUR"} | C_INLINE
"""The calls C computes inline from the event's value (the others, the string functions and CHAR_LENGTH, are
columns the runtime computes)."""


class Unsupported(Exception):
    """A construct the C generator does not support; the message names it."""


def ctype(m3_type: str) -> str:
    """The C type of an M3 value.

    >>> ctype("INT"), ctype("FLOAT"), ctype("DATE"), ctype("STRING")
    ('int64_t', 'double', 'int64_t', 'int64_t')
    """
    return "double" if m3_type == "FLOAT" else "int64_t"


def to_key(expr: str, m3_type: str) -> str:
    """A C value as a key column (int64): a FLOAT's bits.

    >>> to_key("v_A", "INT"), to_key("v_X", "FLOAT")
    ('v_A', 'f2k(v_X)')
    """
    return f"f2k({expr})" if m3_type == "FLOAT" else expr


def from_key(expr: str, m3_type: str) -> str:
    """A key column (int64) as its C value.

    >>> from_key("k", "DATE"), from_key("k", "FLOAT")
    ('k', 'k2f(k)')
    """
    return f"k2f({expr})" if m3_type == "FLOAT" else expr


def c_float(x: float) -> str:
    """A double literal that reads back as exactly ``x``.

    >>> c_float(0.5), c_float(1e-7), c_float(3.0)
    ('0.5', '1e-07', '3.0')
    """
    if x != x or x in (float("inf"), float("-inf")):
        raise Unsupported(f"non-finite constant {x!r}")
    return repr(float(x))



class Gen:
    """What one C module's generation accumulates, and the C of values and conditions.

    Shared by every trigger of the module: the string constants met so far
    (interned first, so their ids are fixed in the code), whether some
    condition orders or matches strings, the emitted lines, and per trigger
    its computed columns.
    """

    def __init__(self, program: Program, specs: dict[str, list[tuple[int, ...]]]):
        self.program, self.specs = program, specs
        self.map_no = {m.name: i for i, m in enumerate(program.maps)}
        self.decl = {m.name: m for m in program.maps}
        self.strings: list[str] = []
        self.string_order = False  # some condition orders strings: C needs the intern table's strings
        self.lines: list[str] = []
        self.counter = 0
        self.target = -1  # the map the statement being generated updates: named when its arithmetic overflows
        self.computed: dict[Call, str] = {}  # the trigger's computed columns: call -> its C variable
        self.computed_columns: dict[tuple[str, int], tuple] = {}  # per trigger: ((column, call), ...)
        self.deferred: frozenset[str] = frozenset()  # the trigger's maps whose updates are queued (ctrigger)

    def product(self, parts: list[tuple[str, str]]) -> tuple[str, str]:
        """Factors multiplied left to right (as Python does): INT by INT checked, else in doubles."""
        expr, t = numeric(*parts[0]), parts[0][1]
        for e, ty in parts[1:]:
            numeric(e, ty)
            if t == "INT" and ty == "INT":
                expr = f"CK_MUL({expr}, {e}, {self.target})"
            else:
                expr, t = f"({expr} * {e})", "FLOAT"
        return expr, t

    def total(self, parts: list[tuple[str, str]]) -> tuple[str, str]:
        """Terms added left to right: INT plus INT checked, else in doubles."""
        expr, t = parts[0]
        for e, ty in parts[1:]:
            if t == "INT" and ty == "INT":
                expr = f"CK_ADD({expr}, {e}, {self.target})"
            else:
                expr, t = f"({expr} + {e})", "FLOAT"
        return expr, t

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def mref(self, name: str) -> str:
        return f"&rt->maps[{self.map_no[name]}]"

    def value(self, e: Expr, types: dict[str, str]) -> tuple[str, str]:
        """A C expression for ``e`` and its M3 type."""
        if isinstance(e, Var):
            if e.name not in types:
                raise Unsupported(f"variable {e.name} is not bound where it is read")
            return f"v_{e.name}", types[e.name]
        if isinstance(e, Const):
            v = e.value
            if isinstance(v, bool):
                raise Unsupported("boolean constant")
            if isinstance(v, int):
                if not -(2**63) <= v < 2**63:
                    raise Unsupported(f"integer constant {v} does not fit 64 bits")
                return f"INT64_C({v})", "INT"
            if isinstance(v, float):
                return c_float(v), "FLOAT"
            if isinstance(v, datetime.date):
                return f"INT64_C({v.toordinal()})", "DATE"
            if isinstance(v, str):
                if v not in self.strings:
                    self.strings.append(v)
                return f"INT64_C({self.strings.index(v)})", "STRING"
            raise Unsupported(f"constant {v!r}")
        if isinstance(e, Prod):
            if not e.factors:
                return "INT64_C(1)", "INT"
            expr, t = self.product([self.value(f, types) for f in e.factors])
            return f"({expr})", t
        if isinstance(e, Sum):  # arithmetic as a side of a comparison: INT terms added with a check
            expr, t = self.total([_number(*self.value(x, types)) for x in e.terms])
            return f"({expr})", t
        if isinstance(e, Call) and e.fn in DATE_PARTS:  # computed in C from the day number (crt's date_part)
            x, t = self.value(e.args[0], types)
            if t != "DATE":
                raise Unsupported(f"{e.fn} of a {t}")
            return f"date_part({x}, {DATE_PARTS[e.fn]})", "INT"
        if isinstance(e, Call) and e.fn == "MOD":  # C's % truncates, as SQL: the sign of the dividend
            x, t = self.value(e.args[0], types)
            m = abs(e.args[1].value)
            if t != "INT":
                raise Unsupported(f"MOD of a {t}")
            return ("INT64_C(0)" if m == 1 else f"({x} % INT64_C({m}))"), "INT"
        if isinstance(e, Call) and e.fn == "HOUR":  # of epoch milliseconds, UTC: floored, as Python's //
            x, t = self.value(e.args[0], types)
            if t not in ("INT", "FLOAT"):
                raise Unsupported(f"HOUR of a {t}")
            return f"((((int64_t)floor((double)({x}) / 3600000.0)) % 24 + 24) % 24)", "INT"
        if isinstance(e, Call) and e.fn == "DIV":  # as DuckDB: both sides as doubles, one rounded division
            x, t = self.value(e.args[0], types)
            if t not in ("INT", "FLOAT"):
                raise Unsupported(f"DIV of a {t}")
            d, m = float(e.args[1].value), (e.args[2].value if len(e.args) > 2 else 1)
            if m != 1:  # a * m / d: the product first, INT * INT exact as DuckDB's BIGINT
                x = f"({x}) * INT64_C({m})" if t == "INT" else f"({x}) * {float(m)!r}"
            return f"((double)({x}) / {d!r})", "FLOAT"
        if isinstance(e, Call) and e.fn in VECTOR:  # of several numbers (..library), checked
            args = [_number(*self.value(a, types)) for a in e.args]
            return c_vector(e.fn, [x for x, _ in args], self.target), "FLOAT"
        if isinstance(e, Call) and e.fn in C_INLINE:  # a cast or math of a number (..library), checked
            x, t = self.value(e.args[0], types)
            if t not in ("INT", "FLOAT") and e.fn != "CAST_DATE":
                raise Unsupported(f"{e.fn} of a {t}")
            return c_inline(e.fn, x, t, tuple(a.value for a in e.args[1:]), self.target), result_type(e.fn)
        if isinstance(e, Call) and e in self.computed:  # a string (interned by the runtime with the batch), an INT,
            return self.computed[e], result_type(e.fn)  # a DATE's day number, a FLOAT (ATOF)
        raise Unsupported(f"expression {type(e).__name__} in a trigger")

    def cond(self, c: Cmp, types: dict[str, str]) -> str:
        if c.op in LIKE_OPS:
            return self.like(c, types)
        (left, lt), (right, rt) = self.value(c.left, types), self.value(c.right, types)
        if c.op not in _COPS:
            raise Unsupported(f"comparison {c.op}")
        if "STRING" in (lt, rt):
            if lt != rt:
                raise Unsupported(f"comparison {c.op} between a {lt} and a {rt}")
            if c.op in ("<", "<="):  # ids keep no order: compare the strings (the runtime sends them to C)
                self.string_order = True
                return f"(str_cmp(rt, {left}, {right}) {_COPS[c.op]} 0)"
        return f"({left} {_COPS[c.op]} {right})"

    def like(self, c: Cmp, types: dict[str, str]) -> str:
        """``X LIKE 'p'``: C matches the interned string's bytes against the pattern (``str_like``), so the
        runtime sends it the intern table's strings, as for ordering."""
        if not (isinstance(c.right, Const) and isinstance(c.right.value, str)):
            raise Unsupported(f"{c.op} against a non-constant pattern")
        left, lt = self.value(c.left, types)
        if lt != "STRING":
            raise Unsupported(f"{c.op} of a {lt}")
        self.string_order = True
        pattern = c.right.value.encode("utf-8", "surrogatepass")
        call = f'str_like(rt, {left}, "{"".join(f"{chr(92)}x{b:02x}" for b in pattern)}", {len(pattern)})'
        return f"({call})" if c.op == "LIKE" else f"(!{call})"


def _number(expr: str, m3_type: str) -> tuple[str, str]:
    """A term of a sum: ``(expr, type)`` once checked to be a number."""
    return numeric(expr, m3_type), m3_type


def numeric(expr: str, m3_type: str) -> str:
    """``expr`` as a factor of a product: only INT and FLOAT multiply.

    >>> numeric("v_A", "INT")
    'v_A'
    """
    if m3_type not in ("INT", "FLOAT"):
        raise Unsupported(f"a {m3_type} value used as a number")
    return expr


def product_type(types: list[str]) -> str:
    """FLOAT if any factor is, else INT.

    >>> product_type(["INT", "FLOAT"]), product_type(["INT"])
    ('FLOAT', 'INT')
    """
    return "FLOAT" if "FLOAT" in types else "INT"

