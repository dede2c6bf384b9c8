"""A closed window's MIN or MAX per row, folded by numpy over the native backend's dump of one map: no row built.

Why: a view computed when read that is one ``MIN`` or ``MAX`` of one map's
entries per row (Nexmark q7's highest price per window,
``MAX(P : m[W_END, W_START, P])``) was read at a closing as every other view
computed when read is (m3/runtime/closed.py): the map's closed entries decoded
into a dict, copied into a store of their own with its index
(:func:`.closed.fill`), then folded per row in Python -- one Python step per
closed entry, about a third of q7's CPU, to find one number per window.  The
map's dump already holds what the fold needs: an INT key column's code is its
value and an INT map's value bits are its value (how many rows hold that key),
so the fold is a numpy group-by over the codes.

Exact, or not used (:func:`closed_fold` answers None, the row path runs): the
view is that one fold and nothing else (no WHERE, no condition or tracking
maps on the fold, no lifted variables), the map's key is exactly the view's
row variables and the folded one, each once, every one of them INT, and the
map's values INT; the Python backend has no dump.  An entry whose value is 0
is absent, as the row path leaves it out; a row's value is the least or the
greatest folded value among its present entries, as :func:`.evaluate.value`
folds them.  The rows come in the order the row path gives them: by each row's
first present entry in the dump (:func:`.closed._index_rows` and
``candidate_rows`` read the copied store in that order).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ast import Var
from ..viewnodes import Fold
from .views import ViewForm


@dataclass(frozen=True)
class ClosedFold:
    """Where a view's MIN or MAX per row is in one map's dump: the map, ``kind``, the key position of each row
    variable (``rows``, in the view's row-variable order) and of the folded variable (``at``)."""

    map: str
    kind: str
    rows: tuple[int, ...]
    at: int

    def fold(self, keys: np.ndarray, values: np.ndarray) -> list[tuple[tuple, int]]:
        """``[(row, folded value)]`` from a dump's ``keys`` (``(n, arity)`` int64 codes) and ``values``, rows in
        the order of their first present entry.

        >>> f = ClosedFold("m", "MAX", (0,), 1)
        >>> f.fold(np.array([[20, 3], [10, 5], [20, 9], [10, 7], [20, 4]]), np.array([1, 2, 1, 0, 1]))
        [((20,), 9), ((10,), 5)]
        >>> ClosedFold("m", "MIN", (1, 0), 2).fold(np.array([[1, 2, 8], [1, 2, 6], [3, 2, 1]]), np.array([1, -1, 2]))
        [((2, 1), 6), ((2, 3), 1)]
        >>> ClosedFold("m", "MAX", (0,), 1).fold(np.empty((0, 2), np.int64), np.empty(0, np.int64))
        []
        """
        present = values != 0
        keys = keys[present]
        if not len(keys):
            return []
        groups = keys[:, list(self.rows)]
        order = np.lexsort(groups.T[::-1])  # (stable: a group's entries in dump order)
        ordered = groups[order]
        starts = np.flatnonzero(np.concatenate(([True], (ordered[1:] != ordered[:-1]).any(axis=1))))
        folded = keys[order, self.at]
        best = (np.maximum if self.kind == "MAX" else np.minimum).reduceat(folded, starts)
        first = order[starts]  # each group's first entry in the dump
        by_first = np.argsort(first, kind="stable")
        return list(zip(map(tuple, groups[first[by_first]].tolist()), best[by_first].tolist()))


def closed_fold(form: ViewForm, native) -> ClosedFold | None:
    """The view's fold as :class:`ClosedFold` reads it from ``native``'s dump (a ``NativeMaps``), or None where
    this module does not apply (module docstring)."""
    if native is None or form.where is not None or form.source is not None or form.lifted or len(form.columns) != 1 \
            or not form.vars:
        return None
    fold = form.columns[0][1]
    if not isinstance(fold, Fold) or fold.kind not in ("MIN", "MAX") or fold.cond is not None or fold.track:
        return None
    args = fold.ref.args
    if not all(isinstance(a, Var) for a in args) or len(form.refs) != 1 or form.refs[0].map != fold.ref.name:
        return None
    names = [a.name for a in args]
    if names.count(fold.var) != 1 or fold.var in form.vars or sorted(n for n in names if n != fold.var) != \
            sorted(form.vars) or len(set(form.vars)) != len(form.vars):
        return None
    name = fold.ref.name
    if name in native.codec.float_maps or any(t != "INT" for t in native.codec.key_types[name]):
        return None
    return ClosedFold(name, fold.kind, tuple(names.index(v) for v in form.vars), names.index(fold.var))


def fold_rows(form: ViewForm, native, bounds: dict[str, tuple[int, float]] | None) -> dict[tuple, int] | None:
    """``Runtime.closed_rows`` by numpy: the view's rows ``{key: value}`` over its map's entries at most
    ``bounds[map]`` (a closing's :meth:`.Closing.bounds`), read from C with the one dump the closing's removal
    of the same entries reuses; None where :func:`closed_fold` does not apply or no bound is given."""
    found = closed_fold(form, native)
    if found is None or bounds is None or found.map not in bounds:
        return None
    key_of = form.key_of
    return {key_of(row): value for row, value in found.fold(*native.columns_at_most(found.map, *bounds[found.map]))}
