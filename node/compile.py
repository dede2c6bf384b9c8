"""Box expressions compiled to Python code, once per box.

Validation (:mod:`boreas.catalog.expressions`) parses each expression with
sqlglot and infers its type.  The data plane must evaluate the same
expressions hundreds of thousands of times a second, so walking the sqlglot
tree per tuple is out of the question.  Instead the tree is translated once
into Python *source* (a column becomes ``row[i]``, ``a <> b`` becomes
``(a != b)``), and that source is compiled with :func:`compile` once.  The
resulting function runs at the speed of hand-written Python.

Operators that process whole batches splice several translated expressions
into one generated loop (see :class:`CodeBuilder`), so even the per-tuple
function call disappears.

NULLs and arithmetic errors
    Borealis has no NULL, but a tuple can still make an expression fail:
    ``x / 0``, ``sqrt(-1)``, ``ln(0)``, a cast of ``'abc'`` to int.  Such a
    failure never escapes: the **whole expression yields None** (a NULL-like
    value).  A None predicate is false, so a filter drops (or sends to its
    false port) a tuple whose predicate divides by zero; a map writes None
    into that field.  Any operation on a None (from upstream) also yields
    None, except ``IS NULL``, ``=`` and ``<>``, which compare it like Python.

    A field declared ``nullable`` holds SQL's NULL: an expression that reads
    one is translated with SQL's three-valued logic (:mod:`.null_logic`):
    comparisons, ``BETWEEN``, ``IN``, ``LIKE`` and arithmetic of NULL are
    NULL, ``AND``/``OR``/``NOT`` are Kleene's, ``IS [NOT] NULL`` tests it.
    A function of NULL (``sqrt``, a cast, ``GREATEST``) fails, so the whole
    expression is NULL.

    >>> n = Schema("N", (Field("x", FieldType.INT, nullable=True), Field("y", FieldType.INT)))
    >>> [compile_expression("x <> 3 or y = 1", Scope.single(n))(r) for r in [(None, 1), (None, 2), (4, 2)]]
    [1, None, 1]

>>> from boreas.catalog.model import Field, FieldType, Schema
>>> s = Schema("T", (Field("value", FieldType.DOUBLE), Field("time", FieldType.INT)))
>>> f = compile_expression("time * 2 + 1", Scope.single(s))
>>> f((0.5, 20))
41
>>> compile_expression("value / (time - 20)", Scope.single(s))((1.0, 20)) is None
True
>>> print(f.__boreas_source__.splitlines()[2].strip())
return ((row[1] * 2) + 1)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from boreas.catalog.expressions import (
    ExpressionError,
    Scope,
    infer_type,
    parse_expression,
)
from boreas.catalog.model import Field, FieldType, Schema  # noqa: F401 - Field: the doctests
from sqlglot import expressions as exp

from .compile_helpers import ERRORS, HELPERS, like_pattern  # noqa: F401 - ERRORS re-exported (it was defined here)
from .null_logic import NULL_HELPERS, OP_NAMES

log = logging.getLogger(__name__)

INT, FLOAT, STR, BOOL = "int", "float", "str", "bool"
_KIND = {
    FieldType.BYTE: INT, FieldType.SHORT: INT, FieldType.INT: INT, FieldType.LONG: INT,
    FieldType.TIMESTAMP: INT, FieldType.SINGLE: FLOAT, FieldType.DOUBLE: FLOAT,
    FieldType.STRING: STR,
}


def kind_of(ftype: FieldType) -> str:
    """The Python type ('int', 'float', 'str') a field of this Borealis type holds."""
    return _KIND[ftype]


class CompileError(ExpressionError):
    """An expression validation accepts but the data plane cannot evaluate."""


_COMPARE = {exp.EQ: "==", exp.NEQ: "!=", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<="}
_ARITH = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*"}
_MATH = {exp.Sqrt: "_sqrt", exp.Ln: "_ln", exp.Exp: "_exp"}
_INT_CASTS = {exp.DataType.Type.TINYINT, exp.DataType.Type.SMALLINT, exp.DataType.Type.INT,
              exp.DataType.Type.BIGINT, exp.DataType.Type.TIMESTAMP}
_STR_CASTS = {exp.DataType.Type.VARCHAR, exp.DataType.Type.TEXT}


@dataclass(frozen=True, slots=True)
class Translation:
    """One expression as Python source over the builder's row variables."""

    source: str
    kind: str | None  # the Python type it statically yields, when known
    type: FieldType   # the Borealis type validation infers for it


