"""One aggregated branch of a set operation: the part it compiles to and what the view reads of it.

Why its own module: :mod:`.setagg` combines the branches of ``UNION [ALL]``, ``INTERSECT [ALL]`` and ``EXCEPT
[ALL]`` by a rule over *what each branch has at a key* (the calculus's existence of a row, as DBToaster lifts it),
and that needs three things of every branch, whatever its shape: its value columns, whether it has a row there
(its hidden ``COUNT(*)`` above 0 and its HAVING true), and whether a value is NULL (an aggregate other than COUNT
over no rows: only a branch without GROUP BY has a row then).  A branch is a part (:mod:`.lifted`), compiled as a
query of its own from the general rules: its keys, its values ``c0 ...``, the aggregates its HAVING reads
``h0 ...``, and ``COUNT(*)`` last; its HAVING becomes a condition of the view over those columns, each comparison
TRUE only where the aggregates it reads are not NULL (SQL's comparison with NULL is not TRUE, and NOT is pushed
down to the comparisons).

>>> import sqlglot
>>> from .examples import PlainErrors
>>> from ..ast import Var
>>> from ..printer import format_view_expr
>>> b = Branch.of(sqlglot.parse_one("SELECT a, SUM(b) FROM R GROUP BY a HAVING NOT COUNT(*) > 1 AND MAX(b) < 3"),
...               2, PlainErrors())
>>> b.part(None).sql()
'SELECT a, SUM(b) AS c0, MAX(b) AS h0, COUNT(*) AS h1, COUNT(*) AS c1 FROM R GROUP BY a'
>>> format_view_expr(b.has_row(0, (Var("A"),)))
'0 < #0.3[A] AND #0.2[A] <= 1 AND #0.1[A] < 3'
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from ..ast import Cmp, Const, Expr, MapRef, RelationDecl
from ..nullable import ROWS, SUFFIX
from ..viewnodes import Arith, BoolOp
from .lifted import ARITH, CMPS
from .neverequal import column_types
from .nodes import sql_of
from .nullexprkeys import KEY_PREFIX
from .nullshown import counted_item
from .outerkeys import ConstKey
from .resolve import Positions, unparen

_NEGATED = {"=": "<>", "<>": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
_FLIPPED = {">": "<", ">=": "<="}
TRUE = Cmp("=", Const(0), Const(0))


def aggregated(e: exp.Expression) -> bool:
    """Whether a SELECT item reads an aggregate (a value column; else a key)."""
    return any(isinstance(n, exp.AggFunc) for n in e.walk())


def _nullable(e: exp.Expression) -> bool:
    """Whether an expression over aggregates is NULL over no rows: it reads an aggregate other than COUNT."""
    return any(isinstance(n, exp.AggFunc) and not isinstance(n, exp.Count) for n in e.walk())


@dataclass
class Branch:
    """An aggregated SELECT of a set operation, read as a part: keys, values, HAVING aggregates, ``COUNT(*)``."""

    select: exp.Select
    keys: list[exp.Expression]  # its non-aggregate items (its GROUP BY), in order
    values: list[exp.Expression]  # its aggregate items, in order
    having: exp.Expression | None
    reads: list[exp.Expression]  # the aggregates its HAVING reads (part columns after the values)
    keyless: bool  # no GROUP BY: one row, also over no rows (SQL)

    flags: list[exp.Expression] = field(default_factory=list)  # a nullable key's indicator (after the keys)
    flagged: tuple[int, ...] = ()  # the places among its keys of the nullable ones (each with its flag, in order)
    nonnull: dict[int, exp.Expression] = field(default_factory=dict)  # value j -> COUNT of its non-NULL rows
    hidden: list[exp.Expression] = field(default_factory=list)  # GROUP BY items it does not select (UNION ALL)
    pad: dict[int, ConstKey] = field(default_factory=dict)  # the other branches' hidden keys: constants here

    @staticmethod
    def of(b: exp.Select, width: int, ctx: Positions, kind: str = "UNION") -> Branch:
        """The branch ``b`` (``width`` columns, as the first branch) of a ``kind`` statement, or refused by name;
        in a UNION ALL its GROUP BY items it does not select are :attr:`hidden` keys (:mod:`.setgroups`).  Over
        nullable columns
        ``b`` is rewritten (:mod:`.threevalued`): its hidden items ``__nonnull_k`` say where item ``k`` is NULL,
        its GROUP BY holds a nullable key's indicator (:mod:`.nullshown`)."""
        for arg in ("order", "limit", "offset"):
            if b.args.get(arg):
                raise ctx.error(f"unsupported {arg.upper()} in a set-operation branch of aggregated queries "
                                f"{sql_of(b)}", b)
        shown = shown_items(b)
        counts = {counted_item(e): e.this for e in b.expressions if counted_item(e) is not None}
        nullkeys = {int(e.alias[len(KEY_PREFIX):]): e.this for e in b.expressions if _key_indicator(e)}
        if len(shown) != width:
            raise ctx.error(f"set-operation branches select {width} and {len(shown)} columns", b)
        items = [e.this if type(e) is exp.Alias else e for e in shown]
        keys = [x for x in items if not aggregated(x)]
        group = b.args.get("group")
        grouped = [g for g in group.expressions] if group is not None else []
        columns = [g for g in grouped if type(g) is exp.Column and g.name.endswith(SUFFIX)]
        flags: list[exp.Expression] = []
        flagged: list[int] = []  # a column key's ``b__null``; an arithmetic key's ``__nullkey_<place>``
        for n, k in enumerate(keys):  # (:mod:`.nullexprkeys`)
            f = nullkeys.get(items.index(k)) or next((f for f in columns if _flag_of(f, k)), None)
            if f is not None:
                flags.append(f)
                flagged.append(n)
        shown_keys = {x.sql() for x in keys}
        aliases = {e.alias.lower() for e in shown if type(e) is exp.Alias}  # GROUP BY an alias: refused below
        hidden = [g for g in grouped if g not in flags and g.sql() not in shown_keys and
                  not (type(g) is exp.Column and not g.table and g.name.lower() in aliases)]
        if hidden and kind not in ("UNION ALL", "UNION") and not any(isinstance(x, exp.Star) for x in items):
            raise ctx.error(f"unsupported {kind} of aggregated queries grouped by columns they do not select "
                            f"({sql_of(b)}): its rows would be aggregate values lifted into keys, which is built "
                            "for UNION and UNION ALL only", b)
        if sorted(g.sql() for g in grouped if g not in flags and g not in hidden) != sorted(shown_keys) or \
                len(shown_keys) != len(keys) or any(isinstance(x, exp.Star) for x in items):
            raise ctx.error(f"unsupported set-operation branch of aggregated queries {sql_of(b)}: each branch grouped "
                            "by exactly its selected columns, at the same places (a key may occur once per branch)", b)
        having = b.args.get("having")
        having = having.this if having is not None else None
        reads = [] if having is None else list(dict.fromkeys(n for n in having.find_all(exp.AggFunc)))
        values = [x for x in items if aggregated(x)]
        at = [j for j, x in enumerate(items) if aggregated(x)]  # an item's place -> its value's
        return Branch(b, keys, values, having, reads, group is None, flags, tuple(flagged),
                      {at.index(k): x for k, x in counts.items() if k in at}, hidden)

    def part(self, branch: int | None) -> exp.Select:
        """The part's SELECT (DISTINCT dropped: a branch grouped by its selected columns holds each row once), with
        its hidden keys after its keys, the other branches' hidden keys as constants (:attr:`pad`) and the constant
        branch key ``branch`` after them all (:func:`.outerkeys.with_constants`), or none."""
        part = self.select.copy()
        counts = [self.nonnull[j] for j in sorted(self.nonnull)]
        columns = self.values + self.reads + counts + [exp.Count(this=exp.Star())]
        names = [f"c{j}" for j in range(len(self.values))] + [f"h{j}" for j in range(len(self.reads))] + \
            [f"n{j}" for j in range(len(counts))] + [f"c{len(self.values)}"]
        keys = self.keys + self.flags + self.hidden
        part.set("expressions", [x.copy() for x in keys] + [exp.alias_(v.copy(), n) for v, n in zip(columns, names)])
        part.set("group", exp.Group(expressions=[x.copy() for x in keys]) if keys else None)
        for arg in ("having", "distinct"):
            part.set(arg, None)
        if branch is not None:
            at = len(keys) + len(self.pad)
            part.meta["constants"] = {**self.pad, at: ConstKey(branch, "INT", at)}
        return part


    def value(self, i: int, row: tuple, j: int) -> Expr:
        """Value column ``j`` of part ``i`` at ``row``."""
        return MapRef(f"#{i}.{j}", row)

    def rows(self, i: int, row: tuple) -> Expr:
        """The part's hidden ``COUNT(*)`` at ``row``."""
        return MapRef(f"#{i}.{len(self.values) + len(self.reads) + len(self.nonnull)}", row)

    def counted(self, i: int, row: tuple, j: int) -> Expr | None:
        """What is 0 where value ``j`` is NULL: the count of its non-NULL rows (over nullable columns), the rows
        (an aggregate other than COUNT without GROUP BY); None where it never is."""
        if j in self.nonnull:
            return MapRef(f"#{i}.{len(self.values) + len(self.reads) + sorted(self.nonnull).index(j)}", row)
        return self.rows(i, row) if self.keyless and _nullable(self.values[j]) else None

    def is_null(self, i: int, row: tuple, j: int) -> Expr | None:
        """Where value ``j`` is NULL (:meth:`counted` 0); None where it never is."""
        n = self.counted(i, row, j)
        return None if n is None else Cmp("<=", n, Const(0))

    def has_row(self, i: int, row: tuple) -> Expr:
        """Where the branch has a row at ``row``: always without GROUP BY, else where it reads rows; and its
        HAVING holds."""
        there = TRUE if self.keyless else Cmp("<", Const(0), self.rows(i, row))
        return there if self.having is None else flat_bool("AND", [there, self._cond(self.having, i, row, False)])

    def _cond(self, e: exp.Expression, i: int, row: tuple, negated: bool) -> Expr:
        e = unparen(e)
        if type(e) in (exp.And, exp.Or):
            op = "AND" if (type(e) is exp.And) != negated else "OR"
            return BoolOp(op, (self._cond(e.this, i, row, negated), self._cond(e.expression, i, row, negated)))
        if type(e) is exp.Not:
            return self._cond(e.this, i, row, not negated)
        op = CMPS.get(type(e))
        if op is None:
            raise ValueError(e)
        op = _NEGATED[op] if negated else op
        left, right = self._value(e.this, i, row), self._value(e.expression, i, row)
        cmp = Cmp(_FLIPPED[op], right, left) if op in _FLIPPED else Cmp(op, left, right)  # a view reads = <> < <=
        if self.keyless and _nullable(e):  # a comparison with NULL is not TRUE (nor is its NOT)
            cmp = flat_bool("AND", [Cmp("<", Const(0), self.rows(i, row)), cmp])
        return cmp

    def _value(self, e: exp.Expression, i: int, row: tuple) -> Expr:
        e = unparen(e)
        if isinstance(e, exp.AggFunc):
            return MapRef(f"#{i}.{len(self.values) + self.reads.index(e)}", row)
        if type(e) in ARITH:
            return Arith(ARITH[type(e)], self._value(e.this, i, row), self._value(e.expression, i, row))
        if type(e) is exp.Neg:
            return Arith("-", Const(0), self._value(e.this, i, row))
        if type(e) is exp.Literal and not e.is_string:
            return Const(int(e.this) if e.this.lstrip("-").isdigit() else float(e.this))
        keys = [k.sql() for k in self.keys]
        if e.sql() in keys:
            return row[keys.index(e.sql())]
        raise ValueError(e)

    def condition(self, i: int, row: tuple, ctx: Positions) -> Expr:
        """:meth:`has_row`, a HAVING it does not translate refused by name."""
        try:
            return self.has_row(i, row)
        except ValueError as bad:
            raise ctx.error(f"unsupported HAVING {sql_of(self.having)} in a set-operation branch of aggregated "
                            f"queries: {sql_of(bad.args[0])} (comparisons, AND, OR, NOT of aggregates, group columns "
                            "that are not nullable, numbers and + - * / only)", self.select) from None


