"""Which operator class runs which box type.

The node builds one operator per box through :func:`build_operator`.  The
built-in Borealis types and ``m3`` (an incrementally maintained SQL view,
:mod:`.m3box`) are in :data:`DEFAULT_REGISTRY`, built once at import from
the list below.  (The catalog side -- which types validation knows -- is
a registry value too, ``boreas.m3.boxtype.box_types()``, that the node
passes to its dataflow.)
Other parts of Boreas add their own types with :func:`register_operator`
(or build a private :class:`OperatorRegistry`, e.g. in tests, to leave the
default alone).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from boreas.catalog.model import Box, Schema

from .aggregate import AggregateOperator
from .aurorajoin import AuroraJoinOperator
from .base import Operator, OperatorError
from .filter import FilterOperator
from .join import JoinOperator
from .m3windows import m3_operator
from .map import MapOperator
from .revision import RevisionFilterOperator, RevisionMapOperator
from .revision_aggregate import RevisionAggregateOperator
from .shedding import RandomDropOperator, WindowDropOperator
from .sjoin import SJoinOperator
from .soutput import SOutputOperator
from .sunion import SUnionOperator
from .table import TABLE_OPERATORS
from .timers import DelayOperator
from .union import UnionOperator

OperatorFactory = Callable[[Box, list[Schema], list[Schema]], Operator]


class OperatorRegistry:
    """Operator factories by box type name."""

    def __init__(self, factories: Iterable[tuple[str, OperatorFactory]] = ()):
        self._factories: dict[str, OperatorFactory] = {}
        for name, factory in factories:
            self.register(name, factory)

    def register(self, type_name: str, factory: OperatorFactory) -> None:
        if not type_name:
            raise ValueError("a box type name is needed")
        self._factories[type_name] = factory

    def names(self) -> list[str]:
        return sorted(self._factories)

    def __contains__(self, type_name: str) -> bool:
        return type_name in self._factories

    def build(self, box: Box, inputs: list[Schema], outputs: list[Schema]) -> Operator:
        """An operator for ``box``; OperatorError for an unknown type or bad parameters."""
        factory = self._factories.get(box.type)
        if factory is None:
            raise OperatorError(f"box {box.name!r} has type {box.type!r}, which has no operator "
                                f"(known: {', '.join(self.names())})")
        return factory(box, list(inputs), list(outputs))


BUILTIN_OPERATORS: tuple[tuple[str, OperatorFactory], ...] = (
    ("filter", FilterOperator),
    ("map", MapOperator),
    ("union", UnionOperator),
    ("aggregate", AggregateOperator),
    ("join", JoinOperator),
    ("delay", DelayOperator),
    ("random_drop", RandomDropOperator),
    ("window_drop", WindowDropOperator),
    ("m3", m3_operator),
    ("revisionfilter", RevisionFilterOperator),
    ("revisionmap", RevisionMapOperator),
    ("revisionaggregate", RevisionAggregateOperator),
    *TABLE_OPERATORS,
    ("sunion", SUnionOperator),
    ("soutput", SOutputOperator),
    ("sjoin", SJoinOperator),
    ("aurorajoin", AuroraJoinOperator),
)


def builtin_operators() -> OperatorRegistry:
    """A fresh registry holding the built-in Borealis operators."""
    return OperatorRegistry(BUILTIN_OPERATORS)


#: The registry :func:`build_operator` uses.
DEFAULT_REGISTRY = builtin_operators()


def build_operator(box: Box, inputs: list[Schema], outputs: list[Schema],
                   registry: OperatorRegistry | None = None) -> Operator:
    """By box.type; unknown type -> OperatorError naming it."""
    return (registry or DEFAULT_REGISTRY).build(box, inputs, outputs)


def register_operator(type_name: str, factory: OperatorFactory) -> None:
    """Make ``build_operator`` build boxes of ``type_name`` with ``factory(box, inputs, outputs)``."""
    DEFAULT_REGISTRY.register(type_name, factory)
