"""A memo of each general view's rows: every row's value after the last batch, so a changed row's value before
the next batch is read, not evaluated again.

Why: ``changes()`` (:mod:`.viewchanges`) finds a general view's changed
rows and compares each row's value before the batch with its value after.
Evaluated, "before" costs as much as "after" or more (every fold read
through :class:`.viewchanges.OldReader`, the slice now with the batch's
changes put back): Nexmark q16 evaluates nine ``COUNT DISTINCT`` folds per
changed row twice.  But the value before batch ``n`` is the value after
batch ``n - 1``, and that was evaluated then: for the rows batch ``n - 1``
changed, by the same ``changes()``; for every other row, by an earlier
batch (a row no batch named since did not change).  So the memo keeps, per
general view, each row present after the last batch with its value — every
fold of the row at once, updated from each batch's map changes through the
rows they name — and "before" is one dict lookup.

It is derived data, owned here and exact at one runtime ``version``:

* :meth:`RowMemo.before` answers only where the memo saw every batch up to
  the one being compared (its version is the one before it): a batch whose
  changes nobody asked for (native), ``restore()``, ``load()`` and closed
  windows' state removed without a view change leave it behind, and it is
  cleared; from there it holds only the rows evaluated since, so a row it
  lacks is evaluated as without it (:data:`UNKNOWN`) until it is *complete*
  again, which only a fresh runtime's empty maps are (every row absent);
* where it is complete, a row it lacks was not in the view before the batch;
* a view whose changed keys do not name the rows they affect
  (:func:`..over.rereads`) evaluates every row, before and after, as
  without the memo; it keeps no rows of it;
* a partition member's runtime (:mod:`..cumulus.member`) moves entries in
  and out between batches, at no version: it keeps no memo.

Its size is the general views' rows (present ones only: a row that leaves
the view leaves the memo).

>>> memo = RowMemo(["v"])
>>> memo.start(1)                       # batch 1 of a fresh runtime: complete
True
>>> memo.before("v", ("a",), 0)         # not there after batch 0: absent
(False, 0)
>>> memo.after("v", ("a",), True, 5)
>>> memo.done(1)
>>> memo.start(2), memo.before("v", ("a",), 0)
(True, (True, 5))
>>> memo.done(2)
>>> memo.start(4), memo.before("v", ("a",), 0) is UNKNOWN   # batch 3 went by unseen
(False, True)
"""

from __future__ import annotations

from collections.abc import Iterable

UNKNOWN = None  # :meth:`RowMemo.before` of a row the memo cannot answer for


class RowMemo:
    """Per general view, its present rows' values at :attr:`version` (module docstring)."""

    def __init__(self, views: Iterable[str]):
        """``views``: the general views whose changed keys name the rows they affect (not ``rereads``)."""
        self._rows: dict[str, dict[tuple, object]] = {name: {} for name in views}
        self.version: int | None = 0  # a fresh runtime's maps are empty: no view has a row
        self.complete = True  # every present row is held (else: only rows evaluated since it was cleared)
        self._exact = False  # whether the batch being compared follows the memo's version

    def clear(self) -> None:
        """Forget every row (the maps changed in a way the memo did not see)."""
        for rows in self._rows.values():
            rows.clear()
        self.version, self.complete = None, False

    def start(self, version: int) -> bool:
        """Before comparing the rows of the batch that made ``version``: whether the memo holds the rows as they
        were before it (else it is cleared, and holds the rows evaluated from this batch on).  Until
        :meth:`done`, the memo is exact at no version (an exception in between leaves it to be cleared)."""
        self._exact = self.version is not None and self.version == version - 1
        if not self._exact:
            self.clear()
        self.version = None
        return self._exact

    def done(self, version: int) -> None:
        """Every changed row of the batch that made ``version`` was noted (:meth:`after`)."""
        self.version = version

    def held(self, view: str) -> dict[tuple, object] | None:
        """The dict of ``view``'s rows that :meth:`before` reads and :meth:`after` writes (row -> value of a
        present row), for a caller that compares a batch's rows in one loop without a method call per row;
        None for a view the memo keeps no rows of.  Read it as :meth:`before` does only where :attr:`exact`."""
        return self._rows.get(view)

    @property
    def exact(self) -> bool:
        """Whether the memo holds the rows as they were before the batch being compared (:meth:`start`)."""
        return self._exact

    def before(self, view: str, row: tuple, zero: object):
        """``(in the view, value)`` of ``row`` before the batch being compared (``zero``: the value of a row not
        in the view), or :data:`UNKNOWN`.  The per-row rule; ``changes()`` applies it, and :meth:`after`'s,
        inline over :meth:`held` (:func:`.viewchanges.general_changes`)."""
        rows = self._rows.get(view)
        if rows is None or not self._exact:
            return UNKNOWN
        if row in rows:
            return True, rows[row]
        return (False, zero) if self.complete else UNKNOWN

    def after(self, view: str, row: tuple, present: bool, value: object) -> None:
        """Note ``row``'s value after the batch being compared (evaluated by ``changes()``)."""
        rows = self._rows.get(view)
        if rows is None:
            return
        if present:
            rows[row] = value
        else:
            rows.pop(row, None)
