"""Checking a view read from Boreas against what it should hold: Spark SQL over the same tables, or given rows.

:func:`verify_view` reads a view of a box (partitioned or not) through
:class:`~boreas.client.query.QueryClient` and compares it, row by row and
with a tolerance for floats, with the expected rows (:func:`compare_view`);
the result is a :class:`ViewCheck` saying what is missing, extra or
different.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

from boreas.client.query import QueryClient

from .load_tasks import runtime_key
from .target import run_sync

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass
class ViewCheck:
    """A view read from Boreas compared with what it should hold; ``ok`` when they agree."""

    box: str
    map: str
    rows: int
    expected: int
    missing: list[tuple[tuple, Any]] = field(default_factory=list)  # expected, not in the view
    extra: list[tuple[tuple, Any]] = field(default_factory=list)  # in the view, not expected
    different: list[tuple[tuple, Any, Any]] = field(default_factory=list)  # (key, view's value, expected)
    epoch: int | None = None  # the stable epoch read (stable reads of a partitioned box)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.extra or self.different)

    def __str__(self) -> str:
        head = f"box {self.box!r} view {self.map!r}: {self.rows} rows read, {self.expected} expected"
        if self.ok:
            return head + ", all equal"
        return (f"{head}; {len(self.missing)} missing (e.g. {self.missing[:3]}), {len(self.extra)} extra "
                f"(e.g. {self.extra[:3]}), {len(self.different)} different (e.g. {self.different[:3]})")


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dt.datetime):
        return value.date()
    return value


def _expected_rows(rows: list[Mapping[str, Any]] | list[tuple], width: int) -> dict[tuple, Any]:
    out: dict[tuple, Any] = {}
    for row in rows:
        values = [_plain(v) for v in (row.values() if isinstance(row, Mapping) else row)]
        key, rest = tuple(values[:width]), values[width:]
        value = rest[0] if len(rest) == 1 else tuple(rest)
        if all(v is None or v == 0 for v in rest):
            continue  # the view keeps no group whose values are all zero
        out[key] = value
    return out


def _same(a: Any, b: Any, rel_tol: float) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y, rel_tol) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=rel_tol, abs_tol=rel_tol)
    return a == b


def compare_view(box: str, map_name: str, got: Mapping[tuple, Any], expected: Mapping[tuple, Any],
                 rel_tol: float = 1e-9, epoch: int | None = None) -> ViewCheck:
    """Compare a view's rows with the expected rows (floats within ``rel_tol``).

    >>> compare_view("v", "V", {(1,): 2.0, (2,): 5}, {(1,): 2.0000000001, (3,): 1}).ok
    False
    >>> c = compare_view("v", "V", {(1,): 2.0, (2,): 5}, {(1,): 2.0000000001, (3,): 1})
    >>> c.missing, c.extra, c.different
    ([((3,), 1)], [((2,), 5)], [])
    """
    check = ViewCheck(box, map_name, len(got), len(expected), epoch=epoch)
    for key, want in expected.items():
        if key not in got:
            check.missing.append((key, want))
        elif not _same(got[key], want, rel_tol):
            check.different.append((key, got[key], want))
    check.extra = [(key, value) for key, value in got.items() if key not in expected]
    return check


def verify_view(box: str, expected: str | Mapping[tuple, Any], tables: Mapping[str, DataFrame | str | Path] | None = None,
                head: str = "", token: str | None = None, spark: SparkSession | None = None, *,
                map: str | None = None, stable: bool = True, wait: float = 0.0, rel_tol: float = 1e-9) -> ViewCheck:
    """Read a view of ``box`` (partitioned or not) and compare it with ``expected``.

    ``expected`` is SQL run by Spark over ``tables`` (:func:`boreas.spark.verify`:
    an ``m3`` box's ``sql`` parameter works as it is; the first columns are
    the view's key columns, in order, then its value columns), or the
    expected rows ``{key tuple: value}``.  The read goes through
    :class:`~boreas.client.query.QueryClient`, which merges a partitioned
    box's members; ``stable`` makes it READ_STABLE (one consistent cut).
    ``wait`` seconds: read again until the view agrees or the time is up
    (a view still taking input).  Returns a :class:`ViewCheck` (``ok``).
    """
    if not head:
        raise ValueError("verify_view needs the Head's URL: head=")
    if isinstance(expected, str):
        from .verify import verify

        rows: Any = verify(expected, dict(tables or {}), spark)
    else:
        rows = None

    async def read() -> ViewCheck:
        async with QueryClient(head, token) as client:
            deadline = time.monotonic() + wait
            while True:
                result = await client.query(box, map, stable=stable)
                kinds = [kind for _, kind in result.keys]
                want = (_expected_rows(rows, len(kinds)) if rows is not None
                        else {tuple(k): v for k, v in expected.items()})  # type: ignore[union-attr]
                want = {tuple(runtime_key(v, kind) if kind == "DATE" else v for v, kind in zip(k, kinds)): v
                        for k, v in want.items()}
                check = compare_view(box, result.map, result.as_dict(), want, rel_tol, result.epoch)
                if check.ok or time.monotonic() >= deadline:
                    return check
                await asyncio.sleep(0.3)

    return run_sync(read)
