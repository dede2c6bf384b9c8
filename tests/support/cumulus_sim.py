"""An in-process cluster of one partitioned ``m3`` box: real PartOperators, messages delivered in random order.

Each member is the :class:`~boreas.node.cumulus.part.PartOperator` a node
runs; what one member sends another (the out ports the dataflow would send
on ``{box}@{member}``) is queued on a per-(source, destination) link, which
keeps its order as a real link does, and the simulation delivers the
head of a randomly chosen link, fires the leader's epoch timer as simulated
time passes, and publishes batches into randomly chosen members.  Used by
the hypothesis tests that compare the members' maps with one
:class:`~boreas.m3.Runtime`.
"""

from __future__ import annotations

import datetime as dt
import random
import zlib
from collections import Counter, deque
from dataclasses import replace

import msgspec
from boreas.catalog.model import (
    Box,
    Field,
    FieldType,
    InPort,
    Partition,
    Schema,
    SegmentPlacement,
)
from boreas.m3 import Runtime, compile_sql
from boreas.m3.boxtype import plan_box
from boreas.m3.cumulus import EVERYWHERE, Layout
from boreas.node.cumulus.part import PartOperator
from boreas.node.operators.m3box import micros_of

FIELD_OF = {"INT": FieldType.INT, "FLOAT": FieldType.DOUBLE, "STRING": FieldType.STRING, "DATE": FieldType.TIMESTAMP}


def _producer_for(relation: str, member: int, n: int) -> str:
    """A producer id of ``relation`` that a publisher sends to ``member`` (``crc32(id) % n``, client/publisher.py):
    after a failover a node hosting two members gives each producer's batches to the member it belongs to."""
    i = 0
    while zlib.crc32(f"{relation}-{member}-{i}".encode()) % n != member:
        i += 1
    return f"{relation}-{member}-{i}"


