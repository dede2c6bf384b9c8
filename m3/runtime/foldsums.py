"""A sum of per-group folds kept per row: ``SUM(MAX(P : f[G, C, P]) FOR G : rows[G, C])`` adjusted per batch.

Why: an aggregate over a grouped derived table's aggregate -- ``AVG``,
``SUM`` or ``COUNT`` of each inner group's ``MAX`` or ``MIN`` (Nexmark q4:
the average over a category's auctions of each auction's highest bid) --
compiles to an ``Over`` of a ``Fold``: for every inner group ``G`` of the
row's slice of ``rows``, the group's fold, summed.  The row evaluation
(:mod:`.viewcode`) ran that loop over every group of every changed row,
though a batch changes few groups (q4: a category holds thousands of
auctions, a batch's bids touch a few of them).  This memo keeps, per such
aggregate and row, the sum and each group's term (its fold, or 0 for a group
whose fold is empty), and after each batch revises only the groups whose
entries the batch's journals name (``-old + new``): a group that joined the
row's slice adds its term, one that left takes it away, one whose fold's
slice changed has its term read again (from :mod:`.slicefolds`, one lookup).
``COUNT`` of the groups is the slice's size already (no memo needed).

Only INT folds are kept: a float sum adjusted differs from the sum read in the
slice's order (as for ``SUM`` in :mod:`.slicefolds`); a float one is read by
the loop, as before.  Exact at one runtime ``version`` like the other memos
(:mod:`.memos`): advanced by the batch that made ``version``, cleared by a
batch gone by unseen, ``restore()``, ``load()`` and closed windows' removal;
a partition member keeps none.  Only the reader of the maps after a batch
inside ``changes()`` reads it (:func:`.viewchanges.view_changes`); every other
reader runs the loop (``evaluate.Reader.fold_sum``).

>>> spec = SumOfFolds("rows", 0, "f", 2, "MAX", 0, ((1, 1),))
>>> spec.fold_pattern((None, "c"), 7), spec.fold_group((7, "c", 30)), spec.rows_group((7, "c"))
((7, 'c', None), ('c', 7), ('c', 7))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from operator import itemgetter


@dataclass(frozen=True)
class SumOfFolds:
    """``SUM(KIND(F : fmap[...]) FOR G : rows[...])`` where each key position of ``rows`` is the group variable
    ``G`` (at ``at``) or a row variable, and each of ``fmap``'s is ``G`` (at ``own``), the folded variable (at
    ``fat``) or one of those row variables (``links``: (rows position, fmap position) pairs)."""

    rows: str
    at: int
    fmap: str
    fat: int
    kind: str
    own: int
    links: tuple[tuple[int, int], ...]

    def fold_pattern(self, pattern: tuple, group: object) -> tuple:
        """The pattern of ``fmap``'s slice folded for ``group`` of the row whose ``rows`` slice is ``pattern``."""
        p: list = [None] * (len(self.links) + 2)
        p[self.own] = group
        for r, f in self.links:
            p[f] = pattern[r]
        return tuple(p)

    @cached_property
    def rows_group(self) -> Callable[[tuple], tuple]:
        """A ``rows`` key's (row variables' values in ``links``' order..., group)."""
        return itemgetter(*(r for r, _ in self.links), self.at)

    @cached_property
    def fold_group(self) -> Callable[[tuple], tuple]:
        """An ``fmap`` key's (row variables' values in ``links``' order..., group)."""
        return itemgetter(*(f for _, f in self.links), self.own)


