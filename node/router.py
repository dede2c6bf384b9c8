"""Where a batch goes on a node: through every local box it reaches, depth first, then out.

:class:`Router` is the one owner of a node's routes: which (operator, box,
in port) consume each stream, which local box writes each stream, the
:class:`~boreas.node.box_inputs.Bridge`\\ s that keep an old stream feeding a
rewired port, and the per-stream and per-box counts ``/metrics`` shows.  The
:class:`~boreas.node.operator_host.OperatorHost` tells it the routes after
every local catalog (:meth:`Router.rewire`); the box task, the timers and
the replayer hand it batches (:meth:`Router.enter`, :meth:`Router.emit`);
what leaves the node goes to :class:`~boreas.node.outputs.Outputs`.

A batch that entered the node is passed on under its own (producer, seq),
never joined with another; a box's output is held by the
:class:`~boreas.node.coalescer.Coalescer` until its batch closes (N rows, or
T ms of flow clock: a record taken or a timer firing past its deadline, a
snapshot, a move, an end of input), then numbered as the box's
(:meth:`BoxStates.number <boreas.node.box_state.BoxStates.number>`, so the
numbering moves with the box) and pushed to local consumers and out.  The clock every box sees is the :class:`~boreas.node.flow_clock.FlowClock`'s
current value.

>>> from collections import Counter
>>> from boreas.catalog.model import Box, Field, FieldType, InPort, Schema
>>> from boreas.node.box_state import BoxStates
>>> from boreas.node.flow_clock import FlowClock
>>> schema = Schema("T", (Field("x", FieldType.INT),))
>>> states = BoxStates()
>>> states.follow({"f": Box("f", "filter", (InPort("S"),), ("O",), (("expression.0", "x > 1"),))},
...               {"S": schema, "O": schema})
{}
>>> router = Router("n:1", "n:1#a", states, None, FlowClock(), Counter())
>>> router.rewire({})
>>> [(name, port) for _, name, port in router.consumers["S"]], router.producer_of
([('f', 0)], {'O': 'f'})
>>> router.remove_box("f")
>>> router.consumers["S"], router.producer_of
([], {})
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Collection, Iterable

from boreas.wire.columns import Columns, as_rows
from boreas.wire.tuples import RowType

from .box_inputs import Bridge
from .box_state import BoxStates
from .coalescer import BatchLimits, Coalescer
from .flow_clock import FlowClock
from .operators import Operator
from .operators.base import InternalStreams
from .outputs import Outputs
from .routes import Routes

log = logging.getLogger("boreas.node.dataflow")  # the dataflow's records keep their logger

Rows = list[tuple] | Columns


class Router:
    """Owns a node's routes (consumers, producers, bridges) and pushes batches along them."""

    def __init__(self, endpoint: str, sender: str, states: BoxStates, out: Outputs, clock: FlowClock,
                 counters: Counter[str], limits: BatchLimits | None = None):
        self.endpoint = endpoint
        self.sender = sender  # the node's producer id, for batches no box wrote (identity.json keeps it)
        self.states = states
        self.out = out
        self.clock = clock
        self.counters = counters
        self.routes = Routes()  # the routing table (node/routes.py); its two dicts are read here as they are
        self.consumers: dict[str, list[tuple[Operator, str, int]]] = self.routes.consumers  # stream -> (op, box, port)
        self.producer_of: dict[str, str] = self.routes.producer_of  # stream -> the local box that writes it
        # A filter inserted or removed across two nodes switches a box's in port from one stream
        # to another that comes over the same ordered link; batches of the old stream still on
        # their way go to the port until the first batch of the new one arrives.
        self.bridges: dict[str, Bridge] = {}  # old stream -> where it still goes
        self._internal: dict[str, InternalStreams] = {}  # box -> streams between its parts (the host's)
        self._cascade: list[str] | None = None  # while :meth:`close_due` runs: streams given rows meanwhile
        #: per stream, batches and tuples routed here (entered, or produced by a box here): ``/metrics``
        self.stream_batches: Counter[str] = Counter()
        self.stream_rows: Counter[str] = Counter()
        #: per box, batches it processed and the seconds its operator took over them
        self.box_batches: Counter[str] = Counter()
        self.box_seconds: Counter[str] = Counter()
        #: the boxes' output batches not yet closed (no limits given: every emit is a batch)
        self.coalescer = Coalescer(limits) if limits is not None else Coalescer()

    # -- the routes ---------------------------------------------------------------------

    def rewire(self, internal: dict[str, InternalStreams], changed: Collection[str] | None = None) -> None:
        """Route to the boxes :class:`BoxStates` now holds, and ``internal`` streams (box -> streams between
        its parts on other nodes); after every local catalog.

        ``changed``: the only boxes added, removed, rebuilt or rewired since
        the last rewiring (an update's: node/slice_change.py), so that only
        the streams they read and write are routed again
        (:meth:`Routes.wire_changed`): an update costs what it touches (issue
        37).  A node with streams between a partitioned box's parts, or with
        bridges, is rewired whole.
        """
        whole = changed is None or internal or self._internal or self.bridges
        self._internal = internal
        if whole:
            self.routes.produce_whole(self.states, internal)
            self._wire_consumers()
        else:
            self.routes.wire_changed(self.states, changed or ())

    def _wire_consumers(self) -> None:
        for old, bridge in list(self.bridges.items()):
            box = self.states.boxes.get(bridge.box)
            if box is None or bridge.port >= len(box.inputs) or box.inputs[bridge.port].stream == old:
                # The box is gone, or its port reads the old stream again (a filter removed before
                # any batch came through it): a bridge now would feed the port twice.
                del self.bridges[old]
        self.routes.wire_whole(self.states, self._internal, self.bridges)

    def bridge(self, old: str, box: str, port: int, new: str, row_type: RowType) -> None:
        """Until ``new`` first arrives, ``old`` (rows of ``row_type``) still feeds ``box``'s ``port``
        (the caller holds the dataflow lock)."""
        self.bridges[old] = Bridge(box, port, new, row_type)
        self._wire_consumers()

    def unbridge(self, old: str) -> None:
        if self.bridges.pop(old, None) is not None:
            self._wire_consumers()

    def bridged_row_type(self, stream: str) -> RowType | None:
        """How batches of ``stream`` decode while it still feeds a rewired port (None: it does not)."""
        bridge = self.bridges.get(stream)
        return bridge.row_type if bridge is not None else None

    def remove_box(self, name: str) -> None:
        """Stop routing to a box taken out (:meth:`BoxStates.take`); the caller holds the lock."""
        self.routes.remove(name, plain=not (self._internal or self.bridges))

    def _cross_bridges(self, stream: str) -> None:
        """The first batch of a stream that replaced another: nothing more of the old one can come."""
        done = [old for old, bridge in self.bridges.items() if bridge.successor == stream]
        for old in done:
            log.info("node %s: %s replaced %s at %s port %d", self.endpoint, stream, old,
                     self.bridges[old].box, self.bridges[old].port)
            self.unbridge(old)

    def input_positions(self, box: str) -> list[tuple[str, str, int]]:
        """(stream, producer, next sequence) of every input batch ``box`` has yet to process."""
        return self.states.positions(box, self.producer_of)

    # -- batches along the routes ---------------------------------------------------------

    async def enter(self, stream: str, rows: Rows, producer: str, seq: int, box: str, digest: int = 0,
                    final: bool = False) -> None:
        """:meth:`enter_now`, for callers that await it."""
        self.enter_now(stream, rows, producer, seq, box, digest, final)

    def enter_now(self, stream: str, rows: Rows, producer: str, seq: int, box: str, digest: int = 0,
                  final: bool = False) -> None:
        """A batch taken into the node (from the input queue, a replay or a failover): for the one box it
        names, else along its stream's routes; its position (and a publisher's digest) is recorded.  A
        producer's final mark that ends its stream (every producer of it ended) closes what the stream's
        consumers hold open (``end_of_input``: an aggregate's windows)."""
        if box:
            self._feed(box, stream, rows, (producer, seq))
        else:
            # recorded first: a member this batch settles counts its producer as one that published here
            # (:meth:`_ended_everywhere`), so the node's final mark waits for that producer's
            self.states.processed[(stream, producer)] = seq  # the hot path: a plain store
            if rows:  # (a final mark alone carries none)
                self._route(stream, rows, (producer, seq))
            elif final:  # passed on where the stream goes from here, after the producer's rows
                self.out.route(stream, [], producer, seq, self._resumable(stream, producer, False),
                               consumed_here=True, final=True)
                for op, name, port in self.consumers.get(stream, ()):  # (a box ordering its inputs waits for the end)
                    if name not in self.states.inputs:
                        self.emit_now(name, op.producer_ended(port, producer, self.clock.current))
            if digest:
                self.states.digests.record(stream, producer, seq, digest)
            if final and self.states.ends.end(stream, producer, [p for s, p in self.states.processed if s == stream]):
                self._ended(stream)
        self.close_due(self.clock.current)

    def _ended(self, stream: str) -> None:
        """``stream`` ended (node/stream_ends.py): its consumers emit what the end closes; a box whose inputs
        have all ended closes its open batches and ends its out streams, with a final mark after all it
        produced, here and downstream (all within the record that ended ``stream``: a replay does the same)."""
        for op, name, port in self.consumers.get(stream, ()):
            self.emit_now(name, op.end_of_input(self.clock.current, port))  # (only that in stream ended)
        inputs = {name: [port.stream for port in self.states.boxes[name].inputs]
                  for _, name, _ in self.consumers.get(stream, ()) if name in self.states.boxes}
        for name in self.states.ends.boxes_done(stream, inputs):
            op = self.states.operators.get(name)
            if op is not None:  # every input ended: what the operator was not told (it was built, rebuilt or
                # restored after an earlier input's end) ends now too; an end it was told is no change
                self.emit_now(name, op.end_of_input(self.clock.current))
            if op is not None and op.holds_end():  # rows it owes leave first (:meth:`produce` sends the marks)
                self.states.ends.hold(name)
            else:
                self._end_outputs(name)

    def _end_outputs(self, name: str) -> None:
        """Box ``name`` produced all it ever will: close its open batches and end its out streams, with a final
        mark after all it produced, here and downstream."""
        outs = list(self.states.boxes[name].outputs)
        self.close_streams(outs)  # what the box holds open leaves before its final mark
        for out in outs:
            producer, seq = self._number(out)
            self.out.route(out, [], producer, seq, self._resumable(out, producer, True),
                           consumed_here=out in self.consumers, final=True)
            for op, consumer, port in self.consumers.get(out, ()):  # its local consumers take it as a producer's
                if consumer not in self.states.inputs:  # final mark, as :meth:`enter_now` does (a partitioned
                    # box's coordinator ends it, or forwards it to the one it handed the producer to)
                    self.emit_now(consumer, op.producer_ended(port, producer, self.clock.current))
            if self.states.ends.end(out, producer, [producer]):
                self._ended(out)

    async def emit(self, box: str, produced: list[tuple[int, list[tuple]]]) -> None:
        """:meth:`emit_now`, for callers that await it (the adopter)."""
        self.emit_now(box, produced)

    def emit_now(self, box: str, produced: list[tuple[int, list[tuple]]]) -> None:
        """Route what ``box`` produced, ``(port, rows)`` pairs, onto its out streams, and close them: sent at
        once (an end of input, the adopter's way in; a record in the log must lead to it, or a replay would
        batch otherwise)."""
        self.close_streams(self.produce(box, produced))

    def produce(self, box: str, produced: list[tuple[int, list[tuple]]]) -> list[str]:
        """Hold what ``box`` produced, ``(port, rows)`` pairs, in its out streams' open batches (one that
        reaches its row limit closes); the streams it went to."""
        definition = self.states.boxes.get(box)
        if definition is None:
            return []
        declared = len(definition.outputs)
        member = box in self._internal  # a partition member's batches carry Cumulus's protocol: never held
        streams = []
        for port, rows in produced:
            if rows:
                stream = definition.outputs[port] if port < declared else self._internal[box].outputs[port - declared][0]
                if member:
                    self._route(stream, rows)
                else:
                    self._hold(stream, rows)
                    streams.append(stream)
        held = self.states.ends.held
        if held and box in held and not self.states.operators[box].holds_end() and self.states.ends.release(box):
            self._end_outputs(box)  # its inputs ended before it emitted the last of what their end closes
        if member and box not in self.states.ends.boxes and not self.states.operators[box].holds_end():
            self._ended_everywhere(box)  # (a member holds its end until the end settled: every producer ended)
        return streams

    def _ended_everywhere(self, box: str) -> None:
        """Partitioned ``box``'s input ended everywhere and it owes nothing (its members learned the end through
        the coordinators' ``Close``\\s and it settled: node/cumulus/end_marks.py): its out streams end here too,
        if no producer that published to it here is still open (a node no producer publishes to never sees its
        input end: node/stream_ends.py ``ends_unheard``).  A local box writing one of its in streams counts as
        that stream's producer here.  A producer a coordinator here handed to another node (docs/cumulus.md
        §6.5) does not: its publisher sends its final mark there (``Ack.moved``), and the end settled only after
        that coordinator heard it."""
        streams = [port.stream for port in self.states.boxes[box].inputs]
        op = self.states.operators[box]  # (a member's operator: node/cumulus/part.py ``PartOperator.moved_to``)
        here = (None, self.endpoint)
        published = {s: [p for st, p in self.states.processed if st == s and op.moved_to(st, p) in here]
                     for s in streams}
        for stream in streams:
            if stream in self.producer_of:
                published[stream].append(self.producer_of[stream])
        if self.states.ends.ends_unheard(box, published):
            self._end_outputs(box)

    def _hold(self, stream: str, rows: Rows) -> None:
        coalescer = self.coalescer
        if not coalescer.fits(stream, rows):
            self._close(stream)
        if self._cascade is not None:
            self._cascade.append(stream)
        if coalescer.add(stream, rows, self.clock.current):
            self._close(stream)

    def _close(self, stream: str) -> None:
        rows = self.coalescer.take(stream)
        if rows:
            self._route(stream, rows)

    # -- closing batches: each at a point of the log, so a replay closes them alike --------------------

    def batches_due(self, now: float) -> bool:
        """Whether an open batch is due at flow clock ``now`` (:meth:`close_due` would close one)."""
        return bool(self.coalescer.due(now))

    def batch_deadline(self) -> float | None:
        """The flow clock value the oldest open batch is due at (None: none is open)."""
        return self.coalescer.next_deadline()

    def close_due(self, now: float) -> None:
        """Close every batch open ``T`` ms or longer at ``now``, and in turn what closing them produced
        (a chain of boxes on this node does not wait ``T`` at every hop)."""
        due = self.coalescer.due(now)
        while due:
            self._cascade = cascade = []
            try:
                for stream in due:
                    self._close(stream)
            finally:
                self._cascade = None
            held = self.coalescer.held()
            due = [s for s in dict.fromkeys(cascade) if s in held]

    def open_streams(self, streams: Iterable[str]) -> list[str]:
        """Those of ``streams`` that have a batch open, oldest first."""
        wanted = set(streams)
        return [s for s in self.coalescer.held() if s in wanted]

    def close_streams(self, streams: list[str]) -> None:
        """Close the batches open on ``streams`` now (a move's detach, an end of input: the caller makes sure
        a record of the log leads to this point, so a replay closes them at the same one)."""
        for stream in streams:
            self._close(stream)

    def close_all(self) -> None:
        """Close every open batch and what closing them produces (a snapshot's marker: no state captured
        holds half a batch)."""
        while held := self.coalescer.held():
            for stream in held:
                self._close(stream)

    def _route(self, stream: str, rows: Rows, origin: tuple[str, int] | None = None) -> None:
        """Push ``rows`` of ``stream`` through every local consumer, then send it where it goes.

        A batch that entered the node is passed on under its own (producer,
        seq); a box's output is numbered as the box's.
        """
        producer, seq = origin if origin is not None else self._number(stream)
        resumable = self._resumable(stream, producer, origin is None)
        if self.bridges:
            self._cross_bridges(stream)
        self.stream_batches[stream] += 1
        self.stream_rows[stream] += len(rows)
        now = self.clock.current
        for op, name, port in self.consumers.get(stream, ()):
            if name in self.states.inputs:
                self._feed(name, stream, rows, (producer, seq))
            else:
                started = time.perf_counter()
                produced = op.process_from(port, rows if op.takes_columns else as_rows(rows), now,
                                           (stream, producer, seq))
                self.box_seconds[name] += time.perf_counter() - started
                self.box_batches[name] += 1
                self.produce(name, produced)
        self.out.route(stream, rows, producer, seq, resumable, consumed_here=stream in self.consumers)

    def _feed(self, box: str, stream: str, rows: Rows, origin: tuple[str, int]) -> None:
        """A batch for one box that orders its own inputs (it arrived by a move), in the form it came in
        (``Columns`` keep their weights while held: :meth:`BoxStates.admit`)."""
        op = self.states.operators.get(box)
        if op is None or box not in self.states.inputs:
            if not self.out.relay(box, stream, rows, *origin):  # it left while this batch queued here
                self.counters["batches_for_absent_box"] += 1
                log.warning("node %s: %s/%s#%d for box %r, which is not here and not forwarded",
                            self.endpoint, stream, origin[0], origin[1], box)
            return
        ports = [port for o, name, port in self.consumers.get(stream, ()) if name == box]
        # held and ordered as it came: a changelog's weights stay with its columns (a row operator reads rows,
        # and is never fed a changelog: catalog/changelog.py refuses that)
        for ready in self.states.admit(box, stream, origin[0], origin[1], rows):
            for port in ports:
                started = time.perf_counter()
                produced = op.process(port, ready if op.takes_columns else as_rows(ready), self.clock.current)
                self.box_seconds[box] += time.perf_counter() - started
                self.box_batches[box] += 1
                self.produce(box, produced)

    def _resumable(self, stream: str, producer: str, own: bool) -> bool:
        """Whether every earlier batch of ``producer`` on ``stream`` went out from this node.

        Then a route that starts again may tell its receiver to skip the
        sequence numbers that went elsewhere.  Not so for a box that moved
        here (its earlier batches left from another node, perhaps still on
        their way) or for a box's batches passing through.
        """
        if own:
            return self.producer_of.get(stream) not in self.states.inputs
        return "~" not in producer

    def _number(self, stream: str) -> tuple[str, int]:
        return self.states.number(stream, self.producer_of.get(stream), self.sender)
