"""Aggregate functions compiled to two small functions over a window list.

A window is a plain list, so it is cheap to update and serialises as is::

    [start, end, t0, seq, n, slot, slot, ...]

``start``/``end`` bound a value window (a tuple window keeps its start
value and no end), ``t0`` is when it opened (``now``), ``seq`` its creation
number (timeouts close windows in that order), ``n`` how many tuples it
holds, and the slots hold each function's running state.  For the box's
functions this module generates ``add(w, row)`` and ``result(w) -> tuple``
once, with every argument expression inlined.

Empty windows (Borealis emits them for gaps in the order field) give
count 0 and every other function the zero of its type (0, 0.0 or ""),
since tuples of fields that are not nullable carry no nulls.  Tuples
whose argument is None (a failed expression upstream) are skipped by every
function but count(); ``count(x)`` counts non-None x, ``count_distinct(x)``
the distinct non-None values of x (Borealis's function; the window keeps them
as a dict, so its state moves and snapshots like any other).

An argument that reads a ``nullable`` field (docs/xml.md, "Nullable
fields") is SQL's: its NULLs are skipped as above, and sum, avg, min, max,
firstval and lastval of a window without a value are NULL (None), not a
zero (a sum keeps the count of its values beside it to know).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from boreas.catalog.expressions import ExpressionError, Scope, field_references, parse_expression
from boreas.catalog.model import Schema
from boreas.node.compile import FLOAT, STR, CodeBuilder, coerce, kind_of

START, END, T0, SEQ, COUNT = range(5)
FIRST_SLOT = 5

_CALL = re.compile(r"^\s*(\w+)\s*\((.*)\)\s*$", re.DOTALL)
FUNCTIONS = ("count", "count_distinct", "sum", "avg", "min", "max", "firstval", "lastval")


class AggregateSpecError(ValueError):
    """An ``aggregate-function.N`` that cannot be compiled."""


@dataclass(frozen=True, slots=True)
class Accumulators:
    add: Callable[[list, tuple], None]
    result: Callable[[list], tuple]
    initial: tuple  # the slots of a new window
    source: str
    #: ``add``'s body (4-space indented lines over ``w`` and ``row``, temporaries ``v<N>`` and ``d``), for a
    #: batch loop that inlines it (:mod:`.aggregate_loop`): no call per tuple.
    add_body: tuple[str, ...] = ()
    namespace: dict | None = None  # the globals ``add_body`` needs (helpers, constants)


def parse_call(text: str) -> tuple[str, str] | None:
    """``aggregate-function.N``'s text as (function, argument), or None when it is not one of :data:`FUNCTIONS`.

    >>> parse_call(" SUM( x * 2 ) "), parse_call("count(*)"), parse_call("median(x)")
    (('sum', 'x * 2'), ('count', '*'), None)
    """
    m = _CALL.match(text)
    if not m or m.group(1).lower() not in FUNCTIONS:
        return None
    return m.group(1).lower(), m.group(2).strip()


def compile_accumulators(functions: list[str], schema: Schema, label: str = "") -> Accumulators:
    """``add``/``result`` for ``aggregate-function.N`` texts over rows of ``schema``."""
    builder = CodeBuilder(Scope.single(schema), ["row"], label=label)
    add = ["def _add(w, row):", "    w[4] += 1"]
    results: list[str] = []
    initial: list[Any] = []
    for i, text in enumerate(functions):
        m = _CALL.match(text)
        if not m or m.group(1).lower() not in FUNCTIONS:
            raise AggregateSpecError(f"aggregate-function.{i}={text!r} is not one of "
                                     f"{', '.join(f + '(...)' for f in FUNCTIONS)}")
        func, arg = m.group(1).lower(), m.group(2).strip()
        slot = FIRST_SLOT + len(initial)
        if func == "count" and arg in ("", "*"):
            results.append("w[4]")
            continue
        if not arg:
            raise AggregateSpecError(f"aggregate-function.{i}: {func}() needs a field or expression")
        try:
            value = builder.translate(arg)
        except ExpressionError as exc:
            raise AggregateSpecError(f"aggregate-function.{i}: {exc}") from None
        kind = kind_of(value.type)
        nullable = any(schema.field(n) is not None and schema.field(n).nullable for _, n in field_references(parse_expression(arg)))
        if func in ("sum", "avg") and kind == STR:
            raise AggregateSpecError(f"aggregate-function.{i}: {func}() needs a numeric argument, "
                                     f"{arg!r} is a string")
        add += _argument(value.source, i)
        v = f"v{i}"
        if func == "count":
            initial.append(0)
            add.append(f"    if {v} is not None: w[{slot}] += 1")
            results.append(f"w[{slot}]")
        elif func == "count_distinct":  # the distinct values seen, as a dict (serialises as a map)
            initial.append(None)
            add += [f"    if {v} is not None:", f"        d = w[{slot}]", "        if d is None:",
                    f"            d = w[{slot}] = {{}}", f"        d[{v}] = 1"]
            results.append(f"(len(w[{slot}]) if w[{slot}] else 0)")
        elif func == "sum" and nullable:  # the sum and its count of values: NULL when that is 0
            initial += [0.0 if kind == FLOAT else 0, 0]
            add.append(f"    if {v} is not None: w[{slot}] += {v}; w[{slot + 1}] += 1")
            total = coerce(f"w[{slot}]", value.kind if value.kind == kind else None, kind)
            results.append(f"({total} if w[{slot + 1}] else None)")
        elif func == "sum":
            initial.append(0.0 if kind == FLOAT else 0)
            add.append(f"    if {v} is not None: w[{slot}] += {v}")
            results.append(coerce(f"w[{slot}]", value.kind if value.kind == kind else None, kind))
        elif func == "avg":
            initial += [0, 0]
            add.append(f"    if {v} is not None: w[{slot}] += {v}; w[{slot + 1}] += 1")
            results.append(f"(w[{slot}] / w[{slot + 1}] if w[{slot + 1}] else {'None' if nullable else '0.0'})")
        elif func in ("min", "max"):
            initial.append(None)
            op = "<" if func == "min" else ">"
            add.append(f"    if {v} is not None and (w[{slot}] is None or {v} {op} w[{slot}]): "
                       f"w[{slot}] = {v}")
            results.append(_or_zero(coerce(f"w[{slot}]", value.kind, kind), kind, nullable))
        elif func == "firstval":
            initial.append(None)
            add.append(f"    if w[4] == 1: w[{slot}] = {v}")
            results.append(_or_zero(coerce(f"w[{slot}]", value.kind, kind), kind, nullable))
        else:  # lastval
            initial.append(None)
            add.append(f"    w[{slot}] = {v}")
            results.append(_or_zero(coerce(f"w[{slot}]", value.kind, kind), kind, nullable))
    result = "def _result(w):\n    return (" + "".join(r + ", " for r in results) + ")\n"
    source = "\n".join(add) + "\n\n" + result
    return Accumulators(builder.define("\n".join(add) + "\n", "_add"),
                        builder.define(result, "_result"), tuple(initial), source, tuple(add[1:]),
                        builder.namespace)


def _or_zero(expression: str, kind: object, nullable: bool = False) -> str:
    """An empty window's value: the type's zero, since tuples carry no nulls (NULL over a nullable field)."""
    zero = "None" if nullable else "0.0" if kind == FLOAT else ('""' if kind == STR else "0")
    return f"(_r if (_r := {expression}) is not None else {zero})"


def _argument(source: str, i: int) -> list[str]:
    """Evaluate one argument into ``v{i}``; a failure makes it None (skipped)."""
    if source.startswith("row[") and source.endswith("]") and source[4:-1].isdigit():
        return [f"    v{i} = {source}"]
    return ["    try:", f"        v{i} = {source}", "    except _ERRORS:", f"        v{i} = None"]