def inexact(value: exp.Expression, sel: exp.Select, relations: dict[str, RelationDecl]) -> str | None:
    """Why a set operation cannot compare ``value`` (an item of branch ``sel``) exactly, or None.  A FLOAT is
    compared with ``=``, so a SUM's rounding makes the result depend on the order of inserts and deletes (SUM
    of 0.1 and 0.2 less 0.1 is not 0.2), and NaN is unequal to itself; ``/`` is NULL over a 0 divisor in SQL,
    which a value over aggregates reads as 0 (:func:`_nullable` takes a COUNT's quotient as never NULL)."""
    if any(type(n) is exp.Div for n in value.walk()):
        return "a quotient (/), NULL in SQL where its divisor is 0"
    types = column_types(sel, relations)
    for n in value.walk():
        if type(n) is exp.Avg or type(n) is exp.Literal and not n.is_string and not n.this.lstrip("-").isdigit():
            return "a FLOAT value, compared exactly"
        if type(n) is exp.Column and not any(type(a) is exp.Count for a in _ancestors(n, value)) and \
                types.get((n.table.lower(), n.name.lower()), "FLOAT" if not types else "INT") == "FLOAT":
            return "a FLOAT value, compared exactly"
    return None


def _ancestors(n: exp.Expression, top: exp.Expression) -> list[exp.Expression]:
    out = []
    while n is not top and n.parent is not None:
        n = n.parent
        out.append(n)
    return out


