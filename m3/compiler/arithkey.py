"""Arithmetic over columns as a key of a view: ``SELECT A + B AS s FROM R``, ``GROUP BY A * 2``.

Why: SQL groups by (and a view without aggregates selects) values computed
from a row.  As for a function of one column (:class:`.resolve.Computed`),
the compiler does what DBToaster does with ``(K ^= A + B)``: the value is a
variable of its own, ``K``, defined by a *lift* ``{K = A + B}`` in every term
(:func:`.normalize.lift_computed`).  Maps are keyed by ``K``; a trigger whose
event binds ``A`` and ``B`` computes ``A + B`` from the row
(``Q[A + B] += 1``, :mod:`.lifts`); where the expression reads columns of
several joined relations, the lift stays a loop guard until an event binds
them all.

Only ``+``, ``-``, ``*``, unary minus and numeric constants over INT and
FLOAT columns (and numeric functions of a column, ``YEAR(d) * 100``), and a
column (or a column times an integer constant) divided by a nonzero integer
constant (``a / 10``, ``a / 2.0``, ``a * 142 / 100``): that quotient is a
function of one column, ``DIV(a, 10)`` (``DIV(a, 100, 142)``)
(:mod:`..functions`), lifted as MOD is.  Its value is SQL's (DuckDB's): a
DOUBLE, both sides taken as doubles and divided once, which Python's ``/``
and C's double division compute bit for bit alike, so equal quotients make
one group, as in SQL.  Other divisions are refused: by a column (``a / b``:
a zero divisor gives DuckDB's ``inf`` or NaN, and NaN, equal to nothing, cannot
be a key), or of other arithmetic (``(a + 3) / 2``: the key would be a function of
a computed value, which the lift does not chain).

The key is INT when every column and constant is an integer, else FLOAT.

>>> import sqlglot
>>> from .examples import resolver_over, stream
>>> res = resolver_over(stream("R", a="INT", c="FLOAT", s="STRING"))
>>> arith_key(res, sqlglot.parse_one("a * 12 - (a + 1)"))
ArithKey(tree=('-', ('*', ('R', 'a'), 12), ('+', ('R', 'a'), 1)), type='INT')
>>> arith_key(res, sqlglot.parse_one("-a + c")).type
'FLOAT'
>>> arith_key(res, sqlglot.parse_one("a / 2.0")), arith_key(res, sqlglot.parse_one("c / -4 + a")).type
(ArithKey(tree=Computed(fn='DIV', ref=('R', 'a'), args=(2,)), type='FLOAT'), 'FLOAT')
>>> arith_key(res, sqlglot.parse_one("a / a"))
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: unsupported division in a key (a / a): only a column by a nonzero integer constant (a divisor that may be 0 gives inf or NaN, and NaN cannot be a key)
>>> str(arith_key(res, sqlglot.parse_one("a * 142 / 100")))
'DIV(a, 100, 142)'
>>> arith_key(res, sqlglot.parse_one("(a + 3) / 2"))
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: unsupported division in a key ((a + 3) / 2): only of a column or a column times an integer constant, not of (a + 3)
>>> arith_key(res, sqlglot.parse_one("s + 1"))
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: unsupported arithmetic on STRING s in a key (only on numbers)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from ..functions import check_call
from .constants import NotConstant, fold, is_constant
from .nodes import sql_of
from .resolve import Computed, Resolver, unparen

_OPS = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*"}
KEY_NODES = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Neg)
"""The sqlglot nodes that make an expression arithmetic (:func:`is_key_arithmetic`)."""


@dataclass(frozen=True)
class ArithKey:
    """Arithmetic over columns used as a key (module doc): lifted into a variable by the normaliser.

    ``tree`` is the form an aggregated expression has (:mod:`.aggregates`): a column, a
    :class:`.resolve.Computed`, a number, ``(op, a, b)`` with op in ``+ - *``, or ``("neg", a)``.
    Two keys written alike (``GROUP BY A * 2`` and ``SELECT A * 2``) are equal.
    """

    tree: object
    type: str = field(compare=False)

    def __str__(self) -> str:
        return _text(self.tree)


def _text(t) -> str:
    if isinstance(t, tuple) and len(t) == 2 and all(isinstance(x, str) for x in t):
        return t[1]
    if isinstance(t, Computed) or not isinstance(t, tuple):
        return str(t)
    if t[0] == "neg":
        return f"-{_text(t[1])}"
    return f"({_text(t[1])} {t[0]} {_text(t[2])})"


def keyed(x, keys: list):
    """A view expression or HAVING predicate (:mod:`.viewexpr`) with every arithmetic over group columns that is
    a group key (``GROUP BY a * 2``) read as that key, ``("col", key)``: ``HAVING a * 2 > 2``, ``SELECT a * 2 + 1``.

    >>> k = ArithKey(("*", ("R", "a"), 2), "INT")
    >>> keyed((">", ("+", ("*", ("col", ("R", "a")), 2), 1), ("agg", "SUM", ("*", ("R", "a"), 2))), [k])
    ('>', ('+', ('col', ArithKey(tree=('*', ('R', 'a'), 2), type='INT')), 1), ('agg', 'SUM', ('*', ('R', 'a'), 2)))
    """
    trees = {k.tree: k for k in keys if isinstance(k, ArithKey)}
    if not trees:
        return x
    return _keyed(x, trees)


def _keyed(x, trees: dict):
    p = _plain(x)
    if p is not None and isinstance(p, tuple) and p in trees:
        return ("col", trees[p])
    if isinstance(x, tuple) and x and x[0] not in ("agg", "col"):
        return (x[0],) + tuple(_keyed(y, trees) for y in x[1:])
    return x


def _plain(x):
    """A view expression over group columns in :class:`ArithKey`'s form (columns unwrapped), else None."""
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return x
    if not isinstance(x, tuple) or not x:
        return None
    if x[0] == "col":
        return x[1]
    if x[0] in ("+", "-", "*", "neg"):
        parts = [_plain(y) for y in x[1:]]
        return None if any(p is None for p in parts) else (x[0], *parts)
    return None


