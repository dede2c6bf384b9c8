"""The relations a script declares: ``CREATE STREAM|TABLE name (col type [NOT NULL], ...)`` → ``RelationDecl``.

Why apart from :mod:`.frontend` (statements and queries): a declaration's
rules are its own — the SQL types M3 keeps (INT, FLOAT, STRING, DATE: every
integer type is INT, every exact or floating number FLOAT, every character
type STRING), one name per column, only NOT NULL and NULL as constraints (a ``NULL`` column is
two: its value and its indicator, :mod:`boreas.m3.nullable`) — and an
``m3`` box asks only whether a script declares relations at all
(:func:`declares_relations`), without compiling it.

>>> import sqlglot
>>> from .positions import Ctx
>>> sql = "CREATE TABLE R(a BIGINT NOT NULL, b DECIMAL(10, 2), c VARCHAR(5), d DATE)"
>>> r = relation(sqlglot.parse_one(sql), "STREAM", Ctx(sql, 0, sql))
>>> r.name, r.kind, [(c.name, c.type) for c in r.columns]
('R', 'STREAM', [('a', 'INT'), ('b', 'FLOAT'), ('c', 'STRING'), ('d', 'DATE')])
>>> sql = "CREATE TABLE S(a INT, c FLOAT NULL)"
>>> [(c.name, c.type) for c in relation(sqlglot.parse_one(sql), "STREAM", Ctx(sql, 0, sql)).columns]
[('a', 'INT'), ('c', 'FLOAT'), ('c__null', 'INT')]
"""

from __future__ import annotations

import re

from sqlglot import exp

from ..ast import Column, RelationDecl
from ..nullable import SUFFIX, indicator
from .nodes import sql_of
from .positions import Ctx, split_statements

#: SQL type names (upper case) -> M3 types
SQL_TYPES = {
    "INT": "INT", "INTEGER": "INT", "BIGINT": "INT", "SMALLINT": "INT", "TINYINT": "INT", "UBIGINT": "INT", "UINT": "INT",
    "FLOAT": "FLOAT", "DOUBLE": "FLOAT", "DECIMAL": "FLOAT", "REAL": "FLOAT", "NUMERIC": "FLOAT", "BIGDECIMAL": "FLOAT",
    "VARCHAR": "STRING", "TEXT": "STRING", "CHAR": "STRING", "NCHAR": "STRING", "NVARCHAR": "STRING", "STRING": "STRING",
    "DATE": "DATE",
}
_DECLARATION = re.compile(r"\s*CREATE\s+(STREAM|TABLE)\b", re.IGNORECASE)


def declares_relations(text: str) -> bool:
    """Whether a script declares its own relations (``CREATE STREAM|TABLE``).

    >>> declares_relations("CREATE STREAM R(a INT); SELECT SUM(a) FROM R"), declares_relations("SELECT 1")
    (True, False)
    """
    return any(_DECLARATION.match(stmt) for _, stmt in split_statements(text))


def relation(tree: exp.Create, kind: str, ctx: Ctx) -> RelationDecl:
    """``CREATE STREAM|TABLE name (col type [NOT NULL], ...)`` as a relation of ``kind`` (``STREAM``, ``TABLE``)."""
    schema = tree.this
    if type(schema) is not exp.Schema or tree.expression is not None:
        raise ctx.error("CREATE STREAM/TABLE needs a column list (CREATE ... AS SELECT is not supported)", tree)
    if type(schema.this) is not exp.Table or schema.this.args.get("db") or schema.this.args.get("alias"):
        raise ctx.error(f"unsupported relation name {sql_of(schema.this)}", schema)
    cols: list[Column] = []
    for cd in schema.expressions:
        if type(cd) is not exp.ColumnDef or cd.args.get("kind") is None:
            raise ctx.error("expected a column definition: name type", cd)
        tname = cd.args["kind"].this.name if hasattr(cd.args["kind"].this, "name") else str(cd.args["kind"].this)
        mtype = SQL_TYPES.get(tname.upper())
        if mtype is None:
            raise ctx.error(f"unsupported column type {tname} of column {cd.name}", cd)
        nullable = False
        for c in cd.args.get("constraints") or []:
            if type(c) is not exp.ColumnConstraint or type(c.args.get("kind")) is not exp.NotNullColumnConstraint:
                raise ctx.error(f"unsupported column constraint {sql_of(c)} of column {cd.name} (only NOT NULL "
                                "and NULL)", c)
            nullable = bool(c.args["kind"].args.get("allow_null"))
        if any(c.name == cd.name for c in cols):
            raise ctx.error(f"duplicate column {cd.name}", cd)
        if cd.name.lower().endswith(SUFFIX):  # the name an indicator column has (:mod:`boreas.m3.nullable`)
            raise ctx.error(f"column {cd.name}: a name ending in {SUFFIX} is kept for a nullable column's indicator", cd)
        cols.append(Column(cd.name, mtype, pos=ctx.pos(cd)))
        if nullable:  # the value (0 where NULL) and its indicator, ordinary columns for the calculus (docs/m3.md "NULLs")
            cols.append(Column(indicator(cd.name), "INT", pos=ctx.pos(cd)))
    return RelationDecl(schema.this.name, kind, tuple(cols), pos=ctx.pos(tree))
