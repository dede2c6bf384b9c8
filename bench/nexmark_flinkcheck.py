"""Nexmark's check against Flink itself: Boreas's result of a query beside the rows PyFlink collected for it.

Why: DuckDB checks the queries whose result is a plain view, but a windowed
query's meaning is Flink's (its windows, its watermark, what a window join
pairs), and DuckDB can only be told that semantics by hand
(tests/test_nexmark_winjoin.py).  Here the oracle is Flink running the
suite's own SQL over the same events (``bench/nexmark_flink.py --collect``).

* **Boreas's rows** (:func:`boreas_result`): what a subscriber of the box's
  out stream holds, its emitted changelog folded in order
  (``nexmark_boreas.folded``).  A windowed query's are the rows its box
  emits as windows close, fed in event order, then the ones the end of
  input releases (Flink's bounded file ends the same way: its watermark
  goes to +infinity); any other query's stream must also equal its view at
  the end (``nexmark_boreas.view_rows``).  A view of rows ends with its ``count``
  (a row's multiplicity), which is expanded.
* **Flink's rows**: its changelog applied, each row with its multiplicity.
* **Aligned by name** (:func:`aligned`): Boreas may order a query's columns
  otherwise (q11's count comes after its session bounds), so Flink's are
  read in Boreas's order, names matched case-blind; event-time values are
  milliseconds since the epoch on both sides.

:func:`compare` (``nexmark_boreas``'s, floats to 1e-9) then says None or the
first difference.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from nexmark_boreas import Planned, boreas_batch, compare, folded, view_rows


def boreas_result(planned: Planned, blocks: list[dict]) -> list[tuple]:
    """The query's rows on Boreas as a subscriber of its box's out stream holds them: the changelog it emitted
    (``nexmark_boreas.folded``), fed in event order, for a windowed query the rows of each window as it closed
    and then the end of input's.  Raises ValueError where the changelog takes away a row it had not emitted."""
    from boreas.wire.columns import Columns

    q, op = planned.query, planned.operator
    if not q.windowed:
        from nexmark_boreas import feed

        feed(planned, blocks)
        return _expanded(folded(planned.emitted), planned.out_fields)
    seq = 0
    for b in blocks:
        for port, kind in enumerate(q.reads):
            if b[kind].num_rows:
                seq += 1
                planned.emitted.extend(op.process_from(port, Columns(boreas_batch(kind, b[kind])), seq * 0.01,
                                                       (kind, "gen", seq)))
    planned.emitted.extend(op.end_of_input((seq + 1) * 0.01))
    return _expanded(folded(planned.emitted), planned.out_fields)


def _expanded(rows: list[tuple], fields: list[str]) -> list[tuple]:
    """A view of rows' rows (its last column ``count``) each listed ``count`` times, without the count."""
    if not fields or fields[-1] != "count":
        return rows
    return [tuple(r[:-1]) for r in rows for _ in range(int(r[-1]))]


def flink_rows(path: Path) -> tuple[list[str], list[tuple]]:
    """(columns, rows each listed as often as Flink's result holds it) from ``nexmark_flink.py --collect``'s file."""
    got = json.loads(Path(path).read_text())
    return got["columns"], [tuple(r[:-1]) for r in got["rows"] for _ in range(int(r[-1]))]


def aligned(fields: list[str], columns: list[str], rows: list[tuple]) -> list[tuple] | str:
    """Flink's rows in the order of Boreas's columns (names matched case-blind), or why they cannot be.

    >>> aligned(["bidder", "starttime", "bid_count"], ["bidder", "bid_count", "starttime"], [(7, 3, 1000.0)])
    [(7, 1000.0, 3)]
    >>> aligned(["a", "b"], ["a", "c"], [(1, 2)])
    "columns ['a', 'b'] on Boreas, ['a', 'c'] on Flink"
    """
    names = [f.lower() for f in (fields[:-1] if fields and fields[-1] == "count" and
                                 len(fields) == len(columns) + 1 else fields)]
    theirs = [c.lower() for c in columns]
    if sorted(names) != sorted(theirs):
        if len(names) == len(theirs):  # renamed (``B.dateTime AS bid_dateTime`` read whole): by position
            return rows
        return f"columns {names} on Boreas, {theirs} on Flink"
    order = [theirs.index(n) for n in names]
    return [tuple(r[i] for i in order) for r in rows]


def check(planned: Planned, blocks: list[dict], flink_file: Path) -> str:
    """``matches (N rows)`` or ``DIFFERS: ...``: Boreas's result of the query against Flink's."""
    columns, theirs = flink_rows(flink_file)
    want = aligned(planned.out_fields, columns, theirs)
    if isinstance(want, str):
        return f"DIFFERS: {want}"
    try:
        got = boreas_result(planned, blocks)
    except ValueError as exc:
        return f"DIFFERS: emitted stream: {exc}"
    if not planned.query.windowed and (off := compare(got, _expanded(view_rows(planned), planned.out_fields),
                                                      peer="the view")) is not None:
        return f"DIFFERS: emitted stream from the box's view: {off}"
    differs = compare(got, want, peer="Flink")
    if differs is None:
        return f"matches Flink ({len(got):,} rows)"
    return f"DIFFERS from Flink: {differs}" + (f"; {first_differences(got, want)}" if len(got) != len(want) else "")


def first_differences(got: list[tuple], want: list[tuple], n: int = 2) -> str:
    """The first rows one side has more often than the other (floats rounded to 6 places).

    >>> first_differences([(1, 2.0), (3, 4.0)], [(1, 2.0000000001), (5, 6.0)])
    'Boreas only: [(3, 4.0)]; Flink only: [(5, 6.0)]'
    """
    def key(r):
        return tuple(round(x, 6) if isinstance(x, float) else x for x in r)

    mine, theirs = Counter(map(key, got)), Counter(map(key, want))
    only = [sorted((mine - theirs).elements(), key=repr)[:n], sorted((theirs - mine).elements(), key=repr)[:n]]
    return f"Boreas only: {only[0]}; Flink only: {only[1]}"