def constant_value(key: ArithKey) -> int | float | None:
    """The value of a key that is the same for every row (``a * 0``, ``(a - a) * 2 + 1``: its polynomial over the
    columns has no other term), else None: such a "key" is a constant column, not a key.

    >>> constant_value(ArithKey(("+", ("*", ("R", "a"), 0), 3), "INT")), constant_value(ArithKey(("R", "a"), "INT"))
    (3, None)
    """
    p = _poly(key.tree)
    if any(p.values()) and set(k for k, c in p.items() if c) - {()}:
        return None
    return p.get((), 0)


def _poly(t) -> dict:
    """``t`` (:class:`ArithKey`'s tree) as a polynomial: ``{sorted columns (as text): coefficient}``."""
    if isinstance(t, (int, float)) and not isinstance(t, bool):
        return {(): t}
    if isinstance(t, tuple) and t and t[0] in ("+", "-", "*", "neg"):
        if t[0] == "neg":
            return {k: -c for k, c in _poly(t[1]).items()}
        a, b = _poly(t[1]), _poly(t[2])
        if t[0] == "*":
            out: dict = {}
            for ka, ca in a.items():
                for kb, cb in b.items():
                    k = tuple(sorted(ka + kb))
                    out[k] = out.get(k, 0) + ca * cb
            return out
        out = dict(a)
        for k, c in b.items():
            out[k] = out.get(k, 0) + (c if t[0] == "+" else -c)
        return out
    return {(repr(t),): 1}  # a column or a computed value: a symbol


def is_key_arithmetic(e: exp.Expression) -> bool:
    """Whether ``e`` is arithmetic that reads a column and no aggregate (a candidate key)."""
    e = unparen(e)
    return isinstance(e, KEY_NODES) and not is_constant(e) and e.find(exp.AggFunc) is None \
        and e.find(exp.Column) is not None


def arith_key(res: Resolver, e: exp.Expression) -> ArithKey:
    """The key ``e`` computes (module doc), or a :class:`..errors.CompileError` saying why it cannot be one."""
    floats: list[bool] = []
    tree = _tree(res, e, floats)
    return ArithKey(tree, "FLOAT" if any(floats) else "INT")


def _tree(res: Resolver, e: exp.Expression, floats: list[bool]):
    e = unparen(e)
    kind = type(e)
    if is_constant(e):
        v = res.constant(e)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise res.ctx.error(f"unsupported arithmetic on {sql_of(e)} in a key (only on numbers)", e)
        floats.append(isinstance(v, float))
        return v
    computed = res.computed(e)
    if computed is not None or kind is exp.Column:
        ref = computed or res.column(e)
        t = res.col_type(ref)
        if t not in ("INT", "FLOAT"):
            raise res.ctx.error(f"unsupported arithmetic on {t} {sql_of(e)} in a key (only on numbers)", e)
        floats.append(t == "FLOAT")
        return ref
    if kind is exp.Neg:
        return ("neg", _tree(res, e.this, floats))
    if kind is exp.Div:
        floats.append(True)
        return _quotient(res, e)
    if kind in _OPS:
        return (_OPS[kind], _tree(res, e.this, floats), _tree(res, e.expression, floats))
    raise res.ctx.error(f"unsupported {kind.__name__.upper()} ({sql_of(e)}) in a key computed from columns "
                        "(only + - * over numeric columns and constants)", e)


def _quotient(res: Resolver, e: exp.Div) -> Computed:
    """``a / d`` as ``DIV(a, d)`` (module doc): a column by a nonzero integer constant, else refused."""
    try:
        d = fold(e.expression)
    except NotConstant:
        d = None
    if isinstance(d, float) and d.is_integer():
        d = int(d)
    if isinstance(d, bool) or not isinstance(d, int) or d == 0:
        raise res.ctx.error(f"unsupported division in a key ({sql_of(e)}): only a column by a nonzero integer "
                            "constant (a divisor that may be 0 gives inf or NaN, and NaN cannot be a key)", e)
    num, m = _scaled_column(unparen(e.this))
    if num is None:
        raise res.ctx.error(f"unsupported division in a key ({sql_of(e)}): only of a column or a column times an "
                            f"integer constant, not of {sql_of(e.this)}", e)
    ref = res.column(num)
    problem = check_call("DIV", [res.col_type(ref), d, m])
    if problem is not None:
        raise res.ctx.error(f"unsupported division in a key ({sql_of(e)}): {problem}", e)
    return Computed("DIV", ref, (d,) if m == 1 else (d, m))


def _scaled_column(e: exp.Expression) -> tuple[exp.Column | None, int]:
    """A dividend ``a`` or ``a * m`` (``m * a``), ``m`` an integer constant, as ``(a, m)``; else ``(None, 0)``."""
    if type(e) is exp.Column:
        return e, 1
    if type(e) is exp.Mul:
        for col, k in ((unparen(e.this), e.expression), (unparen(e.expression), e.this)):
            try:
                m = fold(k) if type(col) is exp.Column else None
            except NotConstant:
                m = None
            if isinstance(m, int) and not isinstance(m, bool):
                return col, m
    return None, 0
