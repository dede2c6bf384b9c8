"""Which of a box's two exact paths takes an Arrow batch of n rows: its columns, or its row code, by measured cost.

A ``filter`` or ``map`` box evaluates a batch that came as Arrow columns
with ``pyarrow.compute`` (:mod:`.arrow_exprs`): a few calls per expression
node, each with a fixed cost of several µs whatever the batch's size.  Its
row code (the definition of the semantics) costs per row instead.  At 10,000
rows the columns cost 5-100x less; at 10 rows the row code over
``Columns.rows()`` costs 3-30x less (docs/dataplane.md, "Small batches").
Adaptive batching makes batches of 10-100 rows the normal case at moderate
rates, so a box picks the cheaper path per batch size.

Where the cut-over lies depends on the expression (how many pyarrow calls
it makes against how long its row code runs per row: 100-1,000 rows
measured), so it is *measured* per box, not guessed (the "micro adaptivity"
of Vectorwise, Raducanu et al., SIGMOD 2013): sizes fall into power-of-two
buckets; in each bucket the first batches try both paths (``TRIALS`` timed
batches each, alternating), then the cheaper per row of the last
``TRIALS`` samples of each path takes the bucket's batches, and every
``RECHECK`` batches both are timed once more, so a change (a stream whose
rows start to be flagged, a machine that got busier) moves the choice.
Samples are this thread's CPU time (``time.thread_time``: a preemption on a
busy machine is not counted), and the minimum of the recent ones is taken.
Batches of ``COLUMNS_FROM`` rows or more always go to the columns (there
they cost far less: nothing is timed).

Both paths give every row exactly the same value (the property tests run
each one against the row path), so which one takes a batch changes the cost
only, never what a subscriber sees.

>>> choice = SizeChoice()
>>> [choice.on_rows(10)[0] for _ in range(6)]  # trials: both paths, alternating
[False, True, False, True, False, True]
>>> for seconds, rows in ((60e-6, False), (20e-6, True)) * 3:
...     choice.record(10, rows, seconds)
>>> choice.on_rows(10), choice.on_rows(5000)  # (the first batch after the trials timed too)
((True, True), (False, False))
>>> SizeChoice.fixed(True).on_rows(100_000)
(True, False)
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

#: From this size on a batch goes to the columns untimed (measured 5-100x cheaper there).
COLUMNS_FROM = 4096
#: Timed batches of each path per bucket before a choice is made (and the samples the choice reads).
TRIALS = 3
#: After the trials, every this many batches of a bucket both paths are timed once more.
RECHECK = 1024


@dataclass
class _Bucket:
    """The recent CPU costs per row of both paths for batches of one power-of-two size range."""

    columns: deque = field(default_factory=lambda: deque(maxlen=TRIALS))
    rows: deque = field(default_factory=lambda: deque(maxlen=TRIALS))
    batches: int = 0
    trial: int = 0

    def cheaper_on_rows(self) -> bool:
        return min(self.rows) < min(self.columns)


@dataclass
class SizeChoice:
    """One box's choice of path per batch size (its only owner: the box; nothing of it is saved in
    ``state()``, a restored box measures again).  ``forced``: always that path (True: rows), for tests and
    benchmarks."""

    forced: bool | None = None
    _buckets: dict[int, _Bucket] = field(default_factory=dict)

    @classmethod
    def fixed(cls, on_rows: bool) -> "SizeChoice":
        """A choice that always takes one path (tests run each against the row path; benches compare them)."""
        return cls(forced=on_rows)

    def on_rows(self, n: int) -> tuple[bool, bool]:
        """(whether a Columns batch of ``n`` rows goes the row code, whether to time it and :meth:`record`)."""
        if self.forced is not None:
            return self.forced, False
        if n >= COLUMNS_FROM:
            return False, False
        bucket = self._buckets.get(n.bit_length())
        if bucket is None:
            bucket = self._buckets[n.bit_length()] = _Bucket()
        if len(bucket.columns) < TRIALS or len(bucket.rows) < TRIALS:
            bucket.trial += 1
            return bucket.trial % 2 == 0, True  # (alternating, so both see the same moments of the machine)
        bucket.batches += 1
        phase = bucket.batches % RECHECK
        chosen = bucket.cheaper_on_rows()
        if phase == 0:
            return not chosen, True
        return chosen, phase == 1

    def record(self, n: int, on_rows: bool, seconds: float) -> None:
        """The CPU time a timed batch of ``n`` rows took on the path :meth:`on_rows` chose."""
        if n <= 0 or n >= COLUMNS_FROM or self.forced is not None:
            return
        bucket = self._buckets.setdefault(n.bit_length(), _Bucket())
        (bucket.rows if on_rows else bucket.columns).append(seconds / n)
