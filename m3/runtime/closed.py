"""The rows of closed event-time windows (node/operators/m3windows.py), composed from their maps' values.

Why apart from :class:`.program.Runtime`: a closed window's rows are read at
keys the caller names, from whichever backend holds the maps; composing the
view's columns (a quotient column's division) from those values needs the
view alone, not the runtime's state.  A view computed when read (a MAX, a
HAVING) is evaluated over its maps' closed entries alone, copied into a
store of their own, when every map it reads is keyed by the row's window
(:func:`window_bound`): so closing a window never brings the whole mirror
of the native backend up to date (docs/m3.md, "Event time").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter

import numpy as np

from ..ast import MapRef, Var, ViewDecl
from .maps import MapStore
from .viewchanges import current_reader
from .views import Ref, ViewForm, candidate_rows, row_value


def view_maps(view: ViewDecl) -> set[str]:
    """The maps a plain view's columns read (numerators and denominators)."""
    return {c.numerator for c in view.columns} | {c.denominator for c in view.columns if c.denominator}


def plain_rows(view: ViewDecl, keys: Sequence[tuple], values: Mapping[str, Sequence]) -> list[tuple[tuple, object]]:
    """A plain view's rows at ``keys``, ``values[map][i]`` being each map's value at ``keys[i]`` (as the
    view reads them: one value, or a tuple of several; a quotient over 0 reads 0)."""
    if len(view.columns) == 1 and view.columns[0].denominator is None:  # one map's values, as they are
        return list(zip(keys, values[view.columns[0].numerator]))
    out = []
    for i, key in enumerate(keys):
        vals = []
        for c in view.columns:
            num = values[c.numerator][i]
            den = None if c.denominator is None else values[c.denominator][i]
            vals.append(num if den is None else (num / den if den else 0))
        out.append((key, vals[0] if len(vals) == 1 else tuple(vals)))
    return out


def window_bound(form: ViewForm, windows: Mapping[str, int]) -> bool:
    """Whether a view computed when read takes every value of a row from entries of that row's window: each
    map it reads is keyed by a window (``windows``: map -> its window key position) held by a row variable
    (not folded over, not a constant).  Then the rows of closed windows are a function of the closed
    entries alone (:func:`general_rows`).

    >>> from ..syntax import parse_program
    >>> from .views import view_form
    >>> p = parse_program('''DECLARE MAP mm[W: INT, P: INT] : INT; DECLARE MAP n[P: INT] : INT;
    ... DECLARE VIEW top[w := W](hi := MAX(P : mm[W, P])); DECLARE VIEW all[p := P](x := MAX(W : mm[W, P]));''')
    >>> [window_bound(view_form(p, v), {"mm": 0}) for v in p.views]
    [True, False]
    """
    if not all(ref.map in windows and ref.slots[windows[ref.map]] is not None for ref in form.refs):
        return False
    if form.source is None:
        return True
    if form.more:  # rows from several aggregates' entries (:func:`..over.lift_sources`): not window-bound here
        return False
    source = form.source.ref  # the aggregate whose entries give the rows (lifted row variables)
    at = windows.get(source.name)
    return at is not None and isinstance(arg := source.args[at], Var) and arg.name in form.vars


def general_rows(form: ViewForm, store: MapStore) -> dict[tuple, object]:
    """A view computed when read, evaluated over ``store``: its rows ``{key: value}`` (as ``Runtime.view``
    reads them, without the TOTAL memo: the store holds one closing's entries, read once)."""
    reader = current_reader(store)
    out = {}
    whole = whole_row_entries(form)
    if whole is not None:  # its entries are the rows
        key_of, row_of = form.key_of, whole.row_of
        return {key_of(row_of(key)): value for key, value in store.items(whole.map) if value and None not in key}
    direct = entry_columns(form)
    if direct is not None:  # each column one entry at the row: no expression evaluated per row
        for row in candidate_rows(form, reader.entries):
            values = [store.get(ref.map, ref.pattern(row)) for ref in direct]
            if None not in row and any(values):
                out[form.key_of(row)] = values[0] if len(values) == 1 else tuple(values)
        return out
    rows = _index_rows(form, store)
    for row in candidate_rows(form, reader.entries) if rows is None else rows:
        inside, found = row_value(form, row, reader)
        if inside:
            out[form.key_of(row)] = found
    return out