class CodeBuilder:
    """Translates expressions over one scope and compiles functions that use them.

    ``variables`` names the Python variable holding each scope entry's row
    (``row`` for a single input; ``left``/``right`` for a join).  Constants an
    expression needs (a LIKE regex) go into the shared globals, so several
    expressions can be spliced into one generated function.
    """

    def __init__(self, scope: Scope, variables: Sequence[str] | None = None, label: str = "",
                 numbers: Mapping[str, str] | None = None):
        self.label = label  # the box name: it tells generated functions apart in tracebacks and profiles
        self.numbers = numbers or {}  # a number literal's text -> the name it is read by (compile_shapes.py)
        if variables is None:
            variables = ["row"] if len(scope.schemas) == 1 else [q or "row" for q, _ in scope.schemas]
        if len(variables) != len(scope.schemas):
            raise ValueError("one variable name per scope entry")
        self.scope = scope
        self._entries = [
            (qualifier, var, {f.name: i for i, f in enumerate(schema.fields)})
            for (qualifier, schema), var in zip(scope.schemas, variables)
        ]
        self.namespace: dict[str, Any] = dict(HELPERS)
        self._constants = 0
        self._nullable = {(q, f.name) for q, schema in scope.schemas for f in schema.fields if f.nullable}
        if self._nullable:
            self.namespace.update(NULL_HELPERS)

    # -- translation ------------------------------------------------------------

    def translate(self, text: str | exp.Expression) -> Translation:
        """Python source for an expression (raises ExpressionError/CompileError)."""
        tree = parse_expression(text) if isinstance(text, str) else text
        ftype = infer_type(tree, self.scope)  # also checks every field name
        source, kind = self._node(tree)
        return Translation(source, kind, ftype)

    def value(self, text: str | exp.Expression) -> Translation:
        """Like :meth:`translate`, converted to the inferred field type (``1=1`` is int 1); an expression
        that is just an array field is that field's value, passed on whole (type None)."""
        tree = parse_expression(text) if isinstance(text, str) else text
        bare = tree.this if isinstance(tree, exp.Paren) else tree
        if isinstance(bare, exp.Column) and self.scope.whole(bare.table or None, bare.name) is not None:
            for q, var, index in self._entries:
                if (bare.table in ("", None) or q == bare.table) and bare.name in index:
                    return Translation(f"{var}[{index[bare.name]}]", None, None)  # type: ignore[arg-type]
        t = self.translate(tree)
        return Translation(coerce(t.source, t.kind, kind_of(t.type)), kind_of(t.type), t.type)

    def constant(self, value: Any) -> str:
        name = f"_k{self._constants}"
        self._constants += 1
        self.namespace[name] = value
        return name

    def define(self, source: str, name: str) -> Callable[..., Any]:
        """Compile ``source`` (which defines ``name``) once and return the function."""
        code = compile(source, f"<boreas {self.label + ' ' if self.label else ''}{name}>", "exec")
        scope = dict(self.namespace)
        exec(code, scope)  # noqa: S102 - our own generated source, never user text verbatim
        fn = scope[name]
        fn.__boreas_source__ = source
        log.debug("compiled %s:\n%s", name, source)
        return fn

    # -- the tree walk (at compile time only) -------------------------------------

    def _column(self, tree: exp.Column) -> tuple[str, str]:
        if tree.args.get("db") or tree.args.get("catalog"):
            raise CompileError(f"field reference {tree.sql()!r} has too many qualifiers")
        qualifier = tree.table or None
        field = self.scope.lookup(qualifier, tree.name)
        for q, var, index in self._entries:
            if (qualifier is None or q == qualifier) and tree.name in index:
                return f"{var}[{index[tree.name]}]", kind_of(field.type)
        raise CompileError(f"field {tree.sql()!r} is not in scope")  # pragma: no cover

    def _may_be_null(self, tree: exp.Expression) -> bool:
        """Whether ``tree`` reads a nullable field (then it is translated with :mod:`.null_logic`)."""
        if not self._nullable:
            return False
        for col in tree.find_all(exp.Column):
            if any(name == col.name and (not col.table or q == col.table) for q, name in self._nullable):
                return True
        return False

    def _node(self, tree: exp.Expression) -> tuple[str, str | None]:
        t = type(tree)
        if t is exp.Paren:
            return self._node(tree.this)
        if t is not exp.Column and self._may_be_null(tree):
            found = self._three_valued(tree)
            if found is not None:
                return found
        if t is exp.Column:
            return self._column(tree)
        if t is exp.Literal:
            if tree.is_string:
                return repr(tree.this), STR
            text = tree.this
            kind = INT if text.lstrip("-").isdigit() else FLOAT
            return self.numbers.get(text) or repr(int(text) if kind == INT else float(text)), kind
        if t is exp.Boolean:
            return repr(bool(tree.this)), BOOL
        if t is exp.Null:
            return "None", None
        if t is exp.Neg:
            src, kind = self._node(tree.this)
            return f"(-{src})", INT if kind == BOOL else kind
        if t in _COMPARE:
            a, _ = self._node(tree.this)
            b, _ = self._node(tree.expression)
            return f"({a} {_COMPARE[t]} {b})", BOOL
        if t is exp.And or t is exp.Or:
            (a, ka), (b, kb) = self._node(tree.this), self._node(tree.expression)
            word = "and" if t is exp.And else "or"
            return f"({a} {word} {b})", BOOL if ka == kb == BOOL else None
        if t is exp.Not:
            a, _ = self._node(tree.this)
            return f"(not {a})", BOOL
        if t in _ARITH:
            (a, ka), (b, kb) = self._node(tree.this), self._node(tree.expression)
            kind = STR if t is exp.Add and ka == kb == STR else _numeric(ka, kb)
            return f"({a} {_ARITH[t]} {b})", kind
        if t is exp.Div:
            a, _ = self._node(tree.this)
            b, _ = self._node(tree.expression)
            return f"({a} / {b})", FLOAT
        if t is exp.Mod:
            (a, ka), (b, kb) = self._node(tree.this), self._node(tree.expression)
            return f"_mod({a}, {b})", _numeric(ka, kb)
        if t in (exp.Min, exp.Max, exp.Greatest, exp.Least):
            return self._extreme(tree)
        return self._function(tree)

    def _three_valued(self, tree: exp.Expression) -> tuple[str, str | None] | None:
        """An operator over a value that may be NULL, as SQL has it (:mod:`.null_logic`); None: the
        plain translation (a function, which fails on NULL: the whole expression is NULL)."""
        t = type(tree)
        if t in _COMPARE:
            a, b = self._node(tree.this)[0], self._node(tree.expression)[0]
            return f"_cmp3({OP_NAMES[_COMPARE[t]]}, {a}, {b})", BOOL
        if t is exp.And or t is exp.Or:
            a, b = self._node(tree.this)[0], self._node(tree.expression)[0]
            return f"{'_and3' if t is exp.And else '_or3'}({a}, {b})", BOOL
        if t is exp.Not:
            return f"_not3({self._node(tree.this)[0]})", BOOL
        if t in _ARITH or t is exp.Div or t is exp.Mod:
            (a, ka), (b, kb) = self._node(tree.this), self._node(tree.expression)
            if t is exp.Mod:
                return f"_bin3(_mod, {a}, {b})", _numeric(ka, kb)
            if t is exp.Div:
                return f"_bin3({OP_NAMES['/']}, {a}, {b})", FLOAT
            kind = STR if t is exp.Add and ka == kb == STR else _numeric(ka, kb)
            return f"_bin3({OP_NAMES[_ARITH[t]]}, {a}, {b})", kind
        if t is exp.Neg:
            src, kind = self._node(tree.this)
            return f"_un3(_neg, {src})", INT if kind == BOOL else kind
        if t is exp.Between:
            src, low, high = (self._node(tree.args[k])[0] for k in ("this", "low", "high"))
            return f"_and3(_cmp3({OP_NAMES['<=']}, {low}, {src}), _cmp3({OP_NAMES['<=']}, {src}, {high}))", BOOL
        if t is exp.In and not any(tree.args.get(k) for k in ("query", "unnest", "field")):
            items = "".join(self._node(e)[0] + ", " for e in tree.expressions)
            return f"_in3({self._node(tree.this)[0]}, ({items}))", BOOL
        if t is exp.Like:
            return f"_bin3(_like, {self._node(tree.this)[0]}, {self._node(tree.expression)[0]})", BOOL
        return None

    def _extreme(self, tree: exp.Expression) -> tuple[str, str | None]:
        args = [self._node(a) for a in [tree.this, *tree.expressions] if a is not None]
        if len(args) == 1:
            return args[0]
        name = "min" if isinstance(tree, (exp.Min, exp.Least)) else "max"
        kinds = {k for _, k in args}
        kind = kinds.pop() if len(kinds) == 1 else INT if kinds <= {INT, BOOL} else None
        return f"{name}({', '.join(s for s, _ in args)})", kind

    def _function(self, tree: exp.Expression) -> tuple[str, str | None]:
        t = type(tree)
        if t is exp.Abs:
            src, kind = self._node(tree.this)
            return f"abs({src})", INT if kind == BOOL else kind
        if t in _MATH:
            return f"{_MATH[t]}({self._node(tree.this)[0]})", FLOAT
        if t is exp.Pow:
            return f"_pow({self._node(tree.this)[0]}, {self._node(tree.expression)[0]})", FLOAT
        if t is exp.Log:
            if tree.expression is not None:  # log(base, x)
                return f"_logb({self._node(tree.this)[0]}, {self._node(tree.expression)[0]})", FLOAT
            return f"_log10({self._node(tree.this)[0]})", FLOAT
        if t in (exp.Floor, exp.Ceil, exp.Round):
            extra = [k for k, v in tree.args.items() if k != "this" and v is not None]
            if extra:
                raise CompileError(f"{tree.sql()!r}: only the one-argument form is supported "
                                   f"(the catalog types it as long)")
            name = {exp.Floor: "_floor", exp.Ceil: "_ceil", exp.Round: "_round"}[t]
            return f"{name}({self._node(tree.this)[0]})", INT
        if t is exp.Coalesce:  # the first argument that is not NULL (None)
            args = [self._node(a) for a in [tree.this, *tree.expressions]]
            kinds = {k for _, k in args}
            return f"_coalesce({', '.join(s for s, _ in args)})", kinds.pop() if len(kinds) == 1 else None
        if t is exp.Concat:
            parts = [self._node(a) for a in tree.expressions]
            if not parts:
                return "''", STR
            return "(" + " + ".join(s if k == STR else f"_text({s})" for s, k in parts) + ")", STR
        if t is exp.Cast:
            src, _ = self._node(tree.this)
            target = tree.to.this
            if target in _INT_CASTS:
                return f"_cast_int({src})", INT
            if target in _STR_CASTS:
                return f"_cast_str({src})", STR
            return f"_cast_float({src})", FLOAT  # the catalog types every other cast as double
        return self._predicate(tree)

    def _predicate(self, tree: exp.Expression) -> tuple[str, str | None]:
        t = type(tree)
        if t is exp.Is:
            src, _ = self._node(tree.this)
            if isinstance(tree.expression, exp.Null):
                return f"({src} is None)", BOOL
            if isinstance(tree.expression, exp.Boolean):
                return f"(bool({src}) is {bool(tree.expression.this)!r})", BOOL
        elif t is exp.In and not any(tree.args.get(k) for k in ("query", "unnest", "field")):
            src, _ = self._node(tree.this)
            items = "".join(self._node(e)[0] + ", " for e in tree.expressions)
            return f"({src} in ({items}))", BOOL
        elif t is exp.Between:
            src, _ = self._node(tree.this)
            low, _ = self._node(tree.args["low"])
            high, _ = self._node(tree.args["high"])
            return f"({low} <= {src} <= {high})", BOOL
        elif t is exp.Like:
            src, _ = self._node(tree.this)
            pattern = tree.expression
            if isinstance(pattern, exp.Literal) and pattern.is_string:
                regex = self.constant(like_pattern(pattern.this))
                return f"({regex}.fullmatch({src}) is not None)", BOOL
            return f"_like({src}, {self._node(pattern)[0]})", BOOL
        if isinstance(tree, (exp.Count, exp.Sum, exp.Avg)):
            raise CompileError(f"{tree.sql()!r}: aggregate functions belong in an aggregate box")
        raise CompileError(f"unsupported expression {tree.sql()!r} ({type(tree).__name__})")


