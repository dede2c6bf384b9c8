"""Hypothesis steps of inserts and deletes cut into batches, shared by the DuckDB-oracle property tests.

A step is ``(1, row)`` (insert ``row``) or ``(-1, n)`` (delete the n-th
present row, in sorted order; skipped while none is present), and a
``True`` cut ends a batch after its step.  Drawing deletes by position
means every delete names a row that is there, whatever was drawn before.

>>> batches([(1, "a"), (1, "b"), (-1, 3), (-1, 0)], [False, True, False, False])
[[(1, 'a'), (1, 'b')], [(-1, 'b'), (-1, 'a')]]
"""

from __future__ import annotations

from collections import Counter


def batches(steps, cuts):
    """``[[(sign, row)]]``: the steps in batches, a delete naming the n-th present row (skipped if none)."""
    present: Counter = Counter()
    out: list[list] = [[]]
    for (sign, what), cut in zip(steps, cuts):
        if sign < 0:
            rows = sorted(present.elements())
            if not rows:
                continue
            what = rows[what % len(rows)]
        present[what] += sign
        out[-1].append((sign, what))
        if cut:
            out.append([])
    return [b for b in out if b]


def replay(runtime, steps, cuts, expected, relation: str = "R", view: str = "Q1") -> None:
    """Apply the steps to ``relation`` batch by batch; after each, ``view``'s nonzero entries must be
    ``expected(present)`` (the oracle over the rows present, a Counter)."""
    present: Counter = Counter()
    for batch in batches(steps, cuts):
        runtime.apply_batch([(relation, sign, r) for sign, r in batch])
        for sign, r in batch:
            present[r] += sign
        assert {k: v for k, v in runtime.view(view).items() if v} == expected(present)
    assert {k: v for k, v in runtime.view(view).items() if v} == expected(present)
