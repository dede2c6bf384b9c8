"""Expressions parsed by their shape: the numbers of a text lifted out.

A catalog holds thousands of expressions that differ only in their numbers
(``value > 3.5``, ``value > 4.5``, ...).  sqlglot parses one in about
0.3 ms, so each *shape* (the text with its numbers as placeholders) is
parsed once and each text's tree is built from it (:func:`by_shape`, for
:func:`~.expressions.parse_expression`); code generated from an expression
can be shared the same way, its numbers passed in (:func:`number_shape`,
for node/compile_shapes.py).  A shape is used only once its first text's
tree, built from it, equals sqlglot's own tree of that text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import sqlglot
from sqlglot import expressions as exp
from sqlglot.errors import ParseError, SqlglotError


class ExpressionError(ValueError):
    """An expression does not parse, or names something not in scope."""


def parse_sql(sql: str, text: str) -> exp.Expression:
    """sqlglot's tree of ``sql``; the errors name ``text``, the expression as written."""
    try:
        tree = sqlglot.parse_one(sql)
    except ParseError as exc:
        first = exc.errors[0] if exc.errors else {}
        where = f" at column {first.get('col')}" if first.get("col") else ""
        raise ExpressionError(f"expression {text!r} does not parse{where}") from None
    except SqlglotError:  # the tokenizer's errors (an unclosed quote, ...)
        raise ExpressionError(f"expression {text!r} does not parse") from None
    if tree is None:
        raise ExpressionError(f"expression {text!r} does not parse")
    return tree


#: A number standing alone as sqlglot reads one (not part of a name, a qualified name, a parameter or a
#: longer number); and what keeps a text off the shared parse: quotes and comments, which may hold digits.
_NUMBER = re.compile(r"(?<![\w.$@:?])\d+(?:\.\d+)?(?![\w.])")
_UNSHAPED = re.compile(r"['\"`#]|--|/\*")
#: The numbers a shape is parsed with: one each, none a text would hold by chance (a text that does is
#: still parsed right: its shape's tree then fails the check below and it is parsed directly).
_SENTINEL = 7_770_000_001


@dataclass
class _Shape:
    """An expression's tree parsed with sentinel numbers, which :meth:`fill` replaces by a text's own."""

    tree: exp.Expression
    sentinels: list[str]
    trusted: bool | None = None  # None: not compared with sqlglot's own tree of a text yet

    def fill(self, numbers: list[str]) -> exp.Expression:
        tree = _build(self.tree, dict(zip(self.sentinels, numbers, strict=True)))
        tree.meta[_REFS] = tuple(field_references(self.tree))  # (numbers are no fields)
        return tree


def _build(node: exp.Expression, numbers: dict[str, str]) -> exp.Expression:
    """A new tree like ``node`` with its sentinel numbers replaced (sqlglot's ``copy`` also deep-copies
    each node's metadata, three times the cost; the positions it holds are the shape's, so none are kept)."""
    args: dict = {}
    for key, value in node.args.items():
        if isinstance(value, exp.Expression):
            value = _build(value, numbers)
        elif type(value) is list:
            value = [_build(v, numbers) if isinstance(v, exp.Expression) else v for v in value]
        args[key] = value
    if isinstance(node, exp.Literal) and not node.is_string:
        args["this"] = numbers[node.this]
    built = type(node)(**args)
    built.comments = list(node.comments) if node.comments else node.comments
    return built


def by_shape(text: str) -> exp.Expression | None:
    """``text``'s tree from its shape's (its numbers replaced by placeholders), or None: no shape applies."""
    numbers = _NUMBER.findall(text)
    if not numbers or _UNSHAPED.search(text):
        return None
    shape = _shape(_NUMBER.sub("\0", text))
    if shape is None or shape.trusted is False:
        return None
    tree = shape.fill(numbers)
    if shape.trusted is None:  # first use: the filled tree must be sqlglot's tree of the text, or never used
        try:
            shape.trusted = parse_sql(text, text) == tree
        except ExpressionError:
            shape.trusted = False
        if not shape.trusted:
            return None
    return tree


