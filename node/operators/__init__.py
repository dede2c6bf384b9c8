"""The data-plane box operators: what a node runs for each box.

One module per concept: :mod:`.base` (the :class:`Operator` contract and
parameter reading), :mod:`.filter`, :mod:`.map`, :mod:`.union`,
:mod:`.aggregate` (with :mod:`.accumulators`), :mod:`.join`,
:mod:`.timers` (clock bookkeeping and ``delay``), :mod:`.shedding`
(``random_drop``, ``window_drop``), :mod:`.m3box` (``m3``: a SQL view
maintained by the M3 runtime) and :mod:`.registry`.  Semantics, with
examples: ``docs/operators.md``.

>>> from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
>>> s = Schema("T", (Field("v", FieldType.INT),))
>>> box = Box("f", "filter", (InPort("In"),), ("Big", "Small"),
...           (("expression.0", "v > 10"), ("pass-on-false-port", "1")))
>>> op = build_operator(box, [s], [s, s])
>>> op.process(0, [(5,), (50,), (7,)], now=0.0)
[(0, [(50,)]), (1, [(5,), (7,)])]
"""

from .base import Operator, OperatorError
from .registry import (
    DEFAULT_REGISTRY,
    OperatorFactory,
    OperatorRegistry,
    build_operator,
    builtin_operators,
    register_operator,
)

__all__ = [
    "DEFAULT_REGISTRY", "Operator", "OperatorError", "OperatorFactory", "OperatorRegistry",
    "build_operator", "builtin_operators", "register_operator",
]
