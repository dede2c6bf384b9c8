"""Members of a partitioned TUMBLE box in process, each on a node with its own flow clock, for
tests/test_cumulus_windows_marks.py: links that can be held (a slow link), producers tracked per node so
a node's input ends when its last producer does, nodes grown into the partition and retired.
:mod:`support.member_cluster` is the plain harness (one clock, no held links)."""

from __future__ import annotations

import dataclasses
import random
from collections import Counter, deque

import msgspec
from boreas.catalog.model import Box, Field, FieldType, InPort, Partition, Schema
from boreas.m3.boxtype import infer_m3, plan_m3_partition
from boreas.m3.cumulus import relayout as changes
from boreas.node.cumulus import messages as msg
from boreas.node.cumulus.windowing import part_operator

BID = Schema("BidTuple", (Field("auction", FieldType.INT), Field("price", FieldType.INT), Field("ts", FieldType.LONG)))
SIZE, DELAY, IDLE = 1000, 300, 1.0
SQL = (f"CREATE STREAM Bid(auction INT, price INT, ts BIGINT, WATERMARK FOR ts AS ts - {DELAY});\n"
       "SELECT auction, window_start, window_end, COUNT(*) AS n, SUM(price) AS total\n"
       f"FROM TABLE(TUMBLE(TABLE Bid, DESCRIPTOR(ts), INTERVAL '{SIZE}' MILLISECOND)) "
       "GROUP BY auction, window_start, window_end")



