"""A column compared with an uncorrelated scalar subquery that has subqueries of its own: the subquery a part.

Why: ``SELECT * FROM E e1 WHERE e1.salary = (SELECT MAX(e2.salary) FROM E e2
WHERE e2.salary < (SELECT MAX(e3.salary) FROM E e3))`` (the second highest
salary; DBToaster's ``employee/query41``) nests a subquery two levels deep.  The
middle one reads no outer column, so it is one value for the whole query: in
the calculus an uncorrelated nested aggregate is a factor of its own
(DBToaster lifts it, ``(V ^= AggSum([], ...))``), which a change of its
relations moves for every row at once.  Compiled as a query of its own it is
an ordinary nested query (its own subquery one level down, :mod:`.nested`).
So the statement becomes a view over parts (:class:`.lifted.Plan`):

* part 0, the outer query without that conjunct: a view of rows, its count per
  row (``#0.0[K, ...]``);
* part 1, ``SELECT <the subquery's value> AS v, COUNT(*) AS n FROM ... WHERE ...``:
  its value and its row count (``#1.0[]``, ``#1.1[]``: SQL's MAX of no rows is
  NULL, and the comparison is not true, so the view asks ``0 < #1.1[]``; a
  value that is not NULL over no rows, a COUNT's 0 or a GREATEST, LEAST,
  COALESCE or CASE, is refused by name: :func:`.hoist.null_on_no_rows`);
* the view keeps part 0's rows whose compared column meets the comparison with
  part 1's value, when read (``0 < COUNT(1 FOR : #0.0[K, ...] WHERE 0 < #1.1[] AND
  K = #1.0[])``: the value read at the row's entry, as :mod:`.selectsub` reads one).

The outer query must be a view of rows (no aggregate, GROUP BY or DISTINCT) over
relations, selecting the compared column (``*`` selects every column); the
subquery selects one expression over aggregates, without GROUP BY, and every
column inside it is qualified by a table of its own FROM (or of a deeper one).
Anything else is left as written (and refused where it stands, by name).

>>> import sqlglot
>>> from .examples import PlainErrors, stream
>>> from ..printer import format_view_expr
>>> rels = {"E": stream("E", id="INT", salary="INT")}
>>> sel = sqlglot.parse_one('''SELECT * FROM E e1 WHERE e1.salary = (SELECT MAX(e2.salary) FROM E e2
...     WHERE e2.salary < (SELECT MAX(e3.salary) FROM E e3))''')
>>> deep_conjunct(sel, rels) is not None
True
>>> p = plan(sel, rels, PlainErrors())
>>> [s.sql() for s in p.parts]
['SELECT e1.id, e1.salary FROM E AS e1', 'SELECT MAX(e2.salary) AS v, COUNT(*) AS n FROM E AS e2 WHERE e2.salary < (SELECT MAX(e3.salary) FROM E AS e3)']
>>> p.keys, format_view_expr(p.where)
(('id', 'salary'), '0 < COUNT(1 FOR  : #0.0[ID, SALARY] WHERE 0 < #1.1[] AND SALARY = #1.0[])')
"""

from __future__ import annotations

from sqlglot import exp

from ..ast import Cmp, Const, MapRef, RelationDecl, Var
from ..over import Over
from ..viewnodes import BoolOp
from .clauses import conjuncts, from_items
from .hoist import null_on_no_rows
from .lifted import Plan
from .outputs import unique_names
from .resolve import Positions
from .setparts import key_variables

_CMPS = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
_FLIP = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_CLAUSES = ("group", "having", "distinct", "order", "limit", "offset", "qualify", "windows", "with", "with_")


def deep_conjunct(sel: exp.Expression, relations: dict[str, RelationDecl]) -> exp.Expression | None:
    """The WHERE conjunct of a view of rows comparing a column with an uncorrelated scalar subquery that holds
    subqueries of its own (module doc), or None."""
    if type(sel) is not exp.Select or any(sel.args.get(k) for k in _CLAUSES) or \
            not isinstance(sel.args.get("where"), exp.Where) or \
            any(isinstance(n, exp.AggFunc) for e in sel.expressions for n in e.walk()):
        return None
    if not all(type(t) is exp.Table and _relation(t, relations) is not None for t in from_items(sel)) or \
            any(j.args.get("side") or j.args.get("using") or j.args.get("method") for j in sel.args.get("joins") or []):
        return None
    for c in conjuncts(sel.args["where"].this):
        if type(c) in _CMPS and _sides(c) is not None:
            return c
    return None


