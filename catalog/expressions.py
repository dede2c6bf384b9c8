"""Box expressions: parse with sqlglot, check field names, infer result types.

Borealis writes predicates and computed fields as small SQL-like expressions
(``value > 5.0``, ``1=1``, ``left.time = right.time``, ``min(a, b)``).
Validation parses each once, checks that it names only fields of the
schemas in scope, and infers a type so a map or join can derive its output
schema.  (The data plane compiles the same trees to Python callables.)

>>> from boreas.catalog.model import Field, FieldType, Schema
>>> s = Schema("T", (Field("value", FieldType.DOUBLE), Field("time", FieldType.INT)))
>>> scope = Scope.single(s)
>>> infer_type(parse_expression("time * 2 + 1"), scope)
<FieldType.INT: 'int'>
>>> infer_type(parse_expression("value / time"), scope)
<FieldType.DOUBLE: 'double'>
>>> infer_type(parse_expression("bogus > 1"), scope)
Traceback (most recent call last):
...
boreas.catalog.expression_shapes.ExpressionError: unknown field 'bogus' (fields: value, time)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from sqlglot import expressions as exp

from .expression_shapes import (  # noqa: F401 - ExpressionError, field_references: re-exported (defined here before)
    ExpressionError,
    by_shape,
    field_references,
    known_shape_tree,
    parse_sql,
)
from .model import Field, FieldType, Schema


@lru_cache(maxsize=4096)
def parse_expression(text: str) -> exp.Expression:
    """Parse one Borealis expression (cached: the same text recurs a lot).

    Texts that differ only in their numbers share one parse (:func:`~.expression_shapes.by_shape`): a catalog of 100,000
    filters ``value > 3.5``, ``value > 4.5``, ... is parsed once, not 100,000 times (sqlglot takes
    about 0.3 ms an expression: half a minute of a deployment's checking).  The tree is the one
    sqlglot gives the text itself.
    """
    if not text or not text.strip():
        raise ExpressionError("expression is empty")
    sql = text.replace("==", "=")
    shaped = by_shape(sql)
    return shaped if shaped is not None else parse_sql(sql, text)


def expression_fields(text: str) -> list[tuple[str | None, str]]:
    """The ``(qualifier, field)`` pairs ``text`` reads; raises :class:`ExpressionError` as
    :func:`parse_expression` does.

    What checking a box needs (its syntax, the fields it names), without a tree: a text whose shape
    is already known good (:func:`~.expression_shapes.by_shape`) reads its shape's fields, so a Head checking a catalog of
    100,000 filters whole (at start) builds no tree for them (the tree cache holds 4,096 texts).

    >>> expression_fields("value > 3.5 and left.time < 7")
    [(None, 'value'), ('left', 'time')]
    """
    return list(_fields_of(text))


@lru_cache(maxsize=4096)
def _fields_of(text: str) -> tuple[tuple[str | None, str], ...]:
    """(:func:`expression_fields`, cached: a box's check asks for its texts' fields twice, shape then
    inference; a text that does not parse raises each time, as exceptions are not cached.)"""
    if text and text.strip():
        sql = text.replace("==", "=")
        shape = known_shape_tree(sql)
        if shape is not None:
            _refuse_element_reference(shape)
            return tuple(field_references(shape))
    tree = parse_expression(text)
    _refuse_element_reference(tree)
    return tuple(field_references(tree))


def check_expression(text: str, scope: Scope) -> None:
    """``text`` parses and names only fields in ``scope`` (raises :class:`ExpressionError`)."""
    for qualifier, name in _fields_of(text):
        scope.lookup(qualifier, name)


@dataclass(frozen=True, slots=True)
class Scope:
    """Which schema each qualifier (``left``, ``right``, or none) refers to."""

    schemas: tuple[tuple[str | None, Schema], ...]

    @classmethod
    def single(cls, schema: Schema) -> Scope:
        return cls(((None, schema),))

    @classmethod
    def join(cls, left: Schema, right: Schema) -> Scope:
        return cls((("left", left), ("right", right)))

    def lookup(self, qualifier: str | None, name: str) -> Field:
        """The scalar field ``name`` (of ``qualifier``'s schema); an array field is refused (:meth:`whole`)."""
        candidates = [s for q, s in self.schemas if q == qualifier or qualifier is None]
        if qualifier is not None and not candidates:
            known = ", ".join(q for q, _ in self.schemas if q)
            raise ExpressionError(f"unknown qualifier {qualifier!r} (use {known or 'no qualifier'})")
        for schema in candidates:
            found = schema.field(name)
            if found is not None and found.array is not None:
                raise ExpressionError(f"field {name!r} is an array ({found.array}): expressions compare and "
                                      f"compute on scalar fields only (an array passes through whole: a "
                                      f"map's or join's out field that is just {name!r})")
            if found is not None:
                return found
        names = ", ".join(f.name for s in candidates for f in s.fields)
        label = f"{qualifier}.{name}" if qualifier else name
        raise ExpressionError(f"unknown field {label!r} (fields: {names})")


    def whole(self, qualifier: str | None, name: str) -> Field | None:
        """The field ``name`` when it is an array (read whole, passed on as it is), else None."""
        for q, schema in self.schemas:
            found = schema.field(name) if q == qualifier or qualifier is None else None
            if found is not None:
                return found if found.array is not None else None
        return None


_ELEMENT = "boreas.element_reference"

#: Why ``a->byte`` is refused: what Borealis's expression language means by it.
ELEMENT_REFERENCE = ("is Borealis's array element reference, which reads the element under the cursor of its "
                     "array-processing boxes (delta_detect, face_detect, ...; ExprUtil.h's FieldExpression), "
                     "not an element by index; Boreas runs none of those boxes and its expressions do not read "
                     "array elements")


def _refuse_element_reference(tree: exp.Expression) -> None:
    found = tree.meta.get(_ELEMENT)  # (looked for once per tree: cached trees are shared, as for _REFS)
    if found is None:
        found = tree.meta[_ELEMENT] = tree.find(exp.JSONExtract) or False
    if found:
        raise ExpressionError(f"'{found.this.sql()}->{found.expression.sql()}' {ELEMENT_REFERENCE}")




def check_fields(tree: exp.Expression, scope: Scope) -> None:
    _refuse_element_reference(tree)
    for qualifier, name in field_references(tree):
        scope.lookup(qualifier, name)


_RANK = [FieldType.BYTE, FieldType.SHORT, FieldType.INT, FieldType.LONG, FieldType.SINGLE,
         FieldType.DOUBLE]
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.And, exp.Or, exp.Not,
                exp.Is, exp.In, exp.Between, exp.Like, exp.Boolean)


def _widest(types: list[FieldType]) -> FieldType:
    numeric = [t for t in types if t in _RANK]
    if not numeric:
        return types[0] if types else FieldType.INT
    return max(numeric, key=_RANK.index)


#: Size given to a computed string whose size cannot be told from its inputs.
DEFAULT_STRING_SIZE = 256


def infer_field(name: str, tree: exp.Expression, scope: Scope, *, whole_arrays: bool = False) -> Field:
    """The output field an expression makes; strings keep a size, as Borealis strings are fixed-size.

    ``whole_arrays``: an expression that is just an array field passes it on whole (a map's or a
    join's out field), keeping its array type; anywhere else an array is refused (:meth:`Scope.lookup`).

    >>> s = Schema("T", (Field("proto", FieldType.STRING, 4), Field("n", FieldType.INT)))
    >>> infer_field("p", parse_expression("proto"), Scope.single(s))
    Field(name='p', type=<FieldType.STRING: 'string'>, size=4, array=None, nullable=False)
    >>> infer_field("m", parse_expression("n + 1"), Scope.single(s)).size is None
    True

    The field is nullable when the expression reads a nullable field (NULL
    propagates: ``n + 1`` of a NULL ``n`` is NULL), except a bare ``IS [NOT]
    NULL`` test, which is never NULL.
    """
    bare = tree.this if isinstance(tree, exp.Paren) else tree
    if whole_arrays and isinstance(bare, exp.Column):
        array = scope.whole(bare.table or None, bare.name)
        if array is not None:
            return Field(name, None, array.size, array.array, nullable=array.nullable)
    ftype = infer_type(tree, scope)
    nullable = _reads_nullable(tree, scope)
    if ftype != FieldType.STRING:
        return Field(name, ftype, nullable=nullable)
    return Field(name, ftype, _string_size(tree, scope) or DEFAULT_STRING_SIZE, nullable=nullable)


def _reads_nullable(tree: exp.Expression, scope: Scope) -> bool:
    """Whether an expression's value may be NULL because a field it reads may be (:func:`infer_field`);
    ``COALESCE`` is NULL only when each of its arguments may be."""
    if isinstance(tree, exp.Is) and isinstance(tree.expression, exp.Null):
        return False
    if isinstance(tree, exp.Coalesce):
        return all(_reads_nullable(a, scope) for a in [tree.this, *tree.expressions])
    if isinstance(tree, exp.Column):
        q, n = tree.table or None, tree.name
        return scope.whole(q, n) is None and scope.lookup(q, n).nullable
    return any(_reads_nullable(child, scope) for child in tree.iter_expressions())


def _string_size(tree: exp.Expression, scope: Scope) -> int | None:
    if isinstance(tree, exp.Paren):
        return _string_size(tree.this, scope)
    if isinstance(tree, exp.Column):
        return scope.lookup(tree.table or None, tree.name).size
    if isinstance(tree, exp.Literal) and tree.is_string:
        return max(len(tree.this.encode()), 1)
    parts = [a for a in [tree.args.get("this"), *tree.args.get("expressions", [])] if isinstance(a, exp.Expression)]
    sizes = [_string_size(a, scope) for a in parts]
    if not sizes or None in sizes:
        return None
    return sum(sizes) if isinstance(tree, exp.Concat) else max(sizes)  # type: ignore[type-var]


def infer_type(tree: exp.Expression, scope: Scope) -> FieldType:
    """The Borealis type an expression yields (predicates yield int, as Borealis has no bool)."""
    _refuse_element_reference(tree)
    if isinstance(tree, exp.Paren):
        return infer_type(tree.this, scope)
    if isinstance(tree, exp.Column):
        return scope.lookup(tree.table or None, tree.name).type
    if isinstance(tree, exp.Literal):
        if tree.is_string:
            return FieldType.STRING
        return FieldType.INT if tree.this.lstrip("-").isdigit() else FieldType.DOUBLE
    if isinstance(tree, exp.Neg):
        return infer_type(tree.this, scope)
    if isinstance(tree, _COMPARISONS):
        check_fields(tree, scope)
        return FieldType.INT
    if isinstance(tree, exp.Div):
        check_fields(tree, scope)
        return FieldType.DOUBLE
    if isinstance(tree, (exp.Add, exp.Sub, exp.Mul, exp.Mod)):
        return _widest([infer_type(tree.this, scope), infer_type(tree.expression, scope)])
    if isinstance(tree, (exp.Min, exp.Max, exp.Abs, exp.Greatest, exp.Least, exp.Coalesce)):
        args = [a for a in [tree.this, *tree.expressions] if a is not None]
        return _widest([infer_type(a, scope) for a in args])
    if isinstance(tree, exp.Count):
        check_fields(tree, scope)
        return FieldType.INT
    if isinstance(tree, (exp.Avg, exp.Sqrt, exp.Pow, exp.Ln, exp.Log, exp.Exp)):
        check_fields(tree, scope)
        return FieldType.DOUBLE
    if isinstance(tree, exp.Sum):
        return infer_type(tree.this, scope)
    if isinstance(tree, (exp.Floor, exp.Ceil, exp.Round)):
        check_fields(tree, scope)
        return FieldType.LONG
    if isinstance(tree, exp.Concat):
        check_fields(tree, scope)
        return FieldType.STRING
    if isinstance(tree, exp.Cast):
        check_fields(tree, scope)
        return _CAST_TYPES.get(tree.to.this, FieldType.DOUBLE)
    raise ExpressionError(f"unsupported expression {tree.sql()!r} ({type(tree).__name__})")


_CAST_TYPES = {
    exp.DataType.Type.TINYINT: FieldType.BYTE,
    exp.DataType.Type.SMALLINT: FieldType.SHORT,
    exp.DataType.Type.INT: FieldType.INT,
    exp.DataType.Type.BIGINT: FieldType.LONG,
    exp.DataType.Type.FLOAT: FieldType.SINGLE,
    exp.DataType.Type.DOUBLE: FieldType.DOUBLE,
    exp.DataType.Type.VARCHAR: FieldType.STRING,
    exp.DataType.Type.TEXT: FieldType.STRING,
    exp.DataType.Type.TIMESTAMP: FieldType.TIMESTAMP,
}
