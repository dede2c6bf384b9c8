"""``map``: one out tuple per in tuple, field N computed by ``expression.N``.

Out field N is named ``output-field-name.N`` and has the type validation
infers for the expression; values are converted to it (``1=1`` gives int 1,
``min(i, d)`` a float).  An expression that fails on a tuple writes None
into that field and the others are still computed.

The batch is mapped by one generated list comprehension with every
expression inlined into one tuple display; if some expression fails on some
tuple, the batch is mapped again by a loop in which that tuple takes a
slower path that evaluates the fields one by one.  (Expressions are pure, so
doing the batch again gives what the loop alone would have.)
"""

from __future__ import annotations

from boreas.catalog.expressions import ExpressionError, Scope
from boreas.catalog.model import Box, Schema
from boreas.node.compile import CodeBuilder

from .base import Emitted, Operator, OperatorError


class MapOperator(Operator):
    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema]):
        super().__init__(box, inputs, outputs)
        expressions = self.indexed("expression")
        names = self.indexed("output-field-name")
        if not expressions:
            raise self.error("needs parameter 'expression.0'")
        if len(names) != len(expressions):
            raise self.error(f"has {len(expressions)} expression.N but {len(names)} output-field-name.N")
        self.check_outputs()
        builder = CodeBuilder(Scope.single(inputs[0]), ["row"], label=box.name)
        try:
            sources = [builder.value(e).source for e in expressions]
        except ExpressionError as exc:
            raise OperatorError(f"map box {box.name!r}: {exc}") from None
        builder.namespace["_slow"] = builder.define(_slow_source(sources), "_slow")
        builder.namespace["_loop"] = builder.define(_batch_source(sources), "_map")
        self._batch = builder.define(_comprehension_source(sources), "_map_fast")
        self._ports = range(len(outputs))

    def process(self, port: int, rows: list[tuple], now: float) -> Emitted:
        if not rows:
            return []
        out = self._batch(rows)
        return [(p, out) for p in self._ports]


def _batch_source(sources: list[str]) -> str:
    display = "(" + "".join(s + ", " for s in sources) + ")"
    return (
        "def _map(rows):\n"
        "    out = []\n"
        "    append = out.append\n"
        "    for row in rows:\n"
        "        try:\n"
        f"            append({display})\n"
        "        except _ERRORS:\n"
        "            append(_slow(row))\n"
        "    return out\n"
    )


def _comprehension_source(sources: list[str]) -> str:
    display = "(" + "".join(s + ", " for s in sources) + ")"
    return (
        "def _map_fast(rows):\n"
        "    try:\n"
        f"        return [{display} for row in rows]\n"
        "    except _ERRORS:\n"
        "        return _loop(rows)\n"
    )


def _slow_source(sources: list[str]) -> str:
    lines = ["def _slow(row):"]
    for i, src in enumerate(sources):
        lines += ["    try:", f"        v{i} = {src}", "    except _ERRORS:", f"        v{i} = None"]
    lines.append("    return (" + "".join(f"v{i}, " for i in range(len(sources))) + ")")
    return "\n".join(lines) + "\n"
