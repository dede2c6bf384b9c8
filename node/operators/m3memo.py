"""What an ``m3`` box last emitted of each view row, so the row path can retract it: the ``-old`` of ``-old/+new``.

``Runtime.changes()`` tells a view's changed keys with their values *now*
(a value of 0, or all zeros, when the row left).  A changelog needs the
value the row had before too, so the retraction names the row it
retracts.  The native, plain-view path reads old values from the journals
(:mod:`.m3changes`); every other view (a general view, the Python backend)
asks this memo, which holds the view's rows as the box last emitted them -- but for a view whose changes
tell the values before the batch themselves (a general view without NULLs, ``ALWAYS`` or a float column:
:func:`told_changelog`): the runtime read them from its row memo, its map's journal or the maps before the
batch, so the box keeps no second copy of the view's rows.  Those values are what the box emitted because it
emits every batch's changes and a view of exact values evaluated again gives the same values (a float need
not: ``M3Operator._told``).

The rows are the views' contents, so the memo is filled from the runtime
before the first batch after the box is built or restored
(:meth:`ViewMemo.load`, :meth:`ViewMemo.forget`).  One thing the maps do not
say is carried with the box's state: which ``ALWAYS`` views' row a
subscriber got (:meth:`ViewMemo.state`, :meth:`ViewMemo.restore`), since
such a row is in the view before any batch, and emitted only with the first
batch that changes it.

>>> memo = ViewMemo(lambda view: {})
>>> memo.load(["V"])
>>> memo.revise("V", [((1,), 5)])
([((1,), 5)], [1])
>>> memo.revise("V", [((1,), 7)])
([((1,), 5), ((1,), 7)], [-1, 1])
>>> memo.revise("V", [((1,), 0)])
([((1,), 7)], [-1])

A view with NULL values says a row left by GONE (:data:`boreas.m3.nullable.GONE`): its NULL is retracted
when a value comes, and a row reading 0 stays:

>>> from boreas.m3.nullable import GONE
>>> memo = ViewMemo(lambda view: {}, {"N"})
>>> memo.load(["N"])
>>> memo.revise("N", [((1,), None)]), memo.revise("N", [((1,), 5)])
(([((1,), None)], [1]), ([((1,), None), ((1,), 5)], [-1, 1]))
>>> memo.revise("N", [((1,), 0)]), memo.revise("N", [((1,), GONE)])
(([((1,), 5), ((1,), 0)], [-1, 1]), ([((1,), 0)], [-1]))
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Any

from boreas.m3.nullable import GONE, hides, left


def present(value: Any) -> bool:
    """Whether a view value is a row of the view (the runtime's 0, or all zeros, or GONE, is a row that left)."""
    return not left(value, False)


def present_rows(rows: dict[tuple, Any], marked: bool) -> list[tuple[tuple, Any]]:
    """A view read's ``(key, value)`` pairs of rows in it: all of them in a view whose changes mark a row that
    left by GONE (``marked``: a row there may read all zeros, a SUM of 0), else those with a value not all 0."""
    return list(rows.items()) if marked else [(k, v) for k, v in rows.items() if present(v)]


def marked_views(views: Iterable) -> frozenset[str]:
    """The names of ``views`` (``m3.ast.ViewDecl``) whose ``changes()`` tell a row that left by GONE: those with
    NULL values or a hidden row count (:func:`boreas.m3.nullable.hides`) and ``ALWAYS`` views with a WHERE, whose
    rows may show all zeros (:func:`boreas.m3.runtime.viewchanges.marked_zeros`)."""
    return frozenset(v.name for v in views if hides([c.name for c in v.columns]) or (v.always and v.where is not None))


_ABSENT = object()  # (a key the memo does not hold: its value may be None, a NULL)


class ViewMemo:
    """Owns each view's rows as last emitted: ``{view: {key: value}}``, first read by ``read(view)``;
    ``marked``: the views whose changes tell a row that left by GONE (:func:`marked_views`).

    ``always``: the ``ALWAYS`` views, whose rows are there before any batch (sent with the first: :meth:`unsent`);
    one without WHERE (an aggregate without GROUP BY) never loses its row, so a value of all zeros (``COUNT(*)`` 0
    after the last delete) is its row, retracted and emitted as any; one with a WHERE (a keyless INTERSECT or
    UNION) is ``marked`` too, its row leaving by GONE alone:

    >>> memo = ViewMemo(lambda view: {(): 1}, always=frozenset({"N"}))
    >>> memo.restore(["N"])  # (a box restored after its row was emitted)
    >>> memo.load(["N"])
    >>> memo.revise("N", [((), 0)])
    ([((), 1), ((), 0)], [-1, 1])
    >>> memo.revise("N", [((), None)]), memo.revise("N", [((), 2)])
    (([((), 0), ((), None)], [-1, 1]), ([((), None), ((), 2)], [-1, 1]))
    >>> fresh = ViewMemo(lambda view: {(): 1}, always=frozenset({"N"}))
    >>> fresh.load(["N"])
    >>> fresh.revise("N", [((), 2)]), fresh.state()
    (([((), 2)], [1]), ['N'])
    >>> moved = ViewMemo(lambda view: {(): 1}, always=frozenset({"N"}))
    >>> moved.restore([])  # (its row was never emitted before the snapshot)
    >>> moved.load(["N"]); moved.revise("N", [((), 2)])
    ([((), 2)], [1])
    """

    def __init__(self, read: Callable[[str], dict[tuple, Any]], marked: Collection[str] = frozenset(),
                 always: frozenset[str] = frozenset()):
        self._read = read
        self._marked = marked
        self._always = always
        self._rows: dict[str, dict[tuple, Any]] = {}
        #: the ALWAYS views whose row was emitted (the others' row is in the view, but no subscriber has it)
        self._emitted: set[str] = set()

    @property
    def always(self) -> frozenset[str]:
        """The ``ALWAYS`` views (rows there before any batch)."""
        return self._always

    def forget(self) -> None:
        """The maps were replaced (a layout change): read every view again when it next changes."""
        self._rows.clear()

    def state(self) -> list[str]:
        """The ``ALWAYS`` views whose row was emitted: part of the box's state, as the maps are."""
        return sorted(self._emitted)

    def unsent(self) -> list[str]:
        """The ``ALWAYS`` views whose one row was never emitted: the box sends it with the next batch it applies
        even where the batch did not change it (a first batch of rows that leave ``MAX`` NULL), so a reader of
        the changelog holds the row SQL has."""
        return [view for view in self._always if view not in self._emitted]

    def restore(self, emitted: Iterable[str]) -> None:
        """The box's state was replaced (restore, move): its maps, and ``emitted``, what :meth:`state` said."""
        self._rows.clear()
        self._emitted = set(emitted) & self._always

    def load(self, views: list[str]) -> None:
        """Read the views not held yet (before a batch is applied: their rows are then the old ones); an ALWAYS
        view whose row was never emitted holds none (its first change is then ``+new`` alone, not the
        retraction of a row no subscriber got)."""
        for view in views:
            if view not in self._rows:
                always = view in self._always
                self._rows[view] = ({} if view not in self._emitted else dict(self._read(view))) if always \
                    else dict(present_rows(self._read(view), view in self._marked))

    def revise(self, view: str, changed: list[tuple[tuple, Any]]) -> tuple[list[tuple[tuple, Any]], list[int]]:
        """``(key, value)`` pairs and their weights for the changes of one batch: ``-old`` for a row that was
        there (its value None included: a NULL), ``+new`` for one that is; a key whose value did not change
        gives nothing."""
        rows = self._rows[view]
        marked, always = view in self._marked, view in self._always
        pairs: list[tuple[tuple, Any]] = []
        weights: list[int] = []
        for key, value in changed:
            old = rows.get(key, _ABSENT)  # (a view of one column holds None for its row's NULL: not absent)
            gone = (marked or not always) and left(value, marked)  # (an ALWAYS view with WHERE: marked, may leave)
            if old is not _ABSENT and not gone and old == value:
                continue
            if old is not _ABSENT:
                pairs.append((key, old))
                weights.append(-1)
            if gone:
                rows.pop(key, None)
            else:
                pairs.append((key, value))
                weights.append(1)
                rows[key] = value
                if always:
                    self._emitted.add(view)
        return pairs, weights


def told_changelog(changed: list[tuple[tuple, Any]], before: dict[tuple, Any]) -> tuple[list[tuple[tuple, Any]],
                                                                                     list[int]]:
    """:meth:`ViewMemo.revise`'s answer for a view whose changes tell each changed row's value before the batch
    (``before``: ``Runtime.changes().before[view]``, :func:`boreas.m3.runtime.viewchanges.tells_before`), with
    no memo of the view's rows: the rows before the batch are the view's rows the box last emitted (it emits
    every batch's changes), so the retraction is that value where the row was there (a row of all zeros is
    none, as the memo never holds one); the insertion, the value now where the row is there.

    >>> told_changelog([((1,), 7), ((2,), 3), ((3,), 0)], {(1,): 5, (3,): 4})
    ([((1,), 5), ((1,), 7), ((2,), 3), ((3,), 4)], [-1, 1, 1, -1])
    """
    pairs: list[tuple[tuple, Any]] = []
    weights: list[int] = []
    get = before.get
    for key, value in changed:  # (present and left inlined: this runs per changed row and batch)
        old = get(key, _ABSENT)
        held = old is not _ABSENT and old is not GONE and (any(old) if isinstance(old, tuple) else old != 0)
        gone = value is GONE or (not any(value) if isinstance(value, tuple) else value == 0)
        if held and not gone and old == value:
            continue
        if held:
            pairs.append((key, old))
            weights.append(-1)
        if not gone:
            pairs.append((key, value))
            weights.append(1)
    return pairs, weights
