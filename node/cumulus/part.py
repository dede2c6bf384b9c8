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

Deadlock-free: every member follows the same order, and a push for version ``v`` depends only on versions before
``v``. A plan whose statements read no map at all (a single relation's ``GROUP BY`` sums) needs no order: what a
version adds does not depend on what was applied before it, so its Work is applied as it arrives, and an epoch's
deltas are the same in any order; epochs still end, for stable reads. A statement that reads a map, even a
co-located one (a join on the partition key), makes a version's change depend on the versions before it: applied
out of epoch order, a late Work of epoch ``e`` would record, as ``e``'s delta, a change computed from a later
epoch's state, and READ_STABLE of ``e`` would be wrong. Layout changes (moves, splits, rebalances while events
flow) are :mod:`~boreas.node.cumulus.relayouts`' and :mod:`~boreas.node.cumulus.precopy`'s.

The operator does no I/O: messages to other members leave on out ports that the dataflow sends on the internal
streams ``{box}@{member}`` (:meth:`internal_streams`, wired by :mod:`~boreas.node.cumulus.ports`); everything it
remembers is in :meth:`state`, so snapshots, replay and moves work unchanged.

**A composed member.** Each member is a :class:`~.member.Member`, whose parts each own their state and their part
of ``state()``/``restore()`` (:mod:`~boreas.node.cumulus.member` lists who owns what); the members on one node
share a :class:`~.hosting.Host`. :class:`PartOperator` is the :class:`~boreas.node.operators.m3box.M3Operator` the
dataflow and the query API see: it builds the member, splits a version's rows and writes them (the applier's
:class:`~.applying.Writer`).
"""

from __future__ import annotations

import logging
import time

from boreas.catalog.model import Box, Partition, Schema
from boreas.m3 import M3Error
from boreas.m3.boxtype import BoxPlan, members_plan
from boreas.m3.cumulus import Layout, LayoutError, classify, refuse_misplaced
from boreas.m3.cumulus.native_member import ColumnRows, NativeMemberRuntime
from boreas.m3.cumulus.plan import LOCAL
from boreas.m3.cumulus.stable import StableView
from boreas.wire.columns import Columns, read_columns, weighted

from ..operators import m3changes, m3columns
from ..operators.base import Emitted, InternalStreams
from ..operators.m3box import M3Operator, runtime_for
from .applying import Groups, Version
from .entry_gauge import EntryGauge
from .hosting import Host
from .leader import Leader
from .member import Member
from .membership import MemberState, layout_of
from .messages import key_codecs
from .ports import Ports

log = logging.getLogger(__name__)


class PartOperator(M3Operator):
    """The member(s) of a partitioned ``m3`` box that ``endpoint`` hosts (two or more only after a failover:
    :mod:`~boreas.node.cumulus.hosting`); ``member`` and ``host`` build a guest member inside its host."""

    # A batch that came as Arrow columns (a changelog's with its weights) is routed as columns and travels to the
    # members as Arrow IPC (node/cumulus/columnar.py); a member on the native backend applies the columns of a
    # trigger that serves no other member as they are (m3/cumulus/native_member.py), others as rows.
    takes_columns = True

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema], partition: Partition, endpoint: str,
                 member: int | None = None, host: Host | None = None):
        M3Operator.__init__(self, box, inputs, outputs, runtime=False)
        members = partition.member_of(endpoint)
        if not members:
            raise self.error(f"is partitioned over {', '.join(partition.nodes)}, not {endpoint}")
        if not partition.planned:
            raise self.error("is partitioned, but its partition has no segments yet (the Head plans them)")
        self.partition = partition  # the catalog's, as the node follows it (wiring.py sets it)
        self.endpoint = endpoint
        self.member = me = members[0] if member is None else member
        try:
            layout = layout_of(partition).check_program(self.plan.program)
        except LayoutError as exc:
            raise self.error(f"has a partition that does not fit its program: {exc}") from None
        refuse_misplaced(self.plan.program, dict(layout.maps), box.name, self.plan.stages is not None)
        plan = classify(self.plan.program, dict(layout.maps), box.name)
        # (see the module docstring; a windowed box's Closes carry the watermarks: passed in one order, §3.13)
        ordered = bool(self.plan.windows) or any(s.refs for _, s in plan.statements())
        self.runtime: NativeMemberRuntime = runtime_for(
            box, self.plan.program, self.error,
            lambda program, backend: NativeMemberRuntime(program, layout, me, plan, backend=backend))
        # View changes read from the C journal as Arrow (as the one-node box's): every view plain, and no view's
        # map read from another member (a pushed entry of it would count as a change when it is taken out again)
        remote = {r.ref.name for _, s in plan.statements() for r in s.refs if r.cls != LOCAL}
        self._columns_out = self.columns_out and not any(
            set(self.plan.program.view(v.name).maps) & remote for v in self.plan.views)
        self.place = MemberState(me, layout, plan, self.runtime)
        self.host = Host(self.error) if host is None else host
        self.leader = Leader(len(layout.members), partition.epoch_ms / 1000.0) if me == 0 else None
        self.parts = Member(box.name, self.place, self.plan, ordered, self.leader, self.host.mailbox_of, self,
                            key_codecs(self.plan.program), len(partition.modulo_nodes))
        self.entries = EntryGauge(lambda: self.runtime.entries())  # (the runtime may be replaced: asked anew)
        # The layout the memo of emitted view rows (M3Operator's) was read under: a layout change moves
        # segments in and out, so the memo is read again from the maps (the keys this member now owns).
        self._memo_layout: Layout | None = None
        self.host.add(self)
        self.rewire(partition, members)
        if host is None:  # the node's own member builds the guests it hosts (after a failover)
            for m in members:
                if m != me:
                    self._guest(m, partition)

    def plan_of(self, box: Box, inputs: list[Schema]) -> BoxPlan:
        """The box's plan, its views without ``ALWAYS`` (:func:`~boreas.m3.boxtype.members_plan`)."""
        return members_plan(super().plan_of(box, inputs))

    def _guest(self, member: int, partition: Partition) -> PartOperator:
        return type(self)(self.box, self.inputs, self.outputs, partition, self.endpoint, member=member,
                          host=self.host)

    @property
    def hosted(self) -> dict[int, PartOperator]:
        """The members hosted on this node, by number (this one among them); the API reads a guest's maps."""
        return self.host.members  # (every hosted member is a PartOperator)

    @property
    def layout(self) -> Layout:
        """The layout this member runs now (the query API answers with it)."""
        return self.place.layout

    def internal_streams(self) -> InternalStreams:
        return self.ports.streams

    def rewire(self, partition: Partition, members: list[int]) -> None:
        """In ports for the members hosted here, out ports to the members (and joining nodes) on other nodes."""
        self.ports = Ports.wire(self.box, partition, members)
        self.parts.mailbox.link(self.ports.outport, len(partition.nodes))

    def follow(self, partition: Partition, members: list[int]) -> None:
        """Follow ``partition`` whose endpoints changed (a failover): ports and layouts (the host asks)."""
        self.partition = partition
        self.rewire(partition, members)
        self._rehome()

    def _rehome(self) -> None:
        """Layouts restored from a state name the nodes members were on then; a failover since moved one."""
        self.parts.rehome(tuple(self.partition.nodes))

    def follows(self, partition: Partition) -> bool:
        """Whether ``partition`` is this box's as it runs here: the same incarnation, its members (and any
        nodes joining, or fewer once a member retired), a layout it already switched to (the catalog learns
        a relayout after the members made it).

        A member that failed over to another node is still the same member:
        the operator follows its new endpoint in place (:meth:`Host.follow`),
        taking a guest if it is now here, so its state and everything
        waiting on it (a publisher held by admission) carry on.
        """
        mine = self.partition
        if not (partition.id == mine.id and len(partition.nodes) >= len(self.layout.members)
                and partition.epoch_ms == mine.epoch_ms and partition.maps == mine.maps
                and partition.layout <= self.layout.version):
            return False
        return partition.nodes == mine.nodes or self.host.follow(partition, partition.member_of(self.endpoint),
                                                                   lambda m: self._guest(m, partition))

    # -- the data plane (every member hosted here) -----------------------------------------

    def process(self, port: int, rows: list | Columns, now: float) -> Emitted:
        if port < len(self.box.inputs):  # (no producer id: a box ordering its own inputs, node/router.py ``_feed``;
            self.parts.coordinator.coordinate(port, rows)  # a windowed box counts them as producer "", §3.13)
        else:
            self.hosted[self.ports.inport[port]].parts.mailbox.inbox.extend(rows)
        return self.host.run(now)

    def process_from(self, port: int, rows: list | Columns, now: float, origin: tuple[str, str, int]) -> Emitted:
        if port >= len(self.box.inputs):
            return self.process(port, rows, now)
        stream, producer, seq = origin
        self.host.take(self._picks(), stream, producer, seq, port, rows)  # stamped there, or handed on (§6.5)
        return self.host.run(now)

    def _picks(self) -> int | tuple[int, ...]:
        return self.parts.handing.listed or len(self.partition.modulo_nodes)

    def moved_to(self, stream: str, producer: str) -> str | None:
        """The node a publisher of ``producer`` should send ``stream`` to now, if its coordinator here handed it
        over (docs/cumulus.md §6.5: the intake's acknowledgement carries it as a hint)."""
        return self.host.moved_to(stream, producer, self.partition.nodes)

    def coordinating(self) -> dict[str, int]:
        """Producers the members hosted here stamped, and batches they forwarded to a new coordinator."""
        return self.host.coordinating()

    def producer_ended(self, port: int, producer: str, now: float) -> Emitted:
        """A producer's ``final``: its coordinator's next Close says so, after its batches (handing.py)."""
        self.host.producer_ended(self._picks(), port, producer)
        return self.host.run(now)

    def end_of_input(self, now: float, port: int | None = None) -> Emitted:
        """Every producer this node took the box's input on ``port`` from ended (None: on every port; a box
        with two in streams is told once for each: :meth:`Host.input_ended`)."""
        if port is None or port < len(self.box.inputs):  # (an internal stream's port carries members' messages)
            self.host.input_ended(port, None if port is None else self.box.inputs[port].stream)
        return self.host.run(now)

    def holds_end(self) -> bool:
        """Until the end of the input settled (node/cumulus/end_marks.py), members on other nodes may still
        send Work to those here, or move here: the box's out streams on this node do not end."""
        return not self.host.end_settled()

    def poll(self, now: float) -> Emitted:
        return self.host.poll(now)

    def next_deadline(self) -> float | None:
        return self.host.next_deadline()

    def backlog(self) -> int:
        """Versions and messages waiting at the members hosted here (the coordinators' admission)."""
        return self.host.backlog()

    def take_guests(self, state: dict, pending: dict[int, list[list]], now: float) -> Emitted:
        """Continue the member(s) of a failed node here (:meth:`Host.take_guests`)."""
        return self.host.take_guests(self.box.name, state, pending, now)

    # -- writing (the applier's Writer) ---------------------------------------------------

    def work_groups(self, port: int, rows: list | bytes | Columns) -> Groups:
        """A Work's rows of in port ``port`` as ``(relation, sign, rows)`` (the box's sign field, DATEs); a Work
        of columns (IPC bytes, or Columns from a coordinator on this node) adds its rows of positive weight and
        takes away those of negative weight."""
        relation = self.plan.ports[port].relation
        if isinstance(rows, bytes):
            rows = read_columns(rows)
        if isinstance(rows, Columns):
            if self.runtime.native_maps() is not None and not any(
                    self.place.roles.serves(relation, sign) for sign in (1, -1)):
                try:  # (the Roles take these as they are: the member writes every row it was sent)
                    parts, _ = m3columns.split(rows, self.plan.ports[port], self.runtime.string_ids)
                    return [(relation, sign, ColumnRows(cols)) for sign, cols in parts if cols and len(cols[0])]
                except ValueError:  # (nulls) the row path says what is wrong with them
                    pass
            adds, takes = m3columns.by_sign(rows)
            return self._row_groups(port, relation, adds, takes)[0]
        inserts, deletes, _ = self._split[port](rows)
        return [g for g in ((relation, 1, inserts), (relation, -1, deletes)) if g[2]]

    def apply_share(self, version: Version, mine: Groups, pushed: dict) -> bool:
        """Apply this member's share of ``version`` to its maps; False (counted, logged) if the runtime refused it.

        The runtime rolls a refused version back, so the maps stay as they were and later versions still apply.
        """
        self.runtime.epoch = version[0]
        try:
            self.runtime.apply_with(mine, pushed)
        except (M3Error, ArithmeticError, TypeError, ValueError) as exc:  # rolled back by the runtime
            self.failed_batches += 1
            log.error("m3 box %r member %d: version %s was not applied: %s", self.box.name, self.member, version, exc)
            return False
        return True

    def write(self, version: Version, mine: Groups, pushed: dict) -> None:
        """Apply this member's share of a version, then emit the view changes it made as a changelog.

        Each changed row it owns goes out as -old/+new with weights, as the
        one-node box's (docs/dataplane.md, "Changelog streams"): the old rows
        come from the memo of what this member last emitted of its own keys,
        read from its maps before the first write and after every layout change.
        """
        native = self.runtime.native_maps()
        columns_out = native is not None and self._columns_out
        if not columns_out:
            if self._memo_layout is not self.place.layout:
                self._memo.forget()
                self._memo_layout = self.place.layout
            self._memo.load([view.name for view in self.plan.views])  # (before applying: the old rows)
        if not self.apply_share(version, mine, pushed):
            return
        if columns_out and self.runtime.native_maps() is native:  # the changes read in bulk, emitted as Arrow
            for out, view in enumerate(self._plain_views):
                changed = m3changes.view_changes(native, view, self.plan.views[out].keys, self.plan.outputs[out],
                                                 self._strings)
                if changed is not None:
                    self.parts.mailbox.emit(out, changed)
            return
        for view, changed in self.runtime.changes().items():
            out = self._port_of_view.get(view)
            if out is not None and changed:
                pairs, weights = self._memo.revise(view, changed)
                if pairs:
                    self.parts.mailbox.emit(out, weighted(self._emit[out](pairs), weights, self.outputs[out]))

    # -- what the API and the metrics ask -------------------------------------------------

    @property
    def completed(self) -> int:
        """The last epoch this member applied completely."""
        return self.parts.applier.completed

    @property
    def woke(self) -> int:
        """The last epoch this member's coordinator asked the leader to end (node/intake.py's admission: a
        publisher waits while it is more than ``LAG`` epochs past the last stable one)."""
        return self.parts.coordinator.woke

    @property
    def known_stable(self) -> int:
        """The last stable epoch the leader announced to this member (node/intake.py's admission)."""
        return self.parts.applier.known_stable

    def at_epoch(self, epoch: int) -> StableView:
        """The member's maps at the end of ``epoch``; ``LookupError`` if that is no longer (or not yet) readable."""
        if not self.parts.applier.readable(epoch):
            raise LookupError(f"epoch {epoch} is not readable on member {self.member} "
                              f"(readable: {self.parts.applier.horizon + 1}-{self.completed})")
        return self.runtime.at_epoch(epoch)

    def layout_at(self, epoch: int) -> Layout:
        """The layout versions of ``epoch`` ran under."""
        return self.place.layout_at(epoch)

    def stable_info(self) -> dict | None:
        """The leader's stable epoch, its age, input positions and layout; None on other members."""
        lead = self.hosted.get(0)  # the leader may be a guest here (after a failover)
        if lead is None or lead.leader is None:
            return None
        info = lead.leader.info(time.time())
        info["layout_at"] = lead.layout_at(max(0, info["epoch"])).to_dict()
        return info

    @property
    def latest_layout(self) -> Layout:
        """The newest layout decided: the one the next change starts from."""
        return self.parts.changes.latest_layout

    def joinable_layout(self) -> Layout:
        """The newest layout decided, with the partition's joining nodes as members (docs/cumulus.md §6.4)."""
        return self.parts.changes.joinable_layout(tuple(self.partition.nodes))

    def relayout_busy(self) -> str | None:
        """Why the leader cannot start a layout change now (None: it can)."""
        return self.parts.changes.relayout_busy()

    def loadable(self, job: str) -> str | None:
        """Why part of bulk load ``job`` cannot go in now (None: it can)."""
        took_input = not self.parts.coordinator.idle or bool(self.runtime.version)
        return self.parts.loads.loadable(job, took_input, bool(self.runtime.entries()))

    def decode_key(self, name: str, key: list) -> tuple:
        """Map ``name``'s key as encoded in states and the segments API (JSON) in the runtime's types.

        The API checks a bulk load's entries with it before they are sent to the member.
        """
        return self.parts.applier.decode_key(name, key)

    def segment_entries(self) -> dict[int, dict[str, int]]:
        """Entries per segment and map on the members hosted here (this one, and any guest)."""
        return {seg: maps for op in self.hosted.values() for seg, maps in op.runtime.segment_entries().items()}

    def state_entries(self) -> int:
        """Entries of the member's maps, counted at most once a second (:mod:`~boreas.node.cumulus.entry_gauge`)."""
        return self.entries.read()

    # -- state ------------------------------------------------------------------------

    def state(self) -> dict:
        return self.host.state(self.member)

    def restore(self, state: dict, now: float | None = None) -> None:
        self.host.restore(state, self.member, now)

    def member_state(self) -> dict:
        """This member's state alone (its maps, and its parts' under their keys); the host adds each guest's."""
        return {**M3Operator.state(self), **self.parts.state()}

    def restore_member(self, state: dict, now: float | None = None) -> None:
        """Take this member's state alone (the host restores each member it hosts)."""
        if state.get("member", self.member) != self.member:
            raise self.error(f"cannot take the state of member {state['member']} as member {self.member}")
        M3Operator.restore(self, state, now)
        self.parts.restore(state, now)
        if "ends" not in state:  # (a state from before the end marks: end_marks.py, "An older state")
            self.parts.handing.seed_ends([port.stream for port in self.box.inputs])
        self._rehome()  # (after a failover, a member's node is another than in the state)