class Cluster:
    """Members of box ``w`` on nodes n0..n{k-1}, their links, a flow clock per node (``offset`` from the
    test's); ``sql``: the box's, over ``schema`` (a TUMBLE view over ``BID`` unless told); ``streams``: its in
    streams and their schemas, by port (``{"Bid": schema}`` unless told), partitioned on ``key``."""

    def __init__(self, members: int, seed: int = 0, idle: float | None = IDLE, sql: str = SQL, schema: Schema = BID,
                 streams: dict[str, Schema] | None = None, key: str = "auction"):
        nodes = tuple(f"n{i}:1" for i in range(members))
        streams = streams or {"Bid": schema}
        self.streams, self.schemas = list(streams), list(streams.values())
        self.schema = schema
        self.box = Box("w", "m3", tuple(InPort(s) for s in streams), ("Out",),
                       (("sql", sql),) if idle is None else (("sql", sql), ("idle-timeout", str(idle))))
        self.outputs = infer_m3(self.box, self.schemas)
        self.partition = plan_m3_partition(self.box, self.schemas, Partition("w", nodes, count=6, key=key,
                                                                     epoch_ms=100))
        self.members = [part_operator(self.box, self.schemas, self.outputs, self.partition, n) for n in nodes]
        self.offset = [0.0] * members
        self.links: dict[tuple[int, int], deque] = {}
        self.rng, self.now = random.Random(seed), 0.0
        self.out: list[tuple] = []
        self.seqs: Counter = Counter()
        self.blocked: set[tuple[int, int]] = set()  # links whose messages wait (a slow link)
        # each node's producers, and ended ones: (port, producer)
        self.producers: list[set[tuple[int, str]]] = [set() for _ in range(members)]
        self.ended: list[set[tuple[int, str]]] = [set() for _ in range(members)]
        self.old_taken = False

    def clock(self, member: int) -> float:
        return self.now + self.offset[member]

    def _collect(self, src: int, emitted) -> None:
        op = self.members[src]
        for port, rows in emitted:
            if port == 0:
                self.out.extend(tuple(r) for r in rows)
                continue
            dst = int(op.internal_streams().outputs[port - 1][0].rsplit("@", 1)[1])
            messages = [list(m) for m in rows]
            if self.old_taken:  # (as a member of a version before ``Taken`` named the epoch it took over at)
                messages = [m[:3] if m[0] == msg.TAKEN else m for m in messages]
            self.links.setdefault((src, dst), deque()).append(messages)

    def publish(self, member: int, producer: str, rows: list[tuple], port: int = 0) -> None:
        """A batch of ``producer`` on in port ``port`` sent to ``member``, which coordinates it."""
        seq = self.seqs[producer]
        self.seqs[producer] += 1
        self.producers[member].add((port, producer))
        self._collect(member, self.members[member].process_from(port, rows, self.clock(member),
                                                                 (self.streams[port], producer, seq)))

    def end(self, member: int, producer: str, port: int = 0) -> None:
        """``producer``'s final mark on ``port`` sent to ``member``'s node; the last of the producers that node took
        the stream from ends the stream there (node/router.py: ``producer_ended``, then ``end_of_input``)."""
        self.producers[member].add((port, producer))
        self.ended[member].add((port, producer))
        op = self.members[member]
        self._collect(member, op.producer_ended(port, producer, self.clock(member)))
        if {k for k in self.producers[member] if k[0] == port} <= self.ended[member]:
            self.end_input(member, port)

    def end_input(self, member: int, port: int | None = None) -> None:
        """The box's input on ``port`` ended on ``member``'s node (node/router.py's ``end_of_input``; None: every
        in stream, as a node before the ports were told)."""
        self._collect(member, self.members[member].end_of_input(self.clock(member), port))

    def tick(self, seconds: float) -> None:
        """Time passes: the leader's epochs end, the links deliver."""
        self.now += seconds
        for i, op in enumerate(self.members):
            deadline = op.next_deadline()
            if deadline is not None and deadline <= self.clock(i):
                self._collect(i, op.poll(self.clock(i)))
        self.deliver()

    def deliver(self) -> None:
        while busy := [k for k, q in self.links.items() if q and k not in self.blocked]:
            src, dst = self.rng.choice(busy)
            op = self.members[dst]
            self._collect(dst, op.process(op.internal_streams().inputs[f"w@{dst}"],
                                          self.links[(src, dst)].popleft(), self.clock(dst)))

    def settle(self, seconds: float = 0.5) -> None:
        for _ in range(round(seconds / 0.05)):
            self.tick(0.05)

    def restart(self, member: int, offset: float) -> None:
        """Member ``member`` continues from its state on a node whose flow clock is ``offset`` ahead."""
        op = self.members[member]
        self.offset[member] = offset
        fresh = part_operator(self.box, self.schemas, self.outputs, self.partition, op.endpoint)
        fresh.restore(msgspec.msgpack.decode(msgspec.msgpack.encode(op.state())), self.clock(member))
        self.members[member] = fresh

    def grow(self) -> int:
        """A node appended to the partition and made a member and a coordinator by a layout change that moves a
        segment to it (as ``boreas rebalance`` after a resubmitted ``<partition>``, docs/cumulus.md §6.4)."""
        old = self.members[0].partition
        nodes = (*old.nodes, f"n{len(old.nodes)}:1")
        partition = dataclasses.replace(old, nodes=nodes, members=len(old.layout_nodes),
                                        coordinators=len(old.modulo_nodes))
        for op in self.members:
            assert op.follows(partition)
            op.partition = partition
        self.members.append(part_operator(self.box, self.schemas, self.outputs, partition, nodes[-1]))
        self.offset.append(0.0)
        self.producers.append(set())
        self.ended.append(set())
        new = len(self.members) - 1
        base = self.members[0].joinable_layout()
        self.request(dataclasses.replace(changes.move(base, base.segments[0].id, new),
                                         coordinators=tuple(range(new + 1))))
        return new

    def retire(self, member: int) -> None:
        """``member``'s segments moved to member 0, then it retires (``boreas retire``): off the coordinators."""
        back = self.members[0].latest_layout
        back = dataclasses.replace(back, version=back.version + 1, segments=tuple(
            dataclasses.replace(seg, member=0) if seg.member == member else seg for seg in back.segments))
        self.request(back)
        self.request(changes.retire(back, member, keep=member))

    def request(self, layout) -> None:
        self.seqs["change"] += 1
        self._collect(0, self.members[0].process(1, [msg.request(f"change/{self.seqs['change']}",
                                                                 layout.to_dict())], self.clock(0)))

    def late(self) -> int:
        return sum(op.counters()["late_tuples"] for op in self.members)
