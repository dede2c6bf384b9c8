"""The member role of a partitioned box's member: versions applied in one total order (docs/cumulus.md §3.5).

A mixin of :class:`~boreas.node.cumulus.part.PartOperator`; the state it
steps through (``at``, ``works``, ``closes``, ``pushes``, ``served``, the
waiting ``_plans``) is the operator's, created in its ``__init__`` and kept
in its ``state()``; this module holds the steps.  Every member applies
versions ``(epoch, coordinator, seq)`` in the same order: for a version it
first *serves* (pushes the entries its writers read from it, as of the
version's start), then, once every push it waits for is in, *writes*
(installs the pushed entries, runs the generated triggers, keeps what it
owns).  Coordinator ``c``'s versions of epoch ``e`` end with its
``Close(e)``; after the last coordinator's the member tells the leader
``Done(e)``.  A push for version ``v`` depends only on versions before
``v``, so the order cannot deadlock.
"""

from __future__ import annotations

import logging

from boreas.m3 import M3Error

from . import messages as msg

log = logging.getLogger(__name__)


class Applying:

    def _progress(self) -> None:
        while True:
            self._relayouts_step()
            e, c = self.at
            if not self.ordered:
                self._release_held()
            if self._gated(e):  # not begun here, or segments still moving in: not done either
                return
            queue = self.works.get((e, c))
            if queue:
                work = queue[0]
                if not self._step(work):
                    return
                queue.popleft()
                continue
            if (e, c) in self.closes:
                self.closes.discard((e, c))
                self.works.pop((e, c), None)
                if c + 1 < len(self.layout.members):  # (the layout of epoch e: a flip comes first)
                    self.at = [e, c + 1]
                else:
                    self._send(0, msg.done(e, self.member))
                    self.at = [e + 1, 0]
                continue
            return

    def _groups(self, work: list) -> list[tuple[str, int, list]]:
        port, rows = work[4], work[5]
        inserts, deletes, _ = self._split[port](rows)
        relation = self.plan.ports[port].relation
        return [g for g in ((relation, 1, inserts), (relation, -1, deletes)) if g[2]]

    def _step(self, work: list) -> bool:
        """Serve, then write one version; False while pushes it needs are missing."""
        v = msg.version(work)
        cached = self._plans.get(v)
        if cached is None:  # what this version needs is worked out once, however often it waits
            shares = [(relation, sign, self.roles.share(self.member, relation, sign, rows))
                      for relation, sign, rows in self._groups(work)]
            need: set[int] = set()
            for _, _, share in shares:
                need |= share.need
            cached = self._plans[v] = ([(rel, sign, share.mine) for rel, sign, share in shares if share.mine], need)
            if v not in self.served:
                self.served.add(v)
                self._serve(v, [share.serve for _, _, share in shares])
        mine, need = cached
        got = self.pushes.get(v, {})
        if not need <= got.keys():
            return False
        del self._plans[v]
        dec = self._decode_key
        pushed = {(name, dec(name, key)): value for src in need for name, key, value in got[src]}
        self.pushes.pop(v, None)
        self.served.discard(v)
        self._apply(work, mine, pushed)
        return True

    def _serve(self, v: tuple[int, int, int], asked: list[dict[int, list]]) -> None:
        """Push each writer the entries it reads from this member for version ``v`` (as of now: its start)."""
        read, enc = self.runtime.read, self._encode_key
        found: dict[tuple[str, tuple], list] = {}
        tables: dict[int, dict] = {}
        for serve in asked:
            for w, wanted in serve.items():
                table = tables.setdefault(w, {})
                for ask in wanted:
                    entries = found.get(ask)
                    if entries is None:
                        entries = found[ask] = read(*ask)
                    for key, value in entries:
                        table[(ask[0], key)] = value
        for w in sorted(tables):
            entries = [[name, enc(name, key), value] for (name, key), value in tables[w].items()]
            self._send(w, msg.push(*v, self.member, entries))

    def _write(self, work: list, pushed: dict, groups: list | None = None) -> None:
        """Apply the rows of ``work`` this member writes (Work of a plan that reads no map, as it arrives)."""
        groups = self._groups(work) if groups is None else groups
        self._apply(work, [(rel, sign, mine) for rel, sign, rows in groups
                           if (mine := self.roles.writes(self.member, rel, sign, rows))], pushed)

    def _apply(self, work: list, mine: list, pushed: dict) -> None:
        if not mine:
            return
        self.runtime.epoch = work[1]
        try:
            self.runtime.apply_with(mine, pushed)
        except (M3Error, ArithmeticError, TypeError, ValueError) as exc:  # rolled back by the runtime
            self.failed_batches += 1
            log.error("m3 box %r member %d: version %s was not applied: %s", self.box.name, self.member,
                      msg.version(work), exc)
            return
        for view, changed in self.runtime.changes().items():
            out = self._port_of_view.get(view)
            if out is not None and changed:
                self._emitted.append((out, self._emit[out](changed)))
