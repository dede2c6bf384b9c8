"""Generated code compiled once per expression shape and shared by every box of that shape.

A node applying a deployment builds thousands of filters ``value > 3.5 and
sensor <> 17``, ``value > 4.5 and sensor <> 18``, ... that differ only in
their numbers.  Translating each one (:mod:`.compile`) and compiling its
source cost about 0.35 ms a box, most of a node's CPU in a deployment
(docs/benchmarks.md, "The control plane at scale").  Here a box's
expressions are *lifted* (:func:`lift`): each number becomes a parameter
(``_n0``, ``_n1``, ...; :func:`~boreas.catalog.expression_shapes.number_shape`),
the generated source is wrapped in a function of those parameters
(:func:`factory`) and compiled once per key (:class:`SharedCode`), and each
box calls it with its own numbers, which makes its functions (closures over
the numbers) in microseconds.  The key holds everything the generated code
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
from typing import Any

from boreas.catalog.expression_shapes import number_shape
from boreas.catalog.expressions import Scope  # noqa: F401 - the doctest
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
    for text in texts:
        found = number_shape(text)
        if found is None:
            key.append(text)
            trees.append(text)
            numbers.append({})
            continue
        shape, written = found
        key.append(shape.key)
        trees.append(shape.tree)
        numbers.append({})
        for placeholder, number in zip(shape.placeholders, written, strict=True):
            numbers[-1][placeholder] = f"_n{len(values)}"
            values.append(float(number) if "." in number else int(number))
    parameters = tuple(f"_n{i}" for i in range(len(values)))
    return Lifted(tuple(key), tuple(trees), tuple(numbers), parameters, tuple(values))


def factory(builder: CodeBuilder, source: str, parameters: Sequence[str], returned: str) -> Callable[..., Any]:
    """``source`` (which defines functions reading ``parameters``) compiled once, inside ``_make(parameters)``
    that returns ``returned`` (an expression of the names it defines): calling ``_make`` with a box's numbers
    gives that box's functions."""
    body = textwrap.indent(source, "    ")
    return builder.define(f"def _make({', '.join(parameters)}):\n{body}    return {returned}\n", "_make")


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