def _numeric(a: str | None, b: str | None) -> str | None:
    if a in (INT, BOOL) and b in (INT, BOOL):
        return INT
    if a in (INT, BOOL, FLOAT) and b in (INT, BOOL, FLOAT):
        return FLOAT
    return None


def coerce(source: str, kind: str | None, target: str) -> str:
    """Source converted to ``target`` ('int', 'float', 'str') unless it already is."""
    if kind == target:
        return source
    if target == INT:
        return f"int({source})" if kind == BOOL else f"_as_int({source})"
    if target == FLOAT:
        return f"float({source})" if kind in (INT, BOOL) else f"_as_float({source})"
    return f"_as_str({source})"


# -- the public one-expression entry points -------------------------------------


def compile_expression(text: str, scope: Scope) -> Callable[[tuple], Any]:
    """``row -> value`` for an expression over one input; None when it fails on a row.

    The value has the type validation infers (``1=1`` gives int 1); use its
    truth for predicates.
    """
    if len(scope.schemas) != 1:
        raise CompileError("compile_expression takes a one-schema scope; use compile_join_expression")
    builder = CodeBuilder(scope, ["row"])
    value = builder.value(text)
    return builder.define(
        f"def _expr(row):\n    try:\n        return {value.source}\n"
        f"    except _ERRORS:\n        return None\n",
        "_expr",
    )


def compile_join_expression(text: str, left: Schema, right: Schema) -> Callable[[tuple, tuple], Any]:
    """``(left_row, right_row) -> value`` for an expression over ``left.x`` and ``right.y``."""
    builder = CodeBuilder(Scope.join(left, right), ["left", "right"])
    value = builder.value(text)
    return builder.define(
        f"def _expr(left, right):\n    try:\n        return {value.source}\n"
        f"    except _ERRORS:\n        return None\n",
        "_expr",
    )
