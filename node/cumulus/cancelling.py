"""Cancelling an announced layout change before its first epoch is fixed (docs/cumulus.md §6.1 step 3).

A client asks the leader (``Cancel`` with ``asked``); the leader cancels
only the *last* change it announced (later ones were decided from its
layout) and only while that change's first epoch E is not fixed (no
``Flip`` sent: every member still runs the old layout and applies nothing
differently).  It then sends ``Cancel`` to every member, on the same
ordered links as the ``Relayout``, so every member drops the change after it
heard of it and before any ``Flip`` that could follow: a source stops
copying (and noting dirty keys), a target drops what it staged, and chunks
still on their way from a source (another link) are dropped when they come.
Nothing moved into any store, so nothing is undone there.

The layout change (:meth:`LayoutChanges.cancel
<boreas.node.cumulus.relayouts.LayoutChanges.cancel>`) drops the change;
:class:`Cancelled` is what a member remembers of the changes it dropped, so
their late chunks and ``Copied`` are told from those of unknown changes.

>>> gone = Cancelled(kept=2)
>>> for change in ("a", "b", "c"):
...     gone.add(change)
>>> "a" in gone, "c" in gone, gone.state()
(False, True, ['b', 'c'])
"""

from __future__ import annotations

#: Cancelled change ids remembered (a source's chunks may come after the Cancel: they are dropped).
CANCELLED_KEPT = 64


class Cancelled:
    """The ids of the last ``kept`` changes this member cancelled, oldest first."""

    def __init__(self, kept: int = CANCELLED_KEPT):
        self.kept = kept
        self._ids: list[str] = []

    def add(self, change: str) -> None:
        self._ids = [*self._ids, change][-self.kept:]

    def __contains__(self, change: object) -> bool:
        return change in self._ids

    def state(self) -> list[str]:
        return list(self._ids)

    def restore(self, ids: list) -> None:
        self._ids = [str(c) for c in ids][-self.kept:]