def _index_rows(form: ViewForm, store: MapStore) -> list[tuple] | None:
    """``candidate_rows`` of a view whose one map's primary index is on exactly the key positions that hold its
    row variables (q7's MAX per window: the map keyed by window and price, indexed by window): the index's
    bound parts, in its order, not a key built per entry; None for any other view.

    >>> from ..syntax import parse_program
    >>> from .views import view_form
    >>> p = parse_program("DECLARE MAP mm[W: INT, P: INT] : INT; DECLARE VIEW top[w := W](hi := MAX(P : mm[W, P]));")
    >>> s = MapStore(p, {"mm": [(0,)]}); fill(s, "mm", {(10, 3): 1, (10, 5): 2, (20, 1): 1})
    >>> form = view_form(p, p.views[0])
    >>> _index_rows(form, s), candidate_rows(form, current_reader(s).entries)
    ([(10,), (20,)], [(10,), (20,)])
    """
    refs = form.outer or form.refs
    if form.source is not None or len(refs) != 1:
        return None
    ref = refs[0]
    pos = store.primary.get(ref.map)
    held = tuple(j for j, slot in enumerate(ref.slots) if slot is not None)
    if pos is None or tuple(sorted(pos)) != held or sorted(ref.slots[j] for j in held) != list(range(len(form.vars))):
        return None
    slots = [ref.slots[j] for j in pos]
    rows = []
    for bound in store.data[ref.map]:
        row: list = [None] * len(form.vars)
        for slot, x in zip(slots, bound if len(pos) > 1 else (bound,)):
            row[slot] = x
        rows.append(tuple(row))
    return rows


def whole_row_entries(form: ViewForm) -> Ref | None:
    """The one map whose entries are the view's rows -- its one value column that map at the row, the map's key
    holding the whole row (q5's counts by auction and window) -- as :func:`entry_columns` gives it; else None.
    One test for :func:`general_rows` and closed_columns.py's reading of the same entries as columns."""
    direct = entry_columns(form)
    if direct is None or len(direct) != 1 or sorted(direct[0].slots) != list(range(len(form.vars))):
        return None
    return direct[0]


def entry_columns(form: ViewForm) -> list[Ref] | None:
    """The ref of each value column when each is one map entry at the row, those maps being what makes a row
    present, and there is no WHERE (a view computed when read only for its key: q5's counts keyed by window and
    an internal auction); else None."""
    if form.where is not None or form.source is not None:
        return None
    refs = []
    for _, e in form.columns:
        if not isinstance(e, MapRef) or not all(isinstance(a, Var) and a.name in form.vars for a in e.args):
            return None
        refs.append(Ref(e.name, tuple(form.vars.index(a.name) for a in e.args)))
    covered = {s for ref in refs for s in ref.slots}
    if covered != set(range(len(form.vars))) or set(form.outer or form.refs) != set(refs):
        return None
    return refs


@dataclass(frozen=True)
class Keep:
    """Which closed entries a reader needs: those whose INT key columns ``columns`` hold one of ``allowed``'s
    tuples (a window join's leaf rows that can meet a row of the other leaf: node/operators/m3winjoin.py).  On
    the native backend the test is made on the keys' codes before any key is decoded (an INT's code is its
    value), so the entries left out cost no tuple."""

    columns: tuple[int, ...]
    allowed: frozenset[tuple]

    def mask(self, table: np.ndarray) -> np.ndarray:
        """Which rows of an ``(n, arity)`` int64 table of key codes to keep: each column against its allowed
        values with numpy, then the few rows left checked as whole tuples.

        >>> Keep((0, 2), frozenset({(1, 5), (2, 6)})).mask(np.array([[1, 0, 5], [1, 0, 6], [3, 0, 5]]))
        array([ True, False, False])
        """
        mask = np.ones(len(table), dtype=bool)
        for j, c in enumerate(self.columns):
            mask &= np.isin(table[:, c], np.fromiter({t[j] for t in self.allowed}, dtype=np.int64))
        if len(self.columns) > 1 and mask.any():
            rows = np.flatnonzero(mask)
            mask[rows] = [tuple(r) in self.allowed for r in table[rows][:, list(self.columns)].tolist()]
        return mask

    def admits(self, key: tuple) -> bool:
        """Whether a decoded key is kept (the Python backend's test)."""
        return tuple(key[c] for c in self.columns) in self.allowed


