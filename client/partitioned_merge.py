"""Merging the members' answers to one read of a partitioned ``m3`` box into one answer.

Each member answers for the segments it holds (docs/cumulus.md §5); the
client checks that the answers cover the segments read exactly once
(:func:`cover_problem`), then concatenates slices and combines the
pre-aggregated parts (:func:`combine`) into an answer of a member's shape
(:func:`merge`).  These are pure functions, kept apart from
:mod:`boreas.client.partitioned`, which decides whom to ask and asks them
(and re-exports them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from boreas.m3.cumulus import Layout

from .errors import QueryFailed


def cover_problem(layout: Layout, answers: Sequence[dict[str, Any]], needed: frozenset[int] | None = None) -> str | None:
    """Why the members' answers do not cover the segments read exactly once (None: they do).

    ``needed`` None: every segment of the layout, each answered by exactly
    one member; else each needed segment answered (and none twice).

    >>> from boreas.m3.cumulus import even_layout
    >>> lay = even_layout("g", ["n1:1", "n2:1"], 4)
    >>> a0 = {"member": 0, "layout": 1, "segments": [0, 2]}
    >>> cover_problem(lay, [a0, {"member": 1, "layout": 1, "segments": [1, 3]}]) is None
    True
    >>> cover_problem(lay, [a0, {"member": 1, "layout": 1, "segments": [1, 2]}])
    "the answers of box 'g' do not cover layout 1's segments exactly once: segment 3 missing; segment 2 answered by members 0 and 1"
    >>> cover_problem(lay, [a0], frozenset({2})) is None, cover_problem(lay, [{**a0, "layout": 2}], frozenset({2}))
    (True, "member 0 of box 'g' answered under layout 2, not layout 1")
    """
    seen: dict[int, list[int]] = {}
    for answer in answers:
        if answer.get("layout") != layout.version:
            return (f"member {answer.get('member')} of box {layout.box!r} answered under layout "
                    f"{answer.get('layout')}, not layout {layout.version}")
        for sid in answer.get("segments", []):
            seen.setdefault(int(sid), []).append(int(answer.get("member", -1)))
    every = {s.id for s in layout.segments}
    want = every if needed is None else set(needed)
    problems = [f"segment {sid} missing" for sid in sorted(want - seen.keys())]
    problems += [f"segment {sid} is not in the layout" for sid in sorted(seen.keys() - every)]
    problems += [f"segment {sid} answered by members {' and '.join(map(str, ms))}"
                 for sid, ms in sorted(seen.items()) if len(ms) > 1]
    if not problems:
        return None
    return f"the answers of box {layout.box!r} do not cover layout {layout.version}'s segments exactly once: " \
        + "; ".join(problems)


def combine(agg: str, partials: Sequence[Any]) -> Any:
    """One aggregate from the members' parts: sums added, min/max of the parts that found something.

    A part is None when its member had no matching entry; a view with
    several columns has list parts, combined column by column.  Nothing
    anywhere: a sum is 0 and a min/max None, as on one node.

    >>> combine("sum", [3, None, 4.5]), combine("min", [None, 2, -1]), combine("max", [None, None])
    (7.5, -1, None)
    >>> combine("sum", [[1, 2], None, [3, 4]]), combine("max", [[1, 9], [5, 2]]), combine("sum", [None])
    ([4, 6], [5, 9], 0)
    """
    found = [p for p in partials if p is not None]
    if not found:
        return 0 if agg == "sum" else None
    fn = {"sum": sum, "min": min, "max": max}[agg]
    if isinstance(found[0], (list, tuple)):
        return [fn(column) for column in zip(*found)]
    return fn(found)


def merge(agg: str, answers: Sequence[dict[str, Any]], layout: Layout,
          needed: frozenset[int] | None = None) -> dict[str, Any]:
    """The members' answers to one read as one answer (the shape of a member's, plus ``members``).

    Checks they cover the segments read exactly once (:func:`cover_problem`;
    :class:`QueryFailed` 409 if not), then: slices concatenated (a key lives
    in one segment), aggregates combined (:func:`combine`).

    >>> from boreas.m3.cumulus import even_layout
    >>> lay = even_layout("g", ["n1:1", "n2:1"], 2)
    >>> def answer(m, rows):
    ...     return {"box": "g", "node": f"n{m + 1}:1", "map": "G", "version": 5, "agg": "sum", "keys": [["a", "INT"]],
    ...             "layout": 1, "member": m, "segments": [m], "rows": rows}
    >>> m = merge("sum", [answer(0, [{"key": [None], "value": 4}]), answer(1, [{"key": [None], "value": None}])], lay)
    >>> m["rows"], m["version"], m["members"], m["segments"], m["node"]
    ([{'key': [None], 'value': 4}], 10, [0, 1], [0, 1], 'n1:1,n2:1')
    >>> merge("slice", [answer(0, [{"key": [1], "value": 2}]), answer(1, [{"key": [2], "value": 3}])], lay)["rows"]
    [{'key': [1], 'value': 2}, {'key': [2], 'value': 3}]
    >>> both = [{**answer(m, [{"key": [None], "value": 4}]), "replicated": True} for m in (0, 1)]
    >>> merge("sum", both, lay)["rows"], merge("sum", both, lay)["members"]  # a replicated map: one answer
    ([{'key': [None], 'value': 4}], [0])
    """
    if answers and all(a.get("replicated") for a in answers):
        # a replicated map (docs/cumulus.md §3.11): every member answered the whole of it, so one answer is the
        # read, whichever members were asked (a reader that could not tell the map's placement asks them all)
        answers = answers[:1]
    else:
        problem = cover_problem(layout, answers, needed)
        if problem:
            raise QueryFailed(problem, 409)
    first = answers[0]
    if agg == "slice":
        rows = [row for answer in answers for row in answer["rows"]]
    else:
        parts = [answer["rows"][0]["value"] if answer["rows"] else None for answer in answers]
        key = first["rows"][0]["key"] if first["rows"] else [None] * len(first["keys"])
        rows = [{"key": key, "value": combine(agg, parts)}]
    return {
        "box": first["box"], "node": ",".join(a["node"] for a in answers), "map": first["map"],
        "version": sum(a["version"] for a in answers), "agg": first["agg"], "stable": False,
        "keys": first["keys"], "rows": rows, "layout": layout.version,
        "members": [a["member"] for a in answers],
        "segments": sorted({int(sid) for a in answers for sid in a.get("segments", [])}),
    }