class Sim:
    def __init__(self, sql: str, layout: Layout, rng: random.Random, epoch_ms: int = 100):
        program = compile_sql(sql)
        self.program = program
        self.single = Runtime(program)
        self.relations = [r for r in program.relations]
        self.port_of = {r.name: i for i, r in enumerate(self.relations)}
        inputs = [Schema(f"{r.name}_t", tuple(Field(c.name, FIELD_OF[c.type]) for c in r.columns)
                         + (Field("sign", FieldType.INT),)) for r in self.relations]
        views = [v.name for v in program.views]
        box = Box("v", "m3", tuple(InPort(r.name) for r in self.relations), tuple(f"out_{v}" for v in views),
                  (("sql", sql), ("sign-field", "sign")))
        outputs = list(plan_box(box, inputs).outputs)
        names = {m.name: m for m in program.maps}
        maps = tuple((m, None if c is None else names[m].keys[c].name, c) for m, c in layout.maps if c != EVERYWHERE)
        partition = Partition("v", layout.members, tuple(SegmentPlacement(s.id, s.lo, s.hi, s.member) for s in layout.segments),
                              maps=maps, layout=layout.version, epoch_ms=epoch_ms, id="sim",
                              replicate=tuple(sorted(layout.replicated)))
        self.box = box
        self.built_from = (inputs, outputs, partition)  # what each member's PartOperator is built from
        self.members = [PartOperator(box, inputs, outputs, partition, node) for node in layout.members]
        self.nodes = layout.members  # member -> the node hosting it (two members on one after a failover)
        self.coordinators = len(layout.members)  # publishers pick among these (nodes added later coordinate none)
        self.links: dict[tuple[int, int], deque] = {}
        self.rng = rng
        self.now = 0.0
        self.view_changes: dict[int, int] = {}
        self.folded: dict[int, Counter] = {}  # out port -> each view row's weights added up (the changelog folded)
        self.batches: dict[tuple[str, str, int], tuple[str, list]] = {}  # (stream, producer, seq) -> events
        self.changes = 0  # layout changes asked for
        self.chunks: list[list] = []  # every Chunk message sent
        self.sent: Counter = Counter()  # messages between members by tag (a final chunk counts as "k!")
        self._seq: dict[tuple[str, str], int] = {}

    # -- moving messages ----------------------------------------------------------
    def _node_of(self, member: int) -> int:
        """The link end of ``member``'s operator: its first member.  A node sends on one ordered link per
        destination, whichever of the members it hosts a message comes from (after a failover: two)."""
        op = self.members[member]
        return next(m for m, other in enumerate(self.members) if other is op)

    def _collect(self, src: int, emitted) -> None:
        declared = len(self.box.outputs)
        op = self.members[src]
        src = self._node_of(src)
        for port, rows in emitted:
            if port < declared:
                self.view_changes[src] = self.view_changes.get(src, 0) + len(rows)
                self.folded.setdefault(port, Counter()).update(dict.fromkeys(rows.rows(), 0))
                for row, weight in zip(rows.rows(), rows.weight_list()):  # a changelog: -old/+new with weights
                    self.folded[port][row] += weight
                continue
            stream = op.internal_streams().outputs[port - declared][0]
            dst = int(stream.rsplit("@", 1)[1])
            self.sent.update(m[0] + ("!" if m[0] == "k" and m[3] else "") for m in rows)
            self.chunks.extend(m for m in rows if m[0] == "k")
            self.links.setdefault((src, dst), deque()).append([list(m) for m in rows])  # as msgpack would

    def publish(self, member: int, relation: str, events: list[tuple[int, tuple]], batch=None) -> None:
        """Events ``(sign, row)`` of ``relation`` (rows with ``datetime.date``s) as one batch into ``member``;
        ``batch``: what is sent for them instead of their rows (the same events as Arrow ``Columns``)."""
        producer = _producer_for(relation, member, self.coordinators)  # a publisher would pick ``member`` for it
        self.publish_as(member, relation, producer, events, batch)

    def publish_as(self, member: int, relation: str, producer: str, events: list[tuple[int, tuple]],
                   batch=None) -> int:
        """Events of ``relation`` as the next batch of ``producer``, into ``member`` (the single runtime takes
        them as well); returns its sequence number."""
        self.single.apply_grouped([(relation, s, [r]) for s, r in events])
        seq = self._seq.get((relation, producer), 0)
        self._seq[(relation, producer)] = seq + 1
        self.batches[(relation, producer, seq)] = (relation, events)
        self.resend(member, relation, producer, seq, batch)
        return seq

    def resend(self, member: int, relation: str, producer: str, seq: int, batch=None) -> None:
        """Batch ``seq`` of ``producer`` (published before) into ``member``: what a publisher that redirected its
        link sends again of what it had not seen acknowledged (docs/cumulus.md §6.5)."""
        _, events = self.batches[(relation, producer, seq)]
        rows = [tuple(micros_of(v) if isinstance(v, dt.date) else v for v in row) + (sign,) for sign, row in events]
        rows = rows if batch is None else batch
        op = self.members[member]
        self._collect(member, op.process_from(self.port_of[relation], rows, self.now, (relation, producer, seq)))

    def feed(self, workload, rng: random.Random, each=None, tick: float = 0.3) -> None:
        """Publish a workload's steps ``(relation, events, member, deliveries)``: each into member ``member``
        (modulo the members publishers pick from), then ``deliveries`` messages delivered, and with chance
        ``tick`` 0.1 s passing; ``each(step)`` runs after every step (a check, a restart, a failover)."""
        for step, (rel, events, member, deliveries) in enumerate(workload):
            self.publish(member % self.coordinators, rel, events)
            for _ in range(deliveries):
                self.deliver_one()
            if rng.random() < tick:
                self.tick(0.1)
            if each is not None:
                each(step)

    def stable_read(self) -> tuple[int, dict[str, dict], Runtime] | None:
        """The leader's stable epoch, every map read at it across the members, and a runtime fed the batches
        its positions cover; None before the first stable epoch."""
        info = self.members[0].stable_info()
        if info["epoch"] < 0:
            return None
        epoch = info["epoch"]
        maps = {m.name: {} for m in self.program.maps}
        for m, op in enumerate(self.members[:len(info["layout_at"]["members"])]):  # the members of that epoch
            view = op.hosted[m].at_epoch(epoch)  # (a guest member after a failover: hosted by another's operator)
            for name in maps:
                maps[name].update(view.read_slice(name))
        upto = {(s, p): q for s, p, q in info["positions"]}
        expected = Runtime(self.program)
        for (stream, producer, seq), (relation, events) in sorted(self.batches.items()):
            if seq <= upto.get((stream, producer), -1):
                expected.apply_grouped([(relation, s, [r]) for s, r in events])
        return epoch, maps, expected

    def deliver_one(self) -> bool:
        busy = [k for k, q in self.links.items() if q]
        if not busy:
            return False
        src, dst = self.rng.choice(busy)
        batch = self.links[(src, dst)].popleft()
        op = self.members[dst]
        port = op.internal_streams().inputs[f"{self.box.name}@{dst}"]  # a guest member has an in port of its own
        self._collect(dst, op.process(port, batch, self.now))
        return True

    def operators(self) -> dict[int, PartOperator]:
        """Each operator once (a node's, hosting a guest after a failover, stands for two members), by a member."""
        found: dict[int, PartOperator] = {}
        for m, op in enumerate(self.members):
            if all(op is not other for other in found.values()):
                found[m] = op
        return found

    def tick(self, seconds: float) -> None:
        self.now += seconds
        for i, op in self.operators().items():
            deadline = op.next_deadline()
            if deadline is not None and deadline <= self.now:
                self._collect(i, op.poll(self.now))

    def settle(self, limit: int = 100_000) -> None:
        """Deliver and tick until nothing moves and no timer waits."""
        for _ in range(limit):
            if self.deliver_one():
                if self.rng.random() < 0.05:
                    self.tick(0.05)
                continue
            if any(op.next_deadline() is not None for op in self.members):
                self.tick(0.1)
                continue
            return
        raise AssertionError("the simulated cluster did not settle")

    def relayout(self, change: str, queue: bool = False) -> bool:
        """Ask the leader for a random move, split or rebalance (as ``boreas move/split/rebalance`` would);
        ``queue``: also while a change is under way (the API refuses then), from the newest layout decided."""
        from boreas.m3.cumulus import relayout as changes

        leader = self.members[0]
        if not queue and leader.relayout_busy() is not None:
            return False
        lay = leader.latest_layout
        kind = self.rng.choice(["move", "split", "rebalance", "move_all"])
        try:
            if kind == "move":
                seg = self.rng.choice(lay.segments)
                new = changes.move(lay, seg.id, self.rng.choice([m for m in range(len(lay.members)) if m != seg.member]))
            elif kind == "split":
                new = changes.split(lay, self.rng.choice(lay.segments).id)
            elif kind == "move_all":
                new = changes.move_all(lay, self.rng.randrange(len(lay.members)))
            else:
                counts = {}
                for op in self.members:
                    for sid, per_map in op.segment_entries().items():
                        counts[sid] = counts.get(sid, 0) + sum(per_map.values())
                new = changes.rebalance(lay, counts)
                if new is lay:
                    return False
        except (ValueError, IndexError):  # one member, one-slot segment, already there
            return False
        self.request(change, new)
        return True

    def request(self, change: str, new: Layout) -> None:
        """Ask the leader for layout ``new`` (the next version of its newest decided layout)."""
        from boreas.node.cumulus import messages as msg

        self.changes += 1  # change ids are unique (the API draws them at random), messages find changes by id
        self._collect(0, self.members[0].process(len(self.box.inputs), [msg.request(f"{change}/{self.changes}",
                                                                                    new.to_dict())], self.now))

    def cancel(self, change: str) -> None:
        """Ask the leader to cancel change ``change`` (its id as :meth:`request` made it), as the API does."""
        from boreas.node.cumulus import messages as msg

        leader = self.members[0]
        self._collect(0, leader.process(leader.internal_streams().inputs[f"{self.box.name}@0"],
                                        [msg.cancel(change, True)], self.now))

    def grow(self, node: str) -> int:
        """A node appended to the partition, as a resubmitted ``<partition>`` does (docs/cumulus.md §6.4): every
        member follows the catalog in place; the new one joins at the first layout change that names it."""
        old = self.members[0].partition
        self.nodes = (*self.nodes, node)
        partition = replace(old, nodes=self.nodes, members=len(old.layout_nodes),
                            coordinators=len(old.modulo_nodes))
        for op in self.operators().values():
            assert op.follows(partition)
            op.partition = partition  # (as the dataflow does once an operator follows)
        self.members.append(PartOperator(self.box, self.members[0].inputs, self.members[0].outputs,
                                         partition, node))
        return len(self.members) - 1

    def restart(self, member: int) -> None:
        """Member ``member`` continues from its own state() (a snapshot restored on a restarted node)."""
        op = self.members[member]
        partition = replace(op.partition, nodes=self.nodes)
        fresh = PartOperator(op.box, op.inputs, op.outputs, partition, self.nodes[member])
        fresh.restore(msgspec.msgpack.decode(msgspec.msgpack.encode(op.state())), self.now)
        self.members = [fresh if other is op else other for other in self.members]

    def fail_over(self, member: int, to: int) -> None:
        """Member ``member``'s node fails over to member ``to``'s (docs/cumulus.md §6.3): ``to``'s node now
        hosts it as a guest, from its state; what ``to`` had sent it and it never took, and what it had sent
        ``to``, come first.  The partition's endpoint of ``member`` becomes ``to``'s."""
        failed, host = self.members[member], self.members[to]
        if failed is host:
            return
        nodes = self.nodes = tuple(self.nodes[to] if n == self.nodes[member] else n for n in self.nodes)
        partition = replace(host.partition, nodes=nodes)
        for op in self.operators().values():  # every node follows the new endpoints in place, as a catalog update does
            if op is not failed:
                assert op.follows(partition)
        fresh = host  # now hosting the failed member(s) too, without state yet
        hosted = [m for m, op in enumerate(self.members) if op is host or op is failed]
        pending: dict[int, list] = {}
        for (src, dst), queue in self.links.items():
            if src in hosted and dst in hosted:  # between members now hosted together: delivered inside
                pending.setdefault(dst, []).extend(m for batch in queue for m in batch)
                queue.clear()
        state = msgspec.msgpack.decode(msgspec.msgpack.encode(failed.state()))  # with any guests it hosted
        ends = (self._node_of(to), self._node_of(member))  # the host's link end, then the failed node's
        self.members = [fresh if m in hosted else op for m, op in enumerate(self.members)]
        for dst in range(len(self.members)):
            if dst not in hosted:  # the failed node's undelivered messages: resent by the adopter (its
                merged = deque(b for end in ends for b in self.links.pop((end, dst), ()))  # replay) after its own
                if merged:
                    self.links[(self._node_of(to), dst)] = merged
        self._collect(to, fresh.take_guests(state, pending, self.now))
