"""The Python side of a native runtime: the MapStore mirror kept in step lazily, and the batch's view changes.

Why a mirror: everything that reads maps — ``view()``, the query API,
``state()``, snapshots, views computed when read, Cumulus and metrics code —
is written against :class:`~boreas.m3.runtime.maps.MapStore`.  Rather than
a second implementation of each, the C maps are the truth and the mirror is
brought up to date only when something reads it (:func:`sync`): from the
keys the C side wrote since the last sync, or a whole map when that list
outgrew it.  A runtime nobody reads pays nothing for the mirror.

The view changes of a batch are computed as the Python backend computes
them, from each map's journal of the batch (first old value per key), here
read from C as the batch's changed keys (:func:`last_changes`); a plain
view's current values come straight from C (:func:`plain_changes`), so
emitting changes needs no sync.  Only the maps Python-side code reads per
batch (a general view's, evaluated in Python) are brought up to date then,
from the same changes in bulk; the others lag until something reads the
whole store.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from operator import itemgetter

from ..maps import MapStore
from ..slicecounts import SliceCounts
from .codes import packed
from .slicechanges import slice_changes


def columns(rows: Sequence[Sequence], arity: int, relation: str) -> list:
    """Rows as columns, in one pass (rows of the wrong width are refused, not truncated).

    >>> columns([(1, "a"), (2, "b")], 2, "R")
    [(1, 2), ('a', 'b')]
    """
    if set(map(len, rows)) != {arity}:
        bad = next(r for r in rows if len(r) != arity)
        raise ValueError(f"relation {relation} has {arity} columns, got a row of {len(bad)}: {tuple(bad)!r}")
    return list(zip(*rows)) if arity else []


def read_columns(rows: Sequence[Sequence], arity: int, relation: str, read: frozenset[int]) -> list:
    """:func:`columns` of the positions ``read`` only (what a native trigger reads,
    :meth:`.backend.NativeMaps.read_positions`), None at the others: a windowed box's held rows (q11's bids,
    their URLs and extras) are turned into the two or three columns the view reads, not into all of them.

    >>> read_columns([(1, "a", 2.0), (2, "b", 3.0)], 3, "R", frozenset({0, 2}))
    [[1, 2], None, [2.0, 3.0]]
    """
    if set(map(len, rows)) != {arity}:
        return columns(rows, arity, relation)  # (it says which row is wrong)
    return [list(map(itemgetter(i), rows)) if i in read else None for i in range(arity)]


def rows_of_columns(batches: Iterable, column_types: Mapping[str, tuple[str, ...]],
                    strings: list[str] | None) -> list[tuple[str, int, list]]:
    """Columnar batches ``(relation, sign, columns)`` as the Python backend's rows: an int64 ``array`` or
    ``memoryview`` (:func:`.codes.packed`) of a DATE column holds day numbers (as the C side takes it), of a
    STRING column ids of ``strings``, the intern table the C side had (None: there was none).

    >>> from array import array
    >>> rows_of_columns([("R", 1, [array("q", [730120]), ["x"]])], {"R": ("DATE", "STRING")}, None)
    [('R', 1, [(datetime.date(2000, 1, 1), 'x')])]
    >>> rows_of_columns([("R", -1, [memoryview(array("q", [730121])), memoryview(array("q", [0]))])],
    ...                 {"R": ("DATE", "STRING")}, ["y"])
    [('R', -1, [(datetime.date(2000, 1, 2), 'y')])]
    """
    out = []
    for rel, sign, cols in batches:
        cols = list(cols)
        for i, (col, t) in enumerate(zip(cols, column_types[rel])):
            if packed(col, "q"):
                if t == "DATE":
                    cols[i] = list(map(datetime.date.fromordinal, col))
                elif t == "STRING":
                    if strings is None:
                        raise TypeError(f"a STRING column of {rel} holds int64 ids, and there is no intern table")
                    cols[i] = list(map(strings.__getitem__, col))
        out.append((rel, sign, list(zip(*cols))))
    return out


def sync(store: MapStore, native, full: bool = False) -> None:
    """Bring ``store`` up to date with the C maps: the keys written since the last sync, or a whole map.

    ``full``: reload every map whole (the runtime leaving C for good: the store becomes the truth).
    """
    for name in store.data:
        _sync_map(store, native, name, full)
    native.clear_pending()


def _sync_map(store: MapStore, native, name: str, full: bool = False) -> None:
    """One map of :func:`sync` (its pending list left for the caller to clear)."""
    keys = None if full else native.pending(name)
    if keys is None:
        store.data[name].clear()
        for idx in store.indexes[name].values():
            idx.clear()
        store.add_many(name, [(store.pack(name, k), v) for k, v in native.dump(name)], replace=True)
        return
    if keys:
        store.add_many(name, list(zip(map(store.pack, [name] * len(keys), keys), native.get_many(name, keys))),
                       replace=True)


def last_changes(store: MapStore, native, names: Iterable[str], kept: Iterable[str],
                 counts: SliceCounts | None = None, version: int = 0,
                 values: dict[str, tuple[Sequence, Sequence]] | None = None) -> dict[str, list]:
    """The last batch's journals of maps ``names`` (one record per key it wrote: stored key, value before the
    batch), and the mirror of every map of ``kept`` (the maps Python-side code reads per batch:
    a general view's, a TOTAL memo's) brought up to date; the other maps keep lagging until :func:`sync`.

    A kept map whose pending keys are the batch's alone (its mirror was current before it) is set from the
    batch's changes, the values read from C with the keys, in bulk (:meth:`.MapStore.add_many`); one that
    lagged more catches up from its pending keys.  Either way its pending list is dropped.

    ``counts``: the maps read only as counts of their slices (:mod:`..slicecounts`), advanced to ``version``
    (the batch's) by the changes of their slices' counts (:func:`.slicechanges.slice_changes`); such a map's
    journal names one key of each slice whose count changed (its value there 0: no reader reads it).

    ``values``: filled with each journal's values before the batch and now, in its keys' order (each key once:
    :func:`..slicefolds.crossed` finds the entries that joined or left their slices from them, no lookup per key).
    """
    journals: dict[str, list] = {name: [] for name in store.data}
    kept = set(kept)
    counted = counts.counted if counts is not None else {}
    moved: dict[str, tuple] = {}
    for name, at in counted.items():  # a counted map's journal: one key per slice whose count changed
        keys, deltas = moved[name] = slice_changes(native, name, at)
        stored = [k[0] for k in keys] if store.arity[name] == 1 else keys
        j = journals[name] = [0] * (2 * len(stored))
        j[::2] = stored
    if counted:
        counts.advance(moved, version, native.dump)
    for name in (set(names) | kept) - set(counted):
        one_batch = name in kept and native.lags_one_batch(name)
        keys, olds, news = native.changed_entries(name)
        stored = [k[0] for k in keys] if store.arity[name] == 1 else keys
        j = journals[name] = [None] * (2 * len(stored))
        j[::2], j[1::2] = stored, olds
        if values is not None:
            values[name] = (olds, news)
        if name not in kept:
            continue
        if one_batch:
            store.add_many(name, list(zip(stored, news)), replace=True)
        else:
            _sync_map(store, native, name)
        native.drop_pending(name)
    return journals


def push(store: MapStore, native) -> None:
    """After ``store`` was loaded (restore, load): make the C maps equal to it."""
    native.clear()
    for name in store.data:
        native.load(name, list(store.items(name)))
    native.clear_pending()


def plain_changes(store: MapStore, native, view, journals: dict[str, list]) -> list[tuple[tuple, object]]:
    """A plain view's changed rows (as ``Runtime._finish`` finds them), values read from the C maps."""
    keys: dict = {}
    for m in view.maps:
        j = journals[m]
        if not j:
            continue
        before = dict(zip(j[-2::-2], j[-1::-2]))
        written = list(dict.fromkeys(j[::2]))
        now = native.get_many(m, [store.unpack(m, k) for k in written])
        for k, value in zip(written, now):
            if value != before[k]:
                keys[k] = None
    if not keys:
        return []
    tuples = [store.unpack(view.maps[0], k) for k in keys]
    current = {m: native.get_many(m, tuples) for m in view.maps}
    out = []
    for i, key in enumerate(tuples):
        vals = []
        for c in view.columns:
            num = current[c.numerator][i]
            if c.denominator is None:
                vals.append(num)
            else:
                den = current[c.denominator][i]
                vals.append(num / den if den else 0)
        out.append((key, vals[0] if len(vals) == 1 else tuple(vals)))
    return out