@lru_cache(maxsize=1024)
def _shape(template: str) -> _Shape | None:
    """``template`` (its numbers as NUL characters) parsed with sentinel numbers; None if it has no shape."""
    pieces = template.split("\0")
    sentinels = [str(_SENTINEL + i) for i in range(len(pieces) - 1)]
    try:
        sql = pieces[0] + "".join(s + p for s, p in zip(sentinels, pieces[1:], strict=True))
        tree = parse_sql(sql, sql)
    except ExpressionError:
        return None  # the text's own parse says why
    found = [n.this for n in tree.walk() if isinstance(n, exp.Literal) and not n.is_string]
    if sorted(found) != sorted(sentinels):  # a number sqlglot does not keep as a literal as written
        return None
    return _Shape(tree, sentinels)


@dataclass(frozen=True, slots=True)
class NumberShape:
    """An expression's tree with its numbers lifted out: what code generated from it depends on.

    Every number of the text is a placeholder of the same kind (``7770000001`` for a whole number,
    ``7770000001.5`` for a decimal one), so the tree types exactly as the text's own does (types depend on a
    number's kind, never on its value), and one translation of it serves every text of the same ``key``, the
    numbers passed in (node/compile_shapes.py: 10,000 filters ``value > 3.5``, ``value > 4.5``, ... are one
    compiled function on a node).  ``placeholders[i]`` stands for the text's ``i``-th number.
    """

    key: tuple[str, tuple[bool, ...]]  # the text with its numbers as NUL characters; each number decimal or not
    tree: exp.Expression
    placeholders: tuple[str, ...]


def number_shape(text: str) -> tuple[NumberShape, tuple[str, ...]] | None:
    """``text``'s :class:`NumberShape` and its numbers (as written, in order), or None: the text has no
    numbers, has quotes or comments, or its shape's tree is not sqlglot's tree of the text (checked on first
    use, as :func:`parse_expression` does).

    >>> shape, numbers = number_shape("value > 3.5 and sensor <> 17")
    >>> numbers, shape.tree.sql(), shape is number_shape("value > 4.5 and sensor <> 9")[0]
    (('3.5', '17'), 'value > 7770000001.5 AND sensor <> 7770000002', True)
    """
    sql = text.replace("==", "=")
    numbers = _NUMBER.findall(sql)
    if not numbers or _UNSHAPED.search(sql):
        return None
    template = _NUMBER.sub("\0", sql)
    shape = _shape(template)
    if shape is not None and shape.trusted is None:
        by_shape(sql)  # decides whether the shape's trees are the text's
    if shape is None or not shape.trusted:
        return None
    return _placeheld(template, tuple("." in n for n in numbers)), tuple(numbers)


@lru_cache(maxsize=1024)
def _placeheld(template: str, decimal: tuple[bool, ...]) -> NumberShape:
    shape = _shape(template)
    assert shape is not None  # (number_shape asked for it just now; a rebuilt one parses the same)
    placeholders = tuple(f"{s}.5" if d else s for s, d in zip(shape.sentinels, decimal, strict=True))
    tree = _build(shape.tree, dict(zip(shape.sentinels, placeholders, strict=True)))
    return NumberShape((template, decimal), tree, placeholders)


def known_shape_tree(sql: str) -> exp.Expression | None:
    """The tree of ``sql``'s shape (sentinel numbers) when the shape is known to give sqlglot's trees, else
    None: what reading an expression's fields needs, without building the text's own tree."""
    if _UNSHAPED.search(sql) or not _NUMBER.search(sql):
        return None
    shape = _shape(_NUMBER.sub("\0", sql))
    return shape.tree if shape is not None and shape.trusted else None


def field_references(tree: exp.Expression) -> list[tuple[str | None, str]]:
    """Every ``(qualifier, field)`` the expression reads (kept in the tree's ``meta``: the same cached tree
    is checked against every box using its text, and a shape's trees share their shape's)."""
    refs = tree.meta.get(_REFS)
    if refs is None:
        refs = tree.meta[_REFS] = tuple((col.table or None, col.name) for col in tree.find_all(exp.Column))
    return list(refs)


_REFS = "boreas.field_references"
