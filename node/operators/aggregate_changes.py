"""``aggregate`` over a changelog: a grouped aggregate that retracts, emitting each changed result as -old/+new.

A changelog's rows arrive with weights (docs/dataplane.md): +1 a row
enters, -1 it leaves, and a batch may retract a row any time after it came.
So the aggregate cannot close a window and forget it; it keeps, for each
group and window, accumulators that a row's weight adds to or takes from:

* ``count(*)`` the weights' sum, ``count(x)`` over rows with x not None;
* ``sum(x)`` the sum of weight times x, ``avg(x)`` that over ``count(x)``;
* ``min(x)``/``max(x)`` and ``count_distinct(x)`` a multiset of x (value ->
  count), so the minimum after a retraction is known without the rows;
* ``firstval``/``lastval`` depend on arrival order: the catalog refuses them
  on a changelog (catalog/changelog.py), as it refuses windows by TUPLES.

Windows are by VALUES of ``order-on-field``, aligned: ``[s, s + window-size)``
for every ``s`` a multiple of ``advance`` (a row may be in several when they
slide), as ``independent-window-alignment`` places them, since a changelog
has no first row to start at.  Windows never close (a revision may come at
any time), so ``slack`` and ``timeout`` have no effect and nothing is late.

After each batch the box emits, for each (group, window) the batch touched
whose result changed, the old result row with weight -1 (if the group had
rows) and the new one with +1 (if it still has): the same out layout as on
a plain stream (group fields, the window start with ``order-by`` FIELD, the
functions).  A group whose rows all left leaves the out stream.

>>> from boreas.catalog.model import Field, FieldType, Schema
>>> s = Schema("S", (Field("g", FieldType.INT), Field("v", FieldType.INT)))
>>> out = Schema("A", (Field("g", FieldType.INT), Field("sum0", FieldType.LONG), Field("max1", FieldType.INT)))
>>> agg = Retracting(["sum(v)", "max(v)"], s, out, groups=[0], size=100, advance=100, order=1, emit_start=False)
>>> agg.apply([(1, 5), (1, 7)], [1, 1])
([(1, 12, 7)], [1])
>>> agg.apply([(1, 7)], [-1])
([(1, 12, 7), (1, 5, 5)], [-1, 1])
>>> agg.apply([(1, 5)], [-1])
([(1, 5, 5)], [-1])
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

from boreas.catalog.expressions import Scope, infer_field, parse_expression
from boreas.catalog.model import Schema
from boreas.node.compile import FLOAT, STR, compile_expression, kind_of

from .accumulators import parse_call
from .aggregate_multisets import MULTISETS, apply_delta
from .base import field_caster

_NULL_WHEN_EMPTY = ("sum", "avg", "min", "max")  # SQL's NULL of no values, over a nullable field


class Retracting:
    """Owns the accumulators of every (group, window start) of an aggregate over a changelog.

    An entry is ``[n, slot, ...]``: ``n`` the weights' sum (the rows it
    holds), then one slot per function: a number (count, sum), a pair
    ``[sum, count]`` (avg, and sum over a nullable field: NULL when no value
    is left) or a dict ``{value: count}`` (min, max, count_distinct).
    """

    def __init__(self, functions: list[str], schema: Schema, out: Schema, *, groups: list[int], size: float,
                 advance: float, order: int | None, emit_start: bool):
        self._key = operator.itemgetter(*groups) if groups else (lambda row: None)
        self._width = len(groups)
        self._size, self._advance, self._order, self._emit_start = size, advance, order, emit_start
        self._functions: list[tuple[str, Callable[[tuple], Any] | None]] = []
        for i, text in enumerate(functions):
            call = parse_call(text)
            if call is None:
                raise ValueError(f"aggregate-function.{i}={text!r} cannot be computed over a changelog")
            func, arg = call
            self._functions.append((func, None if arg in ("", "*") else compile_expression(arg, Scope.single(schema))))
        # Per function: over a nullable field, so SQL's NULL where no value is left (a sum keeps its count too).
        self._nullable = [infer_field("_", parse_expression(arg), Scope.single(schema)).nullable
                          if func in _NULL_WHEN_EMPTY and arg not in ("", "*") else False
                          for func, arg in map(parse_call, functions)]
        start = self._width + (1 if emit_start else 0)
        self._casts = [_caster(f.type) for f in out.fields[start:]]
        self._start_cast = field_caster(schema.fields[order]) if order is not None and emit_start else None
        self.entries: dict[tuple, list] = {}  # (group key, window start) -> [n, slot, ...]
        self.ignored = 0  # rows with no order value

    def windows(self, v: Any) -> list:
        """The aligned windows that hold order value ``v`` (oldest first)."""
        size, adv = self._size, self._advance
        last = math.floor(v / adv)
        first = math.floor((v - size) / adv) + 1
        return [k * adv for k in range(first, last + 1)]

    def apply(self, rows: list[tuple], weights: list[int]) -> tuple[list[tuple], list[int]]:
        """Add each row times its weight; the result rows that left (-1) and entered (+1), retractions first."""
        before: dict[tuple, tuple | None] = {}
        entries = self.entries
        for row, weight in zip(rows, weights):
            if not weight:
                continue
            if self._order is None:
                starts = [None]
            else:
                v = row[self._order]
                if v is None:
                    self.ignored += 1
                    continue
                starts = self.windows(v)
            key = self._key(row)
            for start in starts:
                at = (key, start)
                entry = entries.get(at)
                if at not in before:
                    before[at] = self._result(at, entry)
                if entry is None:
                    entry = entries[at] = self._empty()
                self._add(entry, row, weight)
        return self._changed(before)

    def _changed(self, before: dict[tuple, tuple | None]) -> tuple[list[tuple], list[int]]:
        """The touched entries' old rows (-1) and new rows (+1), retractions first; entries left empty go."""
        entries = self.entries
        old_rows, new_rows = [], []
        for at, old in before.items():
            entry = entries.get(at)
            if entry is not None and not entry[0]:
                del entries[at]
                entry = None
            new = self._result(at, entry)
            if old == new:
                continue
            if old is not None:
                old_rows.append(old)
            if new is not None:
                new_rows.append(new)
        return old_rows + new_rows, [-1] * len(old_rows) + [1] * len(new_rows)

    def add_partials(self, touched: list[tuple[tuple, int, list]], ignored: int = 0) -> tuple[list[tuple], list[int]]:
        """:meth:`apply` from partials already summed per (group, window start), in first-touch order: each
        ``(at, n, deltas)`` adds ``n`` rows and one delta per function (a count or sum, ``(sum, count)``
        for avg, a multiset's ``{value: net weight}``, or None: nothing to add) (:mod:`.aggregate_retract`)."""
        self.ignored += ignored
        before: dict[tuple, tuple | None] = {}
        entries = self.entries
        for at, n, deltas in touched:
            entry = entries.get(at)
            before[at] = self._result(at, entry)
            if entry is None:
                entry = entries[at] = self._empty()
            entry[0] += n
            for i, delta in enumerate(deltas, start=1):
                if delta is None:
                    continue
                if isinstance(delta, dict):  # a multiset's net weights per value (.aggregate_multisets)
                    apply_delta(entry[i], delta)
                elif isinstance(delta, tuple):
                    entry[i][0] += delta[0]
                    entry[i][1] += delta[1]
                else:
                    entry[i] += delta
        return self._changed(before)

    def window_of(self, k: int) -> Any:
        """The start of aligned window number ``k`` (as :meth:`windows` computes it)."""
        return k * self._advance

    # -- one entry -------------------------------------------------------------------------

    def _empty(self) -> list:
        slots: list[Any] = [0]
        for (func, _), nullable in zip(self._functions, self._nullable):
            slots.append({} if func in MULTISETS else [0, 0] if func == "avg" or (func == "sum" and nullable) else 0)
        return slots

    def _add(self, entry: list, row: tuple, weight: int) -> None:
        entry[0] += weight
        for i, (func, arg) in enumerate(self._functions, start=1):
            if arg is None:  # count(*)
                entry[i] += weight
                continue
            x = arg(row)
            if x is None:
                continue
            if func == "count":
                entry[i] += weight
            elif func == "sum" and self._nullable[i - 1]:
                entry[i][0] += weight * x
                entry[i][1] += weight
            elif func == "sum":
                entry[i] += weight * x
            elif func == "avg":
                entry[i][0] += weight * x
                entry[i][1] += weight
            else:
                bag = entry[i]
                n = bag.get(x, 0) + weight
                if n:
                    bag[x] = n
                else:
                    del bag[x]

    def _result(self, at: tuple, entry: list | None) -> tuple | None:
        """The out row of one (group, window); None when it holds no rows."""
        if entry is None or not entry[0]:
            return None
        key, start = at
        prefix = () if self._width == 0 else (key,) if self._width == 1 else key
        if self._start_cast is not None:
            prefix = prefix + (self._start_cast(start),)
        values = []
        for (func, _), slot, cast, nullable in zip(self._functions, entry[1:], self._casts, self._nullable):
            empty = None if nullable else 0
            if func == "avg":
                value = slot[0] / slot[1] if slot[1] else None if nullable else 0.0
            elif func == "sum" and nullable:
                value = slot[0] if slot[1] else None
            elif func in MULTISETS and (not slot or min(slot.values()) > 0):  # every count positive: in C
                value = len(slot) if func == "count_distinct" else (min if func == "min" else max)(slot, default=empty)
            elif func == "min":
                value = min((v for v, n in slot.items() if n > 0), default=empty)
            elif func == "max":
                value = max((v for v, n in slot.items() if n > 0), default=empty)
            elif func == "count_distinct":
                value = sum(1 for n in slot.values() if n > 0)
            else:
                value = slot
            values.append(None if value is None else cast(value))
        return prefix + tuple(values)

    # -- state -------------------------------------------------------------------------------

    def state(self) -> dict:
        return {"ignored": self.ignored,
                "entries": [[list(k) if isinstance(k, tuple) else k, s, _plain(e)]
                            for (k, s), e in self.entries.items()]}

    def restore(self, state: dict | None) -> None:
        self.entries = {}
        self.ignored = int((state or {}).get("ignored", 0))
        for key, start, entry in (state or {}).get("entries", []):
            self.entries[(tuple(key) if isinstance(key, list) else key, start)] = [
                dict(slot) if isinstance(slot, (dict, list)) and func in MULTISETS else slot
                for slot, func in zip(entry, ["n", *(f for f, _ in self._functions)])]


def _plain(entry: list) -> list:
    """An entry as msgpack holds it (a multiset's keys as they are: numbers and strings)."""
    return [dict(slot) if isinstance(slot, dict) else slot for slot in entry]


def _caster(ftype) -> Callable[[Any], Any]:
    kind = kind_of(ftype)
    if kind == FLOAT:
        return float
    if kind == STR:
        return lambda v: "" if v == 0 else v
    return int
