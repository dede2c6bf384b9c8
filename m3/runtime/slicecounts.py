"""The counts of a map's slices kept from each batch's 0 <-> non-zero transitions: a ``COUNT(DISTINCT x)``
read without a Python mirror of the map it counts.

Why: a general view's ``COUNT(DISTINCT x)`` is a ``COUNT`` fold over a
multiplicity map ``m[K..., x]`` (one entry per distinct ``x`` of a group,
its value how many rows carry it), read as the size of the index slice at
the group's keys (:func:`.slices.slice_counter`).  On the native
backend that index is the Python mirror's, so every entry a batch wrote in
``m`` -- one per row, nearly all of them a count going from 3 to 4 -- was
set in the mirror and its index (:meth:`.MapStore.add_many`) only for the
slice's size to be read: Nexmark q16's eight COUNT DISTINCTs cost about
1.4 µs per event there.  But a slice's count changes only when one of its
entries goes from 0 to non-zero or back, and the C journal of the batch
names every entry it wrote with its value before and now.  So for a map
that a general view reads *only* as such counts (:func:`.viewcode.count_reads`),
and nothing else reads per batch, the runtime keeps no mirror of it
(it lags until something reads the whole store, as a plain view's maps do)
and this memo keeps, per slice, its count, adjusted by those transitions.

It is derived data, exact at one runtime ``version`` (as
:class:`.slicefolds.SliceFolds`): :meth:`SliceCounts.advance` applies the
batch that made ``version`` when the memo is at ``version - 1``, and
otherwise counts the map whole from its entries now (a batch whose
changes nobody read; ``restore()``, ``load()`` and closed windows removed
call :meth:`clear`; a fresh runtime's maps are empty, so its counts are
exact at version 0).  Unlike the slices' folds it must hold *every*
slice (there is no mirror to read a missing one from).

>>> counts = SliceCounts({"m": 1})
>>> counts.advance({"m": ([("a", 1), ("b", 1)], [2, 1])}, 1, lambda name: [])
>>> counts.count("m", ("a", None)), counts.count("m", ("b", None)), counts.count("m", ("c", None))
(2, 1, 0)
>>> counts.advance({"m": ([("a", 1)], [-1])}, 2, lambda name: [])    # ("a", 1) went from 3 to 0
>>> counts.count("m", ("a", None)), counts.before("m", ("a", None)), counts.version
(1, 2, 2)
>>> counts.advance({}, 4, lambda name: [(("z", 5), 2)])          # batch 3 went by unseen: counted whole
>>> counts.count("m", ("a", None)), counts.count("m", ("z", None))
(0, 1)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from operator import itemgetter

from .viewcode import count_reads


def _part(arity: int, at: int) -> Callable[[tuple], tuple]:
    """A key's (or pattern's) positions but ``at``, as the tuple the counts are kept under."""
    bound = [i for i in range(arity) if i != at]
    if len(bound) == 1:
        one = bound[0]
        return lambda key: (key[one],)
    return itemgetter(*bound) if bound else (lambda key: ())


class SliceCounts:
    """Per counted map (``at``: its one unbound position), every non-empty slice's count of non-zero entries,
    exact at :attr:`version` (module docstring)."""

    def __init__(self, counted: Mapping[str, int], arity: Mapping[str, int] | None = None):
        """``counted``: map -> the position its COUNT folds leave unbound; ``arity``: each map's key arity
        (default: learnt from the first key seen)."""
        self.counted = dict(counted)
        self._arity = dict(arity or {})
        self._counts: dict[str, dict[tuple, int]] = {name: {} for name in self.counted}
        self._last: dict[str, dict[tuple, int]] = {name: {} for name in self.counted}  # the last batch's changes
        self._parts: dict[str, Callable[[tuple], tuple]] = {}
        self.version: int | None = 0  # a fresh runtime's maps are empty: every count 0

    def clear(self) -> None:
        """Forget the counts (the maps changed in a way the memo did not see): counted whole at the next batch."""
        self.version = None

    def exact(self, version: int) -> bool:
        return bool(self.counted) and self.version == version

    def _part_of(self, name: str, width: int) -> Callable[[tuple], tuple]:
        part = self._parts.get(name)
        if part is None:
            part = self._parts[name] = _part(self._arity.get(name, width), self.counted[name])
        return part

    def slices(self, name: str) -> tuple[Callable[[tuple, int], int], Callable[[tuple], tuple]]:
        """Map ``name``'s counts' ``get`` and the slice of a key or pattern: a reader's count is
        ``get(part(pattern), 0)`` (a map's counts are one dict for the memo's life, cleared in place)."""
        return self._counts[name].get, self._part_of(name, self._arity[name])

    def count(self, name: str, pattern: tuple) -> int:
        """The count of map ``name``'s non-zero entries at ``pattern`` (bound at every position but the counted
        one), now."""
        return self._counts[name].get(self._part_of(name, len(pattern))(pattern), 0)

    def before(self, name: str, pattern: tuple) -> int:
        """:meth:`count` before the batch the memo was last advanced by (its count now less that batch's change)."""
        s = self._part_of(name, len(pattern))(pattern)
        return self._counts[name].get(s, 0) - self._last[name].get(s, 0)

    def advance(self, changes: Mapping[str, tuple[list[tuple], list[int]]], version: int,
                entries: Callable[[str], Iterable[tuple[tuple, object]]]) -> None:
        """After the batch that made ``version``: ``changes[map]``, one key of each slice whose count the batch
        changed and that change (:func:`.native.slicechanges.slice_changes`); ``entries(map)``: its entries
        now, counted whole when the memo was not exact at ``version - 1``."""
        if self.version == version:
            return
        whole = self.version != version - 1
        self.version = None  # not exact until done (an exception leaves it to be counted whole next time)
        for name in self.counted:
            counts, last = self._counts[name], self._last[name]
            keys, deltas = changes.get(name, ((), ()))
            last.clear()
            if keys:  # (one C-level pass: each slice's part of its key, with its change)
                last.update(zip(map(self._part_of(name, len(keys[0])), keys), deltas))
            if whole:
                counts.clear()
                for key, v in entries(name):
                    if v:
                        part = self._part_of(name, len(key))
                        s = part(key)
                        counts[s] = counts.get(s, 0) + 1
                continue
            get = counts.get
            for s, d in last.items():
                n = get(s, 0) + d
                if n:
                    counts[s] = n
                else:
                    del counts[s]
        self.version = version


def counted_maps(program, forms: Mapping, rereads: set[str], totals_read: set[str]) -> dict[str, int]:
    """The maps a native runtime keeps as :class:`SliceCounts` and no mirror: INT maps read by one general view
    (not one whose rows are re-read whole), only as counts (:func:`.viewcode.count_reads`), by no other view and
    no ``TOTAL`` memo (``totals_read``: the maps those read)."""
    readers: dict[str, int] = {}
    ints = {m.name: m.value_type == "INT" for m in program.maps}
    for v in program.views:
        for m in v.maps:
            readers[m] = readers.get(m, 0) + 1
    found: dict[str, int] = {}
    for name, form in forms.items():
        if name in rereads:
            continue
        for m, at in count_reads(form).items():
            if readers.get(m) == 1 and m not in totals_read and sum(r.map == m for r in form.refs) == 1 \
                    and ints.get(m):
                found[m] = at
    return found
