"""The derived data a runtime keeps beside its maps, advanced from each batch's journals: one owner, one reset.

Why one module: a runtime keeps three memos that are not state (a
``state()`` holds none of them; each is rebuilt from the maps): the
correlated ``TOTAL``s' parts (:mod:`.totals`), the general views' rows after
the last batch (:mod:`.rowmemo`) and the slices' folds (:mod:`.slicefolds`).
Each is exact at one version and knows when a batch went by unseen; all of
them must be forgotten together when the maps change at no version
(``restore()``, closed windows' state removed, ``load()``).  :class:`Memos`
holds the three and is what the runtime clears.

>>> from ..syntax import parse_program
>>> p = parse_program("DECLARE MAP m[A: INT, B: INT] : INT; DECLARE VIEW v[a := A](hi := MAX(B : m[A, B]));")
>>> memos = Memos(p, ["v"])
>>> memos.folds.enabled, memos.clear()
(True, None)
"""

from __future__ import annotations

from collections.abc import Iterable

from ..ast import Program
from .rowmemo import RowMemo
from .slicefolds import SliceFolds
from .totals import TotalMemo


class Memos:
    """A runtime's memos of TOTALs, of general views' rows and of slices' folds (module docstring)."""

    def __init__(self, program: Program, row_views: Iterable[str], member: bool = False):
        """``row_views``: the general views whose rows the row memo keeps; ``member``: a partition member's
        runtime (its maps change between batches: it keeps no rows and no folds)."""
        self.totals = TotalMemo(program)
        self.rows = RowMemo(() if member else row_views)
        self.folds = SliceFolds(enabled=not member)

    def clear(self) -> None:
        """Forget everything (the maps changed in a way no memo saw)."""
        self.totals.clear()
        self.rows.clear()
        self.folds.clear()
