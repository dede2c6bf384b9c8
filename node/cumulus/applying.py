"""The member's applier: versions applied in one total order (docs/cumulus.md §3.5, §4.2).

:class:`Applier` owns where the member is in the version order (``at``),
what waits there (``works``, ``closes``, ``pushes``, ``served``, Work
``held`` until its epoch begins here), whether the end of the box's input
passed it (``ending``, node/cumulus/end_marks.py) and which epochs stable reads can
still ask for (``known_stable``, ``horizon``), with their part of the
member's ``state()``.  Every member applies versions ``(epoch,
coordinator, seq)`` in the same order: for a version it first *serves*
(pushes the entries its writers read from it, as of the version's start),
then, once every push it waits for is in, *writes* (installs the pushed
entries, runs the generated triggers, keeps what it owns).  Coordinator
``c``'s versions of epoch ``e`` end with its ``Close(e)``; after the last
coordinator's the member tells the leader ``Done(e)``.  A push for version
``v`` depends only on versions before ``v``, so the order cannot deadlock.

What a version's rows are and how they are written is the box's
(:class:`Writer`: the partition member's operator splits rows by sign and
emits view changes); the layout change says which epochs wait for segments
moving in (:meth:`LayoutChanges.moving_in
<boreas.node.cumulus.relayouts.LayoutChanges.moving_in>`).
"""

from __future__ import annotations

from collections import deque
from itertools import repeat
from typing import Protocol

from boreas.m3.runtime.native.install import Pushed
from boreas.wire.columns import Columns

from . import entry_columns
from . import messages as msg
from .coordinator import Coordinator
from .end_marks import PassedEnd
from .entry_install import entry_columns_of
from .mailbox import Mailbox
from .membership import MemberState
from .messages import KeyCodecs
from .relayouts import LayoutChanges

Groups = list[tuple[str, int, list]]  # (relation, sign, rows)


def _portable(work: list) -> list:
    """A Work as a state keeps it: columns a coordinator on this node handed over as they are become IPC bytes,
    as they would have come from another node."""
    rows = work[5]
    return [*work[:5], rows.ipc()] if isinstance(rows, Columns) else work
Version = tuple[int, int, int]  # (epoch, coordinator, seq)


class Writer(Protocol):
    """How the box splits a Work's rows and writes a version (the partition member's operator)."""

    def work_groups(self, port: int, rows: list) -> Groups:
        """The rows of in port ``port`` as ``(relation, sign, rows)`` in the runtime's form."""

    def write(self, version: Version, mine: Groups, pushed: dict | Pushed) -> None:
        """Apply ``mine`` (with the entries ``pushed`` by other members: a dict, or on a native member a
        :class:`Pushed` of column buffers, which the runtime's ``apply_with`` takes) as version ``version``; emit
        its changes."""

    def passed_close(self, coordinator: int, marks: list) -> None:
        """The order passed ``coordinator``'s Close, which carried a windowed box's watermarks ``marks`` (only a
        windowed box's Closes carry them: node/cumulus/windowing.py)."""


