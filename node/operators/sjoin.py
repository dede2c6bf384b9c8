"""``sjoin``: Borealis's serializing join (``SJoinQBox``), a join of two changelogs.

Borealis's SJoin joined two streams an SUnion had serialised, processing
their tuples by time, and marked a pair TENTATIVE when either tuple was.
In Boreas an sunion's tentative rows come at +1 and are later retracted at
-1, so the join needs no flag of its own: it is *bilinear* -- a pair
weighs the product of its rows' weights -- and the retraction of a
tentative row retracts every pair it made, while the stable row that
replaces it makes the stable pairs.  What it has emitted, summed per row,
is always the join of what its two inputs hold, however the rows and
their retractions were cut into batches or interleaved.

For that, which pairs join must not depend on arrival order, so the
buffers are by ``VALUES`` on both sides (catalog/fault_params.py refuses
``TUPLES``, ``timeout`` and one-sided probing) and read as windows on the
order fields: left row *l* and right row *r* pair when the predicate holds
and, with *l.t <= r.t*, ``r.t - l.t < left-buffer-size`` (*l* is still in
the left buffer when *r* comes, as Borealis trims a VALUES buffer), else
``l.t - r.t < right-buffer-size``.  A null order value pairs with nothing.
Out rows are ``out-field.N`` (or the left row's fields, then the right's),
as a ``join``'s, predicate and fields by the same generated code
(:func:`~.join_rows.compile_probes`).

State: each side's rows with their net weight (a row whose weight sums
to 0 is gone).  Nothing is dropped by age, since a retraction may come for
any row: the state grows with the rows present.
"""

from __future__ import annotations

from typing import Any

from boreas.catalog.fault_params import FaultParamError, check_sjoin_params
from boreas.catalog.model import Box, Schema
from boreas.wire.columns import Columns

from .base import Emitted, Operator, OperatorError
from .changelog_out import changelog, rows_and_weights
from .join_rows import JoinSpec, compile_probes


class SJoinOperator(Operator):
    """A join of two changelogs by value windows; each pair at the product of its rows' weights."""

    takes_columns = True

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema]):
        super().__init__(box, inputs, outputs)
        self.check_outputs()
        try:
            check_sjoin_params(box)
        except FaultParamError as exc:
            raise OperatorError(str(exc)) from None
        sizes = (float(self.number("left-buffer-size", low=0, required=True)),  # type: ignore[arg-type]
                 float(self.number("right-buffer-size", low=0, required=True)))  # type: ignore[arg-type]
        self._orders = [self.field_index(s, box.param(f"{side}-order-on-field") or "", f"{side}-order-on-field")
                        for side, s in zip(("left", "right"), inputs)]
        self._sizes = sizes
        spec = JoinSpec(box.param("predicate") or "", tuple(self.indexed("out-field")), sizes,
                        (self._orders[0], self._orders[1]), None)
        self._probes = compile_probes(box, inputs, spec)
        self._sides: list[dict[Any, list]] = [{}, {}]  # per side: the row's key -> [row, net weight]

    def process(self, port: int, rows: list[tuple] | Columns, now: float) -> Emitted:
        values, weights = rows_and_weights(rows)
        out_rows: list[tuple] = []
        out_weights: list[int] = []
        own, other = self._sides[port], self._sides[1 - port]
        probe = self._probes[port]
        for row, weight in zip(values, weights):
            row = tuple(row)
            for partner, partner_weight in other.values():
                if not self._in_window(row, partner, port):
                    continue
                found: list[tuple] = []
                probe(row, (partner,), found.append)
                out_rows += found
                out_weights += [weight * partner_weight] * len(found)
            key = _key(row)
            held = own.setdefault(key, [row, 0])
            held[1] += weight
            if not held[1]:
                del own[key]
        if not out_rows:
            return []
        return [(0, changelog(out_rows, out_weights, self.outputs[0]))]

    def _in_window(self, row: tuple, partner: tuple, port: int) -> bool:
        left, right = (row, partner) if port == 0 else (partner, row)
        lt, rt = left[self._orders[0]], right[self._orders[1]]
        if lt is None or rt is None:
            return False
        return rt - lt < self._sizes[0] if lt <= rt else lt - rt < self._sizes[1]

    def state_entries(self) -> int:
        return len(self._sides[0]) + len(self._sides[1])

    def state(self) -> dict[str, Any]:
        return {"sides": [[[list(r), w] for r, w in side.values()] for side in self._sides]}

    def restore(self, state: dict[str, Any], now: float | None = None) -> None:
        self._sides = [{_key(tuple(r)): [tuple(r), int(w)] for r, w in side} for side in state["sides"]]


def _key(value: Any) -> Any:
    """A row as a dict key: an array value (a list) as a tuple, nested ones too."""
    if isinstance(value, (list, tuple)):
        return tuple(_key(v) for v in value)
    return value
