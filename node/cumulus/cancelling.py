"""Cancelling an announced layout change before its first epoch is fixed (docs/cumulus.md §6.1 step 3).

A mixin of :class:`~boreas.node.cumulus.part.PartOperator` beside
:mod:`~boreas.node.cumulus.relayouts`, whose state (``relayouts``,
``requested``, ``early``) it changes.  A client asks the leader (``Cancel``
with ``asked``); the leader cancels only the *last* change it announced
(later ones were decided from its layout) and only while that change's
first epoch E is not fixed (no ``Flip`` sent: every member still runs the
old layout and applies nothing differently).  It then sends ``Cancel`` to
every member, on the same ordered links as the ``Relayout``, so every
member drops the change after it heard of it and before any ``Flip`` that
could follow: a source stops copying (and noting dirty keys), a target drops
what it staged, and chunks still on their way from a source (another link)
are dropped when they come (``cancelled`` remembers the last changes
cancelled).  Nothing moved into any store, so nothing is undone there.
"""

from __future__ import annotations

import logging

from . import messages as msg

log = logging.getLogger(__name__)

#: Cancelled change ids remembered (a source's chunks may come after the Cancel: they are dropped).
CANCELLED_KEPT = 64


class Cancelling:

    def cancellable(self) -> str | None:
        """Leader: the change a cancel would drop now (the last announced, its first epoch not fixed); None."""
        last = self.relayouts[-1] if self.relayouts else None
        return last["change"] if self.leader is not None and last is not None and last["first"] is None else None

    def _cancel(self, m: list) -> None:
        change, asked = m[1], bool(m[2])
        if asked:  # a client's: the leader decides
            if self.leader is None:
                log.error("m3 box %r member %d: cancel of %s ignored (not the leader)", self.box.name, self.member,
                          change)
            elif self.cancellable() != change:
                log.warning("m3 box %r: change %s not cancelled: it is not the last announced, or its first "
                            "epoch is fixed", self.box.name, change)
            else:
                self._to_all(msg.cancel(change, False))
            return
        p = self.layout_change(change)
        self.cancelled = [*self.cancelled, change][-CANCELLED_KEPT:]
        self.early = [c for c in self.early if c[1] != change]
        if p is None:
            return
        if p["first"] is not None:  # cannot happen: the leader sends no Flip after a Cancel
            log.error("m3 box %r member %d: change %s has its first epoch; cancel ignored", self.box.name,
                      self.member, change)
            return
        if p["copy"] is not None and self.relayouts and self.relayouts[0] is p:
            self.runtime.on_write = None  # its copy stops noting dirty keys
        self.relayouts = [r for r in self.relayouts if r is not p]
        if self.leader is not None:
            self.requested = self.relayouts[-1]["layout"] if self.relayouts else None
        log.info("m3 box %r member %d: layout change %s cancelled", self.box.name, self.member, change)
