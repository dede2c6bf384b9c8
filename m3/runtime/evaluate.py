"""The value of a view expression at a row, read from map entries: what a view computes when it is read.

Why apart from :mod:`.views` (which finds a view's rows and which of them a
batch changed): evaluating one expression at one row is a concern of its
own, the semantics of the view language (docs/m3.md): a map entry absent is
0; a fold (MIN, MAX, SUM, COUNT of a folded key, only the values meeting its
``WHERE``); a ``TOTAL`` (the entries at the row whose summed variables meet
its condition; over one variable compared with a value of the row, from
sorted prefix sums: one binary search per row); arithmetic, ``/`` as
:func:`divide`; conditions.  Values come through a :class:`Reader`, so the
runtime's store and a stable snapshot read alike.

>>> from ..syntax import parse_program
>>> p = parse_program('''DECLARE MAP m[A: INT, B: INT] : INT; DECLARE MAP n[B: INT] : INT;
... DECLARE VIEW v[a := A](x := COUNT(B : m[A, B] WHERE n[B] <= 0), t := TOTAL(B : m[A, B] WHERE B < 3));''')
>>> maps = {"m": {(1, 1): 2, (1, 2): 1, (1, 5): 4}, "n": {(2,): 1}}
>>> def entries(name, pattern):
...     return {k: v for k, v in maps[name].items() if all(p is None or p == x for p, x in zip(pattern, k))}
>>> reader = Reader(lambda name, key: maps[name].get(key, 0), entries)
>>> [value(c.expr, {"A": 1}, reader) for c in p.views[0].columns]
[2, 3]
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable

from ..ast import Cmp, Const, Expr, MapRef, Var, walk
from ..viewnodes import Arith, BoolOp, Fold, Total
from ..over import Over, conjuncts
from .nanorder import extremes, greatest, greatest2, least, least2

Entries = Callable[[str, tuple], "dict | Iterable[tuple[tuple, object]]"]


_HOLDS_NONE = {}.get  # (a reader that holds no fold ready: every fold read through its ``fold``)


class Reader:
    """Map entries for evaluating rows: ``get(map, key)`` (0 when absent) and ``entries(map, pattern)``.

    ``totals(total, env, reader)``: a TOTAL's value where a memo has it (:mod:`.totals`), else None (then
    it is evaluated here, whole).
    """

    def __init__(self, get: Callable[[str, tuple], object], entries: Entries,
                 totals: Callable[[Total, dict, Reader], object] | None = None):
        self.get = get
        self.entries = entries
        self.totals = totals

    def has(self, name: str, pattern: tuple) -> bool:
        """Whether the map has an entry matching ``pattern`` (a reader of a store answers an unbound pattern
        without listing the map)."""
        return bool(items(self.entries(name, pattern)))

    def values(self, name: str, pattern: tuple, at: int) -> list:
        """The values at key position ``at`` of the entries matching ``pattern`` (bound everywhere else): what a
        fold over that position reads.  A reader of a store answers from an index's slice without building keys."""
        return [k[at] for k, n in items(self.entries(name, pattern)) if n]

    def count(self, name: str, pattern: tuple, at: int) -> int:
        """How many entries match ``pattern`` (bound but at ``at``): a COUNT fold over that position."""
        return len(self.values(name, pattern, at))

    def fold(self, name: str, pattern: tuple, at: int) -> tuple:
        """``(count, least, greatest)`` of the values :meth:`values` lists (least and greatest None where there
        are none): a ``MIN``, ``MAX`` or ``COUNT`` over that position.  The reader of the maps after a batch
        answers from a memo adjusted by the batch's journals (:mod:`.slicefolds`)."""
        found = self.values(name, pattern, at)
        return extremes(found)  # (SQL's order: NaN above every number, .nanorder)

    def getter(self, name: str) -> Callable[[tuple, object], object]:
        """``(key, default) -> get(name, key)``: map ``name``'s accessor, taken once per reader by a view's bound
        row function (:func:`.viewcode.compile_bound`), which passes the 0 :meth:`get` gives where absent (so a
        reader of a store can give its dict's own ``get``, no lookup by name and no Python frame per read)."""
        get = self.get
        return lambda key, default: get(name, key)

    def counter(self, name: str, at: int) -> Callable[[tuple, int], int]:
        """``(others, default) -> count(name, pattern, at)``, taken once per reader (as :meth:`getter`):
        ``others`` the pattern's values at every position but ``at``, in order (the slice's name; a reader
        kept as counts answers it with one dict lookup); ``default`` is returned for an empty slice (0)."""
        count = self.count
        return lambda others, default: count(name, others[:at] + (None,) + others[at:], at) or default

    def folder(self, name: str, at: int) -> tuple[Callable[[tuple], tuple | None], Callable[[tuple], tuple]]:
        """``(held, fold)``, taken once per reader (as :meth:`getter`): ``held(pattern)`` the slice's fold where the
        reader holds it ready (else None), ``fold(pattern)`` ``fold(name, pattern, at)``; a bound row function
        reads ``held(p) or fold(p)`` (a fold is a non-empty tuple), so a memo's slice costs no Python frame.
        This reader holds none."""
        fold = self.fold
        return _HOLDS_NONE, lambda pattern: fold(name, pattern, at)

    def fold_term(self, spec, pattern: tuple, group) -> object:
        """One group's term of a sum of folds (:class:`.foldsums.SumOfFolds`): its fold, 0 where empty."""
        found = self.fold(spec.fmap, spec.fold_pattern(pattern, group), spec.fat)
        return found[1 if spec.kind == "MIN" else 2] if found[0] else 0

    def fold_sum(self, rows: str, fmap: str, pattern: tuple, spec) -> object:
        """``SUM(KIND(...) FOR G : rows[...])`` (``spec``: :class:`.foldsums.SumOfFolds`, of maps ``rows`` and
        ``fmap``) at the row whose ``rows`` slice is ``pattern``: each group's fold, summed in the slice's order.  The reader of the maps after a batch answers from a memo adjusted by the
        batch's journals (:mod:`.foldsums`)."""
        total = 0
        for group in self.values(spec.rows, pattern, spec.at):
            total = total + self.fold_term(spec, pattern, group)
        return total


