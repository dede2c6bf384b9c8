"""The join box types' parameters and out schemas: ``join``, ``sjoin`` and ``aurorajoin``.

The three joins pair two in streams by a ``predicate`` over ``left.`` and
``right.`` fields and share one out schema rule (``out-field.N``
expressions, or all left then right fields); they differ in how their
buffers are sized and trimmed.  ``sjoin`` is the fault-tolerant join over
changelogs (catalog/fault_params.py), ``aurorajoin`` Borealis's older
``AuroraJoinQBox``.  The registry (:mod:`.boxtypes`) lists them with the
other built-in types.
"""

from __future__ import annotations

from .box_params import BoxError, choice_param, derived_schema, field_of, indexed, number_param
from .expressions import Scope, check_expression, infer_field, parse_expression
from .fault_params import FaultParamError, check_sjoin_params
from .model import Box, Schema


def infer_join(box: Box, inputs: list[Schema]) -> list[Schema]:
    """Out: ``out-field.N`` expressions over ``left.``/``right.`` fields, or all left then right fields."""
    scope = Scope.join(inputs[0], inputs[1])
    check_expression(box.param("predicate") or "", scope)
    if box.param("slack") is not None:
        raise BoxError(f"join box {box.name!r}: parameter 'slack' is not a join parameter (Borealis's "
                       f"JoinQBox drops no tuple for order and has no slack; slack belongs to aggregate "
                       f"boxes)")
    for side in ("left", "right"):
        number_param(box, f"{side}-buffer-size", low=0)
        choice_param(box, f"{side}-order-by", ("VALUES", "TUPLES"))
        on = box.param(f"{side}-order-on-field")
        if on:
            field_of(box, inputs[0 if side == "left" else 1], on, f"{side}-order-on-field")
    expressions = indexed(box, "out-field")
    names = indexed(box, "out-field-name")
    if not expressions:
        return [derived_schema(box, 0, list(inputs[0].fields) + list(inputs[1].fields))]
    if len(names) != len(expressions):
        raise BoxError(f"join box {box.name!r} has {len(expressions)} out-field.N but {len(names)} out-field-name.N")
    return [derived_schema(box, 0, [infer_field(n, parse_expression(e), scope, whole_arrays=True)
                              for e, n in zip(expressions, names)])]


def infer_sjoin(box: Box, inputs: list[Schema]) -> list[Schema]:
    """A join's out schema; its buffers by VALUES, no timeout (catalog/fault_params.py)."""
    try:
        check_sjoin_params(box)
    except FaultParamError as exc:
        raise BoxError(str(exc)) from None
    try:
        return infer_join(box, inputs)
    except BoxError as exc:
        raise BoxError(str(exc).replace("join box ", "sjoin box ", 1)) from None


def infer_aurorajoin(box: Box, inputs: list[Schema]) -> list[Schema]:
    """Borealis's older join (``AuroraJoinQBox``): ``down-size`` and ``up-size`` size the left and right buffers;
    a VALUES buffer is trimmed by the arriving tuple's own order field, so both sides name one."""
    for name in ("down-size", "up-size"):
        number_param(box, name, low=0)
    if box.param("timeout") is not None:
        raise BoxError(f"aurorajoin box {box.name!r}: parameter 'timeout' is not supported for an aurorajoin yet")
    if any(choice_param(box, f"{side}-order-by", ("VALUES", "TUPLES")) == "VALUES" for side in ("left", "right")):
        for side, schema in zip(("left", "right"), inputs):
            on = box.param(f"{side}-order-on-field")
            if not on:
                raise BoxError(f"aurorajoin box {box.name!r} needs parameter '{side}-order-on-field': a VALUES buffer "
                               "is trimmed by the arriving tuple's order value, on either side")
            field_of(box, schema, on, f"{side}-order-on-field")
    try:
        return infer_join(box, inputs)
    except BoxError as exc:
        raise BoxError(str(exc).replace("join box ", "aurorajoin box ", 1)) from None
