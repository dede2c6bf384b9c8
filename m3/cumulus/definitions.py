"""Map definitions as SQL: what a bulk load computes with Spark (docs/cumulus.md §7).

Every map of a compiled program has a *defining query* (``MapDecl.definition``):
a sum of products of relation atoms, comparisons and arithmetic, summed over
every variable that is not a key.  :func:`definition_sql` writes it as one SQL
query over tables named like the relations, with the relations' column names:

* each relation atom is a table in ``FROM`` (``t0``, ``t1``, ...), joined on
  the variables it shares with the atoms before it (``JOIN ... ON``; a
  ``CROSS JOIN`` when it shares none);
* constants in an atom, a variable repeated in one atom and the comparisons
  of the product are conditions (``ON``/``WHERE``);
* the other factors multiply into ``SUM(...)``, grouped by the key columns;
* the output columns are ``k0, k1, ..., value``; zero sums are left out
  (maps hold non-zero entries only), as ``evaluate_definition`` does;
* a sum of several products is a ``UNION ALL`` of one aggregate per product
  and an outer ``GROUP BY``/``SUM``.

Values are computed as the runtime computes them: FLOAT columns as
``DOUBLE`` (a ``DECIMAL`` table column is summed in floating point, as the
streamed rows would be), INT columns as ``BIGINT`` (no 32-bit overflow in a
product), FLOAT constants as ``DOUBLE``; DATE constants are ``DATE
'yyyy-mm-dd'`` literals and compare with DATE columns.  ``dialect`` picks the
quoting: ``"standard"`` (DuckDB, PostgreSQL: ``"name"``, ``''`` in strings)
or ``"spark"`` (Spark SQL: backticks, backslash escapes).

>>> from ..syntax import parse_program
>>> p = parse_program('''CREATE TABLE R(A INT, B INT); CREATE TABLE S(B INT, C INT);
... DECLARE MAP m[A: INT] : INT := R(A, B) * S(B, C) * C * {C < 10};''')
>>> print(definition_sql(p, "m"))
SELECT t0."A" AS k0, SUM(CAST(t1."C" AS BIGINT)) AS value
FROM "R" AS t0
JOIN "S" AS t1 ON t1."B" = t0."B"
WHERE t1."C" < 10
GROUP BY t0."A"
HAVING SUM(CAST(t1."C" AS BIGINT)) <> 0
>>> output_columns(p.map("m"))
['k0', 'value']
"""

from __future__ import annotations

import datetime
import math

from ..ast import (
    LIKE_OPS,
    Cmp,
    Const,
    Expr,
    IfThen,
    MapDecl,
    MapRef,
    Prod,
    Program,
    RelAtom,
    Sum,
    Var,
    walk,
)

DIALECTS = ("standard", "spark")
_PLAIN_SQL_OPS = {"=": "=", "<>": "<>", "<": "<", "<=": "<="}
_CASTS = {"INT": "BIGINT", "FLOAT": "DOUBLE"}


class DefinitionError(ValueError):
    """A map whose definition cannot be written as SQL (none, a map reference, an unbound variable)."""


def output_columns(m: MapDecl) -> list[str]:
    """The columns :func:`definition_sql` answers: ``k0, ..., value``.

    >>> from ..ast import Column
    >>> output_columns(MapDecl("m", (Column("A", "INT"), Column("D", "DATE")), "FLOAT"))
    ['k0', 'k1', 'value']
    """
    return [f"k{i}" for i in range(len(m.keys))] + ["value"]


def definitions_sql(program: Program, dialect: str = "standard") -> dict[str, str]:
    """:func:`definition_sql` of every map of ``program``, by map name (every map needs a definition)."""
    return {m.name: definition_sql(program, m, dialect) for m in program.maps}


