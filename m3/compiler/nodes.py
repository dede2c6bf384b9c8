"""What the front end understands of sqlglot's trees: the node types it translates and the fields it reads.

Why a table: sqlglot keeps every clause and modifier in a node's ``args``,
and a translator that reads ``args["expressions"]`` but not
``args["field"]`` silently drops whatever sqlglot put in the field it did
not read (``x IN LIST ('a', 'b')`` once compiled to no filter at all).  So
every node type the front end translates is listed here with every arg it
reads — to use it or to refuse it with a specific message — and
:func:`unread_args` finds the args of a tree that nobody reads;
:func:`unknown_nodes` finds the nodes of types not listed.  The front end
refuses both (:mod:`.frontend`), and ``tests/m3/test_sql_nodes.py`` walks
every class in ``sqlglot.expressions`` through the positions the front end
accepts to show that each is translated or refused, never ignored.

Two spellings are listed where sqlglot renamed an arg across the majors
``pyproject.toml`` allows (``from``/``from_``, ``with``/``with_``).

>>> import sqlglot
>>> tree = sqlglot.parse_one("SELECT SUM(b) FROM R WHERE a BETWEEN SYMMETRIC 2 AND 1")
>>> [(type(n).__name__, arg) for n, arg in unread_args(tree)]
[('Between', 'symmetric')]
>>> [type(n).__name__ for n in unknown_nodes(sqlglot.parse_one("SELECT SUM(b) FROM R WHERE ABS(a) = 1"))]
['Abs']
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlglot import exp

_BINARY = frozenset({"this", "expression"})

# node type -> the args the front end reads (an arg not listed must be absent, empty, False or None)
READS: dict[type[exp.Expression], frozenset[str]] = {
    # statements and declarations
    exp.Create: frozenset({"this", "kind", "expression", "replace", "exists"}),  # OR REPLACE / IF NOT EXISTS: one
    exp.Schema: frozenset({"this", "expressions"}),                              # declaration per name anyway
    exp.ColumnDef: frozenset({"this", "kind", "constraints"}),
    exp.ColumnConstraint: frozenset({"kind"}),
    exp.NotNullColumnConstraint: frozenset({"allow_null"}),  # NOT NULL, or NULL: a nullable column (:mod:`.declarations`)
    exp.DataType: frozenset({"this", "expressions", "nested"}),  # parameters: DECIMAL(15,2) is FLOAT, VARCHAR(n) STRING
    exp.DataTypeParam: frozenset({"this", "expression"}),
    exp.Identifier: frozenset({"this", "quoted"}),
    exp.Table: frozenset({"this", "alias"}),
    exp.TableAlias: frozenset({"this", "columns"}),
    # SELECT and its clauses (the clauses it refuses are read, to name them)
    exp.Select: frozenset({"expressions", "from", "from_", "joins", "where", "group", "order", "distinct", "limit",
                           "offset", "having", "with", "with_", "qualify", "windows"}),
    exp.From: frozenset({"this"}),
    exp.Join: frozenset({"this", "on", "side", "kind", "using"}),
    exp.Where: frozenset({"this"}),
    exp.Group: frozenset({"expressions", "all"}),
    exp.Order: frozenset({"expressions"}),
    exp.Ordered: frozenset({"this", "desc", "nulls_first"}),  # ORDER BY is ignored by design (a view is a set)
    exp.Alias: frozenset({"this", "alias"}),
    exp.Column: frozenset({"this", "table"}),
    exp.Star: frozenset(),
    # conditions
    exp.And: _BINARY, exp.Or: _BINARY, exp.Not: frozenset({"this"}), exp.Paren: frozenset({"this"}),
    exp.EQ: _BINARY, exp.NEQ: _BINARY, exp.LT: _BINARY, exp.LTE: _BINARY, exp.GT: _BINARY, exp.GTE: _BINARY,
    exp.Between: frozenset({"this", "low", "high"}),
    exp.In: frozenset({"this", "expressions", "field", "query", "unnest"}),
    exp.List: frozenset({"expressions"}),
    exp.Like: frozenset({"this", "expression", "negate"}),
    exp.Boolean: frozenset({"this"}),
    # values and arithmetic
    exp.Literal: frozenset({"this", "is_string"}),
    exp.Null: frozenset(),
    exp.Neg: frozenset({"this"}),
    exp.Add: _BINARY, exp.Sub: _BINARY, exp.Mul: _BINARY, exp.Div: _BINARY,
    exp.Cast: frozenset({"this", "to"}),
    exp.TsOrDsToDate: frozenset({"this"}),
    exp.Date: frozenset({"this"}),
    exp.Interval: frozenset({"this", "unit"}),
    exp.Var: frozenset({"this"}),
    exp.Extract: frozenset({"this", "expression"}),
    # inside an aggregate a CASE (:mod:`.sugar`); ignore_nulls is moot: the runtime has no NULLs
    exp.Greatest: frozenset({"this", "expressions", "ignore_nulls"}),
    exp.Least: frozenset({"this", "expressions", "ignore_nulls"}),
    exp.Substring: frozenset({"this", "start", "length", "zero_start"}),  # of a column: a computed key
    exp.Mod: _BINARY,  # MOD(a, m), a % m of a column by a constant: a computed key (..functions)
    exp.Year: frozenset({"this"}), exp.Quarter: frozenset({"this"}), exp.Month: frozenset({"this"}),
    exp.DayOfWeek: frozenset({"this"}), exp.DayOfWeekIso: frozenset({"this"}), exp.DayOfYear: frozenset({"this"}),
    exp.WeekOfYear: frozenset({"this"}),
    exp.Day: frozenset({"this"}),
    # string and event-time functions of a column (..functions; SPLIT_INDEX, DATE_FORMAT: Anonymous by name)
    exp.Lower: frozenset({"this"}), exp.Upper: frozenset({"this"}), exp.Length: frozenset({"this"}),
    exp.Hour: frozenset({"this"}), exp.RegexpExtract: frozenset({"this", "expression", "position", "group"}),
    exp.Anonymous: frozenset({"this", "expressions"}),
    exp.Case: frozenset({"this", "ifs", "default"}),
    # of constants and padded columns, folded with three-valued logic (:mod:`.padding`); NULLIF: a CASE (:mod:`.sugar`)
    exp.Is: _BINARY, exp.Coalesce: frozenset({"this", "expressions"}), exp.Nullif: _BINARY,
    exp.If: frozenset({"this", "true", "false"}),
    # aggregates (COUNT_BIG counts the same rows)
    exp.Sum: frozenset({"this"}), exp.Avg: frozenset({"this"}),
    exp.Min: frozenset({"this", "expressions"}), exp.Max: frozenset({"this", "expressions"}),
    exp.Count: frozenset({"this", "expressions", "big_int"}),
    exp.Distinct: frozenset({"expressions", "on"}),  # SELECT DISTINCT, COUNT(DISTINCT x); ON is read to refuse it
    exp.Having: frozenset({"this"}),
    exp.Filter: _BINARY,  # AGG(...) FILTER (WHERE c) (:mod:`.aggfilter`)
    # derived tables and CTEs, flattened into the query that reads them (:mod:`.derived`); the args it refuses are
    # read, to name them
    exp.Subquery: frozenset({"this", "alias"}),
    exp.With: frozenset({"expressions", "recursive", "search", "cycle", "udfs"}),
    exp.CTE: frozenset({"this", "alias", "scalar", "materialized", "key_expressions"}),
    # UNION ALL (:mod:`.union`), INTERSECT and EXCEPT (:mod:`.setops`); an ORDER BY of a set operation is read
    # (accepted where it names an output, a view being a set: :mod:`.setparts`)
    exp.Union: frozenset({"this", "expression", "distinct", "with", "with_", "order"}),
    exp.Intersect: frozenset({"this", "expression", "distinct", "with", "with_", "order"}),
    exp.Except: frozenset({"this", "expression", "distinct", "with", "with_", "order"}),
}


def present(value: object) -> bool:
    """Whether an arg holds something (sqlglot leaves unused args None, False or empty).

    >>> present(None), present(False), present([]), present(""), present(exp.Star()), present(True)
    (False, False, False, False, True, True)
    """
    return value is not None and value is not False and value != [] and value != ""


def unread_args(tree: exp.Expression, skip: tuple[exp.Expression, ...] = ()) -> Iterator[tuple[exp.Expression, str]]:
    """``(node, arg)`` for every arg of a listed node that holds something the front end does not read.

    ``skip``: subtrees not to look into (none of the front end's own).
    """
    for node in _walk(tree, skip):
        reads = READS.get(type(node))
        if reads is not None:
            for arg, value in node.args.items():
                if arg not in reads and present(value):
                    yield node, arg


def unknown_nodes(tree: exp.Expression, skip: tuple[exp.Expression, ...] = ()) -> Iterator[exp.Expression]:
    """The nodes of the tree whose type the front end does not translate (outermost first)."""
    for node in _walk(tree, skip):
        if type(node) not in READS:
            yield node


def _walk(tree: exp.Expression, skip: tuple[exp.Expression, ...]) -> Iterator[exp.Expression]:
    stack = [tree]
    while stack:
        node = stack.pop()
        if any(node is s for s in skip):
            continue
        yield node
        children = [v for vs in node.args.values() for v in (vs if isinstance(vs, list) else [vs])
                    if isinstance(v, exp.Expression)]
        stack.extend(reversed(children))


def ancestors(node: exp.Expression, stop: exp.Expression) -> Iterator[exp.Expression]:
    """The nodes above ``node`` up to ``stop`` (neither included): what a subquery or derived table is inside.

    >>> import sqlglot
    >>> tree = sqlglot.parse_one("SELECT SUM(b) FROM R WHERE a > (SELECT MAX(c) FROM S)")
    >>> [type(n).__name__ for n in ancestors(tree.find(exp.Max), tree)]
    ['Select', 'Subquery', 'GT', 'Where']
    """
    node = node.parent
    while node is not None and node is not stop:
        yield node
        node = node.parent


def describe(node: exp.Expression, arg: str) -> str:
    """An unread arg in words: ``SYMMETRIC of BETWEEN``, ``SAMPLE clause`` (of a SELECT).

    >>> describe(exp.Select(), "sample"), describe(exp.Between(), "symmetric")
    ('SAMPLE clause', 'SYMMETRIC of BETWEEN')
    """
    word = arg.rstrip("_").replace("_", " ").upper()
    return f"{word} clause" if isinstance(node, exp.Select) else f"{word} of {type(node).__name__.upper()}"


def sql_of(e: exp.Expression) -> str:
    """A node's SQL for a message; its type's name when sqlglot cannot print it (a tree built by hand).

    >>> sql_of(exp.column("a").eq(1)), sql_of(exp.Literal(this="1"))
    ('a = 1', 'LITERAL')
    """
    try:
        return e.sql()
    except Exception:  # noqa: BLE001 - sqlglot's generator may fail any way on a tree built by hand; a message must not
        return type(e).__name__.upper()
