"""Members of one partitioned ``m3`` box in process, for the windowed and top-N member tests.

Real :class:`~boreas.node.cumulus.part.PartOperator`\\s on nodes ``n0..n{k-1}``; the messages between members
wait on per-link queues and are delivered one at a time from a random busy link (each link in its order), the
flow clock moves by :meth:`MemberCluster.tick`, and :meth:`MemberCluster.relayout` asks the leader for a random
move, split or rebalance as ``boreas move/split/rebalance`` would.  A test's subclass says what it keeps of the
rows the box emits (:meth:`MemberCluster.emitted`).

Each node's end of the box's out stream is kept by a copy of node/router.py's rules (node/stream_ends.py), written
here by hand, so a test through this harness does not test the router (tests/test_stream_ends.py does): a node's
input ends when every producer that published to it ended (``producer_ended``, then ``end_of_input``); its out
stream then ends at once, or is held while the operator ``holds_end()`` and ends after the first of its calls
that no longer does; a node whose producers all ended, or that none published to, ends it after the first
call at which the operator no longer ``holds_end()`` (the end settled: node/router.py ``_ended_everywhere``).  A row the box emits on a node after its out stream ended is kept in
:attr:`MemberCluster.after_final` (a subscriber would get it after ``final``).  :meth:`MemberCluster.fail_over`
hosts a member on another member's node, as a failover does (docs/cumulus.md §6.3).  :mod:`support.cumulus_sim` is the general harness (any
program, several relations); this one is the small shape both tests share.
"""

from __future__ import annotations

import dataclasses
import random
import zlib
from collections import Counter, deque

import msgspec
from boreas.catalog.model import Box, Partition, Schema
from boreas.m3.boxtype import infer_m3, plan_m3_partition
from boreas.m3.cumulus import relayout as changes
from boreas.node.cumulus import messages as msg
from boreas.node.cumulus.windowing import part_operator


