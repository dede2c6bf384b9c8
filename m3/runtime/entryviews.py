"""A view of rows -- one map's keys its rows, the map's entry its one value -- whose changes are its map's.

Why apart from :mod:`.viewchanges`: a join's ``SELECT`` without aggregates
compiles to a view whose rows are the keys of its ``count`` map (a general
view where an output column repeats a row variable, Nexmark q9's
``A.id``/``B.auction``); :func:`.viewchanges.general_changes` would evaluate
each changed row's function after the batch and read its value before from
the row memo (which then holds every row of the view).  But such a row's
value is its map's entry: the rows a batch changed are the entries it
changed, their values before the journal's first old values, as for a plain
view; nothing is evaluated and nothing memoised.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter

from ..ast import MapRef, Var
from .maps import MapStore
from .views import ViewForm, same


def entry_map(form: ViewForm) -> str | None:
    """The map whose keys are a view's rows and whose entry is its one value (a view of rows, as a join's
    ``SELECT`` without aggregates compiles to: its ``count`` map), else None.  Such a view's rows a batch changed
    are the map's entries it changed, its value before the entry's first old value: no row is evaluated.

    >>> from ..syntax import parse_program
    >>> from .views import view_form
    >>> p = parse_program('''DECLARE MAP c[A: INT, B: INT] : INT;
    ... DECLARE VIEW v[a := A, b := B, a2 := A](count := c[A, B]); DECLARE VIEW w[a := A](count := c[A, 1]);''')
    >>> [entry_map(view_form(p, v)) for v in p.views]
    ['c', None]
    """
    if len(form.refs) != 1 or len(form.columns) != 1 or form.where is not None or form.source is not None:
        return None
    ref, (_, e) = form.refs[0], form.columns[0]
    rows = tuple(range(len(form.vars)))
    if not (rows and isinstance(e, MapRef) and e.name == ref.map and ref.slots == rows and form.outer in ((), (ref,))
            and tuple(a.name if isinstance(a, Var) else None for a in e.args) == form.vars):
        return None
    return ref.map


def entry_changes(form: ViewForm, name: str, journal: list, store: MapStore,
                  olds: dict | None = None) -> list[tuple[tuple, object]]:
    """:func:`.viewchanges.general_changes` of a view :func:`entry_map` names map ``name`` for: every key the
    batch wrote (in the order it first wrote them) whose entry changed, with its value now (0: the row left; a
    row holding a NULL is in no view); ``olds``: where given, each of those rows that was in the view gets its
    value before the batch there (by its output key)."""
    if not journal:
        return []
    before = dict(zip(journal[-2::-2], journal[-1::-2]))  # a key's first old value: its value before the batch
    get, key_of = store.getter(name), row_key(form.out)
    wrap = store.arity[name] == 1
    out = []
    for k in dict.fromkeys(journal[::2]):
        was, now = before[k], get(k, 0)
        if (was != 0) == (now != 0) and (was == now or same(was, now)):
            continue
        row = (k,) if wrap else k
        if None not in row:
            out.append((key := key_of(row), now))
            if olds is not None and was != 0:
                olds[key] = was
    return out


def row_key(out: tuple[int, ...]) -> Callable[[tuple], tuple]:
    """A view's output key of a row (``out``: the row variable of each key column), as a function made once
    per batch: an ``itemgetter`` of the row for two columns or more.

    >>> row_key((2, 0))(("a", "b", "c")), row_key((1,))(("a", "b")), row_key(())(("a",))
    (('c', 'a'), ('b',), ())
    """
    if len(out) == 1:
        only = out[0]
        return lambda row: (row[only],)
    return itemgetter(*out) if out else (lambda row: ())