def items(found) -> list:
    """An ``entries`` answer (a dict or pairs) as a list of ``(key, value)``."""
    return list(found.items()) if isinstance(found, dict) else list(found)


def value(e: Expr, env: dict, reader: Reader):
    """The value of a view expression where the variables are ``env``."""
    if isinstance(e, Const):
        return e.value
    if isinstance(e, Var):
        return env[e.name]
    if isinstance(e, MapRef):
        return reader.get(e.name, tuple(env[a.name] if isinstance(a, Var) else a.value for a in e.args))
    if isinstance(e, Arith):
        a, b = value(e.left, env, reader), value(e.right, env, reader)
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if e.op == "*":
            return a * b
        if e.op == "LEAST":
            return least2(a, b)
        if e.op == "GREATEST":
            return greatest2(a, b)
        return divide(a, b)
    if isinstance(e, Fold):
        pattern = tuple(None if isinstance(a, Var) and a.name == e.var else env[a.name] if isinstance(a, Var)
                        else a.value for a in e.ref.args)
        at = next(i for i, a in enumerate(e.ref.args) if isinstance(a, Var) and a.name == e.var)
        values = [k[at] for k, n in items(reader.entries(e.ref.name, pattern)) if n]
        if e.cond is not None:  # only the values that meet a nested condition (COUNT DISTINCT beside NOT IN)
            values = [x for x in values if holds(e.cond, {**env, e.var: x}, reader)]
        if not values:
            return 0
        if e.kind == "MIN":
            return least(values)
        if e.kind == "MAX":
            return greatest(values)
        return len(values) if e.kind == "COUNT" else sum(values)
    if isinstance(e, Over):
        return _over(e, env, reader)
    if isinstance(e, Total):
        if reader.totals is not None:
            kept = reader.totals(e, env, reader)
            if kept is not None:
                return kept
        ranged = _range_total(e, env, reader)
        if ranged is not None:
            return ranged
        free = set(e.vars)
        pattern = tuple(None if isinstance(a, Var) and a.name in free else env[a.name] if isinstance(a, Var)
                        else a.value for a in e.ref.args)
        slots = [(i, a.name) for i, a in enumerate(e.ref.args) if isinstance(a, Var) and a.name in free]
        total = 0
        for k, n in items(reader.entries(e.ref.name, pattern)):
            if not n:
                continue
            if e.cond is not None:
                inner = dict(env)
                inner.update((name, k[i]) for i, name in slots)
                if not holds(e.cond, inner, reader):
                    continue
            total += n
        return total
    raise TypeError(f"not a view expression: {e!r}")


def _over(e: Over, env: dict, reader: Reader):
    """An aggregate over a map's entries (:mod:`..over`); one that reads no row variable (an uncorrelated
    scalar subquery over a grouped derived table: Q15's MAX) is computed once per reader."""
    own = set(e.vars)
    free = {n.name for n in walk(e) if isinstance(n, Var)} - own - {x for n in walk(e) if isinstance(n, Over)
                                                                       for x in n.vars}
    cache = reader.__dict__.setdefault("_overs", {}) if not free else None
    if cache is not None and id(e) in cache:
        return cache[id(e)]
    found = []
    for inner in _over_entries(e, env, reader):
        if e.cond is None or holds(e.cond, inner, reader):
            found.append(1 if e.kind == "COUNT" else value(e.expr, inner, reader))
    result = 0 if not found else least(found) if e.kind == "MIN" else greatest(found) if e.kind == "MAX" else sum(found)
    if cache is not None:
        cache[id(e)] = result
    return result