class Applier:
    """Member ``place.member``'s place in the version order; ``ordered``: the plan reads maps (else Work applies
    as it arrives, within its epoch)."""

    def __init__(self, place: MemberState, ordered: bool, mailbox: Mailbox, coordinator: Coordinator,
                 changes: LayoutChanges, writer: Writer, codecs: KeyCodecs):
        self.place, self.ordered, self.mailbox = place, ordered, mailbox
        self.coordinator, self.changes, self.writer = coordinator, changes, writer
        self.encode_key, self.decode_key = codecs  # map keys as messages and states carry them, and back
        self.at = [0, 0]  # epoch, coordinator whose versions it applies now (or whose Close it awaits)
        self.works: dict[tuple[int, int], deque] = {}
        self.closes: set[tuple[int, int]] = set()
        self.marks: dict[tuple[int, int], list] = {}  # a windowed box's Closes: their watermarks (event_marks.py)
        self.ends: dict[tuple[int, int], bool | None] = {}  # Closes: whether their producers all ended (end_marks.py)
        self.ending = PassedEnd()  # whether the end of the box's input passed here, in the order
        self.pushes: dict[Version, dict[int, list]] = {}
        self.served: set[Version] = set()
        self.held: list[list] = []  # Work this member may not apply yet (its epoch has not begun here)
        self.known_stable = -1  # the last stable epoch the leader announced
        self.horizon = -1  # deltas of epochs up to here are dropped: no stable read before its end
        self._plans: dict[Version, tuple[Groups, set[int]]] = {}  # waiting versions: groups, pushers (not state)

    # -- what arrives -------------------------------------------------------------------

    def work(self, m: list) -> None:
        if self.ordered:
            self.works.setdefault((m[1], m[2]), deque()).append(m)
        elif self.gated(m[1]):  # (a plan reading no map applies Work in any order, but within its epoch)
            self.held.append(m)
        else:
            self._write(m, {})

    def push(self, m: list) -> None:
        self.pushes.setdefault(msg.version(m), {})[m[4]] = m[5]

    def close(self, epoch: int, coordinator: int, marks: list | None = None, ended: bool | None = None,
              says_end: bool = False) -> None:
        """Coordinator ``coordinator``'s Close of ``epoch``; ``says_end``: it carries ``ended`` (a Close of a
        version before end marks does not)."""
        self.closes.add((epoch, coordinator))
        if marks is not None:
            self.marks[(epoch, coordinator)] = marks
        if says_end:
            self.ends[(epoch, coordinator)] = ended

    def start_at(self, epoch: int) -> None:
        """Begin the order at ``epoch`` (a joining member, at the first epoch of the change that adds it)."""
        self.at = [epoch, 0]

    def stable(self, epoch: int) -> int | None:
        """The leader announced stable epoch ``epoch``; the new horizon if it moved (reads of the stable epoch
        before it still work)."""
        if epoch <= self.known_stable:
            return None
        self.horizon = self.known_stable
        self.place.runtime.deltas.forget_through(self.horizon)
        self.known_stable = epoch
        return self.horizon

    # -- the order ----------------------------------------------------------------------

    def gated(self, epoch: int) -> bool:
        """Whether Work of ``epoch`` must wait: its epoch has not begun here (the Advance that starts it,
        and every layout change decided before it, has not arrived), or segments are still moving in."""
        return epoch > self.coordinator.epoch or self.changes.moving_in(epoch)

    def progress(self) -> None:
        """Apply what can be, in order (after every message)."""
        while True:
            self.changes.step(self.at[0], self.coordinator.epoch)
            e, c = self.at
            if not self.ordered:
                self._release_held()
            if self.gated(e):  # not begun here, or segments still moving in: not done either
                return
            queue = self.works.get((e, c))
            if queue:
                if not self._step(queue[0]):
                    return
                queue.popleft()
                continue
            if (e, c) in self.closes:
                self.closes.discard((e, c))
                self.works.pop((e, c), None)
                marks = self.marks.pop((e, c), None)
                if marks is not None:  # (every member passes it at the same point of the order)
                    self.writer.passed_close(c, marks)
                if (e, c) in self.ends:  # (the end passes at the same point of the order on every member)
                    before = self.ending.passed
                    if self.ending.heard(c, self.ends.pop((e, c)), self.place.members, e) and not before:
                        # the end must settle: the leader ends epochs until it announced ``e`` stable, even when
                        # no work was stamped in ``e`` (the Close of a coordinator that forgot a handed producer)
                        self.mailbox.send(0, msg.wake(e))
                if c + 1 < self.place.members:  # (the layout of epoch e: a flip comes first)
                    self.at = [e, c + 1]
                else:
                    self.mailbox.send(0, msg.done(e, self.place.member))
                    self.at = [e + 1, 0]
                continue
            return

    def _release_held(self) -> None:
        if self.held:
            ready = [w for w in self.held if not self.gated(w[1])]
            if ready:
                self.held = [w for w in self.held if self.gated(w[1])]
                for work in ready:
                    self._write(work, {})

    def _groups(self, work: list) -> Groups:
        return self.writer.work_groups(work[4], work[5])

    def _step(self, work: list) -> bool:
        """Serve, then write one version; False while pushes it needs are missing."""
        v = msg.version(work)
        cached = self._plans.get(v)
        roles, me = self.place.roles, self.place.member
        if cached is None:  # what this version needs is worked out once, however often it waits
            shares = [(relation, sign, roles.share(me, relation, sign, rows)) for relation, sign, rows in self._groups(work)]
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
        pushed = self._pushed([item for src in need for item in got[src]])
        self.pushes.pop(v, None)
        self.served.discard(v)
        if mine:
            self.writer.write(v, mine, pushed)
        return True

    def _pushed(self, items: list) -> dict | Pushed:
        """The entries of a version's Push items: ``{(map, key tuple): value}`` (Arrow columns per map decoded in
        bulk: node/cumulus/entry_columns.py); on a native member a :class:`Pushed` whose items the C maps can
        take as they are stay column buffers (node/cumulus/entry_install.py), installed by ``rt_import``."""
        runtime = self.place.runtime
        native = runtime.native_maps() if runtime.keeps_native else None
        entries: dict = {}
        columns = []
        dec = self.decode_key
        for item in items:
            if len(item) == 3:  # [map, key, value]: a Push kept in a state saved before Arrow Pushes
                entries[(item[0], dec(item[0], item[1]))] = item[2]
                continue
            if native is not None and (got := entry_columns_of(native, item)) is not None:
                columns.append(got)
                continue
            name, keys, values = entry_columns.decode_tuples(item)
            entries.update(zip(zip(repeat(name), keys), values))
        return Pushed(native, entries, columns) if columns else entries

    def _serve(self, v: Version, asked: list[dict[int, list]]) -> None:
        """Push each writer the entries it reads from this member for version ``v`` (as of now: its start)."""
        runtime = self.place.runtime
        # (arities from the program: a native member's store is a mirror, brought up to date when read)
        read, arity = runtime.read, {m.name: len(m.keys) for m in runtime.program.maps}
        bulk = runtime.keeps_native and runtime.native_maps() is not None  # point reads from C, in bulk
        found: dict[tuple[str, tuple], list] = {}
        tables: dict[int, dict[str, dict]] = {}  # writer -> map -> {key: value}
        points: dict[int, dict[str, dict]] = {}  # writer -> map -> {fully bound key: None} (bulk only)
        for serve in asked:
            for w, wanted in serve.items():
                table = tables.setdefault(w, {})
                for ask in wanted:
                    if bulk and len(ask[1]) == arity[ask[0]] and None not in ask[1]:
                        points.setdefault(w, {}).setdefault(ask[0], {})[tuple(ask[1])] = None
                        continue
                    entries = found.get(ask)
                    if entries is None:
                        entries = found[ask] = read(*ask)
                    if entries:
                        table.setdefault(ask[0], {}).update(entries)
        for w in sorted(tables.keys() | points.keys()):
            items = [entry_columns.encode_tuples(name, list(got), list(got.values()), arity[name])
                     for name, got in tables.get(w, {}).items() if got]
            for name, keys in points.get(w, {}).items():  # (node/cumulus/entry_columns.py: Arrow from C's buffers)
                if len(exported := runtime.exported_at(name, list(keys))):
                    items.append(entry_columns.encode_exported(exported))
            self.mailbox.send(w, msg.push(*v, self.place.member, items))

    def _write(self, work: list, pushed: dict) -> None:
        """Apply the rows of ``work`` this member writes (Work of a plan that reads no map, as it arrives)."""
        roles, me = self.place.roles, self.place.member
        mine = [(rel, sign, rows) for rel, sign, all_rows in self._groups(work)
                if (rows := roles.writes(me, rel, sign, all_rows))]
        if mine:
            self.writer.write(msg.version(work), mine, pushed)

    # -- what others ask ----------------------------------------------------------------

    @property
    def completed(self) -> int:
        """The last epoch this member applied completely."""
        return self.at[0] - 1

    def readable(self, epoch: int) -> bool:
        """Whether a stable read of ``epoch`` can be answered here (after the horizon, applied completely)."""
        return self.horizon < epoch <= self.completed

    def end_settled(self) -> bool:
        """Whether the end of the box's input passed every member of the partition (node/cumulus/end_marks.py)."""
        return self.ending.settled(self.known_stable)

    def backlog(self) -> int:
        """Versions and messages waiting here: while many wait, the coordinator takes no more input."""
        return sum(len(q) for q in self.works.values()) + len(self.held) + len(self.pushes)

    # -- state ------------------------------------------------------------------------

    def state(self) -> dict:
        enc, runtime = self.encode_key, self.place.runtime
        return {
            "at": list(self.at), "works": [[e, c, [_portable(w) for w in q]] for (e, c), q in self.works.items()],
            "closes": [list(x) for x in self.closes],
            "close_marks": [[e, c, marks] for (e, c), marks in self.marks.items()],
            "close_ends": [[e, c, ended] for (e, c), ended in self.ends.items()], "ending": self.ending.state(),
            "pushes": [[*v, [[src, entries] for src, entries in by.items()]] for v, by in self.pushes.items()],
            "served": [list(v) for v in self.served], "held": [_portable(w) for w in self.held],
            "known_stable": self.known_stable, "horizon": self.horizon,
            "deltas": runtime.deltas.state(lambda name, k: enc(name, runtime.store.unpack(name, k))),
        }

    def restore(self, state: dict) -> None:
        self.at = list(state.get("at", [0, 0]))
        self.works = {(e, c): deque(q) for e, c, q in state.get("works", [])}
        self.closes = {tuple(x) for x in state.get("closes", [])}
        self.marks = {(e, c): marks for e, c, marks in state.get("close_marks", [])}
        self.ends = {(e, c): ended for e, c, ended in state.get("close_ends", [])}
        self.ending.restore(state.get("ending"))
        self.pushes = {(e, c, s): {src: entries for src, entries in by} for e, c, s, by in state.get("pushes", [])}
        self.served = {tuple(v) for v in state.get("served", [])}
        self.held = [list(w) for w in state.get("held", [])]
        self.known_stable, self.horizon = int(state.get("known_stable", -1)), int(state.get("horizon", -1))
        self._plans = {}
        dec, pack = self.decode_key, self.place.runtime.store.pack
        self.place.runtime.deltas.restore(state.get("deltas", []), lambda name, k: pack(name, dec(name, k)))
