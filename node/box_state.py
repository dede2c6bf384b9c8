"""The one owner of a node's boxes' state: what moves, snapshots, recovery and failover carry.

A box's whole state is more than its operator's ``state()``:

* the **operator** itself (windows, join buffers, delay queues, M3 maps,
  random generators), built from the box's declaration;
* its **producer id** and the next **sequence number** of each out stream,
  so its output is one unbroken numbered sequence wherever the box runs and
  however often it is replayed (receivers drop what they already have);
* its **input positions**: for each input (stream, producer) the next batch
  it has yet to take -- for a box that arrived by a move, a
  :meth:`Sequencer.for_box <boreas.wire.sequencing.Sequencer.for_box>` that
  also holds early batches; for the others, the last batch of each entering
  stream the node processed;
* the **pause** a moved box took (``/status``);
* which streams have **ended** and which boxes ended their out streams
  (:class:`~boreas.node.stream_ends.StreamEnds`, ``BoxStates.ends``).

:class:`BoxStates` holds all of it for one node, and is the only code that
changes it.  The dataflow runs the operators; a move takes one box out
(:meth:`BoxStates.take`) and puts it in on the target (:meth:`BoxStates.put`)
as a :class:`BoxHandover`; a snapshot is :meth:`BoxStates.capture`, a
recovery :meth:`BoxStates.restore`; failover replays a failed node's boxes
and hands each over like a move.

>>> from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
>>> schema = Schema("T", (Field("x", FieldType.INT),))
>>> states = BoxStates()
>>> box = Box("f", "filter", (InPort("S"),), ("O",), (("expression.0", "x > 1"),))
>>> states.follow({"f": box}, {"S": schema, "O": schema})
{}
>>> states.number("O", "f", "node"), states.number("O", "f", "node")[1]
(('f~...', 0), 1)
>>> h = states.take("f", positions=[("S", "pub", 3)])
>>> (h.box, h.out_seq, h.positions, "f" in states.operators)
('f', {'O': 2}, [('S', 'pub', 3)], False)
>>> BoxHandover.decode(h.encode()) == h
True
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec
from boreas.catalog.model import Box, Schema
from boreas.wire.columns import Columns, read_columns
from boreas.wire.digests import DigestBook
from boreas.wire.sequencing import Sequencer

from .gcpause import gc_paused
from .operators import Operator, OperatorError, build_operator
from .stream_ends import StreamEnds

#: How an operator is made from a box and its in and out schemas (default: :func:`build_operator`).
Builder = Callable[[Box, list[Schema], list[Schema]], Operator]

#: A batch as a box takes it: rows, or Arrow columns (a changelog's with their weights).
Rows = list[tuple] | Columns

#: Pauses kept per moved box (``/status``).
PAUSES_KEPT = 20


@dataclass
class BoxHandover:
    """One box's whole state, as it travels to another node (a move, a failover)."""

    box: str
    producer: str
    out_seq: dict[str, int]
    positions: list[tuple[str, str, int]]  # (input stream, producer, next sequence to take)
    state: dict[str, Any]
    detached_at: float = 0.0  # wall clock at the source: the box's pause starts here
    held: list[tuple[str, str, int, Rows]] = field(default_factory=list, compare=False)  # early batches
    links: list[Any] = field(default_factory=list, compare=False, repr=False)  # the source's forwards
    # What the source kept of the box's outputs for named subscribers ([name, encoded Batch]): they resume from it
    retained: list[list] = field(default_factory=list, compare=False, repr=False)
    # Which of its input streams have ended, and whether it ended its out streams (StreamEnds.of_box)
    ends: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def encode(self) -> bytes:
        return msgspec.msgpack.encode([self.box, self.producer, self.out_seq,
                                       [list(p) for p in self.positions], self.state, self.detached_at,
                                       self.retained, self.ends])

    @classmethod
    def decode(cls, data: bytes) -> "BoxHandover":
        box, producer, out_seq, positions, state, detached_at, *rest = msgspec.msgpack.decode(data)
        return cls(box, producer, out_seq, [tuple(p) for p in positions], state, detached_at,
                   retained=rest[0] if rest else [], ends=rest[1] if len(rest) > 1 else {})