def _over_entries(e: Over, env: dict, reader: Reader) -> list[dict]:
    """The entries of an aggregate's map at the row (value 0 skipped), each as the row's variables and its own.

    With lifted keys (conjuncts ``C = cnt[K]`` of its condition, ``C`` a row variable, the other side reading
    only the entry's variables: TPC-H Q13's ``c_count``), the entries are grouped by those values once per
    reader, so each row of a view keyed by an inner aggregate reads its own group's entries, not all of them.
    """
    own = set(e.vars)
    lifted = [(x.name, y) for c in conjuncts(e.cond) if isinstance(c, Cmp) and c.op == "="
              for x, y in ((c.left, c.right), (c.right, c.left))
              if isinstance(x, Var) and x.name in env and x.name not in own and _var_names(y) <= own]
    pattern = tuple(None if isinstance(a, Var) and a.name in own else env[a.name] if isinstance(a, Var)
                    else a.value for a in e.ref.args)
    cache = reader.__dict__.setdefault("_groups", {}) if lifted else None
    if cache is None or (id(e), pattern) not in cache:
        slots = [(i, a.name) for i, a in enumerate(e.ref.args) if isinstance(a, Var) and a.name in own]
        own_values = [{name: k[i] for i, name in slots} for k, n in items(reader.entries(e.ref.name, pattern)) if n]
        if cache is None:
            return [{**env, **b} for b in own_values]
        groups: dict[tuple, list[dict]] = {}
        for b in own_values:
            groups.setdefault(tuple(value(y, {**env, **b}, reader) for _, y in lifted), []).append(b)
        cache[(id(e), pattern)] = groups
    return [{**env, **b} for b in cache[(id(e), pattern)].get(tuple(env[x] for x, _ in lifted), [])]


_FLIPPED = {"<": ">", "<=": ">=", "=": "=", "<>": "<>"}


def _range_total(e: Total, env: dict, reader: Reader):
    """A TOTAL over one variable ``X`` whose condition compares ``X`` with a value of the row (a subquery
    correlated by a comparison: VWAP's volume at higher prices), from sorted prefix sums: the entries at the
    row's pattern are sorted once per reader (one read, or one batch's changed rows), then each row costs a
    binary search instead of a scan.  None when the TOTAL is not of that form."""
    cond = e.cond
    if len(e.vars) != 1 or not isinstance(cond, Cmp):
        return None
    x = e.vars[0]
    if isinstance(cond.left, Var) and cond.left.name == x and x not in _var_names(cond.right):
        op, bound = _FLIPPED[cond.op], cond.right  # X op' t  ==  t op X
    elif isinstance(cond.right, Var) and cond.right.name == x and x not in _var_names(cond.left):
        op, bound = cond.op, cond.left  # t op X
    else:
        return None
    pattern = tuple(None if isinstance(a, Var) and a.name == x else env[a.name] if isinstance(a, Var) else a.value
                    for a in e.ref.args)
    cache = reader.__dict__.setdefault("_ranges", {})
    key = (id(e), pattern)
    found = cache.get(key)
    if found is None:
        at = next(i for i, a in enumerate(e.ref.args) if isinstance(a, Var) and a.name == x)
        pairs = sorted((k[at], n) for k, n in items(reader.entries(e.ref.name, pattern)) if n)
        keys = [k for k, _ in pairs]
        sums = [0]
        for _, n in pairs:
            sums.append(sums[-1] + n)
        found = cache[key] = (keys, sums, dict(pairs))
    keys, sums, by_key = found
    t = value(bound, env, reader)
    total = sums[-1]
    if op == "<":  # t < X
        return total - sums[bisect.bisect_right(keys, t)]
    if op == "<=":
        return total - sums[bisect.bisect_left(keys, t)]
    if op == ">":  # t > X
        return sums[bisect.bisect_left(keys, t)]
    if op == ">=":
        return sums[bisect.bisect_right(keys, t)]
    if op == "=":
        return by_key.get(t, 0)
    return total - by_key.get(t, 0)


def _var_names(e: Expr) -> set[str]:
    return {n.name for n in walk(e) if isinstance(n, Var)}


def divide(a, b) -> float:
    """``a / b`` as floats; by zero ``inf`` or ``-inf`` (as DuckDB divides), and ``0 / 0`` is 0.

    0 / 0 is what an AVG of no rows reads (SQL: NULL; M3 has no NULL, and an
    absent entry is 0); DuckDB's ``SUM(a) / SUM(b)`` with both 0 is NaN.

    >>> divide(3, 2), divide(1, 0), divide(-1, 0.0), divide(0, 0)
    (1.5, inf, -inf, 0)
    """
    if b:
        return a / b
    if not a:
        return 0
    return math.inf if a > 0 else -math.inf


_CMP = {"=": lambda a, b: a == b, "<>": lambda a, b: a != b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b}


def holds(e: Expr, env: dict, reader: Reader) -> bool:
    """Whether a view condition holds where the variables are ``env``."""
    if isinstance(e, BoolOp):
        if e.op == "NOT":
            return not holds(e.args[0], env, reader)
        if e.op == "AND":
            return all(holds(a, env, reader) for a in e.args)
        return any(holds(a, env, reader) for a in e.args)
    if isinstance(e, Cmp):
        return bool(_CMP[e.op](value(e.left, env, reader), value(e.right, env, reader)))
    raise TypeError(f"not a view condition: {e!r}")
