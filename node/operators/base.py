"""What every operator is: the :class:`Operator` contract and parameter reading.

An operator is one box instance on a node.  The node hands it batches of
rows (Python tuples in the in stream's field order) and forwards whatever it
returns; it never looks inside.  Keeping the contract this small lets the
scheduler batch freely and lets a box move between nodes: :meth:`state`
captures everything the operator remembers as plain msgpack-able values and
:meth:`restore` continues from there.

Parameters are checked here once, when the box is built, so a bad parameter
is an :class:`OperatorError` naming the box rather than a failure on the
first tuple.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from boreas.catalog.boxtypes import BoxError, builtin_registry, indexed
from boreas.catalog.expressions import ExpressionError
from boreas.catalog.model import Box, Field, Schema
from boreas.catalog.schemas_of import BoxTyping
from boreas.node.compile import FLOAT, kind_of

log = logging.getLogger(__name__)

Rows = list[tuple]
Emitted = list[tuple[int, list[tuple]]]

#: The catalog's own box types, to check that an operator produces what validation inferred.
_CATALOG_TYPES = builtin_registry()

#: The typings (box name -> :class:`BoxTyping`) of the catalog index whose schemas the operators being built
#: were given (:func:`typed_by`), so that :meth:`Operator.check_outputs` does not infer a box again.
_TYPED: ContextVar[Mapping[str, BoxTyping] | None] = ContextVar("boreas_operator_typings", default=None)


@contextmanager
def typed_by(typings: Mapping[str, BoxTyping]) -> Iterator[None]:
    """Operators built within were given schemas from a catalog index holding ``typings``: a box typed
    there (the same box object, the same in schemas) is checked against its typing's out schemas instead
    of being inferred again (a node applying a 500-box update typed each box twice: issue 37)."""
    token = _TYPED.set(typings)
    try:
        yield
    finally:
        _TYPED.reset(token)

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


@dataclass(frozen=True)
class InternalStreams:
    """Streams between the parts of one box that runs on several nodes (a partitioned ``m3`` box).

    They are not in the catalog: the operator declares them and the dataflow
    wires them like declared ones, so they get links, acknowledgements,
    resends, de-duplication, the input log and replay unchanged.
    ``inputs`` maps a stream arriving here to the in port it feeds (numbered
    after the box's declared in ports); out port ``len(box.outputs) + i``
    writes ``outputs[i]``, a (stream, destination endpoint) pair.  An input
    arrives as rows of its schema, or, with a decoder, as whatever the
    decoder makes of the batch (the members' messages).
    """

    inputs: dict[str, int]
    outputs: tuple[tuple[str, str], ...]
    schemas: dict[str, Schema]  # of the inputs that carry rows of a schema
    decoders: dict[str, Any] = field(default_factory=dict)  # inputs decoded otherwise (messages): .decode(raw)


class OperatorError(ValueError):
    """A box cannot run as given (bad parameters, wrong schemas); the message names the box."""


class Operator(abc.ABC):
    """One box instance.  Rows are Python tuples in the schema's field order.

    An operator with ``takes_columns`` is handed a batch that arrived as
    Arrow columns as it is (a :class:`~boreas.wire.columns.Columns`); every
    other one gets its rows (the dataflow converts once per batch).
    """

    takes_columns = False

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema]):
        self.box = box
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        if len(self.inputs) != len(box.inputs):
            raise self.error(f"has {len(box.inputs)} in streams but {len(self.inputs)} input schemas were given")
        if len(self.outputs) != len(box.outputs):
            raise self.error(f"has {len(box.outputs)} out streams but {len(self.outputs)} output schemas were given")

    @abc.abstractmethod
    def process(self, port: int, rows: list[tuple], now: float) -> list[tuple[int, list[tuple]]]:
        """Consume a batch arriving on in-port `port`; return (out_port, rows) pairs produced now, in order."""

    def internal_streams(self) -> InternalStreams | None:
        """The streams this box exchanges with its own parts on other nodes; None for a box on one node."""
        return None

    def process_from(self, port: int, rows: list[tuple], now: float,
                     origin: tuple[str, str, int]) -> list[tuple[int, list[tuple]]]:
        """:meth:`process`, told the batch's ``(stream, producer, seq)`` (a box that reports input positions)."""
        return self.process(port, rows, now)

    def poll(self, now: float) -> list[tuple[int, list[tuple]]]:
        """Called at/after next_deadline(): emit what timers release (delay, aggregate timeout)."""
        return []

    def next_deadline(self) -> float | None:
        """When :meth:`poll` next has something to release (``time.monotonic()`` seconds), or None."""
        return None

    def end_of_input(self, now: float, port: int | None = None) -> list[tuple[int, list[tuple]]]:
        """Every producer of the input stream on in port ``port`` has ended (node/stream_ends.py; None: of every
        input): emit what only more input would have released (an aggregate's open windows).  A box with more than
        one in stream is told once per stream, each time with its port."""
        return []

    def holds_end(self) -> bool:
        """Whether, its inputs all ended, it still owes rows their end closes (its out streams' final marks wait
        for them: node/stream_ends.py): a partitioned windowed view's member before its last windows close."""
        return False

    def producer_ended(self, port: int, producer: str, now: float) -> list[tuple[int, list[tuple]]]:
        """One producer of the stream on in port ``port`` sent its final mark, the stream may go on from others:
        emit what waited for that producer alone (a windowed ``m3`` view's watermark: node/watermarks.py)."""
        return []

    def counters(self) -> dict[str, int]:
        """Tuples this box dropped, by reason (``{"late_tuples": n, ...}``), for the node's ``/status``.

        A box that drops a tuple must say so somewhere an operator can see it,
        so a dropped tuple is never silent.  The counts are part of
        :meth:`state`, so they survive moves and recovery.  By default an
        operator that keeps an ``ignored`` count (tuples it could not use)
        reports it as ``ignored_tuples``; one that drops nothing reports ``{}``.
        """
        ignored = getattr(self, "ignored", None)
        return {"ignored_tuples": ignored} if isinstance(ignored, int) else {}

    def state_entries(self) -> int | None:
        """How many entries (groups, buffered tuples, map entries) the operator's state holds now; None: no state.

        Cheap (no encoding), so ``/metrics`` and the web UI can show every
        box's state size on every poll.
        """
        return None

    def state(self) -> dict:
        """Everything the operator remembers, as msgpack-able dicts/lists/numbers/strings."""
        return {}

    def restore(self, state: dict, now: float | None = None) -> None:
        """Continue from :meth:`state` (possibly of an operator on another node).

        Timer state is kept in the monotonic clock of the operator that saved
        it.  ``now`` (optional) is the restoring node's current time; when
        given, pending timers keep the time they had left when the state was
        saved, as if the move took no time.  When omitted the clocks are
        assumed to be the same one (same host), unless the first call after
        restore shows the clock went backwards, which rebases the same way.
        """

    # -- helpers for subclasses ---------------------------------------------------

    def error(self, reason: str) -> OperatorError:
        return OperatorError(f"{self.box.type} box {self.box.name!r} {reason}")

    def param_error(self, name: str, reason: str) -> OperatorError:
        return self.error(f"parameter {name!r}={self.box.param(name)!r}: {reason}")

    def check_outputs(self) -> None:
        """The output schemas given must have the layout the catalog infers for this box."""
        if _CATALOG_TYPES.get(self.box.type) is None:
            return
        inferred = self._typed_outputs()
        if inferred is None:
            try:
                inferred = _CATALOG_TYPES.infer(self.box, self.inputs)
            except (BoxError, ExpressionError) as exc:
                raise OperatorError(str(exc)) from None
        for port, (want, got) in enumerate(zip(inferred, self.outputs)):
            if want is not got and not want.same_shape(got):
                raise self.error(f"out port {port} would carry {want.describe()} "
                                 f"but its schema is {got.describe()}")

    def _typed_outputs(self) -> tuple[Schema, ...] | None:
        """The out schemas the catalog index (:func:`typed_by`) inferred for this very box from these in
        schemas; None when it did not (another box object, other schemas, or a problem)."""
        typings = _TYPED.get()
        typing = typings.get(self.box.name) if typings is not None else None
        if typing is None or typing.box is not self.box or typing.outs is None or typing.problems:
            return None
        return typing.outs if typing.inputs == tuple(self.inputs) else None

    def indexed(self, prefix: str) -> list[str]:
        try:
            return indexed(self.box, prefix)
        except BoxError as exc:
            raise OperatorError(str(exc)) from None

    def number(self, name: str, default: float | None = None, *, whole: bool = False,
               positive: bool = False, low: float | None = None,
               required: bool = False) -> float | None:
        """A numeric parameter: an int when written as one (or when ``whole``), else a float."""
        text = self.box.param(name)
        if text is None:
            if required:
                raise self.error(f"needs parameter {name!r}")
            return default
        try:
            value: float = int(text) if text.strip().lstrip("+-").isdigit() else float(text)
        except ValueError:
            raise self.param_error(name, "not a number") from None
        if whole:
            if value != int(value):
                raise self.param_error(name, "not a whole number")
            value = int(value)
        if positive and not value > 0:
            raise self.param_error(name, "must be greater than 0")
        if low is not None and value < low:
            raise self.param_error(name, f"must be at least {low}")
        return value

    def flag(self, name: str, default: bool = False) -> bool:
        text = self.box.param(name)
        if text is None:
            return default
        if text.strip().lower() in _TRUE:
            return True
        if text.strip().lower() in _FALSE:
            return False
        raise self.param_error(name, "must be true or false")

    def choice(self, name: str, allowed: tuple[str, ...], default: str | None = None) -> str | None:
        text = self.box.param(name)
        if text is None:
            return default
        if text.strip().upper() not in allowed:
            raise self.param_error(name, f"must be one of {', '.join(allowed)}")
        return text.strip().upper()

    def field_index(self, schema: Schema, name: str, param: str) -> int:
        for i, f in enumerate(schema.fields):
            if f.name == name.strip():
                return i
        raise self.param_error(param, f"no field {name.strip()!r} in "
                                      f"({', '.join(f.name for f in schema.fields)})")

    def group_indexes(self, schema: Schema, param: str = "group-by") -> list[int]:
        text = self.box.param(param) or ""
        return [self.field_index(schema, g, param) for g in text.split(",") if g.strip()]

    def seed(self) -> int | None:
        """Optional ``seed`` parameter of the random boxes (tests and replays set it)."""
        return self.number("seed", None, whole=True)  # type: ignore[return-value]


def group_key_parts(key: Any, width: int) -> list:
    """A group key (None, a value, or a tuple) as a msgpack-able list."""
    if width == 0:
        return []
    if width == 1:
        return [key]
    return list(key)


def group_key_from(parts: list, width: int) -> Any:
    if width == 0:
        return None
    if width == 1:
        return parts[0]
    return tuple(parts)


def field_caster(field: Field) -> type:
    """int or float: what a value written into this numeric field is converted with."""
    return float if kind_of(field.type) == FLOAT else int
