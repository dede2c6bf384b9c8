"""A fold of an index slice kept per slice: its count, least and greatest value, adjusted from each batch's
journals, so a general view's ``MIN``, ``MAX`` or ``COUNT`` of a slice is one dict lookup after the batch.

Why: a general view's row evaluation (:mod:`.viewcode`) reads a fold over a
slice with one unbound position (``MAX(M : m[C, D, M])``, a ``COUNT
DISTINCT``) by listing the slice's values (:func:`.slices.slice_values`)
and folding them: O(the slice's size) per changed row and batch.  Nexmark
q16's latest minute of a channel's day lists up to 1,440 minutes, q17's
``MIN``/``MAX`` an auction's distinct prices, and q4's average lists, for
every auction of a changed category, that auction's prices — though only a
few auctions' bids changed.  But a slice's values are the keys of its
non-zero entries, and a batch's journals name every entry it changed with
its value before (:mod:`.viewchanges`): an entry that became non-zero adds
its value to the slice, one that became zero takes it out.  So the memo
keeps, per slice read so far, ``(count, least, greatest)`` and adjusts it
after each batch from the journal: a value added is a new count and
possibly a new least or greatest; a value removed lowers the count, and
when it was the least or the greatest the slice's fold is dropped (read
again from the index the next time: a delete of the extreme value is the
only case that needs the slice; an emptied slice is dropped too, and an
empty one read is not kept, so the memo holds at most the non-empty slices
read; a native batch's entries that moved in or out are found by numpy from the values before and now C
handed back with its journal, :func:`crossed`, not by a lookup per key).  ``SUM`` is not kept (a float's sum
adjusted differs from the sum read in the slice's order).

It is derived data, exact at one runtime ``version`` (the pattern of
:class:`.totals.TotalMemo`): :meth:`SliceFolds.advance` applies the batch
that made ``version`` when the memo is at ``version - 1``, and is cleared
otherwise (a native batch whose ``changes()`` nobody read, ``load()``);
:meth:`SliceFolds.clear` after ``restore()`` and closed windows' removal
(the maps change at no version); a partition member's runtime (which moves
entries in and out between batches) keeps none.  Only the reader of the
maps now inside ``changes()`` reads it (:func:`.viewchanges.view_changes`);
every other reader folds the slice as before.

>>> folds = SliceFolds()
>>> folds.advance({}, None, 1)          # batch 1 of a fresh runtime
>>> folds.get("m", ("a", None), 1, lambda *read: [3, 1, 2])   # read once from the slice
(3, 1, 3)
>>> folds.get("m", ("a", None), 1, lambda *read: [])          # and kept: the slice is not read again
(3, 1, 3)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from .nanorder import extremes, greatest2, least2

Fold = tuple  # (count, least, greatest): least and greatest None where the slice is empty
EMPTY: Fold = (0, None, None)


def fold_of(values: list) -> Fold:
    """A slice's fold from its values (one pass each for the least and the greatest)."""
    return extremes(values)  # (SQL's order: NaN above every number, .nanorder)