def _key_indicator(e: exp.Expression) -> bool:
    return type(e) is exp.Alias and e.alias.startswith(KEY_PREFIX) and e.alias[len(KEY_PREFIX):].isdigit()


def shown_items(b: exp.Select) -> list[exp.Expression]:
    """A branch's output items: not the hidden counts a rewrite over nullable columns appends (``__nonnull_k``,
    where item ``k`` is NULL; ``__rows__null``, a group's rows: the part's own ``COUNT(*)`` says it; an
    arithmetic key's indicator ``__nullkey_k``, read as the key's flag)."""
    return [e for e in b.expressions if counted_item(e) is None and not _key_indicator(e) and
            not (type(e) is exp.Alias and e.alias == ROWS)]


def _flag_of(flag: exp.Column, key: exp.Expression) -> bool:
    """Whether ``flag`` is the indicator column of the key item ``key`` (``r.b__null`` of ``r.b``)."""
    return type(key) is exp.Column and flag.name.lower() == (key.name + SUFFIX).lower() and \
        flag.table.lower() == key.table.lower()


def flat_bool(op: str, conds: list[Expr]) -> Expr:
    """``conds`` joined by ``op`` (AND, OR) with nested chains of the same ``op`` flattened and, for AND, the
    always-true condition left out: the branches' conditions are built piece by piece, and a flat chain is
    what the views' printer and the cost classes read.

    >>> print(flat_bool("AND", [TRUE, BoolOp("AND", (Cmp("<", Const(0), Const(1)), TRUE)), TRUE]).op)
    <
    """
    flat = [x for c in conds for x in (c.args if isinstance(c, BoolOp) and c.op == op else (c,))
            if not (op == "AND" and x == TRUE and len(conds) > 1)]
    return flat[0] if len(flat) == 1 else BoolOp(op, tuple(flat))
