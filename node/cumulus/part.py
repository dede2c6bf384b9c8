"""One member of a partitioned ``m3`` box on this node (docs/cumulus.md §3.5, §3.8).

A box partitioned over *n* nodes runs as *n* :class:`PartOperator`\\s, one
per member, each holding the entries of the segments its member owns.  Every
member plays three roles:

* **coordinator** of the batches its publishers send it (a publisher picks
  one member per producer): each batch becomes a *version* ``(epoch,
  coordinator, seq)`` and goes, as ``Work``, to the members that write or
  serve it (:class:`~boreas.m3.cumulus.roles.Roles`) -- only the rows each
  needs (:mod:`~boreas.node.cumulus.coordinator`);
* **member**: applies versions in one total order, ``(epoch, coordinator,
  seq)``, the same on every member.  For a version it first *serves*
  (pushes the entries its writers read from it, as of the version's start),
  then, once every push it waits for is in, *writes* (installs the pushed
  entries, runs the generated triggers, keeps what it owns).  A coordinator
  ``c``'s versions of epoch ``e`` end with its ``Close(e)``, so a member
  knows when to go on to coordinator ``c + 1``;
* **leader** (member 0, :class:`~boreas.node.cumulus.leader.Leader`): ends
  epochs.  While coordinators stamp work (``Wake``), it sends ``Advance(e +
  1)`` every ``epoch-ms``; each coordinator answers with ``Close(e)`` to
  every member, members with ``Done(e)`` once they applied all of ``e``.
  An epoch every member is done with is *stable*: READ_STABLE reads every
  member's maps at its end (:meth:`at_epoch`, through the deltas each member
  keeps for the last few epochs).

Deadlock-free: every member follows the same order, and a push for version
``v`` depends only on versions before ``v``.  A plan whose statements read
no map at all (a single relation's ``GROUP BY`` sums) needs no order: what a
version adds does not depend on what was applied before it, so its Work is
applied as it arrives, and an epoch's deltas are the same in any order;
epochs still end, for stable reads.  A statement that reads a map, even a
co-located one (a join on the partition key), makes a version's change
depend on the versions before it: applied out of epoch order, a late Work of
epoch ``e`` would record, as ``e``'s delta, a change computed from a later
epoch's state, and READ_STABLE of ``e`` would be wrong.  Layout changes
(moves, splits, rebalances while events flow) are
:mod:`~boreas.node.cumulus.relayouts`' and
:mod:`~boreas.node.cumulus.precopy`'s.

The operator does no I/O: messages to other members leave on out ports that
the dataflow sends on the internal streams ``{box}@{member}``
(:meth:`internal_streams`); everything it remembers is in :meth:`state`, so
snapshots, replay and moves work unchanged.

>>> from boreas.catalog.model import Partition, SegmentPlacement
>>> part = Partition("v", ("n1", "n2"), (SegmentPlacement(0, 0, 2048, 0), SegmentPlacement(1, 2048, 4096, 1)),
...                  maps=(("Q1_total", "A", 0),), layout=1, id="c0ffee")
>>> lay = layout_of(part)
>>> lay.members, lay.column("Q1_total"), [s.member for s in lay.segments]
(('n1', 'n2'), 0, [0, 1])
>>> internal_stream("v", 1)
'v@1'
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterable

from boreas.catalog.model import Box, Partition, Schema
from boreas.m3.cumulus import EVERYWHERE, Layout, LayoutError, Segment, classify
from boreas.m3.cumulus.member import MemberRuntime
from boreas.m3.cumulus.roles import Roles

from ..operators.base import Emitted, InternalStreams
from ..operators.m3box import M3Operator, runtime_for
from . import messages as msg
from .applying import Applying
from .cancelling import Cancelling
from .coordinator import Coordinating
from .hosting import Hosting
from .leader import Leader
from .loading import BulkLoad
from .membership import Membership
from .messages import MessageRows, key_codecs
from .relayouts import LayoutChanges

log = logging.getLogger(__name__)


_CHANGES = frozenset((msg.REQUEST, msg.RELAYOUT, msg.CHUNK, msg.COPIED, msg.FLIP, msg.CANCEL))  # relayouts.py's messages


def internal_stream(box: str, member: int) -> str:
    """The stream carrying messages of ``box`` to member ``member``."""
    return f"{box}@{member}"


def layout_of(partition: Partition) -> Layout:
    """The :class:`~boreas.m3.cumulus.Layout` a committed ``<partition>`` describes (its joining nodes are not
    members of it yet; its ``replicate=`` maps are placed :data:`~boreas.m3.cumulus.EVERYWHERE`)."""
    return Layout(partition.box, partition.layout_nodes,
                  tuple(Segment(s.id, s.lo, s.hi, s.member) for s in partition.segments),
                  (*((name, position) for name, _, position in partition.maps),
                   *((name, EVERYWHERE) for name in partition.replicate)),
                  version=partition.layout)


class PartOperator(Hosting, Coordinating, Applying, Cancelling, LayoutChanges, Membership, BulkLoad, M3Operator):
    """The member(s) of a partitioned ``m3`` box that ``endpoint`` hosts (two or more only after a failover:
    :mod:`~boreas.node.cumulus.hosting`); ``member`` and ``host`` build a guest member inside its host."""

    takes_columns = False  # members route and push rows (columnar Work is not built yet: docs/dataplane.md)

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema], partition: Partition, endpoint: str,
                 member: int | None = None, host: PartOperator | None = None):
        M3Operator.__init__(self, box, inputs, outputs, runtime=False)
        members = partition.member_of(endpoint)
        if not members:
            raise self.error(f"is partitioned over {', '.join(partition.nodes)}, not {endpoint}")
        if not partition.planned:
            raise self.error("is partitioned, but its partition has no segments yet (the Head plans them)")
        self.partition = partition
        self.member = me = members[0] if member is None else member
        try:
            self.layout = layout_of(partition).check_program(self.plan.program)
        except LayoutError as exc:
            raise self.error(f"has a partition that does not fit its program: {exc}") from None
        plan = classify(self.plan.program, dict(self.layout.maps), box.name)
        self.ordered = any(s.refs for _, s in plan.statements())  # (see the module docstring)
        self.runtime = runtime_for(box, self.plan.program, self.error,
                                   lambda program, backend: MemberRuntime(program, self.layout, me, plan, backend=backend))
        self._plan = plan
        self.roles = Roles(plan, self.layout)
        self._involved = [self._involvement(plan, port, self.layout) for port in range(len(box.inputs))]
        self._encode_key, self._decode_key = key_codecs(self.plan.program)
        self.epoch_s = partition.epoch_ms / 1000.0
        self.endpoint = endpoint
        self.rewire(partition, members)
        self._init_coordinator()  # (coordinator.py)
        # member: where it is in the order, and what waits
        self.at = [0, 0]  # epoch, coordinator whose versions it applies now (or whose Close it awaits)
        self.works: dict[tuple[int, int], deque] = {}
        self.closes: set[tuple[int, int]] = set()
        self.pushes: dict[tuple[int, int, int], dict[int, list]] = {}
        self.served: set[tuple[int, int, int]] = set()
        self.known_stable = -1  # the last stable epoch the leader announced
        self.horizon = -1  # deltas of epochs up to here are dropped: no stable read before its end
        self.leader = Leader(len(self.layout.members), partition.epoch_ms / 1000.0) if me == 0 else None
        # the first epoch this member takes part in; None while it is joining (docs/cumulus.md §6.4)
        self.joined: int | None = 0 if me < len(self.layout.members) else None
        self.loaded: set[tuple[str, int]] = set()  # (job, part) of bulk loads applied: a retried task adds nothing
        self._init_changes()  # layout changes (docs/cumulus.md §6): relayouts.py owns their state
        # per call
        self._plans: dict[tuple[int, int, int], tuple[list, set[int]]] = {}  # waiting versions: groups, pushers
        self._local: deque = deque()
        self._out: dict[int, list] = {}
        self._emitted: Emitted = []
        self._init_hosting(members, host, inputs, outputs, endpoint)

    def internal_streams(self) -> InternalStreams:
        return self._internal

    def rewire(self, partition: Partition, members: list[int]) -> None:
        """In ports for the members hosted here, out ports to the members (and joining nodes) on other nodes.

        Public: the host rewires every member it hosts when a failover moves one (:meth:`Hosting._rehost`).
        """
        box = self.box
        self.n = len(partition.nodes)
        others = [m for m in range(self.n) if m not in members]  # members on other nodes
        self._port_to = {m: len(box.outputs) + i for i, m in enumerate(others)}
        self._inport = {len(box.inputs) + i: m for i, m in enumerate(members)}
        streams = [internal_stream(box.name, m) for m in members]
        self._internal = InternalStreams(
            inputs={stream: port for port, stream in zip(self._inport, streams)},
            outputs=tuple((internal_stream(box.name, m), partition.nodes[m]) for m in others),
            schemas={}, decoders={stream: MessageRows() for stream in streams})

    # -- the data plane (one member; hosting.py runs every member hosted here) ------------
    # The member_* methods are this one member's step; they are public because the operator the
    # dataflow holds calls them on every member it hosts (hosting.py), guests included.

    def member_tick(self, now: float) -> None:
        """The leader's clock: send the Advance that ends the epoch, if it is time."""
        if self.leader is not None:
            advance = self.leader.tick(now, time.time())
            if advance is not None:
                self._to_all(advance)

    def member_deadline(self) -> float | None:
        """When this member next needs :meth:`member_tick` or a copy step without a message (flow clock)."""
        copy = self.copy_deadline()  # a segment being copied away: a step if no message comes (relayouts.py)
        lead = None if self.leader is None else self.leader.next_deadline()
        return lead if copy is None else copy if lead is None else min(copy, lead)

    def member_run(self, now: float) -> Emitted:
        """Take every message queued for this member; what it sends to members on other nodes."""
        self._sent_final = False
        if self.relayouts:  # a source that sent its final chunks switches now (relayouts.py)
            self._progress()
        self._drain()
        if self._copy_step(now):  # segments being copied away: a step after the box's own work
            self._drain()
        if self.leader is not None:
            self.leader.deadline(now)
        emitted, self._emitted = self._emitted, []
        for m, out in self._out.items():
            if out:
                emitted.append((self._port_to[m], out))
        self._out = {}
        for m, message in self._alone:
            if m in self.hosted:  # a member hosted here too (a guest after a failover)
                self.hosted[m]._local.append(message)
            else:
                emitted.append((self._port_to[m], [message]))
        self._alone = []
        return emitted

    def deliver_local(self, messages: Iterable[list]) -> None:
        """Queue messages for this member from a member hosted on the same node (they never leave the process).

        The host (hosting.py) hands guests their internal stream's rows and the
        messages a failover kept for them; the next :meth:`member_run` takes them.
        """
        self._local.extend(messages)

    @property
    def has_local(self) -> bool:
        """Messages wait for this member: the host runs its members until none has any (hosting.py)."""
        return bool(self._local)

    def _drain(self) -> None:
        while self._local:
            self._receive(self._local.popleft())
            self._progress()

    def _send(self, member: int, message: list) -> None:
        if member in self.hosted:  # itself, or another member hosted on this node
            self.hosted[member]._local.append(message)
        else:
            self._out.setdefault(member, []).append(message)

    def _to_all(self, message: list) -> None:
        """Leader: to every member, and to the nodes a layout change announced makes members."""
        for m in range(self._reach()):
            self._send(m, message)

    # -- messages ------------------------------------------------------------------------

    def _receive(self, m: list) -> None:
        tag = m[0]
        if tag == msg.WORK:
            if self.ordered:
                self.works.setdefault((m[1], m[2]), deque()).append(m)
            elif self._gated(m[1]):  # (a plan reading no map applies Work in any order, but within its epoch)
                self.held.append(m)
            else:
                self._write(m, {})
        elif tag == msg.PUSH:
            self.pushes.setdefault(msg.version(m), {})[m[4]] = m[5]
        elif tag == msg.CLOSE:
            self.closes.add((m[1], m[2]))
            if self.leader is not None:
                self.leader.closed(m[1], m[2], m[3])
        elif tag == msg.ADVANCE:
            if m[1] > self.epoch:
                self._next_epoch(m[1])
            if m[2] > self.known_stable:  # a newer stable epoch: reads of the one before it still work
                self.horizon = self.known_stable
                self.runtime.deltas.forget_through(self.horizon)
                self.known_stable = m[2]
                self._forget_layouts(self.horizon)
        elif tag == msg.WAKE:
            if self.leader is not None:
                self.leader.woken(m[1])
        elif tag == msg.DONE:
            if self.leader is not None:
                self.leader.done(m[1], m[2])
        elif tag == msg.LOAD:
            self._load(m)
        elif tag in _CHANGES:
            self._change_message(m)
        else:
            log.error("m3 box %r member %d: unknown message %r ignored", self.box.name, self.member, tag)

    # -- READ_STABLE --------------------------------------------------------------------

    @property
    def completed(self) -> int:
        """The last epoch this member applied completely."""
        return self.at[0] - 1

    def at_epoch(self, epoch: int):
        """The member's maps at the end of ``epoch``; ``LookupError`` if that is no longer (or not yet) readable."""
        if epoch <= self.horizon or epoch > self.completed:
            raise LookupError(f"epoch {epoch} is not readable on member {self.member} "
                              f"(readable: {self.horizon + 1}-{self.completed})")
        return self.runtime.at_epoch(epoch)

    def stable_info(self) -> dict | None:
        """The leader's stable epoch, its age, input positions and layout; None on other members."""
        lead = self.hosted.get(0)  # the leader may be a guest here (after a failover)
        if lead is None or lead.leader is None:
            return None
        info = lead.leader.info(time.time())
        info["layout_at"] = lead.layout_at(max(0, info["epoch"])).to_dict()
        return info

    # -- state ------------------------------------------------------------------------

    def member_state(self) -> dict:
        """This member's state alone; public because the host adds each guest's under ``"guests"``."""
        enc = self._encode_key
        return {
            **M3Operator.state(self), "member": self.member, "layout": self.layout.version,
            **self._coordinator_state(), "at": list(self.at),
            "works": [[e, c, list(q)] for (e, c), q in self.works.items()],
            "closes": [list(x) for x in self.closes],
            "pushes": [[*v, [[src, entries] for src, entries in by.items()]] for v, by in self.pushes.items()],
            "served": [list(v) for v in self.served],
            "known_stable": self.known_stable, "horizon": self.horizon, "joined": self.joined,
            "deltas": self.runtime.deltas.state(lambda name, k: enc(name, self.runtime.store.unpack(name, k))),
            "leader": None if self.leader is None else self.leader.state(),
            "loaded": [list(x) for x in self.loaded],
            **self._changes_state(),
        }

    def restore_member(self, state: dict, now: float | None = None) -> None:
        """Take this member's state alone; public because the host restores each member it hosts."""
        if state.get("member", self.member) != self.member:
            raise self.error(f"cannot take the state of member {state['member']} as member {self.member}")
        M3Operator.restore(self, state, now)
        self._restore_coordinator(state)
        self.at = list(state.get("at", [0, 0]))
        self.works = {(e, c): deque(q) for e, c, q in state.get("works", [])}
        self.closes = {tuple(x) for x in state.get("closes", [])}
        self.pushes = {(e, c, s): {src: entries for src, entries in by} for e, c, s, by in state.get("pushes", [])}
        self.served = {tuple(v) for v in state.get("served", [])}
        self.known_stable, self.horizon = int(state.get("known_stable", -1)), int(state.get("horizon", -1))
        self.joined = state["joined"] if "joined" in state else 0
        dec, pack = self._decode_key, self.runtime.store.pack
        self.runtime.deltas.restore(state.get("deltas", []), lambda name, k: pack(name, dec(name, k)))
        self.loaded = {(j, int(p)) for j, p in state.get("loaded", [])}
        self._restore_changes(state)
        if self.leader is not None and state.get("leader"):
            self.leader.restore(state["leader"])
        self._rehome()  # (hosting.py: after a failover, a member's node is another than in the state)

    def decode_key(self, name: str, key: list) -> tuple:
        """Map ``name``'s key as encoded in states and the segments API (JSON) in the runtime's types.

        The API checks a bulk load's entries with it before they are sent to the
        member (:mod:`~boreas.node.cumulus.api`).
        """
        return self._decode_key(name, key)

    # -- boreas segments ---------------------------------------------------------------

    def segment_entries(self) -> dict[int, dict[str, int]]:
        """Entries per segment and map on the members hosted here (this one, and any guest)."""
        return {seg: maps for op in self.hosted.values() for seg, maps in op.runtime.segment_entries().items()}