def _sides(c: exp.Expression):
    """``(column, subquery select, op with the column on the left)`` of such a comparison, or None."""
    for col, sub, op in ((c.this, c.expression, _CMPS[type(c)]), (c.expression, c.this, _FLIP[_CMPS[type(c)]])):
        while type(sub) is exp.Paren:
            sub = sub.this
        if type(col) is not exp.Column or type(sub) is not exp.Subquery or type(sub.this) is not exp.Select:
            continue
        inner = sub.this
        if any(inner.args.get(k) for k in _CLAUSES) or len(inner.expressions) != 1 or \
                not any(isinstance(n, exp.AggFunc) for n in inner.expressions[0].walk()):
            continue
        own = {t.alias_or_name.lower() for s in inner.find_all(exp.Select) for t in from_items(s)}
        if any(not x.table or x.table.lower() not in own for x in inner.find_all(exp.Column)):
            continue  # correlated, or a column whose binding is not plain: the nested rules read it
        if not any(isinstance(n, (exp.Subquery, exp.Exists)) or (type(n) is exp.Select and n is not inner)
                   for n in inner.walk() if n is not inner):
            continue  # one level: the nested rules read it
        return col, inner, op
    return None


def plan(sel: exp.Select, relations: dict[str, RelationDecl], ctx: Positions) -> Plan:
    """The parts and the view of such a query (module doc)."""
    c = deep_conjunct(sel, relations)
    assert c is not None
    col, inner, op = _sides(c)
    outer = sel.copy()
    rest = [x.copy() for x in conjuncts(sel.args["where"].this) if x is not c]
    outer.set("where", exp.Where(this=exp.and_(*rest)) if rest else None)
    outer.set("expressions", _expanded(sel, relations, ctx))
    names = unique_names([e.alias_or_name for e in outer.expressions])
    at = [i for i, e in enumerate(outer.expressions) if _same(e.this if type(e) is exp.Alias else e, col, sel)]
    if not at:
        raise ctx.error(f"unsupported comparison of {col.sql()} with a subquery nested in a subquery where the "
                        "column is not selected (select it)", col)
    value = inner.expressions[0]
    value = value.this if type(value) is exp.Alias else value
    if not null_on_no_rows(value):  # the gate 0 < #1.1[] reads no rows as NULL (module doc)
        raise ctx.error(f"unsupported {value.sql()} compared with a subquery nested in a subquery: its value over "
                        "no rows is not NULL (only SUM, AVG, MIN, MAX under + - * / and constants)", value)
    part = inner.copy()
    part.set("expressions", [exp.alias_(value.copy(), "v"), exp.alias_(exp.Count(this=exp.Star()), "n")])
    key_vars = key_variables(names)
    row = tuple(Var(v) for v in key_vars)
    # the part's value is read at the row's entry of part 0 (an uncorrelated value is no map of the row's)
    meets = BoolOp("AND", (Cmp("<", Const(0), MapRef("#1.1", ())), Cmp(op, Var(key_vars[at[0]]), MapRef("#1.0", ()))))
    where = Cmp("<", Const(0), Over("COUNT", Const(1), (), MapRef("#0.0", row), meets))
    return Plan((outer, part), tuple(names), tuple(key_vars), (("count", MapRef("#0.0", row)),), where)


def _expanded(sel: exp.Select, relations: dict[str, RelationDecl], ctx: Positions) -> list[exp.Expression]:
    """The SELECT list with ``*`` and ``alias.*`` as the relations' columns (qualified), in FROM order."""
    out: list[exp.Expression] = []
    for e in sel.expressions:
        star = e if isinstance(e, exp.Star) else e.this if type(e) is exp.Column and isinstance(e.this, exp.Star) \
            else None
        if star is None:
            out.append(e.copy())
            continue
        qual = e.table.lower() if type(e) is exp.Column else ""
        for t in from_items(sel):
            if not qual or t.alias_or_name.lower() == qual:
                out += [exp.column(c.name, table=t.alias_or_name) for c in _relation(t, relations).columns]
    return out


def _relation(t: exp.Table, relations: dict[str, RelationDecl]) -> RelationDecl | None:
    """The declared relation a FROM item names (SQL names are case-insensitive)."""
    if t.args.get("db"):
        return None
    return next((r for name, r in relations.items() if name.lower() == t.name.lower()), None)


def _same(e: exp.Expression, col: exp.Column, sel: exp.Select) -> bool:
    """Whether a selected expression is the compared column (unqualified names read the one table that has it)."""
    if type(e) is not exp.Column or e.name.lower() != col.name.lower():
        return False
    if e.table and col.table:
        return e.table.lower() == col.table.lower()
    return len(from_items(sel)) == 1
