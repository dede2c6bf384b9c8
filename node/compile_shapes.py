"""Generated code compiled once per expression shape and shared by every box of that shape.

A node applying a deployment builds thousands of filters ``value > 3.5 and
sensor <> 17``, ``value > 4.5 and sensor <> 18``, ... that differ only in
their numbers.  Translating each one (:mod:`.compile`) and compiling its
source cost about 0.35 ms a box, most of a node's CPU in a deployment
(docs/benchmarks.md, "The control plane at scale").  Here a box's
expressions are *lifted* (:func:`lift`): each number becomes a parameter
(``_n0``, ``_n1``, ...; :func:`~boreas.catalog.expression_shapes.number_shape`),
the generated source is compiled once per key (:class:`SharedCode`) and
each box gets it with its own numbers in microseconds: put in as the code's
constants (:class:`Constants`: the bytecode a box compiled alone has), or,
where Python's compiler folded a number into another constant, passed to a
function of those parameters (:func:`factory`: closures over the numbers,
about 5% slower a tuple).  The key holds everything the generated code
depends on: each expression's shape and the kind (whole or decimal) of each
of its numbers, which is what the types depend on, plus what the operator
adds (its in schema, its options).

A text without numbers, or with quotes or comments (which may hold digits),
is its own key: boxes with the same expressions share code too.

>>> from boreas.catalog.model import Field, FieldType, Schema
>>> a, b = lift(["x > 3.5 and n <> 17"]), lift(["x > 4.5 and n <> 18"])
>>> a.key == b.key, a.values, b.parameters
(True, (3.5, 17), ('_n0', '_n1'))
>>> s = Schema("T", (Field("x", FieldType.DOUBLE), Field("n", FieldType.INT)))
>>> builder = CodeBuilder(Scope.single(s), ["row"])
>>> [src] = a.translated(builder, lambda tree: builder.translate(tree).source)
>>> src
'((row[0] > _n0) and (row[1] != _n1))'
>>> make = factory(builder, f"def _test(row):\\n    return {src}\\n", a.parameters, "_test")
>>> make(*a.values)((4.0, 1)), make(*b.values)((4.0, 1))
(True, False)
"""

from __future__ import annotations

import textwrap
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import CodeType
from typing import Any

from boreas.catalog.expression_shapes import NumberShape, number_shape
from boreas.catalog.expressions import Scope  # noqa: F401 - the doctest
from boreas.catalog.model import Schema
from sqlglot import expressions as exp

from .compile import CodeBuilder


@dataclass(frozen=True, slots=True)
class Lifted:
    """A box's expressions with their numbers lifted out (:func:`lift`)."""

    key: tuple[Hashable, ...]  # per expression: its shape's key (numbers' kinds included), or its text
    trees: tuple[str | exp.Expression, ...]  # what to translate: the shape's tree, or the text itself
    numbers: tuple[dict[str, str], ...]  # per expression: a placeholder's text -> its parameter's name
    parameters: tuple[str, ...]  # the generated factory's parameters, in order
    values: tuple[int | float, ...]  # this box's numbers, one per parameter, as the row code reads them
    placeholders: tuple[int | float, ...]  # the shapes' placeholder numbers, one per parameter (the key's)

    def translated(self, builder: CodeBuilder, how: Callable[[str | exp.Expression], Any]) -> list[Any]:
        """``how(tree)`` for each expression (``builder.translate``, ``builder.value``), the builder reading
        that expression's placeholders as their parameters (each shape numbers its own from the same
        sentinel, so they are told apart per expression)."""
        out = []
        for tree, numbers in zip(self.trees, self.numbers, strict=True):
            builder.numbers = numbers
            out.append(how(tree))
        builder.numbers = {}
        return out


def lift(texts: Sequence[str]) -> Lifted:
    """``texts`` (one box's expressions, in order) with their numbers as parameters."""
    key: list[Hashable] = []
    trees: list[str | exp.Expression] = []
    numbers: list[dict[str, str]] = []
    values: list[int | float] = []
    placeholders: tuple[int | float, ...] = ()
    for text in texts:
        found = number_shape(text)
        if found is None:
            key.append(text)
            trees.append(text)
            numbers.append({})
            continue
        shape, written = found
        names, held = _parameters(shape, len(values))
        key.append(shape.key)
        trees.append(shape.tree)
        numbers.append(names)
        placeholders += held
        values += [float(n) if "." in n else int(n) for n in written]
    parameters = tuple(f"_n{i}" for i in range(len(values)))
    return Lifted(tuple(key), tuple(trees), tuple(numbers), parameters, tuple(values), placeholders)


@lru_cache(maxsize=1024)
def _parameters(shape: NumberShape, first: int) -> tuple[dict[str, str], tuple[int | float, ...]]:
    """A shape's placeholders -> parameter names from ``_n{first}`` on, and the placeholders as numbers
    (the same for every box of the shape: made once).  (Read only: the dict is shared.)"""
    names = {p: f"_n{first + i}" for i, p in enumerate(shape.placeholders)}
    return names, tuple(float(p) if "." in p else int(p) for p in shape.placeholders)


