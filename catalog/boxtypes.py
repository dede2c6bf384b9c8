"""The registry of box types: port arity, parameters, output schemas.

Validation asks the registry three things about a box: is its type known,
are its ports and parameters right, and what schema does each out stream
carry given the schemas of its in streams.  Each built-in type answers in
one small function.

Other parts of Boreas add box types without the catalog importing them (the
catalog depends on no other Boreas package): a registry is a value, built
with the extra types and passed explicitly to whatever validates -- no
import registers anything.  ``boreas.m3.boxtype.box_types()`` is the one
place the full registry (the built-in types and ``m3``) is built; the Head,
the nodes and the CLI each make one and pass it on.

Usage::

    registry = builtin_registry([BoxType("m3", infer_m3, min_inputs=1, max_inputs=None)])
    out_schemas = registry.infer(box, [packet_schema])
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from .expressions import (
    ExpressionError,
    Scope,
    check_expression,
    expression_fields,
    infer_field,
    parse_expression,
)
from .box_params import (
    BoxError,
    check_slack,
    choice_param,
    derived_schema,
    field_of,
    indexed,
    number_param,
)
from .model import Box, Field, FieldType, Partition, Schema
from .unsupported_boxes import why_unsupported
from .revision_params import RevisionParamError, check_revision_params, plain_box, revised_value
from .fault_params import infer_soutput, infer_sunion
from .join_params import infer_aurorajoin, infer_join, infer_sjoin
from .table_params import TABLE_TYPES, TableParamError, infer_table_box


#: Parameters whose values are expressions, in every built-in box type.
_EXPRESSION_PARAM = re.compile(r"^(expression\.\d+|predicate|out-field\.\d+)$")

InferFn = Callable[[Box, list[Schema]], list[Schema]]
PlanPartitionFn = Callable[[Box, list[Schema], Partition], Partition]
"""Plan a partition of a box of this type (its in streams' schemas given): the partition as
submitted, returned with ``segments``, ``maps``, ``layout`` and ``id`` filled in; raises
:class:`BoxError` saying why the box cannot be partitioned so."""


@dataclass(frozen=True, slots=True)
class BoxType:
    """A box type.  ``plan_partition`` (optional) lets its boxes be partitioned (``<partition>``)."""

    name: str
    infer: InferFn
    min_inputs: int = 1
    max_inputs: int | None = 1
    required: tuple[str, ...] = ()
    summary: str = ""
    plan_partition: PlanPartitionFn | None = None


class BoxTypeRegistry:
    """Box types by name.  Build one with :func:`builtin_registry`."""

    def __init__(self, types: Iterable[BoxType] = ()):
        self._types: dict[str, BoxType] = {}
        for box_type in types:
            self.register(box_type)

    def register(self, box_type: BoxType) -> None:
        self._types[box_type.name] = box_type

    def names(self) -> list[str]:
        return sorted(self._types)

    def get(self, name: str) -> BoxType | None:
        return self._types.get(name)

    def partitionable(self) -> list[str]:
        """The types whose boxes can be partitioned (they plan partitions)."""
        return [name for name in self.names() if self._types[name].plan_partition is not None]

    def check_shape(self, box: Box) -> list[str]:
        """Problems with the box's type, arity and required parameters."""
        box_type = self._types.get(box.type)
        if box_type is None:
            why = why_unsupported(box.type)
            if why is not None:
                return [f"box type {box.type!r} is not supported: {why}"]
            return [f"unknown box type {box.type!r} (known: {', '.join(self.names())})"]
        problems = []
        n = len(box.inputs)
        if n < box_type.min_inputs or (box_type.max_inputs is not None and n > box_type.max_inputs):
            want = (
                str(box_type.min_inputs)
                if box_type.min_inputs == box_type.max_inputs
                else f"{box_type.min_inputs} or more"
                if box_type.max_inputs is None
                else f"{box_type.min_inputs} to {box_type.max_inputs}"
            )
            problems.append(f"{box.type} box {box.name!r} has {n} in streams, needs {want}")
        for name in box_type.required:
            if box.param(name) is None:
                problems.append(f"{box.type} box {box.name!r} needs parameter {name!r}")
        # Syntax is checked even where the in streams' schemas are unknown.
        for name, value in box.params:
            if _EXPRESSION_PARAM.match(name):
                try:
                    expression_fields(value)  # (no tree: the fields are checked where the schemas are known)
                except ExpressionError as exc:
                    problems.append(f"{box.type} box {box.name!r}: parameter {name!r}: {exc}")
        return problems

    def infer(self, box: Box, inputs: list[Schema]) -> list[Schema]:
        """Schemas of the box's out streams, in port order; raises :class:`BoxError`."""
        box_type = self._types[box.type]
        try:
            schemas = box_type.infer(box, inputs)
        except ExpressionError as exc:
            raise BoxError(f"{box.type} box {box.name!r}: {exc}") from None
        if len(schemas) != len(box.outputs):
            raise BoxError(
                f"{box.type} box {box.name!r} has {len(box.outputs)} out streams, "
                f"its parameters give {len(schemas)}"
            )
        return schemas


# -- helpers ------------------------------------------------------------------


# -- the built-in types ---------------------------------------------------------


def infer_filter(box: Box, inputs: list[Schema]) -> list[Schema]:
    """Tuples go to out port N of the first true ``expression.N``; others to the false port."""
    scope = Scope.single(inputs[0])
    predicates = indexed(box, "expression")
    if not predicates:
        raise BoxError(f"filter box {box.name!r} needs parameter 'expression.0'")
    for text in predicates:
        check_expression(text, scope)
    false_port = (box.param("pass-on-false-port") or "0").strip() not in ("0", "false", "")
    return [inputs[0]] * (len(predicates) + (1 if false_port else 0))


def infer_map(box: Box, inputs: list[Schema]) -> list[Schema]:
    """One out field per ``expression.N``, named ``output-field-name.N``."""
    scope = Scope.single(inputs[0])
    expressions = indexed(box, "expression")
    names = indexed(box, "output-field-name")
    if not expressions:
        raise BoxError(f"map box {box.name!r} needs parameter 'expression.0'")
    if len(names) != len(expressions):
        raise BoxError(
            f"map box {box.name!r} has {len(expressions)} expression.N but {len(names)} output-field-name.N"
        )
    fields = [infer_field(n, parse_expression(e), scope, whole_arrays=True) for e, n in zip(expressions, names)]
    return [derived_schema(box, 0, fields)]


def infer_union(box: Box, inputs: list[Schema]) -> list[Schema]:
    """Merges in streams that all carry the same tuple layout."""
    for port, schema in enumerate(inputs[1:], start=1):
        if not schema.same_shape(inputs[0]):
            raise BoxError(
                f"union box {box.name!r}: in port {port} carries {schema.describe()}, "
                f"in port 0 carries {inputs[0].describe()}"
            )
    out = inputs[0]
    nullable = [any(s.fields[i].nullable for s in inputs) for i in range(len(out.fields))]
    if nullable != [f.nullable for f in out.fields]:  # a NULL of any in port may come out
        out = replace(out, fields=tuple(replace(f, nullable=n) for f, n in zip(out.fields, nullable)))
    return [out] * len(box.outputs)


_AGG = re.compile(r"^\s*(\w+)\s*\((.*)\)\s*$")
_AGG_FUNCTIONS = ("count", "count_distinct", "sum", "avg", "min", "max", "firstval", "lastval")


def infer_aggregate(box: Box, inputs: list[Schema]) -> list[Schema]:
    """Out: the group-by fields, the window's order-on field (when ordered by FIELD), the aggregates."""
    schema = inputs[0]
    scope = Scope.single(schema)
    choice_param(box, "window-size-by", ("VALUES", "TUPLES"))
    order_by = choice_param(box, "order-by", ("FIELD", "TUPLENUM")) or "TUPLENUM"
    number_param(box, "window-size", low=0)
    number_param(box, "advance", low=0)
    number_param(box, "timeout", low=0)
    check_slack(box)
    fields: list[Field] = []
    group_by = box.param("group-by")
    if group_by:
        fields += [field_of(box, schema, g, "group-by") for g in group_by.split(",") if g.strip()]
    if order_by == "FIELD":
        on = box.param("order-on-field")
        if not on:
            raise BoxError(f"aggregate box {box.name!r}: order-by FIELD needs parameter 'order-on-field'")
        fields.append(field_of(box, schema, on, "order-on-field"))
    functions = indexed(box, "aggregate-function")
    names = indexed(box, "aggregate-function-output-name")
    if not functions:
        raise BoxError(f"aggregate box {box.name!r} needs parameter 'aggregate-function.0'")
    for i, text in enumerate(functions):
        m = _AGG.match(text)
        if not m or m.group(1).lower() not in _AGG_FUNCTIONS:
            raise BoxError(
                f"aggregate box {box.name!r}: aggregate-function.{i}={text!r} is not one of "
                f"{', '.join(f + '(...)' for f in _AGG_FUNCTIONS)}"
            )
        func, arg = m.group(1).lower(), m.group(2).strip()
        name = names[i] if i < len(names) else f"{func}{i}"
        if func == "count":
            fields.append(Field(name, FieldType.INT))
        elif not arg:
            raise BoxError(f"aggregate box {box.name!r}: {func}() needs a field or expression")
        elif func == "count_distinct":
            check_expression(arg, scope)
            fields.append(Field(name, FieldType.INT))
        elif func == "avg":  # nullable as its argument: an AVG of only NULLs is NULL
            check_expression(arg, scope)
            nullable = any(scope.lookup(q, n).nullable for q, n in expression_fields(arg))
            fields.append(Field(name, FieldType.DOUBLE, nullable=nullable))
        else:
            fields.append(infer_field(name, parse_expression(arg), scope))
    return [derived_schema(box, 0, fields)]


def infer_revision(box: Box, inputs: list[Schema]) -> list[Schema]:
    """A revision box: its plain counterpart's out schemas over a changelog (catalog/revision_params.py),
    a map's and an aggregate's with Borealis's ``revised_value`` string field appended."""
    try:
        check_revision_params(box)
    except RevisionParamError as exc:
        raise BoxError(str(exc)) from None
    plain = plain_box(box)
    try:
        schemas = _INFER_PLAIN[plain.type](plain, inputs)
    except BoxError as exc:  # the counterpart's messages, about this box
        raise BoxError(str(exc).replace(f"{plain.type} box ", f"{box.type} box ", 1)) from None
    if box.type == "revisionfilter":
        return schemas
    out = derived_schema(box, 0, [*schemas[0].fields, revised_value()])
    for i, text in enumerate(indexed(box, "inverse")):  # over the out fields (Borealis's UPSTREAM mode)
        try:
            check_expression(text, Scope.single(out))
        except ExpressionError as exc:
            raise BoxError(f"{box.type} box {box.name!r}: parameter 'inverse.{i}': {exc}") from None
    return [out]


def infer_table(box: Box, inputs: list[Schema]) -> list[Schema]:
    """A table box (catalog/table_params.py), bound to its table's declaration."""
    try:
        return infer_table_box(box, inputs)
    except TableParamError as exc:
        raise BoxError(str(exc)) from None


_INFER_PLAIN: dict[str, InferFn] = {"filter": infer_filter, "map": infer_map, "aggregate": infer_aggregate}


def _pass_through(check: Callable[[Box, list[Schema]], None]) -> InferFn:
    def infer(box: Box, inputs: list[Schema]) -> list[Schema]:
        check(box, inputs)
        return [inputs[0]] * len(box.outputs)

    infer.__doc__ = check.__doc__
    return infer


def _check_delay(box: Box, inputs: list[Schema]) -> None:
    """Holds each tuple for ``delay-ms`` milliseconds."""
    number_param(box, "delay-ms", low=0, whole=True)


def _check_random_drop(box: Box, inputs: list[Schema]) -> None:
    """Drops each tuple with probability ``drop_rate``."""
    number_param(box, "drop_rate", low=0, high=1)


def _check_window_drop(box: Box, inputs: list[Schema]) -> None:
    """Drops whole windows with probability ``drop_rate``, keeping windows intact."""
    number_param(box, "drop_rate", low=0, high=1)
    number_param(box, "window-size", low=0)
    choice_param(box, "window-size-by", ("VALUES", "TUPLES"))
    on = box.param("order-on-field")
    if on:
        field_of(box, inputs[0], on, "order-on-field")


def builtin_registry(extra: Iterable[BoxType] = ()) -> BoxTypeRegistry:
    """A fresh registry: the built-in Borealis box types, then ``extra`` (``m3``, say)."""
    return BoxTypeRegistry(
        [
            BoxType("filter", infer_filter, required=("expression.0",),
                    summary="route tuples by predicate"),
            BoxType("map", infer_map, required=("expression.0", "output-field-name.0"),
                    summary="compute new fields"),
            BoxType("union", infer_union, min_inputs=1, max_inputs=None,
                    summary="merge streams of one schema"),
            BoxType("aggregate", infer_aggregate,
                    required=("aggregate-function.0", "window-size-by", "window-size"),
                    summary="windowed, grouped aggregates"),
            BoxType("join", infer_join, min_inputs=2, max_inputs=2,
                    required=("predicate", "left-buffer-size", "right-buffer-size"),
                    summary="windowed equi/theta join"),
            BoxType("delay", _pass_through(_check_delay), required=("delay-ms",),
                    summary="delay tuples"),
            BoxType("random_drop", _pass_through(_check_random_drop), required=("drop_rate",),
                    summary="load shedding by tuple"),
            BoxType("window_drop", _pass_through(_check_window_drop),
                    required=("drop_rate", "window-size"), summary="load shedding by window"),
            BoxType("revisionfilter", infer_revision, required=("expression.0",),
                    summary="filter over a changelog (Borealis revision processing)"),
            BoxType("revisionmap", infer_revision, required=("expression.0", "output-field-name.0"),
                    summary="map over a changelog (Borealis revision processing)"),
            BoxType("revisionaggregate", infer_revision,
                    required=("aggregate-function.0", "window-size-by", "window-size"),
                    summary="retracting aggregate (Borealis revision processing)"),
            *(BoxType(name, infer_table, required=("sql",), summary=f"{name} rows of a <table>")
              for name in TABLE_TYPES),
            BoxType("joinstatic", infer_table, max_inputs=2, required=("predicate",),
                    summary="join a stream with a <table>'s rows"),
            BoxType("sunion", infer_sunion, min_inputs=1, max_inputs=None, required=("interval",),
                    summary="serializing union: tentative rows while an input is away, corrected after"),
            BoxType("soutput", infer_soutput, summary="a fault-tolerant diagram's output (sunion's companion)"),
            BoxType("sjoin", infer_sjoin, min_inputs=2, max_inputs=2,
                    required=("predicate", "left-buffer-size", "right-buffer-size"),
                    summary="join over changelogs (tentative rows retracted with their pairs)"),
            BoxType("aurorajoin", infer_aurorajoin, min_inputs=2, max_inputs=2,
                    required=("predicate", "down-size", "up-size"),
                    summary="Borealis's older join: the other side's buffer trimmed by each arriving tuple"),
            *extra,
        ]
    )
