"""Borealis's fault-tolerance boxes (``sunion``, ``soutput``, ``sjoin``): their parameters and out schemas.

Borealis's delay-process-correct model (DPC): a serializing union
(``SUnionQBox``) puts its inputs' tuples into buckets of ``interval``
milliseconds and emits a bucket, serialised, once every input has moved
past it; an input that stays away longer than its ``max-delay.N`` lets the
bucket go out *tentative*, and once the input is back the tentative tuples
are undone and the bucket comes out again, stable.  ``soutput`` stood at
the diagram's end and ``sjoin`` joined two serialised streams.  Boreas
carries the same as a changelog (docs/operators.md, "Fault-tolerance
boxes"): tentative rows at +1, undone at -1, then the stable rows.  What
is checked here, for validation and for the operators alike:

* ``interval`` (required, > 0 ms); ``max-delay.N`` (required for every in
  port N, >= 0 ms; one for a port the box does not have is ignored, as
  Borealis ignores it); ``stagger`` (0 or 1); ``location`` (``input`` or
  ``middle``: kept; Boreas replays every box from its node's log, so an
  input sunion keeps no more than a middle one);
* ``benchmark``: Borealis's experiment switch.  ``none``, ``tuple_types``,
  ``undo_log``, ``checkpoint`` and ``soutput`` made the sunion a plain
  union; ``block`` made it wait for every input however long; the others
  serialise (the default);
* ``should-reconcile`` 0 (a node that never corrects its tentative output,
  for Borealis's experiments) is refused: Boreas always corrects;
* Boreas's own: ``order-on-field`` (a numeric field holding each row's time
  in the unit of ``interval``; without it, a row's time is when it reached
  the box) and ``tentative-field`` (a name: each data out row gets an int
  field so named, 1 tentative, 0 stable);
* an sunion has one control out stream (port 0, no fields) and either one
  data out stream (its in streams all of one layout) or one per in stream;
  an soutput has a control and a data out stream; an sjoin is a ``join``
  whose buffers are by ``VALUES`` on both sides (a ``TUPLES`` buffer counts
  arrivals, which a retraction cannot undo) without ``timeout``.

>>> from boreas.catalog.model import Box, InPort
>>> box = Box("u", "sunion", (InPort("A"), InPort("B")), ("C", "U"), (("interval", "500"),
...       ("max-delay.0", "2000"), ("max-delay.1", "1000"), ("stagger", "0")))
>>> p = sunion_params(box)
>>> (p.interval, p.delays, p.stagger, p.mode)
(500.0, (2000.0, 1000.0), False, 'serialize')
>>> sunion_params(Box("u", "sunion", (InPort("A"),), ("C", "U"), (("interval", "5"),)))
Traceback (most recent call last):
  ...
boreas.catalog.fault_params.FaultParamError: sunion box 'u' needs parameter 'max-delay.0' (how long, in ms, to wait for in port 0 before going on without it)
"""

from __future__ import annotations

from dataclasses import dataclass

from .box_params import BoxError, derived_schema, field_of
from .model import Box, Field, FieldType, Schema

#: The fault-tolerance box types (their out streams are changelogs: catalog/changelog.py).
FAULT_TYPES = ("sunion", "soutput", "sjoin")

_PLAIN = ("none", "tuple_types", "undo_log", "checkpoint", "soutput")
_SERIALIZE = ("sunion", "sunion_boundary", "all_together_checkpoint_redo_no_move",
              "all_together_undo_redo_no_move")


class FaultParamError(ValueError):
    """A fault-tolerance box's parameter is wrong; the message names the box and the parameter."""


@dataclass(frozen=True)
class SUnionParams:
    """An sunion's parameters, read once."""

    interval: float  # ms: the buckets' width, in the unit of the rows' time
    delays: tuple[float, ...]  # ms per in port: how long a bucket waits for that port
    stagger: bool  # every bucket waits (True), or only the first while an input is away
    mode: str  # "serialize", "plain" (a union) or "block" (never tentative)
    location: str
    order_field: str | None
    tentative_field: str | None


def _number(box: Box, name: str, *, low: float, above: bool = False) -> float | None:
    text = box.param(name)
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise FaultParamError(f"{box.type} box {box.name!r}: parameter {name!r}={text!r} is not a number") from None
    if value < low or (above and value == low):
        raise FaultParamError(f"{box.type} box {box.name!r}: parameter {name!r}={text!r} must be "
                              f"{'greater than' if above else 'at least'} {low:g}")
    return value


def _choice(box: Box, name: str, allowed: tuple[str, ...], default: str) -> str:
    text = box.param(name)
    if text is None:
        return default
    if text.strip().lower() not in allowed:
        raise FaultParamError(f"{box.type} box {box.name!r}: parameter {name!r}={text!r} must be one of "
                              f"{', '.join(allowed)}")
    return text.strip().lower()


