"""A node's data plane: the composition root of the objects that run its boxes over batches.

The dataflow is built from the local catalog alone: the slice says which
streams enter (``<input>``, with their schemas), which boxes run here, and
where each stream goes (``<subscribe>``: downstream nodes and clients).

:class:`Dataflow` makes its parts, hands each the others it talks to, and
keeps the few entry points the rest of the node calls.  Each part owns its
state (docs/architecture.md, "The composed node"):

* :class:`~boreas.node.box_state.BoxStates`: the boxes' state (operators,
  producer ids, numbering, input positions) -- what moves, snapshots and
  failover carry;
* :class:`~boreas.node.operator_host.OperatorHost`: the local catalog's
  streams (schemas, row types, partitions, coordinators); builds operators
  and refuses an update whose boxes cannot run;
* :class:`~boreas.node.router.Router`: the routes (consumers, producers,
  bridges) and pushing a batch through the boxes, depth first;
* :class:`~boreas.node.intake.Intake` and its :class:`~boreas.node.inbox.Inbox`:
  batches in (checks, admission, the durable acknowledgement);
* :class:`~boreas.node.box_task.BoxTask`: the one task that runs the boxes,
  the lock, output commit; :class:`~boreas.node.timers.Timers`: firing due
  timers;
* :class:`~boreas.node.journal.Journal` (the input log, when durable) and
  :class:`~boreas.node.flow_clock.FlowClock` (the time the boxes see);
* :class:`~boreas.node.replaying.Replayer`: a snapshot's capture, restore
  and the log's replay;
* :class:`~boreas.node.outputs.Outputs`: links, forwards and the outbox.

The input queue is bounded and links to other nodes wait when full, so a
slow consumer slows the node and, through acknowledgements, the publishers;
the node's memory stays bounded.

Usage::

    flow = Dataflow("localhost:15000", token, sender)
    flow.reconfigure(local_catalog)      # after every update XML
    await flow.start()
    reply = await flow.intake.accept(batch)   # from the /data receiver
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping

from boreas.catalog.boxtypes import BoxTypeRegistry
from boreas.catalog.model import Catalog, Partition, Schema
from boreas.m3.boxtype import box_types as standard_box_types
from boreas.wire.frames import Batch
from boreas.wire.tuples import RowType

from .box_state import BoxStates
from .box_task import BoxTask
from .coalescer import UNBATCHED, BatchLimits
from .flow_clock import FlowClock
from .inbox import Arrival, Inbox
from .intake import Intake
from .journal import Journal, payload
from .operator_host import OperatorHost
from .operators import Operator
from .outputs import Outputs, SubscriberLimits
from .replaying import Replayer
from .router import Router
from .timers import Timers


class Dataflow:
    """The composition root of a node's data plane (its parts are public: callers use the one they need)."""

    def __init__(self, endpoint: str, token: str | None, sender: str, queue_batches: int = 64,
                 box_types: BoxTypeRegistry | None = None, subscriber_limits: SubscriberLimits = SubscriberLimits(),
                 outputs: Outputs | None = None, batch_limits: BatchLimits = UNBATCHED):
        self.endpoint = endpoint
        # The box types this node's slices are checked and inferred with (the node passes its own).
        self.box_types = box_types or standard_box_types()
        # Where what the node produces goes: links, forwards of moved boxes, the outbox (a failover's
        # replay passes its own, which keeps what it would send).
        self.out = outputs if outputs is not None else Outputs(endpoint, token, sender, Counter(), subscriber_limits)
        self.counters: Counter[str] = self.out.counters  # the node's data counters (/status, /metrics)
        self.clock = FlowClock()
        self.journal = Journal(batch_limits)
        self.state = BoxStates()
        # boxes' output batches close at batch_limits (boreas node --batch-rows, --batch-ms)
        self.router = Router(endpoint, sender, self.state, self.out, self.clock, self.counters, batch_limits)
        self.host = OperatorHost(endpoint, self.box_types, self.state, self.router, self.out)
        self.timers = Timers(self.state, self.router, self.journal, self.clock)
        inbox = Inbox(queue_batches)
        self.task = BoxTask(endpoint, inbox, self.router, self.timers, self.journal, self.clock, self.out,
                            self.counters)
        self.intake = Intake(endpoint, inbox, self.host, self.router, self.state, self.out, self.journal,
                             self.task.progress, self.counters)
        self.replayer = Replayer(self.state, self.out, self.journal, self.clock, self.task.lock, self.timers,
                                 self.router, self.intake.row_type, inbox.wake)

    # -- what the rest of the node reads --------------------------------------------------

    @property
    def operators(self) -> dict[str, Operator]:
        """The running operators by box name (read them; :attr:`state` changes them)."""
        return self.state.operators

    @property
    def lock(self) -> asyncio.Lock:
        """Held while boxes run: a move, a snapshot or an update taking it falls between two batches."""
        return self.task.lock

    @property
    def progress(self) -> asyncio.Condition:
        """Notified after every group of batches the box task finished (the Cumulus handlers wait on it)."""
        return self.task.progress

    @property
    def schemas(self) -> Mapping[str, Schema]:
        return self.host.schemas

    @property
    def partitions(self) -> dict[str, Partition]:
        return self.host.partitions

    @property
    def queued(self) -> int:
        """Batches (and wake-ups) in the input queue, not yet taken."""
        return self.task.inbox.qsize()

    @property
    def sender(self) -> str:
        """The node's producer id for batches no box wrote (a restart keeps it: identity.json)."""
        return self.router.sender

    @sender.setter
    def sender(self, sender: str) -> None:
        self.router.sender = sender

    # /metrics: per stream and per box counts (the router's)
    @property
    def stream_batches(self) -> Counter[str]:
        return self.router.stream_batches

    @property
    def stream_rows(self) -> Counter[str]:
        return self.router.stream_rows

    @property
    def box_batches(self) -> Counter[str]:
        return self.router.box_batches

    @property
    def box_seconds(self) -> Counter[str]:
        return self.router.box_seconds

    # -- lifecycle ---------------------------------------------------------------

    async def start(self, run: bool = True) -> None:
        """Start the links, and (unless ``run`` is False: a log replay comes first) the boxes."""
        await self.out.start()
        if run:
            self.run()

    def run(self) -> None:
        """Start the box task."""
        self.task.start()

    async def close(self) -> None:
        await self.task.close()
        await self.out.close()

    # -- the entry points other parts of the node call ------------------------------------

    def reconfigure(self, catalog: Catalog, keep_state: tuple[str, ...] = (),
                    touched: tuple[Catalog, Mapping[str, set[str]]] | None = None) -> None:
        """Follow a new local catalog (:meth:`OperatorHost.reconfigure`; ``touched``: the keys it wrote over
        the one followed last, :attr:`LocalCatalog.touched`); the caller holds the lock.

        The boxes' open output batches close first (logged), numbered by the
        boxes that wrote them, before the update removes or rewires any; the
        box task sends them.
        """
        if self.router.coalescer.held():
            self.timers.close_all(self.clock.now(), record=True)
            self.task.inbox.wake()
        self.host.reconfigure(catalog, keep_state, touched)

    def refusals(self, candidate: Catalog, source: str, rules: bool = True,
                 touched: tuple[Catalog, Mapping[str, set[str]]] | None = None) -> list[dict[str, object]]:
        """Why the boxes of an update could not run here (:meth:`OperatorHost.refusals`); [] if they can."""
        return self.host.refusals(candidate, source, rules, touched)

    def row_type(self, stream: str) -> RowType | None:
        """How batches of ``stream`` arriving here decode; None if it does not enter this node."""
        return self.intake.row_type(stream)

    def bridge(self, old: str, box: str, port: int, new: str) -> None:
        """Until ``new`` first arrives, ``old`` still feeds ``box``'s ``port`` (the caller holds the lock)."""
        self.router.bridge(old, box, port, new, self.host.row_type(old))

    async def release(self) -> None:
        """Send what is queued for sending (after :meth:`Outputs.send_later`)."""
        await self.task.release()

    async def replay(self, batch: Batch) -> None:
        """Process a batch that was queued for forwarding after all (a move that failed)."""
        arrival = self.intake.arrival(batch)
        if arrival is not None:
            await self.task.take_now([arrival])

    async def deliver(self, batches: list[tuple[str, list[tuple], str, int, str]]) -> None:
        """Process batches handed over by a failover or a Cumulus handler: (stream, rows, producer, seq,
        box or "").

        They are logged like any batch taken here; a named box gets the
        batch alone (its own positions drop what it already has).
        """
        await self.task.take_now([Arrival(stream, rows, producer, seq, box, payload(rows), None, 0)
                                  for stream, rows, producer, seq, box in batches])
