"""``join``: a symmetric windowed join of two streams, as Borealis's JoinQBox.

Each side keeps a buffer.  A tuple arriving on one side is first joined with
every tuple in the *other* side's buffer (oldest first; one out tuple per
pair whose ``predicate`` holds), then enters its own buffer, which is then
trimmed:

* ``<side>-order-by`` TUPLES (default): the buffer keeps the newest
  ``<side>-buffer-size`` tuples;
* ``<side>-order-by`` VALUES: oldest tuples leave while the new tuple's
  ``<side>-order-on-field`` value is ``>= buffer-size`` past theirs (the
  buffer is assumed ordered on that field, as Borealis assumes).

A size of 0 keeps nothing on that side.  ``timeout`` (seconds, optional)
also drops buffered tuples that arrived that long ago.

Order: Borealis's JoinQBox has no ``slack`` and drops no tuple for order of
arrival -- every tuple is joined, then buffered -- so this operator does the
same, and the Head refuses a ``slack`` on a join instead of ignoring it (an
aggregate is where slack applies; docs/operators.md).

Out tuples are ``out-field.N`` expressions over ``left.x``/``right.y``,
named ``out-field-name.N``; with none, the left tuple's fields followed by
the right's.  A predicate that fails on a pair is false; an out field that
fails is None.

Two paths, one semantics: a batch at a time on Arrow columns
(:mod:`.join_columns`, buffers in :mod:`.join_buffer`) where the predicate
and out fields translate exactly, else a tuple at a time (:mod:`.join_rows`,
the reference), which also takes a batch of few (tuple, buffered tuple)
pairs on a columnar join, the buffers handed over (the columns' fixed cost
per batch is more than its probes).  Rows arriving at a columnar join for
its columns are made columns, and its out tuples are rows again; a batch of rows whose values the columns cannot
hold as they are (an int in a double field) hands the buffers to the row
path for good, through the same ``state()`` a move carries (both paths and
the hand-overs owned by :class:`~.join_paths.JoinPaths`).  A changelog is
refused at submission (catalog/changelog.py): a windowed join of arrivals
cannot apply a retraction.
"""

from __future__ import annotations

from boreas.catalog.model import Box, Schema
from boreas.node.compile import STR, kind_of
from boreas.wire.columns import Columns

from .base import Emitted
from .join_columns import ColumnJoin
from .join_paths import JoinPaths
from .join_rows import JoinSpec, RowJoin, compile_probes
from .timers import Timed

SIDES = ("left", "right")


class JoinOperator(Timed):
    takes_columns = True  # Arrow batches are joined as columns where the box's shape allows (.join_columns)

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema], *, columnar: bool = True):
        """``columnar=False``: the row path only (the property tests' reference; bench/columnar_operators.py)."""
        super().__init__(box, inputs, outputs)
        if len(inputs) != 2:
            raise self.error(f"needs 2 in streams, has {len(inputs)}")
        predicate = box.param("predicate")
        if not predicate:
            raise self.error("needs parameter 'predicate'")
        self.check_outputs()
        self.spec = self._spec(box, inputs, predicate)
        probes = compile_probes(box, inputs, self.spec)
        self.paths = JoinPaths("join", box.name, RowJoin(self.spec, probes),
                               ColumnJoin.make(self.spec, inputs, outputs[0], probes) if columnar else None,
                               self.error)

    def _spec(self, box: Box, inputs: list[Schema], predicate: str) -> JoinSpec:
        sizes: list[float] = []
        orders: list[int | None] = []
        for side, schema in zip(SIDES, inputs):
            by_values = self.choice(f"{side}-order-by", ("VALUES", "TUPLES"), "TUPLES") == "VALUES"
            size = self.number(f"{side}-buffer-size", low=0, required=True)
            if by_values:
                on = box.param(f"{side}-order-on-field")
                if not on:
                    raise self.error(f"needs parameter '{side}-order-on-field' ({side}-order-by VALUES)")
                index = self.field_index(schema, on, f"{side}-order-on-field")
                if kind_of(schema.fields[index].type) == STR:
                    raise self.param_error(f"{side}-order-on-field", "order-by VALUES needs a numeric field")
                orders.append(index)
                sizes.append(size)  # type: ignore[arg-type]
            else:
                orders.append(None)
                sizes.append(int(size))  # type: ignore[arg-type]  # Borealis truncates
        timeout = self.number("timeout", None, low=0)
        return JoinSpec(predicate, tuple(self.indexed("out-field")), (sizes[0], sizes[1]), (orders[0], orders[1]),
                        float(timeout) if timeout is not None else None)

    @property
    def columnar(self) -> bool:
        """Whether batches are joined on columns (the predicate and out fields translate, no row batch misfit)."""
        return self.paths.columns is not None

    # -- the data path ---------------------------------------------------------------

    def process(self, port: int, rows: list[tuple] | Columns, now: float) -> Emitted:
        self.tick(now)
        return self.paths.process(port, rows, now)

    # -- state ----------------------------------------------------------------------------

    def shift_times(self, delta: float) -> None:
        engine = self.paths.engine
        assert isinstance(engine, (ColumnJoin, RowJoin))
        engine.shift_times(delta)

    def state_entries(self) -> int:
        """Tuples buffered on both sides."""
        return self.paths.engine.entries()

    def state(self) -> dict:
        return {"clock": self.clock_state(), **self.paths.state()}

    def restore(self, state: dict, now: float | None = None) -> None:
        try:
            self.paths.restore(state)
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise self.error(f"cannot restore state: {exc!r}") from None
        self.restore_clock(state.get("clock"), now)
