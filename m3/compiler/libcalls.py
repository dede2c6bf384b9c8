"""DBToaster's library calls in SQL: one spelling per function, and ``CREATE FUNCTION ... AS EXTERNAL`` of one.

Why a pass of its own: sqlglot parses SQL's math functions into a node type
each (``Cos``, ``Sqrt``, ``Pow``, ...) and DBToaster's names (``CAST_INT``,
``ATOI``) as anonymous calls; the resolver reads one form, an anonymous call
by the library's name (:mod:`..library`), so this pass rewrites the others
before any other pass reads the statement.  A script may also declare a
name for a library function (DBToaster's ``CREATE FUNCTION f(x double)
RETURNS double AS EXTERNAL 'cos'``): :func:`declared` accepts it when the
external name is the library's, and the calls of ``f`` are then calls of it.
An external function the library does not have stays refused, naming it:
Boreas runs no host-language code.  The declared argument and return types
are not the library's to change: its functions keep their own types (a
``RETURNS int`` of ``cos`` still gives a FLOAT).

>>> import sqlglot
>>> from .positions import Ctx
>>> sql = "CREATE FUNCTION make_int (s string) RETURNS int AS EXTERNAL 'ATOI'"
>>> aliases = dict([declared(sqlglot.parse_one(sql), Ctx(sql, 0, sql))])
>>> aliases
{'MAKE_INT': 'ATOI'}
>>> spelled(sqlglot.parse_one("SELECT make_int(s), SQRT(a) + POW(b, 2), cos(c) FROM R"), aliases).sql()
'SELECT ATOI(s), SQRT(a) + POW(b, 2), COS(c) FROM R'
>>> bad = "CREATE FUNCTION f (x double) RETURNS double AS EXTERNAL 'my_udf'"
>>> declared(sqlglot.parse_one(bad), Ctx(bad, 0, bad))
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: unsupported CREATE FUNCTION f AS EXTERNAL 'my_udf': Boreas calls no external function; the built-in library has ATOI, ATOF, CAST_INT, CAST_FLOAT, CAST_DATE, CAST_STRING, COS, SIN, TAN, ACOS, ASIN, ATAN, SQRT, EXP, LN, RADIANS, DEGREES, POW, POWER, VEC_LENGTH, VEC_DOT, VECTOR_ANGLE, DIHEDRAL_ANGLE (at line 1, col 17)
"""

from __future__ import annotations

from typing import Protocol

from sqlglot import exp

from ..errors import CompileError
from ..library import LIBRARY, SQL_NAMES

#: sqlglot's node types of the library's math functions -> the library's name
_NODES: dict[type, str] = {exp.Cos: "COS", exp.Sin: "SIN", exp.Tan: "TAN", exp.Acos: "ACOS", exp.Asin: "ASIN",
                           exp.Atan: "ATAN", exp.Sqrt: "SQRT", exp.Exp: "EXP", exp.Ln: "LN",
                           exp.Radians: "RADIANS", exp.Degrees: "DEGREES", exp.Pow: "POW"}
_LISTED = ("ATOI", "ATOF", "CAST_INT", "CAST_FLOAT", "CAST_DATE", "CAST_STRING", "COS", "SIN", "TAN", "ACOS", "ASIN",
           "ATAN", "SQRT", "EXP", "LN", "RADIANS", "DEGREES", "POW", "POWER", "VEC_LENGTH", "VEC_DOT", "VECTOR_ANGLE",
           "DIHEDRAL_ANGLE")


class Positions(Protocol):
    """Where errors point (:class:`.positions.Ctx`)."""

    def error(self, message: str, node: exp.Expression | None = None) -> CompileError: ...


def is_declaration(tree: exp.Expression) -> bool:
    """Whether a statement is ``CREATE FUNCTION``."""
    return type(tree) is exp.Create and str(tree.args.get("kind") or "").upper() == "FUNCTION"


def declared(tree: exp.Create, ctx: Positions) -> tuple[str, str]:
    """``(NAME, library function)`` that ``CREATE FUNCTION name(args) ... AS EXTERNAL 'ext'`` declares, where
    ``ext`` names a library function taking that many arguments; refused otherwise (module doc)."""
    fn = tree.this
    name = fn.this.name if isinstance(fn, exp.UserDefinedFunction) and isinstance(fn.this, exp.Table) else None
    ext = tree.expression
    external = ext.this if type(ext) is exp.Literal and ext.is_string else None
    props = tree.args.get("properties")
    is_external = props is not None and any(type(p) is exp.ExternalProperty for p in props.expressions)
    if name is None or external is None or not is_external:
        raise ctx.error(f"unsupported CREATE FUNCTION {tree.this.sql()}: only ... AS EXTERNAL 'name' of a "
                        f"built-in function ({', '.join(_LISTED)})", tree)
    target = SQL_NAMES.get(external.upper())
    if target is None:
        raise ctx.error(f"unsupported CREATE FUNCTION {name} AS EXTERNAL {external!r}: Boreas calls no external "
                        f"function; the built-in library has {', '.join(_LISTED)}", tree)
    params = len(fn.expressions)
    takes = sorted({1 + n for n in LIBRARY[target][2]})
    if params not in takes:
        raise ctx.error(f"CREATE FUNCTION {name} declares {params} argument(s); {external} takes "
                        f"{' or '.join(map(str, takes))}", tree)
    return name.upper(), target


def spelled(tree: exp.Expression, aliases: dict[str, str]) -> exp.Expression:
    """The statement with every library call an anonymous call by the library's name (module doc)."""
    def rename(node: exp.Expression) -> exp.Expression:
        name = _NODES.get(type(node))
        if name is not None:
            args = [node.this] + ([node.expression] if node.args.get("expression") is not None else [])
            return exp.Anonymous(this=name, expressions=args)
        if type(node) is exp.Anonymous and str(node.this).upper() in aliases:
            return exp.Anonymous(this=aliases[str(node.this).upper()], expressions=list(node.expressions))
        return node

    return tree.transform(rename, copy=False)