class FoldSums:
    """Per :class:`SumOfFolds` and row pattern, the sum of its groups' folds and each group's term, exact at
    :attr:`version` (module docstring)."""

    def __init__(self, enabled: bool = True):
        """``enabled``: False for a runtime whose maps change between batches (a partition member)."""
        self.enabled = enabled
        self._sums: dict[SumOfFolds, dict[tuple, list]] = {}  # spec -> pattern -> [sum, {group: term}]
        self.version: int | None = 0

    def clear(self, version: int | None = None) -> None:
        """Forget every sum (the maps changed in a way the memo did not see); exact again at ``version``."""
        self._sums = {}
        self.version = version

    def exact(self, version: int) -> bool:
        """Whether the memo may answer for the maps at ``version``."""
        return self.enabled and self.version == version

    def get(self, spec: SumOfFolds, pattern: tuple, values: Callable[[str, tuple, int], list],
            term: Callable[[SumOfFolds, tuple, object], object]) -> object:
        """The sum at ``pattern``, kept, or made from ``values`` (the ``rows`` slice's groups now) and ``term``
        (a group's fold now) and then kept: not an empty slice (the memo holds no more rows than the maps), nor
        one with a term not an INT (summed in the slice's order, as the loop does: a float sum adjusted would
        differ)."""
        rows = self._sums.get(spec)
        if rows is None:
            rows = self._sums[spec] = {}
        found = rows.get(pattern)
        if found is None:
            terms = {g: term(spec, pattern, g) for g in values(spec.rows, pattern, spec.at)}
            found = [sum(terms.values()), terms]
            if terms and all(type(t) is int for t in terms.values()):  # noqa: E721 - not a bool or a float
                rows[pattern] = found
        return found[0]

    def advance(self, journals: dict[str, list], store, version: int,
                fold: Callable[[str, tuple, int], tuple]) -> None:
        """After the batch that made ``version``: revise each kept row's groups the journals name (stored key,
        value before, ...; ``store``: the maps now; ``fold``: a slice's fold now, read after the batch)."""
        if not self.enabled or self.version == version:
            return
        if self.version != version - 1:  # a batch went by unseen
            self.clear(version)
            return
        self.version = None  # not exact until done (an exception leaves it cleared at the next batch)
        for spec, rows in self._sums.items():
            if rows and (journals.get(spec.rows) or journals.get(spec.fmap)):
                _revise(spec, rows, journals, store, fold)
        self.version = version


def _revise(spec: SumOfFolds, rows: dict[tuple, list], journals: dict[str, list], store,
            fold: Callable[[str, tuple, int], tuple]) -> None:
    """Revise the kept rows of one aggregate for every group the batch wrote an entry of, in ``rows`` or ``fmap``:
    each such group's term read now (none where it is no longer in the row's slice), the sum by the difference.
    The groups are found from the journals' keys by ``itemgetter`` (a batch writes many entries of few groups:
    q4's bids, one per price, of a few thousand auctions); a group whose fold did not change reads the same term
    again, one slice fold lookup (``fold``: the reader's after the batch, :mod:`.slicefolds`)."""
    named: dict = {}
    for name, getter in ((spec.rows, spec.rows_group), (spec.fmap, spec.fold_group)):
        if journal := journals.get(name):
            named.update(dict.fromkeys(map(getter, journal[::2])))
    present, at, fmap, fat = store.getter(spec.rows), spec.at, spec.fmap, spec.fat
    pick = 1 if spec.kind == "MIN" else 2
    rslots, fslots = [r for r, _ in spec.links], [f for _, f in spec.links]
    p: list = [None] * (len(rslots) + 1)
    q: list = [None] * (len(fslots) + 2)
    own = spec.own
    for found in named:
        for i, r in enumerate(rslots):
            p[r] = found[i]
        p[at] = None
        pattern = tuple(p)
        kept = rows.get(pattern)
        if kept is None:
            continue
        group, terms = found[-1], kept[1]
        p[at] = group
        old = terms.pop(group, 0)
        if present(tuple(p), 0):
            for i, f in enumerate(fslots):
                q[f] = found[i]
            q[own] = group
            got = fold(fmap, tuple(q), fat)
            new = terms[group] = got[pick] if got[0] else 0
        else:
            new = 0
        if not terms or type(new) is not int:  # noqa: E721 - emptied, or a float: read again when next asked for
            del rows[pattern]
        else:
            kept[0] += new - old
