"""The view rows a batch changed, found from the batch's journals: what ``Runtime.changes()`` returns.

Why apart from the runtime: which rows changed, and their values before and
after, is a question about views and journals alone, answered the same way
for both backends (the Python backend's journals, or the C side's read back
by :func:`.native.mirror.last_changes`).  A journal is a flat list
``stored key, old value, stored key, old value, ...`` per map, newest last,
so a key's *first* old value (the one read newest first) is its value
before the batch.

* A *plain* view (maps and AVG quotients read at its keys, positionally)
  lists every key some map of it changed at, with its current value
  (:func:`plain_changes`; 0 or a tuple of 0s: the row left).
* A *general* view (computed when read, :mod:`.views`) evaluates each row a
  changed key names after the batch, takes its value before from the memo
  of the rows after the previous batch (:mod:`.rowmemo`) or, where the memo
  does not have it, evaluates it before the batch too (through
  :class:`OldReader`: the current maps with the journals' first old values
  over them), and lists the rows whose presence or value differ
  (:func:`general_changes`).

>>> first_values(["k", 1, "j", 0, "k", 5])
{'k': 1, 'j': 0}
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter

from ..nullable import GONE, ViewNulls
from .entryviews import entry_changes, entry_map, row_key
from .evaluate import Reader
from .maps import MapStore
from .rowmemo import RowMemo
from .slicecounts import SliceCounts
from .slices import but, key_getter, slice_count, slice_counter, slice_values
from .foldsums import FoldSums
from .slicefolds import SliceFolds
from .views import ViewForm, candidate_rows, same


def first_values(journal: list) -> dict:
    """Stored key -> its value before the batch (its first old value), from one map's journal."""
    return dict(zip(journal[-2::-2], journal[-1::-2]))


def plain_value(store: MapStore, v, key):
    """A plain view's value at ``key`` (stored form; a plain view's maps share their keys)."""
    get = store.get_stored
    vals = []
    for c in v.columns:
        num = get(c.numerator, key)
        if c.denominator is None:
            vals.append(num)
        else:
            den = get(c.denominator, key)
            vals.append(num / den if den else 0)
    return vals[0] if len(vals) == 1 else tuple(vals)


def plain_changes(store: MapStore, v, journals: dict[str, list]) -> list[tuple[tuple, object]]:
    """A plain view's rows whose maps the batch changed (a key written back to its old value is not listed)."""
    keys: dict = {}
    for m in v.maps:
        j = journals[m]
        if not j:
            continue
        before = first_values(j)
        get = store.getter(m)
        for k in dict.fromkeys(j[::2]):  # in the order the batch first wrote them
            if get(k, 0) != before[k]:
                keys[k] = None
    unpack = store.unpack
    return [(unpack(v.maps[0], k), plain_value(store, v, k)) for k in keys]


def view_changes(views, forms: dict[str, ViewForm], rereads: set[str], nulls: dict, store: MapStore, memo,
                 journals: dict[str, list], version: int, plain, rows_memo: RowMemo | None = None,
                 folds: SliceFolds | None = None, counts: SliceCounts | None = None,
                 sums: FoldSums | None = None, moved: dict[str, tuple] | None = None) -> dict[str, list]:
    """``Runtime.changes()``: the rows of ``views`` the batch that made ``version`` changed, from its journals
    (``plain(view)``: a plain view's, as the backend reads them; ``forms``: the general views'; ``nulls``: the
    views whose keys read NULLs); the TOTAL memo (:mod:`.totals`) advanced to ``version`` first; ``rows_memo``:
    the general views' rows after the previous batch (:mod:`.rowmemo`), advanced to ``version``; ``folds``: the
    slices' folds (:mod:`.slicefolds`), advanced to ``version`` and read by the rows' evaluation after it;
    ``counts``: the counts of the maps read only as counts (:mod:`.slicecounts`), read where exact at ``version``
    (a native runtime's: it keeps no mirror of those maps); ``sums``: the sums of folds (:mod:`.foldsums`),
    advanced to ``version`` (their groups' terms read after the batch) and read by the rows' evaluation after it;
    ``moved``: the journals' values before and now where each key is there once (a native batch's, read from C)."""
    memo.advance(journals, store, version)
    if folds is not None:
        folds.advance(journals, store, version, moved)
    counted = counts if counts is not None and counts.exact(version) else None
    now = current_reader(store, memo.at(version), folds if folds is not None and folds.exact(version) else None,
                         counted)
    if sums is not None:
        sums.advance(journals, store, version, now.fold)
        now.sums = sums if sums.exact(version) else None
    if rows_memo is not None:
        rows_memo.start(version)
    changes = Changes()
    for v in views:
        form = forms.get(v.name)
        shown = nulls.get(v.name)
        always = v.always and v.where is None  # (its one row never leaves: no GONE)
        gone = GONE if marked_zeros(v, shown) and not always else None  # (a row may read all zeros: GONE = left)
        olds = {} if form is not None and shown is None and not v.always else None  # (:func:`tells_before`'s views)
        rows = plain(v) if form is None else general_changes(form, journals, store, now, v.name in rereads,
                                                             memo.previous if memo.plans else None, rows_memo,
                                                             counted, gone, olds)
        if olds is not None:
            changes.before[v.name] = olds
        if rows:  # (a general view's rows that left are GONE already: the others are in it, all zero or not)
            # (an ALWAYS view without WHERE never loses its one row: its NULLs are shown also where all is 0)
            changes[v.name] = shown.rows(rows, present=form is not None or always) if shown else rows
    if rows_memo is not None:
        rows_memo.done(version)
    return changes