class MemberCluster:
    """The members of box ``box`` reading ``schema`` on port 0, partitioned by ``key`` over ``members`` nodes."""

    def __init__(self, box: Box, schema: Schema, key: str, members: int, rng: random.Random):
        nodes = tuple(f"n{i}:1" for i in range(members))
        self.box, self.schema, self.stream = box, schema, box.inputs[0].stream
        self.outputs = infer_m3(box, [schema])
        self.partition = plan_m3_partition(box, [schema], Partition(box.name, nodes, count=6, key=key, epoch_ms=100))
        self.members = [part_operator(box, [schema], self.outputs, self.partition, n) for n in nodes]
        self.links: dict[tuple[int, int], deque] = {}
        self.rng, self.now = rng, 0.0
        self.relayouts = 0
        self.blocked: set[tuple[int, int]] = set()  # links whose messages wait (a slow link)
        self.published: list[set[str]] = [set() for _ in nodes]  # per node, the producers that published to it
        self.ended: list[set[str]] = [set() for _ in nodes]  # ... and those whose final mark came
        self.out_end: list[str] = ["open"] * members  # per node, its out stream: "open", "held" or "ended"
        self.after_final: list[tuple[int, object]] = []  # (node, rows) emitted after the node's out stream ended
        self.wire = False  # whether messages between members pass through msgpack, as on a real link
        self.publishers = members  # the nodes producers publish to (a grown node gets no producer)

    def emitted(self, member: int, rows) -> None:
        """Rows the box emitted on its out stream at ``member`` (a subclass keeps what its test compares)."""
        raise NotImplementedError

    def node_of(self, member: int) -> int:
        """The node hosting ``member`` (named by its first member: two members share one after a failover)."""
        op = self.members[member]
        return next(m for m, other in enumerate(self.members) if other is op)

    def _collect(self, src: int, emitted) -> None:
        op = self.members[src]
        src = self.node_of(src)
        for port, rows in emitted:
            if port == 0:
                if self.out_end[src] == "ended":
                    self.after_final.append((src, rows))
                self.emitted(src, rows)
                continue
            dst = int(op.internal_streams().outputs[port - 1][0].rsplit("@", 1)[1])
            self.links.setdefault((src, dst), deque()).append([list(m) for m in rows])
        if self.out_end[src] == "held" and not op.holds_end():  # (the router asks after each call: ``produce``)
            self.out_end[src] = "ended"
        elif self.out_end[src] == "open" and self.ended[src] >= self.published[src] and not op.holds_end():
            self.out_end[src] = "ended"  # the end settled, and no producer here is open: a copy of node/router.py
            # ``_ended_everywhere``'s rule (a node no producer publishes to), kept by hand; producers are pinned to
            # their first node here (no handed-away producer), and the router's own rule is tested in
            # tests/test_stream_ends.py, not through this harness

    def member_of(self, producer: str) -> int:
        """The member a producer's publisher picks before any layout change lists coordinators."""
        return zlib.crc32(producer.encode()) % self.publishers

    def publish(self, producer: str, seq: int, batch) -> None:
        member = self.member_of(producer)
        self.published[self.node_of(member)].add(producer)
        self._collect(member, self.members[member].process_from(0, batch, self.now, (self.stream, producer, seq)))

    def end(self, producer: str) -> None:
        """``producer``'s final mark; the last of a node's producers ends the box's input there, and its out
        stream ends, or waits while the operator holds it (node/router.py ``_ended``)."""
        member = self.member_of(producer)
        node = self.node_of(member)
        op = self.members[member]
        self.published[node].add(producer)
        self.ended[node].add(producer)
        self._collect(member, op.producer_ended(0, producer, self.now))
        if self.ended[node] >= self.published[node] and self.out_end[node] == "open":
            self._collect(member, op.end_of_input(self.now))
            self.out_end[node] = "held" if op.holds_end() else "ended"

    def deliver_one(self) -> bool:
        busy = [k for k, q in self.links.items() if q and k not in self.blocked]
        if not busy:
            return False
        src, dst = self.rng.choice(busy)
        op = self.members[dst]
        inbound = op.internal_streams().inputs[f"{self.box.name}@{dst}"]
        batch = self.links[(src, dst)].popleft()
        if self.wire:
            batch = msgspec.msgpack.decode(msgspec.msgpack.encode(batch))
        self._collect(dst, op.process(inbound, batch, self.now))
        return True

    def _inbound(self, member: int) -> int:
        """The in port of ``member``'s internal stream (after the box's in ports)."""
        return self.members[member].internal_streams().inputs[f"{self.box.name}@{member}"]

    def operators(self) -> dict[int, object]:
        """Each operator once, by the first member it hosts."""
        return {m: self.members[m] for m in range(len(self.members)) if self.node_of(m) == m}

    def tick(self, seconds: float) -> None:
        self.now += seconds
        for i, op in self.operators().items():
            deadline = op.next_deadline()
            if deadline is not None and deadline <= self.now:
                self._collect(i, op.poll(self.now))

    def settle(self, relayouts_too: bool = False) -> None:
        """Deliver and tick until nothing is due (and, with ``relayouts_too``, no layout change is in progress)."""
        for _ in range(100_000):
            if self.deliver_one():
                continue
            if any(op.next_deadline() is not None and op.next_deadline() <= self.now + 0.2
                   for op in self.operators().values()):
                self.tick(0.1)
                continue
            if relayouts_too and self.members[0].relayout_busy() is not None:
                self.tick(0.1)
                continue
            return
        raise AssertionError("the members did not settle")

    def relayout(self) -> bool:
        """Ask the leader for a random move, split or rebalance; False when it is busy or the change is not possible."""
        leader = self.members[0]
        if leader.relayout_busy() is not None:
            return False
        lay = leader.latest_layout
        kind = self.rng.choice(["move", "split", "rebalance"])
        try:
            if kind == "move":
                seg = self.rng.choice(lay.segments)
                new = changes.move(lay, seg.id, self.rng.choice([m for m in range(len(lay.members)) if m != seg.member]))
            elif kind == "split":
                new = changes.split(lay, self.rng.choice(lay.segments).id)
            else:
                counts: Counter = Counter()
                for op in self.members:
                    for sid, per_map in op.segment_entries().items():
                        counts[sid] += sum(per_map.values())
                new = changes.rebalance(lay, counts)
        except (ValueError, IndexError):
            return False
        self.relayouts += 1
        self._collect(0, leader.process(self._inbound(0), [msg.request(f"change/{self.relayouts}", new.to_dict())], self.now))
        return True

    def restart(self, member: int) -> None:
        """Member ``member`` continues from its own state (a snapshot restored on a restarted node)."""
        op = self.members[member]
        fresh = part_operator(self.box, [self.schema], self.outputs, self.partition, op.endpoint)
        fresh.restore(msgspec.msgpack.decode(msgspec.msgpack.encode(op.state())), self.now)
        self.members[member] = fresh

    def grow(self, node: str) -> int:
        """A node appended to the partition, as a resubmitted ``<partition>`` does (docs/cumulus.md §6.4, as
        tests/support/cumulus_sim.py's): every member follows the catalog in place; the new member joins at the
        first layout change that names it (:meth:`move`)."""
        old = self.members[0].partition
        partition = dataclasses.replace(old, nodes=(*old.nodes, node), members=len(old.layout_nodes),
                                        coordinators=len(old.modulo_nodes))
        for op in self.operators().values():
            assert op.follows(partition)
            op.partition = partition  # (as the dataflow does once an operator follows)
        self.members.append(part_operator(self.box, [self.schema], self.outputs, partition, node))
        self.published.append(set())
        self.ended.append(set())
        self.out_end.append("open")
        return len(self.members) - 1

    def move_to_a_new_node(self, slot: int, coordinator: int) -> int:
        """:meth:`grow` by a node and ask the leader to move the segment holding ``slot`` to it; return the new
        member once ``coordinator`` stamps with the change's first epoch (the new member passed no Close yet)."""
        new = self.grow(f"n{len(self.members)}:1")
        leader = self.members[0]
        assert leader.relayout_busy() is None
        seg = next(s for s in leader.latest_layout.segments if s.lo <= slot < s.hi)
        self.relayouts += 1
        layout = changes.move(leader.joinable_layout(), seg.id, new)
        self._collect(0, leader.process(self._inbound(0), [msg.request(f"change/{self.relayouts}", layout.to_dict())], self.now))
        for _ in range(100_000):
            p = leader.parts.changes.pending
            if p is not None and p.first is not None and self.members[coordinator].parts.coordinator.epoch >= p.first:
                return new
            if not self.deliver_one():
                self.tick(0.01)
        raise AssertionError("the change did not flip")

    def fail_over(self, member: int, to: int) -> None:
        """Member ``member``'s node fails; ``to``'s node hosts it as a guest from its state (docs/cumulus.md §6.3,
        as tests/support/cumulus_sim.py's): the messages between them come first, the failed node's others are
        resent from ``to``'s, and its producers publish to ``to``'s node from now on."""
        failed, host = self.members[member], self.members[to]
        gone, at = self.node_of(member), self.node_of(to)
        nodes = tuple(host.partition.nodes[to] if n == failed.endpoint else n for n in host.partition.nodes)
        partition = dataclasses.replace(host.partition, nodes=nodes)
        for op in self.operators().values():
            if op is not failed:
                assert op.follows(partition)
                op.partition = partition
        hosted = [m for m, op in enumerate(self.members) if op is host or op is failed]
        pending: dict[int, list] = {}
        for (src, dst), queue in self.links.items():
            if src in hosted and dst in hosted:
                pending.setdefault(dst, []).extend(m for batch in queue for m in batch)
                queue.clear()
        state = msgspec.msgpack.decode(msgspec.msgpack.encode(failed.state()))
        self.members = [host if m in hosted else op for m, op in enumerate(self.members)]
        for dst in range(len(self.members)):
            if dst not in hosted:
                merged = deque(b for end in (at, gone) for b in self.links.pop((end, dst), ()))
                if merged:
                    self.links[(at, dst)] = merged
        self.blocked = {(at if s == gone else s, d) for s, d in self.blocked}
        self.published[at] |= self.published[gone]
        self.ended[at] |= self.ended[gone]
        self._collect(to, host.take_guests(state, pending, self.now))
