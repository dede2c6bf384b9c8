"""Operators built by hand for the operator tests: schemas, a box of any type, helpers to read what it emits.

``test_operators.py``, ``test_compiled_expressions.py`` and
``test_operator_moves.py`` build operators the same way (the output schemas
the catalog infers, as a node would), so the builders live here.
"""

from __future__ import annotations

import math
import struct
from pathlib import Path

import msgspec
from boreas.catalog.boxtypes import builtin_registry
from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
from boreas.node.operators import Operator, build_operator
from boreas.wire.columns import as_rows

EXAMPLES = Path(__file__).parents[2] / "examples" / "xml"
CATALOG_TYPES = builtin_registry()

I, D, S, TS = FieldType.INT, FieldType.DOUBLE, FieldType.STRING, FieldType.TIMESTAMP


def schema(name: str, *fields: tuple[str, FieldType]) -> Schema:
    return Schema(name, tuple(Field(n, t, 8 if t == S else None) for n, t in fields))


T = schema("T", ("value", D), ("time", I))
PACKET = schema("Packet", ("time", I), ("protocol", S))
READING = schema("Reading", ("sensor", I), ("time", I), ("celsius", D))
TRADE = schema("Trade", ("time", I), ("symbol", S), ("price", D))
QUOTE = schema("Quote", ("time", I), ("symbol", S), ("bid", D))


def make(type_: str, params: dict[str, str], *inputs: Schema, outs: int = 1) -> Operator:
    """A box of ``type_`` with the output schemas the catalog infers for it."""
    box = Box("b", type_, tuple(InPort(f"in{i}") for i in range(len(inputs))),
              tuple(f"out{i}" for i in range(outs)), tuple(params.items()))
    return build_operator(box, list(inputs), CATALOG_TYPES.infer(box, list(inputs)))


def rows_of(emitted: list[tuple[int, list[tuple]]], port: int = 0) -> list[tuple]:
    return [r for p, rows in emitted if p == port for r in rows]


def msgpack_trip(state: dict) -> dict:
    return msgspec.msgpack.decode(msgspec.msgpack.encode(state))



#: An aggregate's functions: the average of ``value`` as ``avg`` and the count as ``n``.
AVG = {"aggregate-function.0": "avg(value)", "aggregate-function-output-name.0": "avg",
       "aggregate-function.1": "count()", "aggregate-function-output-name.1": "n"}


def same(value):
    """A value as the comparison sees it: its type and bits (nan equal to nan, -0.0 not 0.0)."""
    if isinstance(value, float):
        return ("float", struct.pack("<d", value)) if not math.isnan(value) else ("nan",)
    return (type(value).__name__, value)


def normal(emitted: list) -> list:
    """What an operator emitted, port by port, rows of :func:`same` values (rows or columns alike)."""
    return [(port, [tuple(same(v) for v in row) for row in as_rows(rows)]) for port, rows in emitted]