def marked_zeros(view, shown: ViewNulls | None) -> bool:
    """Whether a view's changes tell a row that left by GONE, not by 0: a row of it may read all zeros (hidden
    columns, :class:`..nullable.ViewNulls`, or an ``ALWAYS`` view with a WHERE, whose rows are there while the
    WHERE holds, a COUNT(*) of 0 over no rows included: a keyless INTERSECT, a keyless UNION)."""
    return (shown is not None and shown.hidden) or (view.always and view.where is not None)


class Changes(dict):
    """``Runtime.changes()``: ``{view: [(key, value now)]}``, and in :attr:`before`, for each view
    :func:`tells_before` names, ``{key: value before the batch}`` of its listed rows that were in it then: a
    changelog's ``-old`` without a second memo of the view's rows (node/operators/m3box.py)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.before: dict[str, dict[tuple, object]] = {}


def tells_before(view) -> bool:
    """Whether ``changes()`` tells the values before the batch of a view's changed rows (:class:`Changes`): a
    general view (its rows evaluated before and after, or read from its one map's journal) whose keys and
    values hold no NULL (whose changes are told as they are, not through :class:`..nullable.ViewNulls`) and
    whose row is not always there (``ALWAYS``)."""
    return bool(view.general and not view.always
                and not ViewNulls.of(view.keys, view.internal, [c.name for c in view.columns]))


class StoreReader(Reader):
    """The maps as they are now (``totals``: the hook of a memo of TOTALs, :mod:`.totals`; ``folds``: the
    memo of slices' folds, exact at the maps' version, :mod:`.slicefolds`)."""

    def __init__(self, store: MapStore, totals=None, folds: SliceFolds | None = None,
                 counts: SliceCounts | None = None):
        super().__init__(self._get, store.match, totals)
        self.store, self._folds = store, folds
        self.sums: FoldSums | None = None  # the memo of sums of folds, where exact at the maps' version
        self._kept_counts = {name: counts.slices(name) for name in counts.counted} \
            if counts is not None else {}
        self._counters: dict[tuple[str, int, int], Callable[[tuple], int]] = {}
        self._getters: dict[str, Callable[[tuple, object], object]] = {}

    def _get(self, name: str, key: tuple):
        """``get(map, key tuple)``: the map's entry by a getter made once per map for the reader's life (a row's
        evaluation reads it per map reference and row: no key packing, no index lookup by name per call)."""
        get = self._getters.get(name)
        if get is None:
            get = self._getters[name] = key_getter(self.store, name)
        return get(key, 0)

    def has(self, name: str, pattern: tuple) -> bool:
        return self.store.has(name, pattern)

    def values(self, name: str, pattern: tuple, at: int) -> list:
        return slice_values(self.store, name, pattern, at)

    def count(self, name: str, pattern: tuple, at: int) -> int:
        """A COUNT fold (``COUNT(DISTINCT x)``): the index serving the slice found once per map and position for
        the reader's life (one batch's rows), then each row's count is one lookup (:func:`slice_counter`); a map
        kept as counts alone, from them (:mod:`.slicecounts`: its counts and the pattern's slice, no call more)."""
        kept = self._kept_counts.get(name)
        if kept is not None:
            return kept[0](kept[1](pattern), 0)
        counter = self._counters.get((name, at, len(pattern)))
        if counter is None:
            counter = self._counters[(name, at, len(pattern))] = slice_counter(self.store, name, len(pattern), at)
        return counter(pattern)

    def fold(self, name: str, pattern: tuple, at: int) -> tuple:
        if self._folds is None:
            return super().fold(name, pattern, at)
        return self._folds.get(name, pattern, at, self.values)

    def getter(self, name: str) -> Callable[[tuple, object], object]:
        """Map ``name``'s entry by ``(key, default)``, the store's dict bound (:func:`key_getter`)."""
        get = self._getters.get(name)
        if get is None:
            get = self._getters[name] = key_getter(self.store, name)
        return get

    def counter(self, name: str, at: int) -> Callable[[tuple, int], int]:
        """A COUNT fold of map ``name`` at ``at`` as one function of the slice's bound values (as
        :meth:`.Reader.counter`): a map kept as counts alone, its counts' ``get`` itself (they are kept by
        those values, :mod:`.slicecounts`); else the index's slice's size (:func:`slice_counter`)."""
        kept = self._kept_counts.get(name)
        if kept is not None:
            return kept[0]
        counter = slice_counter(self.store, name, self.store.arity[name], at)
        return lambda others, default: counter(others[:at] + (None,) + others[at:]) or default

    def folder(self, name: str, at: int) -> tuple[Callable[[tuple], tuple | None], Callable[[tuple], tuple]]:
        """A slice's fold of map ``name`` at ``at``: ``(held, fold)``, the memo's dict ``get`` of a pattern's fold
        (None where not held) and the read that computes and keeps it."""
        if self._folds is None:
            return super().folder(name, at)
        return self._folds.reader(name, at, self.values)

    def fold_sum(self, rows: str, fmap: str, pattern: tuple, spec) -> object:
        if self.sums is None:
            return super().fold_sum(rows, fmap, pattern, spec)
        return self.sums.get(spec, pattern, self.values, self.fold_term)



def current_reader(store: MapStore, totals=None, folds: SliceFolds | None = None,
                   counts: SliceCounts | None = None) -> Reader:
    """The maps as they are now (``totals``: the hook of a memo of TOTALs, :mod:`.totals`; ``folds``: of the
    slices' folds, :mod:`.slicefolds`; ``counts``: of the maps kept as counts alone, :mod:`.slicecounts`)."""
    return StoreReader(store, totals, folds, counts)


def general_changes(form: ViewForm, journals: dict[str, list], store: MapStore, now: Reader,
                    rereads: bool = False, old_totals=None, rows_memo: RowMemo | None = None,
                    counts: SliceCounts | None = None, gone=None, olds: dict | None = None) -> list[tuple[tuple, object]]:
    """The rows of a general view whose presence or value the batch changed, each with its value now.

    ``rereads``: the changed keys do not name the rows they affect (:func:`..over.rereads`), so every row
    before and after is evaluated.  ``old_totals``: the hook of a memo of TOTALs read before the batch
    (:meth:`.totals.TotalMemo.previous`).  ``rows_memo``: the rows after the previous batch
    (:mod:`.rowmemo`): a row's value before is read there where it has it, and its value now noted there.
    ``counts``: the maps kept as counts alone (:mod:`.slicecounts`), exact now.  ``gone``: the value told for a
    row that left (:data:`..nullable.GONE` in a view with NULL values, whose rows may read all zeros), else its
    value now (zero).  ``olds``: where given, each listed row that was in the view before the batch gets its value
    then there, by its output key (what the row memo or the maps before the batch said: :class:`Changes`).
    """
    entry = None if rereads else entry_map(form)
    if entry is not None:
        return entry_changes(form, entry, journals[entry], store, olds)
    rows: dict[tuple, None] = {}
    for ref in form.refs:  # the rows the batch's keys name (one C-level pass per map's journal)
        keys = journals[ref.map][::2]
        if keys:
            if store.arity[ref.map] == 1:
                keys = [(k,) for k in keys]
            rows.update(dict.fromkeys(map(ref.rows_of, keys)))
    if not rows:
        return []
    before = None  # the maps before the batch: made only for a row the row memo cannot answer for
    if rereads:
        before = old_reader(form, journals, store, old_totals, counts)
        rows = dict.fromkeys(candidate_rows(form, before.entries) + candidate_rows(form, now.entries))
    out = []
    zero, evaluate, key_of = form.zero, form.evaluate, row_key(form.out)
    evaluate_now = form.bind(now)  # the view's row function with the maps' accessors taken once (viewcode)
    held = rows_memo.held(form.name) if rows_memo is not None else None  # the memo's rows, read and noted inline
    known = held is not None and rows_memo.exact  # (as RowMemo.before and .after answer and note them)
    complete = known and rows_memo.complete
    for row in rows:
        if known and row in held:
            was_in, was = True, held[row]
        elif complete:
            was_in, was = False, zero
        else:
            if before is None:
                before = old_reader(form, journals, store, old_totals, counts)
            was_in, was = evaluate(row, before)
        now_in, new = evaluate_now(row)
        if held is not None:
            if now_in:
                held[row] = new
            elif was_in or not known:
                held.pop(row, None)
        if was_in != now_in or not (was == new or same(was, new)):
            out.append((key := key_of(row), new if now_in or gone is None else gone))
            if was_in and olds is not None:
                olds[key] = was
    return out


def old_reader(form: ViewForm, journals: dict[str, list], store: MapStore, old_totals=None,
               counts: SliceCounts | None = None) -> OldReader:
    """The maps a general view reads as they were before the batch (each changed map's first old values;
    ``counts``: the maps kept as counts alone, exact now, which know their counts before the batch)."""
    old = {ref.map: first_values(journals[ref.map]) for ref in form.refs if journals[ref.map]}
    return OldReader(store, old, old_totals, counts)


class OldReader(Reader):
    """The maps as they were before the batch: the current store with the journals' first old values over it."""

    def __init__(self, store: MapStore, old: dict[str, dict], totals=None, counts: SliceCounts | None = None):
        self.store, self.old, self.totals = store, old, totals
        self._counts = counts
        self._slices: dict[tuple[str, tuple[int, ...]], dict] = {}

    def get(self, name: str, key: tuple):
        changed = self.old.get(name)
        if changed:
            k = self.store.pack(name, key)
            if k in changed:
                return changed[k]
        return self.store.get(name, key)

    def has(self, name: str, pattern: tuple) -> bool:
        changed = self.old.get(name)
        if any(x is not None for x in pattern):
            over = self._overlay(name, pattern) if changed else None
            if not over:  # the batch changed no entry of this slice
                return self.store.has(name, pattern)
            return any(v for _, v in over) or bool(self.entries(name, pattern))
        if not changed:
            return self.store.size(name) > 0
        if any(changed.values()):  # an entry the batch changed was there before it
            return True
        get = self.store.getter(name)  # else: the entries now, less those the batch created
        return self.store.size(name) > sum(1 for k in changed if get(k, 0))

    def values(self, name: str, pattern: tuple, at: int) -> list:
        """The slice's values at ``at`` before the batch: those now, with the entries the batch changed in the
        slice put back as they were (no copy of the slice's entries; ``at`` is its one unbound position, so a
        value is one entry)."""
        over = self._overlay(name, pattern, but(len(pattern), at)) if self.old.get(name) else None
        if not over:
            return slice_values(self.store, name, pattern, at)
        found = dict.fromkeys(slice_values(self.store, name, pattern, at))  # (in the slice's order, as the read
        for key, v in over:                                                 # now: a float SUM adds them alike)
            if v:
                found[key[at]] = None
            else:
                found.pop(key[at], None)
        return list(found)

    def count(self, name: str, pattern: tuple, at: int) -> int:
        """The slice's count before the batch: the count now, less the entries the batch created in the slice,
        plus those it removed (a map kept as counts alone: its count less the batch's change of it)."""
        if self._counts is not None and name in self._counts.counted:
            return self._counts.before(name, pattern)
        n = slice_count(self.store, name, pattern, at)
        over = self._overlay(name, pattern, but(len(pattern), at)) if self.old.get(name) else None
        if over:
            get = self.store.get
            n += sum((v != 0) - (get(name, key) != 0) for key, v in over)
        return n

    def entries(self, name: str, pattern: tuple):
        over = self._overlay(name, pattern) if self.old.get(name) else None
        if not over:  # the batch changed no entry of this slice: it is as it is now
            return self.store.match(name, pattern)
        found = dict(self.store.match(name, pattern))
        for key, v in over:
            if v:
                found[key] = v
            else:
                found.pop(key, None)
        return found

    def _overlay(self, name: str, pattern: tuple, bound: tuple[int, ...] | None = None) -> list:
        """The entries of ``name`` matching ``pattern`` the batch changed, as ``(key, value before)`` (``bound``:
        the pattern's bound positions, when the caller knows them)."""
        if bound is None:
            bound = tuple(i for i, x in enumerate(pattern) if x is not None)
        found = self._slices.get((name, bound))
        if found is None:  # the changed keys of this map, by their values at the bound positions (built once)
            by_bound: dict = {}
            unpack = self.store.unpack
            part = itemgetter(*bound) if len(bound) > 1 else (lambda key: (key[bound[0]],)) if bound else \
                (lambda key: ())
            for k, v in self.old[name].items():
                key = unpack(name, k)
                by_bound.setdefault(part(key), []).append((key, v))
            found = self._slices[(name, bound)] = (by_bound, part)
        by_bound, part = found
        return by_bound.get(part(pattern), [])