class SliceFolds:
    """Per map and unbound position, each slice's :data:`Fold` read since the memo was last cleared, exact at
    :attr:`version` (module docstring)."""

    def __init__(self, enabled: bool = True):
        """``enabled``: False for a runtime whose maps change between batches (a partition member)."""
        self.enabled = enabled
        self._folds: dict[tuple[str, int], dict[tuple, Fold]] = {}
        self.version: int | None = 0  # a fresh runtime's maps are empty, and the memo holds no slice

    def clear(self, version: int | None = None) -> None:
        """Forget every slice (the maps changed in a way the memo did not see); exact again at ``version``."""
        self._folds = {}
        self.version = version

    def exact(self, version: int) -> bool:
        """Whether the memo may answer for the maps at ``version``."""
        return self.enabled and self.version == version

    def get(self, name: str, pattern: tuple, at: int, values: Callable[[str, tuple, int], list]) -> Fold:
        """The fold of map ``name``'s slice at ``pattern`` (bound but at ``at``), from the memo, or from
        ``values(name, pattern, at)`` (the slice's values now) and then kept.  Only while :meth:`exact` at the maps' version."""
        slices = self._folds.get((name, at))
        if slices is None:
            slices = self._folds[(name, at)] = {}
        found = slices.get(pattern)
        if found is None:
            found = fold_of(values(name, pattern, at))
            if found[0]:  # (an empty slice is not kept: the memo holds no more slices than the maps do)
                slices[pattern] = found
        return found

    def reader(self, name: str, at: int, values: Callable[[str, tuple, int], list]
               ) -> tuple[Callable[[tuple], Fold | None], Callable[[tuple], Fold]]:
        """:meth:`get` of map ``name`` at ``at`` as ``(held, fold)`` of the pattern (as
        :meth:`.evaluate.Reader.folder`), its slices' dict bound: ``held`` the dict's own ``get`` (a kept slice
        read with no Python frame), ``fold`` a slice's fold read and kept.  Valid until the memo is next cleared
        or advanced (one batch's ``changes()``)."""
        slices = self._folds.get((name, at))
        if slices is None:
            slices = self._folds[(name, at)] = {}
        get = slices.get

        def fold(pattern: tuple) -> Fold:
            found = get(pattern)
            if found is None:
                found = fold_of(values(name, pattern, at))
                if found[0]:  # (an empty slice is not kept, as in get)
                    slices[pattern] = found
            return found
        return get, fold

    def advance(self, journals: dict[str, list], store, version: int,
                moved: Mapping[str, tuple[Sequence, Sequence]] | None = None) -> None:
        """After the batch that made ``version``: adjust every kept slice the batch changed an entry of (the
        journals: stored key, value before, ...; ``store``: the maps now; ``moved``: per map, the values before
        and now of its journal's keys when each key is there once, as a native batch's are read from C)."""
        if not self.enabled or self.version == version:
            return
        if self.version != version - 1:  # a batch went by unseen
            self.clear(version)
            return
        self.version = None  # not exact until done (an exception leaves it cleared at the next batch)
        for (name, at), slices in self._folds.items():
            journal = journals.get(name)
            if journal and slices:
                wrap = store.arity[name] == 1  # (a stored key is the key tuple but at arity 1)
                _adjust(slices, crossed(journal, store, name, (moved or {}).get(name)), wrap, at)
        self.version = version


def crossed(journal: list, store, name: str, values: tuple[Sequence, Sequence] | None = None) -> list[tuple]:
    """``(stored key, now in)`` of each entry of map ``name`` the batch moved into its slices (``now in``: it
    became non-zero) or out of them (it became zero): the others' values are in their slices as before.
    ``values``: the values before and now of the journal's keys, each there once (a native batch's, from C: the
    transitions found by numpy, no lookup per key; never given for a journal cut after C wrote it, as a partition
    member's is: ``Runtime.drop_foreign``); otherwise each key's first old value and the store's now.

    >>> from array import array
    >>> crossed([(1, 2), 0, (1, 3), 4, (2, 2), 1], None, "m", (array("q", [0, 4, 1]), array("q", [5, 0, 1])))
    [((1, 2), True), ((1, 3), False)]
    """
    if values is not None:
        was, now = np.asarray(values[0]), np.asarray(values[1])
        at = np.flatnonzero((was != 0) != (now != 0)).tolist()
        keys, joined = journal[::2], (now != 0)
        return [(keys[i], bool(joined[i])) for i in at]
    get = store.getter(name)
    before = dict(zip(journal[-2::-2], journal[-1::-2]))  # a key's first old value: its value before the batch
    out = []
    for k, was in before.items():
        now = get(k, 0) != 0
        if (was != 0) != now:
            out.append((k, now))
    return out


def _adjust(slices: dict[tuple, Fold], moved: list[tuple], wrap: bool, at: int) -> None:
    """Apply one map's entries :func:`crossed` found to its kept slices at unbound position ``at``: the values
    that joined a slice first, then those that left it (a value that leaves is an extreme only of the slice with
    the joins in)."""
    left = []
    for k, joined in moved:
        key = (k,) if wrap else k
        pattern = key[:at] + (None,) + key[at + 1:]
        fold = slices.get(pattern)
        if fold is None:
            continue
        if not joined:
            left.append((pattern, key[at]))
            continue
        x = key[at]
        n, lo, hi = fold
        slices[pattern] = (n + 1, least2(lo, x), greatest2(hi, x))
    for pattern, x in left:
        fold = slices.get(pattern)
        if fold is None:
            continue
        n, lo, hi = fold
        if n == 1 or x == lo or x == hi or x != x:  # emptied, or an extreme (a NaN) left: read again when asked
            del slices[pattern]
        else:
            slices[pattern] = (n - 1, lo, hi)
