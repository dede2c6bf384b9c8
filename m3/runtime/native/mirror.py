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
read from C (:func:`last_journals`); a plain view's current values come
straight from C (:func:`plain_changes`), so emitting changes needs no sync.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence

from ..maps import MapStore
from .codes import packed


def columns(rows: Sequence[Sequence], arity: int, relation: str) -> list:
    """Rows as columns, in one pass (rows of the wrong width are refused, not truncated).

    >>> columns([(1, "a"), (2, "b")], 2, "R")
    [(1, 2), ('a', 'b')]
    """
    if set(map(len, rows)) != {arity}:
        bad = next(r for r in rows if len(r) != arity)
        raise ValueError(f"relation {relation} has {arity} columns, got a row of {len(bad)}: {tuple(bad)!r}")
    return list(zip(*rows)) if arity else []


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
        keys = None if full else native.pending(name)
        if keys is None:
            store.data[name].clear()
            for idx in store.indexes[name].values():
                idx.clear()
            for k, v in native.dump(name):
                store.set(name, k, v)
            continue
        for k, v in zip(keys, native.get_many(name, keys)):
            store.set(name, k, v)
    native.clear_pending()


def push(store: MapStore, native) -> None:
    """After ``store`` was loaded (restore, load): make the C maps equal to it."""
    native.clear()
    for name in store.data:
        native.load(name, list(store.items(name)))
    native.clear_pending()


def last_journals(store: MapStore, native, names: Iterable[str]) -> dict[str, list]:
    """The last batch's journals of maps ``names`` as the Python backend keeps them: stored key, old value, ..."""
    journals: dict[str, list] = {name: [] for name in store.data}
    pack = store.pack
    for name in names:
        j = journals[name]
        for key, old in native.last(name):
            j.append(pack(name, key))
            j.append(old)
    return journals


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