def schema_key(schema: Schema) -> tuple:
    """``schema`` as a key part: hashing a Schema hashes each Field through dataclass code, which cost more
    than the rest of a cache lookup; the key is made once per schema object (kept while it is keyed)."""
    found = _SCHEMA_KEYS.get(id(schema))
    if found is None or found[0] is not schema:
        if len(_SCHEMA_KEYS) > 4096:
            _SCHEMA_KEYS.clear()
        found = _SCHEMA_KEYS[id(schema)] = (schema, (schema.name, tuple(
            (f.name, f.type, f.size, f.array, f.nullable) for f in schema.fields)))
    return found[1]


_SCHEMA_KEYS: dict[int, tuple[Schema, tuple]] = {}


def factory(builder: CodeBuilder, source: str, parameters: Sequence[str], returned: str) -> Callable[..., Any]:
    """``source`` (which defines functions reading ``parameters``) compiled once, inside ``_make(parameters)``
    that returns ``returned`` (an expression of the names it defines): calling ``_make`` with a box's numbers
    gives that box's functions."""
    body = textwrap.indent(source, "    ")
    return builder.define(f"def _make({', '.join(parameters)}):\n{body}    return {returned}\n", "_make")


class Constants:
    """``make(*numbers)`` for code whose numbers are its placeholders as constants: each box gets the compiled
    code with its own numbers in place of the placeholders (``code.replace(co_consts=...)``), run in its own
    globals: the very bytecode a box compiled alone has (a constant is read as fast as one can be; a closure's
    cell, :func:`factory`, costs about 5% of a filter's loop).  :meth:`of` says when that is exact."""

    def __init__(self, code: CodeType, namespace: dict[str, Any], placeholders: Sequence[int | float],
                 names: Sequence[str]):
        self.code = code
        self.namespace = namespace
        self.placeholders = tuple(placeholders)
        self.names = tuple(names)

    @classmethod
    def of(cls, builder: CodeBuilder, source: str, placeholders: Sequence[int | float],
           names: Sequence[str]) -> Constants | None:
        """``source`` (the placeholders as literals, defining ``names``) compiled once; None when the compiler
        folded a placeholder into another constant (``1.5 + 2``: no constant to put a box's number in), or two
        expressions' placeholders are the same number (each shape numbers its own from one sentinel)."""
        if len(set(placeholders)) != len(placeholders):
            return None
        code = compile(source, f"<boreas {builder.label} (shape)>", "exec")
        found = _constants(code)
        if not all((type(p), p) in found or (type(p), -p) in found for p in placeholders):
            return None
        return cls(code, builder.namespace, placeholders, names)

    def __call__(self, *values: int | float) -> tuple[Callable[..., Any], ...]:
        swap = {}
        for placeholder, value in zip(self.placeholders, values, strict=True):
            swap[(type(placeholder), placeholder)] = value
            swap[(type(placeholder), -placeholder)] = -value  # (``-3`` is folded into one constant)
        scope = dict(self.namespace)
        exec(_swapped(self.code, swap), scope)  # noqa: S102 - our own generated code, numbers put in
        return tuple(scope[name] for name in self.names)


def _constants(code: Any) -> set[tuple[type, Any]]:
    """Every constant in ``code``, its nested code objects and constant tuples, as (type, value)."""
    found: set[tuple[type, Any]] = set()
    for const in code.co_consts if isinstance(code, CodeType) else code:
        if isinstance(const, (CodeType, tuple, frozenset)):
            found |= _constants(const)
        else:
            found.add((type(const), const))
    return found


def _swapped(code: CodeType, swap: dict[tuple[type, Any], Any]) -> CodeType:
    return code.replace(co_consts=tuple(_swap(c, swap) for c in code.co_consts))


def _swap(const: Any, swap: dict[tuple[type, Any], Any]) -> Any:
    kind = type(const)
    if kind is int or kind is float:
        return swap.get((kind, const), const)
    if kind is CodeType:
        return _swapped(const, swap)
    if kind is tuple or kind is frozenset:
        return kind(_swap(c, swap) for c in const)
    return const


class SharedCode:
    """The compiled factories of one node process by key, the ``size`` most recently used kept.

    The one owner of the cache: operators ask :meth:`get` and never see the dict.  Keys name everything
    the code depends on, so a factory is never stale; one evicted is compiled again when asked for.
    """

    def __init__(self, size: int = 1024):
        self._made: OrderedDict[Hashable, Callable[..., Any]] = OrderedDict()
        self._size = size

    def get(self, key: Hashable, make: Callable[[], Callable[..., Any]]) -> Callable[..., Any]:
        """The factory kept for ``key``, or ``make()``'s (kept; an exception propagates, nothing is kept)."""
        found = self._made.get(key)
        if found is not None:
            self._made.move_to_end(key)
            return found
        found = self._made[key] = make()
        if len(self._made) > self._size:
            self._made.popitem(last=False)
        return found


#: The node process's shared code (a node builds its operators on one thread, its event loop's).
SHARED = SharedCode()