class BoxStates:
    def __init__(self, on_new_box_id: Callable[[], None] | None = None):
        # The dataflow reads these while it runs boxes and records ``processed`` per batch; every
        # other change goes through the methods below.
        self.operators: dict[str, Operator] = {}
        self.boxes: dict[str, Box] = {}  # the declaration each operator was built from
        # Each box's place in ``boxes`` (ascending as inserted): the router orders a stream's consumers by it
        # when it rewires only what an update changed, as a whole rewiring walking ``boxes`` would.
        self.rank: dict[str, int] = {}
        self._ranks = itertools.count()
        self.broken: dict[str, str] = {}  # box -> why it could not be built
        # A box's output batches are numbered per (stream, box), not per node, so the numbering
        # can move with the box; the producer id is the box's name and a random incarnation.
        self.box_ids: dict[str, str] = {}
        self.out_seq: dict[str, int] = {}
        self.inputs: dict[str, Sequencer] = {}  # boxes that order their own inputs (arrived by a move)
        self.processed: dict[tuple[str, str], int] = {}  # (entering stream, producer) -> last seq here
        # the digests of the publishers' batches taken (recorded with ``processed``): the receiver refuses a
        # re-used sequence number with other rows (wire/digests.py); snapshots keep them
        self.digests = DigestBook()
        self.ends = StreamEnds()  # the streams that ended (every producer's final mark came) and the boxes they ended
        self.paused_since: dict[str, float] = {}
        self.move_pauses: dict[str, list[float]] = {}
        #: told ``(box, seconds)`` of every move pause as it ends (the node's metrics histogram)
        self.pause_observers: list[Callable[[str, float], None]] = []
        self.on_new_box_id = on_new_box_id  # persist producer ids as they are made (a durable node), once a follow()

    # -- following the catalog ----------------------------------------------------------

    def check(self, boxes: Mapping[str, Box], schemas: Mapping[str, Schema],
              build: Builder = build_operator, only: Collection[str] | None = None) -> dict[str, str]:
        """Which new or changed boxes could not run, and why (nothing changes here).

        A node checks an update this way before applying it, so a box it
        cannot run is refused with the reason instead of breaking later.
        ``only``: the names the update may have changed (every other box is the
        one held); ``boxes`` then needs only those of them it declares.
        """
        reasons: dict[str, str] = {}
        pairs = boxes.items() if only is None else ((n, boxes[n]) for n in only if n in boxes)
        made = 0  # new producer ids
        for name, box in pairs:
            if self._held(name, box, schemas):
                continue
            missing = [s for s in [p.stream for p in box.inputs] + list(box.outputs) if s not in schemas]
            if missing:
                reasons[name] = f"the schema of stream {missing[0]!r} cannot be told here"
                continue
            try:
                build(box, [schemas[p.stream] for p in box.inputs], [schemas[s] for s in box.outputs])
            except OperatorError as exc:
                reasons[name] = str(exc)
            except Exception as exc:  # a box type's own bug must refuse the update, not break the node
                reasons[name] = f"{box.type} box {name!r} cannot be built: {type(exc).__name__}: {exc}"
        return reasons

    def follow(self, boxes: Mapping[str, Box], schemas: Mapping[str, Schema],
               keep_state: Iterable[str] = (), build: Builder = build_operator,
               rebuild: Iterable[str] = (), only: Collection[str] | None = None) -> dict[str, str]:
        """Keep unchanged boxes (and their state), build new ones (with ``build``); returns the broken ones.

        Boxes named in ``keep_state`` carry their state over though their
        declaration changed (a box whose in port was rewired to a filter);
        boxes named in ``rebuild`` are built again though it did not (their
        partition changed), and keep their state too.  ``only``: the names the
        new catalog may have changed, in the order its boxes list them (an
        update's; :class:`~boreas.node.slice_change.SliceChange`): every other
        box is the one held, so the walk is over those, not every box (issue
        37); ``boxes`` then needs only those of them it declares, and the
        broken ones must be among them (they are tried again).
        """
        rebuild = {name for name in rebuild if name in self.operators}
        keep_state = set(keep_state) | rebuild
        kept = {name: self.operators[name].state() for name in keep_state if name in self.operators}
        if only is None:
            gone_ids, gone = set(self.box_ids) - set(boxes), set(self.operators) - set(boxes)
        else:
            gone_ids = {n for n in only if n not in boxes and n in self.box_ids}
            gone = {n for n in only if n not in boxes and n in self.operators}
        for name in gone_ids:  # deleted: a new box of that name starts afresh
            outputs = self.boxes[name].outputs if name in self.boxes else ()
            for stream in outputs:
                self.out_seq.pop(stream, None)
            self.ends.forget_box(name, outputs)  # nor has it ended anything, nor does a final mark of it wait
            del self.box_ids[name]
        for name in gone:
            del self.operators[name]
            self.boxes.pop(name, None)
            self.rank.pop(name, None)
        self.broken = {}
        pairs = boxes.items() if only is None else ((n, boxes[n]) for n in only if n in boxes)
        made = 0  # new producer ids
        for name, box in pairs:
            if name not in rebuild and self._held(name, box, schemas):
                continue
            try:
                operator = build(box, [schemas[p.stream] for p in box.inputs],
                                          [schemas[s] for s in box.outputs])
            except (KeyError, OperatorError) as exc:
                self.broken[name] = str(exc)
                self.operators.pop(name, None)
                continue
            if name in kept:
                operator.restore(kept[name])
            if name not in self.boxes:
                self.rank[name] = next(self._ranks)
            self.operators[name], self.boxes[name] = operator, box
            if name not in self.box_ids:
                self.box_ids[name] = f"{name}~{uuid.uuid4().hex[:12]}"
                made += 1
        if made and self.on_new_box_id is not None:  # once for them all: nothing ran under them yet
            self.on_new_box_id()  # (once per box wrote the whole identity per box: 20,000 boxes, 20,000 writes)
        return dict(self.broken)

    def _held(self, name: str, box: Box, schemas: Mapping[str, Schema]) -> bool:
        """Whether box ``name``'s operator held here runs ``box`` as declared: the same box, built with the
        schemas its streams have now.  A box is built with its streams' schemas, so one whose declaration
        did not change but whose in or out stream's schema did (an ``<input>`` given another schema) is
        built again, or it would read rows of the new layout by the old one.  A stream whose schema cannot
        be told here (its declaration went) keeps the box as built, as before."""
        operator = self.operators.get(name)
        if operator is None or not _same(self.boxes.get(name), box):
            return False
        streams = [p.stream for p in box.inputs]
        return (all(schemas.get(s, built) == built for s, built in zip(streams, operator.inputs))
                and all(schemas.get(s, built) == built for s, built in zip(box.outputs, operator.outputs)))

    # -- numbering and positions ----------------------------------------------------------

    def number(self, stream: str, box: str | None, sender: str) -> tuple[str, int]:
        """(producer, seq) of the next batch of ``stream`` written by ``box`` (or the node, ``sender``)."""
        producer = self.box_ids.get(box, sender) if box else sender
        seq = self.out_seq.get(stream, 0)
        self.out_seq[stream] = seq + 1
        return producer, seq

    def positions(self, name: str, producer_of: dict[str, str]) -> list[tuple[str, str, int]]:
        """(stream, producer, next sequence) of every input batch box ``name`` has yet to process."""
        if name in self.inputs:
            return self.inputs[name].box_positions()
        positions: list[tuple[str, str, int]] = []
        for port in self.boxes[name].inputs:
            local = producer_of.get(port.stream)
            if local is not None and local != name:
                positions.append((port.stream, self.box_ids[local], self.out_seq.get(port.stream, 0)))
            else:
                positions += [(s, p, seq + 1) for (s, p), seq in self.processed.items() if s == port.stream]
        return positions

    def admit(self, name: str, stream: str, producer: str, seq: int, rows: Rows) -> list[Rows]:
        """A batch for a box that orders its own inputs: the batches now next for it, in order.

        Each is held as it came: :class:`~boreas.wire.columns.Columns` keep a
        changelog's weights (a snapshot keeps them too: :meth:`capture`).
        """
        ready = self.inputs[name].ordered(stream, producer, seq, rows)
        if ready and name in self.paused_since:
            pauses = self.move_pauses.setdefault(name, [])
            pauses.append(time.time() - self.paused_since.pop(name))
            del pauses[:-PAUSES_KEPT]
            for observe in self.pause_observers:
                observe(name, pauses[-1])
        return ready

    # -- moves ---------------------------------------------------------------------------

    def take(self, name: str, positions: list[tuple[str, str, int]]) -> BoxHandover:
        """Take box ``name`` out (it leaves this node), with everything its future depends on."""
        box = self.boxes.pop(name)
        self.rank.pop(name, None)
        with gc_paused():
            state = self.operators.pop(name).state()
        inputs = self.inputs.pop(name, None)
        return BoxHandover(name, self.box_ids.pop(name), {s: self.out_seq.pop(s, 0) for s in box.outputs},
                           positions, state, time.time(),
                           held=inputs.held_items() if inputs is not None else [],
                           ends=self.ends.of_box(name, [port.stream for port in box.inputs]))

    def put(self, handover: BoxHandover, now: float) -> None:
        """Continue a box where another node left it (its declaration was applied here first)."""
        with gc_paused():
            self.operators[handover.box].restore(handover.state, now=now)
        self.inputs[handover.box] = Sequencer.for_box(handover.positions)
        for stream, producer, seq, rows in handover.held:
            self.inputs[handover.box].hold(stream, producer, seq, rows)
        self.box_ids[handover.box] = handover.producer
        self.paused_since[handover.box] = handover.detached_at
        for stream, seq in handover.out_seq.items():
            self.out_seq[stream] = max(seq, self.out_seq.get(stream, 0))
        self.ends.merge(handover.ends)

    # -- snapshots and recovery ------------------------------------------------------------

    def capture(self) -> dict[str, Any]:
        """Everything the boxes remember, between two batches (fresh containers: encode them anywhere)."""
        return {
            "boxes": {name: op.state() for name, op in self.operators.items()},
            "box_ids": dict(self.box_ids),
            "out_seq": dict(self.out_seq),
            "processed": [[s, p, seq] for (s, p), seq in self.processed.items()],
            "digests": self.digests.state(),
            "ends": self.ends.state(),
            "box_inputs": {name: {"next": [list(p) for p in inputs.box_positions()],
                                  "held": [[s, p, n, _kept(rows)] for s, p, n, rows in inputs.held_items()]}
                           for name, inputs in self.inputs.items()},
        }

    def adopt_identity(self, box_ids: dict[str, str]) -> None:
        """Producer ids from a node's identity file (a restart, or a failover's replay)."""
        self.box_ids.update(box_ids)

    def restore(self, captured: dict[str, Any]) -> list[str]:
        """Continue from :meth:`capture` after a restart; returns the boxes that got their state back."""
        self.box_ids.update(captured["box_ids"])
        self.out_seq.update({s: int(n) for s, n in captured["out_seq"].items()})
        self.processed.update({(s, p): int(seq) for s, p, seq in captured["processed"]})
        self.digests.restore(captured.get("digests", []))
        self.ends.restore(captured.get("ends"))
        restored = []
        for name, state in captured["boxes"].items():
            op = self.operators.get(name)
            if op is None:
                continue  # the box left (moved or deleted) after this snapshot
            op.restore(state)
            restored.append(name)
        for name, inputs in captured["box_inputs"].items():
            if name in self.operators:
                sequencer = self.inputs[name] = Sequencer.for_box([tuple(p) for p in inputs["next"]])
                for s, p, n, rows in inputs["held"]:
                    sequencer.hold(s, p, n, _taken(rows))
        return restored

    def handover(self, name: str, producer_of: dict[str, str]) -> BoxHandover:
        """Box ``name`` as a move would hand it over, without taking it out (failover's replay)."""
        box = self.boxes[name]
        inputs = self.inputs.get(name)
        return BoxHandover(name, self.box_ids[name], {s: self.out_seq.get(s, 0) for s in box.outputs},
                           self.positions(name, producer_of), self.operators[name].state(), time.time(),
                           held=inputs.held_items() if inputs is not None else [],
                           ends=self.ends.of_box(name, [port.stream for port in box.inputs]))


def _kept(rows: Rows) -> list | bytes:
    """A held batch as a snapshot keeps it: rows as they are, columns as IPC bytes (their weights a column)."""
    return rows.ipc() if isinstance(rows, Columns) else rows


def _taken(kept: list | bytes) -> Rows:
    """A held batch from a snapshot, as it was held (see :func:`_kept`)."""
    return read_columns(kept) if isinstance(kept, bytes) else [tuple(r) for r in kept]


def _same(held: Box | None, box: Box) -> bool:
    """Whether ``box`` is the box held (the very object first: an update shares every box it leaves alone, and
    comparing 5,000 of them field by field per update was a tenth of a node's apply: issue 37)."""
    return held is box or held == box
