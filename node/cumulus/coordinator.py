"""The coordinator of a member of a partitioned box: stamping input batches as versions (docs/cumulus.md §3.5).

:class:`Coordinator` owns what the coordinator keeps (``epoch``, ``seq``,
``woke``, ``stamped``, ``holding``, the layout version it stamps with and
the dispatchers of that layout) and its part of the member's ``state()``.
Input batches of a publisher that picked this member become *versions*
``(epoch, member, seq)`` and go, as ``Work``, to the members that write or
serve their rows, each getting only its rows.  On ``Advance(e + 1)`` the
coordinator closes ``e`` (``Close`` to every member, with the input
positions it stamped to the leader) and stamps with ``e + 1``, under the
layout of a change whose first epoch it is (:meth:`Coordinator.route`).

**Holding.**  Every message between members costs each end a frame, a
system call, an acknowledgement and a pass of the dataflow, whatever its
size (at 4 members on loopback about 100 us a frame, more than the rows in
it), and a batch of a publisher is split over every member.  So, when the
box has more than one member, the coordinator *holds* a port's batches and
stamps them as one version when ``HOLD`` rows of that port are held or the
epoch ends (``Advance``), whichever comes first: an epoch's Work to a member
then mostly leaves in the frame of its ``Close``, and a version's pushes
serve more rows.  What is held and when it goes is decided by the input
alone (rows taken, ``Advance`` messages; both are in the node's input log),
never by time, so a node replaying its log numbers every message it sends
as it did.  The order within a port is kept (a producer's batches stay in
order: stable reads stay per-producer prefixes); versions of different
ports may leave in another order than their batches came, as batches of
different producers may anyway.  A held version is stamped in the epoch
its rows arrived in (held rows go before the epoch's ``Close``), so the
positions a ``Close`` names are exactly what its epoch holds.  Sequential
relations (one event per version) are not held, and a lone member holds
nothing (its Work never leaves the process).

**Columns.**  A batch that came as Arrow columns (a publisher's Arrow, an
upstream box's changelog with its weights) is routed a column at a time
(:mod:`~boreas.node.cumulus.columnar`) and each member's share travels in its
``Work`` as Arrow IPC bytes instead of rows; held, such batches are stamped
as one batch of columns (rows and columns held on one port go as a version
each, in the order they came).
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter

from boreas.m3.boxtype import BoxPlan
from boreas.m3.cumulus import Layout
from boreas.m3.cumulus.member import group
from boreas.m3.cumulus.roles import Roles
from boreas.wire.columns import Columns, read_columns

from ..operators.m3box import date_of
from . import messages as msg
from .columnar import ColumnRoute, concat
from .end_marks import ProducerEnds
from .event_marks import StampedTime
from .mailbox import Mailbox
from .membership import MemberState

#: rows of one in port a coordinator holds at most before stamping them as one version (docs/cumulus.md §3.5)
HOLD = 4096


class Coordinator:
    """The coordinator of member ``place.member``: its input batches as versions, sent as ``Work``.

    ``box`` is the box's plan (its in ports' columns and sign fields);
    ``ordered``: the plan reads maps, so versions apply in one order
    (sequential relations then go one event per version).
    """

    def __init__(self, place: MemberState, box: BoxPlan, ordered: bool, mailbox: Mailbox,
                 times: StampedTime | None = None):
        self.place = place
        # a windowed box's: its rows given their windows, its producers' watermarks, carried by each Close
        self.times = times
        self.ends = ProducerEnds()  # its producers' ends, carried by each Close (node/cumulus/end_marks.py)
        self.clock = 0.0  # the flow clock of the run it stamps in (a windowed producer's idle timer)
        self.box = box
        self.ordered = ordered
        self.mailbox = mailbox
        self.epoch = 0  # the epoch it stamps Work with (the last Advance)
        self.seq = 0
        self.woke = -1  # the last epoch it asked the leader to end
        self.stamped: dict[tuple[str, str], int] = {}  # (stream, producer) -> last seq taken in this epoch
        # in port -> what it took in this epoch, not stamped yet (in arrival order): runs of rows (lists) and Columns
        self.holding: dict[int, list[list | Columns]] = {}
        # producers taken by another coordinator -> the epoch from whose Close on they count there alone
        self.forgetting: dict[str, int] = {}
        # counters (not state): Work rows stamped for members on this node, and for members on other nodes
        self.rows_kept = self.rows_sent = 0
        self.routing = place.layout.version  # the layout version it stamps Work with
        self.layout = place.layout  # the layout it stamps Work with
        self._closing = 0  # members of the epoch it stamps with (its Close goes to each)
        self._involved: list[Callable[[list], list]] = []  # per in port: rows -> the members each goes to
        self._columnar: list[ColumnRoute] = []  # per in port: where a batch of columns goes
        self.route(place.layout)

    def route(self, layout: Layout) -> None:
        """Stamp with ``layout`` from now on (the first epoch of a layout change, or a restored state)."""
        self.routing = layout.version
        self.layout = layout
        self._closing = len(layout.members)
        self._involved, self._columnar = [], []
        for port in range(len(self.box.ports)):
            rows, columns = self._involvement(port, layout)
            self._involved.append(rows)
            self._columnar.append(columns)

    def _involvement(self, port: int, layout: Layout) -> tuple[Callable[[list], list], ColumnRoute]:
        """``rows -> [members]`` for rows of in port ``port`` in the in stream's form (sign field and all).

        A batch at a time (:meth:`Roles.involved`); a row with a sign that is
        neither 1 nor -1 stays here, where the splitter counts it refused."""
        pp = self.box.ports[port]
        s = pp.sign_index
        picks = [i for i in range(len(pp.columns) + (s is not None)) if i != s]

        def getter(i: int):
            at = picks[i]
            if pp.columns[i][1] == "DATE":
                return lambda row: date_of(row[at])
            return itemgetter(at)

        roles = Roles(self.place.plan, layout, getter, pp.relation)
        columnar = ColumnRoute.of(roles, pp, layout, self.place.member)
        inserts, deletes = roles.involved(pp.relation, 1), roles.involved(pp.relation, -1)
        if s is None:
            return inserts, columnar
        alike, me, sign_of = roles.placed_alike(pp.relation), self.place.member, itemgetter(s)

        def involved(rows: list) -> list:
            signs = list(map(sign_of, rows))
            ins = signs.count(1)
            if ins == len(signs):
                return inserts(rows)
            dels = signs.count(-1)
            if alike or ins + dels == 0:
                out = inserts(rows)
            elif dels == len(signs):
                return deletes(rows)
            else:
                out = [a if g == 1 else b for a, b, g in zip(inserts(rows), deletes(rows), signs)]
            if ins + dels != len(signs):
                out = [m if g == 1 or g == -1 else me for m, g in zip(out, signs)]
            return out
        return involved, columnar

    def _sequential(self, port: int) -> bool:
        return self.ordered and self.box.ports[port].relation in self.place.roles.sequential

    def coordinate(self, port: int, rows: list | Columns, producer: str = "") -> None:
        """Take an input batch of ``producer`` on in port ``port`` (rows, or columns): stamp it now, or hold it
        (see the module docstring); a windowed port's rows get their windows first (node/cumulus/event_marks.py)."""
        self.ends.heard(port, producer)
        if self.times is not None and port in self.times.windows.ports:
            rows = self.times.assign(port, producer, rows, self.clock)
        joined = self.place.joined
        joining = joined is None or self.epoch < joined
        if joining or self._closing > 1 and not self._sequential(port):
            held = self.holding.get(port)
            if held is None:
                held = self.holding[port] = []
            if isinstance(rows, Columns):
                held.append(rows)
            elif held and isinstance(held[-1], list):
                held[-1] += rows
            else:
                held.append(list(rows))
            if sum(map(len, held)) >= HOLD and not joining:  # (a joining member stamps from its first epoch on)
                self._stamp_held(port, self.holding.pop(port))
        else:
            self._stamp(port, rows)
        self.wake()

    def wake(self) -> None:
        """Ask the leader to end the epoch stamped with (once per epoch)."""
        if self.woke != self.epoch:
            self.woke = self.epoch
            self.mailbox.send(0, msg.wake(self.epoch))

    def ended(self, port: int | None, producer: str) -> None:
        """``producer`` ended on ``port`` (None: on every port): the next Close says so (and, in a windowed box,
        carries +inf for it); the epoch must end for that Close to go."""
        self.ends.end(port, producer)
        if self.times is not None:
            self.times.end(port, producer)
        self.wake()

    def idle_deadline(self) -> float | None:
        """When a windowed producer of this coordinator next turns idle (flow clock; None: none will)."""
        return None if self.times is None else self.times.windows.next_deadline()

    def poll(self, now: float) -> None:
        """A producer turned idle by ``now``: the epoch must end, so that a ``Close`` carries the marks without
        it (a quiet stream closes what its last rows closed, as on one node: node/watermarks.py)."""
        if self.times is None:
            return
        self.times.windows.advance(now)  # (so a restore on another node's clock shifts the timers from here)
        due = self.idle_deadline()
        if due is not None and due <= now:
            self.times.windows.polled = now
            self.wake()

    def hand_away(self, producer: str) -> list:
        """A producer handed to another coordinator: ``[its watermarks (empty: none), its end entry]``, which
        still hold here until :meth:`forget` (its ``Close`` may pass before the other's takes them: P never counts
        nowhere)."""
        marks = [] if self.times is None else self.times.hand_away(producer, self.clock)
        return [marks, self.ends.hand_away(producer)]

    def forget(self, producer: str, at: int) -> None:
        """The coordinator a producer was handed to took it (``Taken``) while stamping with epoch ``at``: its
        watermarks and its end count there from its ``Close(at)`` on, so they stay here for every ``Close`` before
        ``at`` (the Handover and the leader's Advances travel on different links: ``at`` may be past the
        Handover's epoch, and this coordinator may still stamp with an epoch before ``at``)."""
        if at <= self.epoch:
            self._forget(producer)
        else:
            self.forgetting[producer] = at

    def _forget(self, producer: str) -> None:
        """Forget a handed producer; the epoch must end (a late ``Taken`` may come while the leader is idle): its
        ``Close`` may carry the mark the end passes with (node/cumulus/end_marks.py)."""
        self.ends.forget(producer)
        self.wake()
        if self.times is not None:
            self.times.forget(producer)

    def _forget_due(self) -> None:
        """Forget the handed producers whose new coordinator's Closes carry them from the epoch closing now."""
        due = [p for p, at in self.forgetting.items() if at <= self.epoch]
        for producer in due:
            del self.forgetting[producer]
            self._forget(producer)

    def take_over(self, producer: str, marks: list, ends: list | None = None) -> None:
        """A producer handed here with the watermarks and end entry :meth:`hand_away` gave."""
        self.forgetting.pop(producer, None)  # (handed back before its entry here was forgotten: it stays)
        if self.times is not None and marks:
            self.times.take_over(producer, marks, self.clock)
        self.ends.take_over(producer, ends)

    def took(self, stream: str, producer: str, seq: int) -> None:
        """Batch ``seq`` of ``producer`` on ``stream`` is the last one taken (its Close names it: stable reads)."""
        self.stamped[(stream, producer)] = seq

    def _stamp(self, port: int, rows: list | Columns) -> None:
        """Rows of in port ``port`` as versions: one, or one per event for a sequential relation."""
        if isinstance(rows, Columns):
            self._stamp_columns(port, rows)
            return
        involved = self._involved[port]
        for version in ([r] for r in rows) if self._sequential(port) else (rows,):
            self._send_work(port, group(involved(version), version))

    def _stamp_columns(self, port: int, columns: Columns) -> None:
        """A batch of columns as versions, each member's rows sent as Arrow IPC."""
        route = self._columnar[port]
        if self._sequential(port):
            for i in range(len(columns)):
                one = Columns(columns.batch.slice(i, 1), weights=None if columns.weights is None
                              else columns.weights.slice(i, 1))
                self._send_work(port, route.shares(one))
        else:
            self._send_work(port, route.shares(columns))

    def _send_work(self, port: int, shares: dict[int, list | Columns]) -> None:
        """One version: each member's share as its Work (rows as they are; columns as IPC bytes to a member on
        another node, as they are to one hosted here, whose applier keeps them as IPC bytes in its state)."""
        if not shares:
            return
        me, mailbox = self.place.member, self.mailbox
        seq, self.seq = self.seq, self.seq + 1
        for m, share in shares.items():
            if mailbox.is_local(m):
                self.rows_kept += len(share)
            else:
                self.rows_sent += len(share)
                share = share.ipc() if isinstance(share, Columns) else share
            mailbox.send(m, msg.work(self.epoch, me, seq, port, share))

    def _stamp_held(self, port: int, held: list[list | Columns]) -> None:
        """Held runs of one port: each run of rows as one version, the batches of columns between them as one."""
        columns: list[Columns] = []
        for piece in held:
            if isinstance(piece, Columns):
                columns.append(piece)
                continue
            if columns:
                self._stamp(port, concat(columns))
                columns = []
            self._stamp(port, piece)
        if columns:
            self._stamp(port, concat(columns))

    def _release_holding(self) -> None:
        """Stamp every port's held rows (the epoch ends), ports in the order they were first held."""
        holding, self.holding = self.holding, {}
        for port, held in holding.items():
            self._stamp_held(port, held)

    def advance(self, epoch: int) -> None:
        """``Advance(epoch)``: close the epoch stamped with so far, stamp with ``epoch`` from now on.

        A joining member closes nothing before its first epoch, and a retired
        one nothing from the first epoch it is not a member of: no member
        expects a Close of it for an epoch it takes no part in."""
        me, joined = self.place.member, self.place.joined
        if joined is not None and self.epoch >= joined and me < self._closing:
            self._release_holding()
            positions = [[s, p, q] for (s, p), q in self.stamped.items()]
            self.stamped = {}
            if self.forgetting:
                self._forget_due()
            marks = None if self.times is None else self.times.marks(self.clock)
            for member in range(self._closing):  # the members of the epoch closed
                self.mailbox.send(member, msg.close(self.epoch, me, positions if member == 0 else None, marks,
                                                    self.ends.mark()))
        self.epoch = epoch

    @property
    def idle(self) -> bool:
        """Whether it never stamped nor holds anything (a bulk load goes only into such a member)."""
        return not self.seq and not self.holding

    # -- state -------------------------------------------------------------------------

    def state(self) -> dict:
        return {"epoch": self.epoch, "seq": self.seq, "woke": self.woke, "routing": self.routing,
                "stamped": [[s, p, q] for (s, p), q in self.stamped.items()],
                "stamped_time": None if self.times is None else self.times.state(), "ends": self.ends.state(),
                "forgetting": [[p, at] for p, at in self.forgetting.items()],
                "holding_runs": [[port, [p.ipc() if isinstance(p, Columns) else list(p) for p in held]]
                         for port, held in self.holding.items()]}

    def restore(self, state: dict, layouts: list[Layout], now: float | None = None) -> None:
        """Continue from :meth:`state`; ``layouts``: those it may stamp with (the member's, the changes');
        ``now``: the restoring node's flow clock, which a windowed box's idle timers are shifted to (as the
        one-node box's, node/operators/m3event_time.py)."""
        self.epoch, self.seq, self.woke = int(state.get("epoch", 0)), int(state.get("seq", 0)), int(state.get("woke", -1))
        self.stamped = {(s, p): int(q) for s, p, q in state.get("stamped", [])}
        self.forgetting = {p: int(at) for p, at in state.get("forgetting", [])}
        self.ends.restore(state.get("ends"))
        self.holding = {int(port): [read_columns(p) if isinstance(p, bytes) else list(p) for p in held]
                        for port, held in state.get("holding_runs", [])}
        for port, rows in state.get("holding", []):  # (a state from before columns were held: rows)
            self.holding[int(port)] = [list(rows)]
        if self.times is not None:
            self.times.restore(state.get("stamped_time") or {}, now)
            if now is not None:
                self.clock = now
        version = int(state.get("routing", self.place.layout.version))
        self.route(next((lay for lay in layouts if lay.version == version), self.place.layout))
