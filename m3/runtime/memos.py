"""The derived data a runtime keeps beside its maps, advanced from each batch's journals: one owner, one reset.

Why one module: a runtime keeps five memos that are not state (a
``state()`` holds none of them; each is rebuilt from the maps): the
correlated ``TOTAL``s' parts (:mod:`.totals`), the general views' rows after
the last batch (:mod:`.rowmemo`), the slices' folds (:mod:`.slicefolds`),
the sums of per-group folds (:mod:`.foldsums`) and the counts of slices read
only as counts (:mod:`.slicecounts`).
Each is exact at one version and knows when a batch went by unseen; all of
them must be forgotten together when the maps change at no version
(``restore()``, closed windows' state removed, ``load()``).  :class:`Memos`
holds the five and is what the runtime clears.

>>> from ..syntax import parse_program
>>> p = parse_program("DECLARE MAP m[A: INT, B: INT] : INT; DECLARE VIEW v[a := A](hi := MAX(B : m[A, B]));")
>>> memos = Memos(p, ["v"])
>>> memos.folds.enabled, memos.clear()
(True, None)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..ast import Program
from .foldsums import FoldSums
from .rowmemo import RowMemo
from .slicecounts import SliceCounts, counted_maps
from .slicefolds import SliceFolds
from .totals import TotalMemo


class Memos:
    """A runtime's memos of TOTALs, of general views' rows, of slices' folds, of sums of folds and of slices'
    counts (module docstring)."""

    def __init__(self, program: Program, row_views: Iterable[str], member: bool = False,
                 forms: Mapping | None = None, rereads: frozenset[str] = frozenset()):
        """``row_views``: the general views whose rows the row memo keeps; ``member``: a partition member's
        runtime (its maps change between batches: it keeps no rows, no folds, no sums and no counts); ``forms``: the
        general views' forms and ``rereads`` those re-read whole (for the maps kept as counts alone)."""
        self.totals = TotalMemo(program)
        # (an ALWAYS view's row is there before any batch, which a fresh memo takes as no row: its before is read)
        always = {v.name for v in program.views if v.always}
        self.rows = RowMemo(() if member else [v for v in row_views if v not in always])
        self.folds = SliceFolds(enabled=not member)
        self.sums = FoldSums(enabled=not member)
        totals_read = set().union(*({p.total.ref.name} | {ref.name for ref in p.reads}
                                    for p in self.totals.plans.values()))
        self.counts = SliceCounts({} if member or not forms else counted_maps(program, forms, rereads, totals_read),
                                  {m.name: len(m.keys) for m in program.maps})

    def kept(self, view_reads: set[str]) -> set[str]:
        """The maps a native runtime's mirror keeps current per batch: those Python reads per batch (a general
        view's, a TOTAL memo's), less those kept as counts alone (:mod:`.slicecounts`)."""
        return view_reads.union(*({p.total.ref.name} | {ref.name for ref in p.reads}
                                  for p in self.totals.plans.values())) - set(self.counts.counted)

    def clear(self) -> None:
        """Forget everything (the maps changed in a way no memo saw)."""
        self.totals.clear()
        self.rows.clear()
        self.folds.clear()
        self.sums.clear()
        self.counts.clear()