def definition_sql(program: Program, m: MapDecl | str, dialect: str = "standard") -> str:
    """One SQL query answering the map's entries as rows ``k0, ..., value`` (non-zero values only).

    A sum of products becomes a ``UNION ALL`` of one aggregate per product:

    >>> from ..syntax import parse_program
    >>> p = parse_program('''CREATE TABLE R(A INT, B FLOAT);
    ... DECLARE MAP m[] : FLOAT := R(A, B) * B + -1 * R(A, B) * {A = 3} * B;''')
    >>> print(definition_sql(p, "m", dialect="spark"))
    SELECT SUM(value) AS value FROM (
    SELECT SUM(CAST(t0.`B` AS DOUBLE)) AS value
    FROM `R` AS t0
    UNION ALL
    SELECT SUM(((-1) * CAST(t0.`B` AS DOUBLE))) AS value
    FROM `R` AS t0
    WHERE t0.`A` = 3
    ) AS terms
    HAVING SUM(value) <> 0
    """
    if dialect not in DIALECTS:
        raise ValueError(f"unknown SQL dialect {dialect!r} (known: {', '.join(DIALECTS)})")
    decl = program.map(m) if isinstance(m, str) else m
    if decl.definition is None:
        raise DefinitionError(f"map {decl.name!r} has no defining query")
    if any(isinstance(n, MapRef) for n in walk(decl.definition)):
        raise DefinitionError(f"map {decl.name!r} is defined over other maps, not over relations")
    sql = _Writer(program, decl, dialect)
    terms = _terms(decl.definition)
    if len(terms) == 1 and any(isinstance(f, RelAtom) for f in terms[0]):
        return sql.term(terms[0], outer=True)
    keys = [f"k{i}" for i in range(len(decl.keys))]
    inner = "\nUNION ALL\n".join(sql.term(t, outer=False) for t in terms)
    head = "SELECT " + ", ".join([*keys, "SUM(value) AS value"]) + " FROM (\n" + inner + "\n) AS terms"
    group = ("\nGROUP BY " + ", ".join(keys)) if keys else ""
    return head + group + "\nHAVING SUM(value) <> 0"


def _terms(e: Expr) -> list[list[Expr]]:
    """The definition as a sum of products: a list of factor lists (sums of relation terms distributed).

    Like ``evaluate_definition``'s, and nested products are flattened.
    """
    if isinstance(e, Sum):
        return [f for t in e.terms for f in _terms(t)]
    if isinstance(e, Prod):
        out: list[list[Expr]] = [[]]
        for f in e.factors:
            if isinstance(f, (Sum, Prod)) and any(isinstance(n, RelAtom) for n in walk(f)):
                out = [a + b for a in out for b in _terms(f)]
            else:
                out = [a + [f] for a in out]
        return out
    return [[e]]