def sunion_params(box: Box) -> SUnionParams:
    """The sunion's parameters, checked (:class:`FaultParamError` naming the box and the parameter)."""
    interval = _number(box, "interval", low=0, above=True)
    if interval is None:
        raise FaultParamError(f"sunion box {box.name!r} needs parameter 'interval' (the buckets' width in ms)")
    delays = []
    for port in range(len(box.inputs)):
        delay = _number(box, f"max-delay.{port}", low=0)
        if delay is None:
            raise FaultParamError(f"sunion box {box.name!r} needs parameter 'max-delay.{port}' (how long, in ms, "
                                  f"to wait for in port {port} before going on without it)")
        delays.append(delay)
    if _choice(box, "should-reconcile", ("0", "1"), "1") == "0":
        raise FaultParamError(f"sunion box {box.name!r}: parameter 'should-reconcile'=0 made a Borealis node never "
                              "correct its tentative output (an experiment switch); Boreas always corrects it")
    benchmark = _choice(box, "benchmark", _PLAIN + ("block",) + _SERIALIZE, "sunion")
    mode = "plain" if benchmark in _PLAIN else "block" if benchmark == "block" else "serialize"
    tentative = box.param("tentative-field")
    if tentative is not None and not tentative.strip().isidentifier():
        raise FaultParamError(f"sunion box {box.name!r}: parameter 'tentative-field'={tentative!r} is not a field "
                              "name")
    order = box.param("order-on-field")
    return SUnionParams(interval, tuple(delays), _choice(box, "stagger", ("0", "1"), "1") == "1", mode,
                        _choice(box, "location", ("input", "middle"), "input"),
                        order.strip() if order is not None else None,
                        tentative.strip() if tentative is not None else None)


def check_sjoin_params(box: Box) -> None:
    """What an sjoin refuses beyond a join's parameters: buffers by TUPLES, ``timeout``, one-sided probing."""
    for side in ("left", "right"):
        if (box.param(f"{side}-order-by") or "TUPLES").strip().upper() != "VALUES":
            raise FaultParamError(
                f"sjoin box {box.name!r}: parameter '{side}-order-by' must be VALUES (with '{side}-order-on-field'): "
                "a TUPLES buffer counts rows as they arrive, which the retraction of a tentative row cannot undo")
        if not box.param(f"{side}-order-on-field"):
            raise FaultParamError(f"sjoin box {box.name!r} needs parameter '{side}-order-on-field'")
        flag = box.param(f"{side}join")
        if flag is not None and flag.strip().lower() != "true":
            raise FaultParamError(
                f"sjoin box {box.name!r}: parameter '{side}join'={flag!r}: a join that probes from one side only "
                "gives pairs that depend on arrival order, which a retraction cannot undo (only true is accepted)")
    if box.param("timeout") is not None:
        raise FaultParamError(f"sjoin box {box.name!r}: parameter 'timeout' drops rows by when they arrived, "
                              "which the retraction of a tentative row cannot undo")


def infer_sunion(box: Box, inputs: list[Schema]) -> list[Schema]:
    """Out port 0: control (no fields); then one data stream (in streams of one layout) or one per in stream,
    each with ``tentative-field`` appended when named."""
    try:
        params = sunion_params(box)
    except FaultParamError as exc:
        raise BoxError(str(exc)) from None
    data = len(box.outputs) - 1
    if data not in (1, len(inputs)):
        raise BoxError(f"sunion box {box.name!r} has {data} data out streams (after the control stream, port 0): "
                       f"it needs 1 (its in streams merged) or {len(inputs)} (one per in stream)")
    if params.order_field is not None:
        for port, schema in enumerate(inputs):
            f = field_of(box, schema, params.order_field, "order-on-field")
            if f.type not in (FieldType.BYTE, FieldType.SHORT, FieldType.INT, FieldType.LONG, FieldType.DOUBLE,
                              FieldType.SINGLE, FieldType.TIMESTAMP):
                raise BoxError(f"sunion box {box.name!r}: parameter 'order-on-field' names {f.name!r}, a "
                               f"{f.declared_type} field of in port {port}: a row's time is a number")
    for port, schema in enumerate(inputs[1:] if data == 1 else (), start=1):
        if not schema.same_shape(inputs[0]):
            raise BoxError(f"sunion box {box.name!r}: in port {port} carries {schema.describe()}, in port 0 "
                           f"carries {inputs[0].describe()} (one data out stream merges them)")
    outs = [inputs[0]] if data == 1 else list(inputs)
    if params.tentative_field is not None:
        for schema in outs:
            if schema.field(params.tentative_field) is not None:
                raise BoxError(f"sunion box {box.name!r}: parameter 'tentative-field' names "
                               f"{params.tentative_field!r}, which its in stream has already")
        outs = [derived_schema(box, i + 1, [*s.fields, Field(params.tentative_field, FieldType.INT)])
                for i, s in enumerate(outs)]
    return [derived_schema(box, 0, []), *outs]


def infer_soutput(box: Box, inputs: list[Schema]) -> list[Schema]:
    """Out port 0: control (no fields); port 1: the in stream's rows, as a changelog."""
    return [derived_schema(box, 0, []), inputs[0]]