def closed_entries(store: MapStore, native, name: str, position: int, bound: float,
                   keep: Keep | None = None) -> dict[tuple, object]:
    """``Runtime.entries_at_most``: on the native backend (``native``) read from C with one dump, else from
    ``store`` (then the truth); ``keep``: only the entries it keeps."""
    if native is not None:
        return native.items_at_most(name, position, bound, keep)
    return {key: value for key, value in store.items(name)
            if key[position] <= bound and (keep is None or keep.admits(key))}


def rows_at_keys(view: ViewDecl, store: MapStore, native, closed: Mapping[str, Mapping[tuple, object]]) -> list:
    """``Runtime.rows_at``: a plain view's rows at the keys ``closed`` holds, a map it lacks read at those keys
    (from C on the native backend, not through the mirror).  A view that is one map read as it is
    (``plain_map``) has the closed entries themselves as its rows: no pass per key."""
    if (only := view.plain_map) is not None and only in closed:
        return list(closed[only].items())
    keys = list(dict.fromkeys(key for name in view.maps for key in closed.get(name, ())))
    values = {}
    for name in view_maps(view):
        if name in closed:
            values[name] = list(map(closed[name].get, keys, [0] * len(keys)))
        elif native is not None:
            values[name] = native.get_many(name, keys)
        else:
            values[name] = [store.get(name, key) for key in keys]
    return plain_rows(view, keys, values)


def remove_closed(store: MapStore, native, bounds: Mapping[str, tuple[int, float]]) -> int:
    """``Runtime.remove_at_most``: on the native backend by their codes in C, the mirror (``store``) dropping
    the ones it holds (a key it lags on is pending and reads 0 when it catches up); the number deleted."""
    gone = 0
    for name, (position, bound) in bounds.items():
        if store.data[name]:
            mirrored = [key for key, _ in store.items(name) if key[position] <= bound]
            for key in mirrored:
                store.set(name, key, 0)
            gone += len(mirrored) if native is None else 0
        if native is not None:
            gone += native.remove_at_most(name, position, bound)
    return gone


def closed_store(program, specs: dict, closed: Mapping[str, Mapping[tuple, object]], names) -> MapStore:
    """A store of its own holding the entries ``closed`` holds of maps ``names`` (``Runtime.closed_rows``)."""
    part = MapStore(program, specs)
    for name in names:
        if entries := closed.get(name):
            fill(part, name, entries)
    return part


def fill(store: MapStore, name: str, entries: Mapping[tuple, object]) -> None:
    """Put ``entries`` (distinct key tuples) into map ``name`` of ``store``, empty until now: what
    ``store.add_many`` does there (a 0 left out), without reading each key back first nor building its stored
    form apart from its index cuts (a closing copies every closed entry of a map a view computed when read
    reads: q7's prices per window).

    >>> from ..syntax import parse_program
    >>> p = parse_program("CREATE STREAM R(A INT, B INT); DECLARE MAP n[A: INT, B: INT] : INT;")
    >>> s = MapStore(p, {"n": [(1,), (0,)]}); fill(s, "n", {(1, 2): 5, (1, 3): 0, (2, 3): 1})
    >>> s.data["n"], s.indexes["n"][(0,)]
    ({2: {1: 5}, 3: {2: 1}}, {1: {2: 5}, 2: {3: 1}})
    """
    arity = store.arity[name]
    present = [(key, value) for key, value in entries.items() if value]
    if store.primary[name] is None:
        store.data[name].update(((key[0], value) for key, value in present) if arity == 1 else present)
        return
    for pos, index in store.indexes[name].items():
        rest = [i for i in range(arity) if i not in pos]
        if not rest:  # (no index covers every position; were it to, add_many knows how)
            store.add_many(name, [(store.pack(name, key), value) for key, value in present])
            return
    for pos, index in store.indexes[name].items():
        bound, rest_of = itemgetter(*pos), itemgetter(*(i for i in range(arity) if i not in pos))
        for key, value in present:
            b = bound(key)
            if (sub := index.get(b)) is None:
                index[b] = {rest_of(key): value}
            else:
                sub[rest_of(key)] = value
