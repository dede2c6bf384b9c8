"""Reads of one map's slices through the store's indexes: a key's entry, a slice's values and its count.

Why apart: the readers of a general view's rows (:mod:`.viewchanges`: the maps now and before a batch) and
the memos of slices' folds read a map's slice at every position but one (a ``COUNT``, ``MIN``, ``MAX`` or
``SUM`` fold) as the index serving it keeps it, keyed by the values at ``at``: no key tuple is built per
entry.  Each function finds that index once per map and position.
"""

from __future__ import annotations

from collections.abc import Callable

from .maps import MapStore

def key_getter(store: MapStore, name: str) -> Callable[[tuple, object], object]:
    """``(key tuple, default) -> value`` (``default`` where absent) of map ``name``: :meth:`.MapStore.get`
    specialised for one map, valid for the store's life (a map's dict and its indexes are made once and changed
    in place).  The default is an argument so that a map of two or more keys without an index answers with its
    dict's own ``get`` (a one-key map unwraps the key in one lambda):
    a view's bound row function (:mod:`.viewcode`) calls it per row and map read, with no Python frame between.

    >>> from ..ast import Column, MapDecl, Program
    >>> decl = lambda n, k: MapDecl(n, tuple(Column(c, "INT") for c in k), "INT")
    >>> s = MapStore(Program((), (decl("one", "A"), decl("two", "AB"), decl("ix", "AB")), (), ()), {"ix": [(1,)]})
    >>> for m in ("one", "two", "ix"): s.set(m, (1,) if m == "one" else (1, 2), 7)
    >>> [key_getter(s, m)(k, 0) for m in ("one", "two", "ix") for k in ((1,) if m == "one" else (1, 2), (5,) * (
    ...     1 if m == "one" else 2))]
    [7, 0, 7, 0, 7, 0]
    """
    get = store.getter(name)
    if store.arity[name] == 1:
        return lambda key, default: get(key[0], default)
    return get  # (the stored key is the key tuple: the dict's get, or the indexed map's getter)


def slice_values(store: MapStore, name: str, pattern: tuple, at: int) -> list:
    """The values at ``at`` of map ``name``'s entries at ``pattern`` (bound but at ``at``), now."""
    sub = index_slice(store, name, pattern, at)
    return [k[at] for k, n in store.match(name, pattern) if n] if sub is None else list(sub)


def slice_count(store: MapStore, name: str, pattern: tuple, at: int) -> int:
    """How many entries of map ``name`` match ``pattern`` (bound but at ``at``), now."""
    sub = index_slice(store, name, pattern, at)
    return sum(1 for _, n in store.match(name, pattern) if n) if sub is None else len(sub)


def slice_counter(store: MapStore, name: str, arity: int, at: int) -> Callable[[tuple], int]:
    """:func:`slice_count` of map ``name`` at position ``at`` as a function of the pattern, the index that serves
    it found once: valid while the store's indexes stay the same dicts (one batch's ``changes()``; the mirror
    clears an index in place, never replaces it).

    >>> from ..ast import Column, MapDecl, Program
    >>> s = MapStore(Program((), (MapDecl("n", tuple(Column(c, "INT") for c in "AB"), "INT"),), (), ()),
    ...              {"n": [(0,)]})
    >>> s.add_many("n", [((1, 2), 5), ((1, 3), 1), ((2, 3), 1)])
    >>> count = slice_counter(s, "n", 2, 1); count((1, None)), count((2, None)), count((3, None))
    (2, 1, 0)
    """
    found = store.cuts[name].get(but(arity, at))
    if found is None or arity != store.arity[name]:
        return lambda pattern: slice_count(store, name, pattern, at)
    index, bound = store.indexes[name][found.pos], found.bound
    return lambda pattern: len(index.get(bound(pattern), _EMPTY))


def index_slice(store: MapStore, name: str, pattern: tuple, at: int) -> dict | None:
    """Map ``name``'s slice at ``pattern`` (bound at every position but ``at``, as a fold's compiled read gives
    it) as an index keeps it, its keys the values at ``at`` in their stored form (a map keeps non-zero entries
    only: :mod:`.maps`), so a fold over ``at`` lists or counts them without a key tuple built per entry; None
    where no index serves those positions.  Runs per fold per row: the index found once per map and position."""
    found = store.cuts[name].get(_BUT.get((len(pattern), at)) or but(len(pattern), at))
    if found is None or len(pattern) != store.arity[name]:
        return None
    return store.indexes[name][found.pos].get(found.bound(pattern), _EMPTY)


_BUT: dict[tuple[int, int], tuple[int, ...]] = {}  # (arity, position) -> every other position


def but(arity: int, at: int) -> tuple[int, ...]:
    """Every key position but ``at`` (made once per arity and position: a fold's reads run per row)."""
    bound = _BUT.get((arity, at))
    if bound is None:
        bound = _BUT[(arity, at)] = tuple(i for i in range(arity) if i != at)
    return bound
_EMPTY: dict = {}