class _Writer:
    def __init__(self, program: Program, m: MapDecl, dialect: str):
        self.program, self.map, self.dialect = program, m, dialect

    # -- names and literals ---------------------------------------------------------

    def name(self, text: str) -> str:
        if self.dialect == "spark":
            return "`" + text.replace("`", "``") + "`"
        return '"' + text.replace('"', '""') + '"'

    def literal(self, value: object) -> str:
        if isinstance(value, bool):
            raise DefinitionError(f"map {self.map.name!r}: a boolean constant")
        if isinstance(value, int):
            return str(value)
        if isinstance(value, float):
            text = repr(value) if math.isfinite(value) else self.string(repr(value))
            return f"CAST({text} AS DOUBLE)"
        if isinstance(value, str):
            return self.string(value)
        if isinstance(value, datetime.date):
            return f"DATE '{value.isoformat()}'"
        raise DefinitionError(f"map {self.map.name!r}: cannot write constant {value!r}")

    def string(self, text: str) -> str:
        if self.dialect == "spark":
            return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
        return "'" + text.replace("'", "''") + "'"

    # -- one product -------------------------------------------------------------------

    def term(self, factors: list[Expr], outer: bool) -> str:
        """``SELECT keys, SUM(value) ... GROUP BY keys`` of one product (``HAVING`` when it is the whole query)."""
        atoms = [f for f in factors if isinstance(f, RelAtom)]
        conditions = [f for f in factors if isinstance(f, Cmp)]
        values = [f for f in factors if not isinstance(f, (RelAtom, Cmp))]
        bound: dict[str, tuple[str, str]] = {}  # variable -> (column expression, M3 type)
        sources: list[str] = []
        where: list[str] = []
        for i, atom in enumerate(_join_order(atoms)):
            relation = self._relation(atom)
            alias = f"t{i}"
            on: list[str] = []
            for arg, column in zip(atom.args, relation.columns):
                here = f"{alias}.{self.name(column.name)}"
                if isinstance(arg, Const):
                    on.append(f"{here} = {self.literal(arg.value)}")
                elif arg.name in bound:
                    on.append(f"{here} = {bound[arg.name][0]}")
                else:
                    bound[arg.name] = (here, column.type)
            table = f"{self.name(atom.name)} AS {alias}"
            if i == 0:
                sources.append(f"FROM {table}")
                where += on
            elif on:
                sources.append(f"JOIN {table} ON " + " AND ".join(on))
            else:
                sources.append(f"CROSS JOIN {table}")
        where += [self.condition(c, bound) for c in conditions]
        keys = []
        for k in self.map.keys:
            if k.name not in bound:
                raise DefinitionError(f"map {self.map.name!r}: key {k.name} is bound by no relation atom "
                                      f"of a term of its definition")
            keys.append(bound[k.name][0])
        value = " * ".join(self.value(f, bound) for f in values) if values else "1"
        if len(values) > 1:
            value = f"({value})"
        if not atoms:  # a constant term (no relation): one row, when the comparisons hold
            if keys:
                raise DefinitionError(f"map {self.map.name!r}: a term without relation atoms has no keys")
            if where:
                value = f"CASE WHEN {' AND '.join(where)} THEN {value} ELSE 0 END"
            return f"SELECT {value} AS value"
        select = [f"{k} AS k{i}" for i, k in enumerate(keys)] + [f"SUM({value}) AS value"]
        lines = ["SELECT " + ", ".join(select), *sources]
        if where:
            lines.append("WHERE " + " AND ".join(where))
        if keys:
            lines.append("GROUP BY " + ", ".join(keys))
        if outer:
            lines.append(f"HAVING SUM({value}) <> 0")
        return "\n".join(lines)

    def _relation(self, atom: RelAtom):
        try:
            relation = self.program.relation(atom.name)
        except KeyError:
            raise DefinitionError(f"map {self.map.name!r} reads relation {atom.name!r}, which the program "
                                  f"does not declare") from None
        if len(relation.columns) != len(atom.args):
            raise DefinitionError(f"map {self.map.name!r}: {atom.name}(...) has {len(atom.args)} arguments; "
                                  f"the relation has {len(relation.columns)} columns")
        return relation

    # -- expressions ---------------------------------------------------------------------

    def operand(self, e: Expr, bound: dict) -> str:
        """A comparison operand: columns as they are (DATE compares as DATE)."""
        if isinstance(e, Var):
            return self._var(e, bound)[0]
        if isinstance(e, Const):
            return self.literal(e.value)
        return self.value(e, bound)

    def condition(self, c: Cmp, bound: dict) -> str:
        if c.op in LIKE_OPS:
            return self.like(c, bound)
        return f"{self.operand(c.left, bound)} {_PLAIN_SQL_OPS[c.op]} {self.operand(c.right, bound)}"

    def like(self, c: Cmp, bound: dict) -> str:
        """``X [NOT] LIKE 'p'`` with M3's (DuckDB's) meaning: no escape character, a backslash is itself.

        Spark SQL escapes with a backslash by default, so a pattern holding
        one names an escape character the pattern does not use.
        """
        if not (isinstance(c.right, Const) and isinstance(c.right.value, str)):
            raise DefinitionError(f"map {self.map.name!r}: {c.op} against something else than a string constant")
        pattern = c.right.value
        sql = f"{self.operand(c.left, bound)} {c.op} {self.string(pattern)}"
        if "\\" in pattern:
            escape = next(ch for ch in "!#$&~^|" + "".join(map(chr, range(0x2000, 0x2100))) if ch not in pattern)
            sql += f" ESCAPE {self.string(escape)}"
        return sql

    def value(self, e: Expr, bound: dict) -> str:
        """A factor of the summed value, computed in the runtime's types (BIGINT, DOUBLE)."""
        if isinstance(e, Const):
            text = self.literal(e.value)
            return f"({text})" if isinstance(e.value, int) and e.value < 0 else text
        if isinstance(e, Var):
            column, kind = self._var(e, bound)
            return f"CAST({column} AS {_CASTS[kind]})" if kind in _CASTS else column
        if isinstance(e, Prod):
            return "(" + " * ".join(self.value(f, bound) for f in e.factors) + ")"
        if isinstance(e, Sum):
            return "(" + " + ".join(self.value(t, bound) for t in e.terms) + ")"
        if isinstance(e, Cmp):
            return f"CASE WHEN {self.condition(e, bound)} THEN 1 ELSE 0 END"
        if isinstance(e, IfThen):
            return f"CASE WHEN {self.condition(e.cond, bound)} THEN {self.value(e.then, bound)} ELSE 0 END"
        raise DefinitionError(f"map {self.map.name!r}: cannot write {type(e).__name__} in a value")

    def _var(self, v: Var, bound: dict) -> tuple[str, str]:
        if v.name not in bound:
            raise DefinitionError(f"map {self.map.name!r}: variable {v.name} is bound by no relation atom "
                                  f"of its term")
        return bound[v.name]


def _join_order(atoms: list[RelAtom]) -> list[RelAtom]:
    """The atoms in their order, except that the next one shares a variable with those before it when one can.

    >>> r = RelAtom("R", (Var("A"),)); s = RelAtom("S", (Var("B"),)); t = RelAtom("T", (Var("A"), Var("B")))
    >>> [a.name for a in _join_order([r, s, t])]
    ['R', 'T', 'S']
    """
    left = list(atoms)
    out: list[RelAtom] = []
    seen: set[str] = set()
    while left:
        pick = next((a for a in left if {x.name for x in a.args if isinstance(x, Var)} & seen), left[0])
        left.remove(pick)
        out.append(pick)
        seen |= {x.name for x in pick.args if isinstance(x, Var)}
    return out
