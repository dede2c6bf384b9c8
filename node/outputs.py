"""Where what a node produces goes: its links, the forwards of moved boxes, and the outbox.

The dataflow decides *what* leaves the node; :class:`Outputs` owns *how*:

* one :class:`~boreas.wire.links.OutboundLink` per destination (downstream
  nodes and client subscribers), following the local catalog's
  ``<subscribe>`` elements; links to nodes stay open while idle, so a stream
  that comes back to a neighbour never overtakes batches still on an older
  connection;
* when a stream's one node consumer is replaced by another (a move, a
  failover), what waits on the old link for that stream is handed to the
  new one (:meth:`OutboundLink.redirect`);
* the **forwards** of boxes that moved away: their input streams go on to
  the box's new node for a while;
* the **outbox**: batches produced under the dataflow lock are queued here
  and handed to the links after the lock is released, in order, by one
  task at a time (``sending``), so a slow receiver never keeps a move
  waiting.

Usage::

    outputs = Outputs("localhost:15000", token, sender, counters)
    outputs.follow(catalog)                        # after every local catalog change
    outputs.route("Out", rows, "box~1", 7, resumable=True)
    await outputs.flush()                          # hand the outbox to the links
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import dataclass

from boreas.catalog.model import Catalog
from boreas.wire.frames import Batch, decode, encode, make_batch
from boreas.wire.links import OutboundLink
from boreas.wire.tuples import RowType

from .named_subscribers import keep_retained, named_entry, resume_elsewhere

log = logging.getLogger(__name__)

#: Batches a link to a neighbour node may hold beyond its capacity while that node is down
#: (restarting after a crash), so the rest of this node keeps going meanwhile.
DOWN_CAPACITY = 4096
#: Batches a link to a client subscriber with ``on-slow="drop"`` holds for it; past that, batches are dropped.
CLIENT_BUFFER = 1024
DEFAULT_ON_SLOW = "disconnect"
#: A subscriber that is cut off when slow (the default, ``on-slow="disconnect"``) is judged by whether it keeps
#: acknowledging, never by a burst the node itself produced (a replay after recovery, a move): up to
#: ``CLIENT_RETAIN_BYTES`` of rows wait for it, and it is cut off (told why and how much it missed) only when it
#: acknowledged nothing for ``CLIENT_SLOW_AFTER`` seconds while batches waited, or they would pass that bound.
CLIENT_RETAIN_BYTES = 256 * 1024 * 1024
CLIENT_SLOW_AFTER = 10.0
CLIENT_UNBOUNDED = 1 << 30  # batches: the bytes bound is what counts
#: A named subscriber (``<subscribe name=>``) resumes where it stopped: its batches are kept for it, while it is down
#: too, up to ``CLIENT_RETAIN_BYTES`` and for ``NAMED_RETAIN_FOR`` seconds without an acknowledgement.
NAMED_RETAIN_FOR = 3600.0


@dataclass(frozen=True)
class SubscriberLimits:
    """How long and how much a node waits for a client subscriber that disconnects when slow
    (``boreas node --subscriber-slow-after``, ``--subscriber-buffer-mb``), and keeps a named one's batches
    (``--subscriber-buffer-mb``, ``--subscriber-retain-for``)."""

    retain_bytes: int = CLIENT_RETAIN_BYTES
    slow_after: float = CLIENT_SLOW_AFTER
    retain_for: float = NAMED_RETAIN_FOR

    def named_options(self) -> dict:
        """The :class:`~boreas.wire.links.OutboundLink` bounds for a named subscriber: it is never cut off for
        being slow or down, only once what waits for it passes these bounds (and it is told so)."""
        return {"capacity": CLIENT_UNBOUNDED, "retain_bytes": self.retain_bytes, "retain_for": self.retain_for}

    def link_options(self, policy: str) -> dict:
        """The :class:`~boreas.wire.links.OutboundLink` bounds for a subscriber with this ``on-slow`` policy."""
        if policy == "block":  # back-pressure was asked for: no buffer of its own
            return {}
        if policy == "drop":
            return {"capacity": CLIENT_BUFFER}
        return {"capacity": CLIENT_UNBOUNDED, "retain_bytes": self.retain_bytes, "slow_after": self.slow_after}
#: Batches a link to another member of a partitioned box may hold: the members' messages must never
#: make the box task wait (a member waiting to send could not take the message another waits for);
#: publishers are held back instead, by the coordinators' admission (:meth:`Dataflow.accept`).
MEMBER_CAPACITY = 1 << 20
MEMBER_WINDOW = 64

#: link, stream, rows, producer, seq, restart, final (the producer's end of the stream: node/stream_ends.py)
Output = tuple[OutboundLink, str, list[tuple], str, int, bool, bool]


def _node_link(link: OutboundLink) -> bool:
    """A link whose receiver takes a stream's batches over from another's when its consumer moves (not a client's)."""
    return not link.drop_when_down and link.name is None


class Outputs:
    def __init__(self, endpoint: str, token: str | None, sender: str, counters: Counter[str],
                 limits: SubscriberLimits = SubscriberLimits()):
        self.endpoint = endpoint
        self.limits = limits
        self.token = token
        self.sender = sender
        self.counters = counters  # the dataflow's: rows_out, batches_unrouted
        self.links: dict[str, OutboundLink] = {}
        self.destinations: dict[str, list[str]] = {}  # stream -> endpoints it is sent to
        # Moves: where the input streams of boxes that moved away are forwarded (with their row
        # types, after the catalog forgets them).
        self.forwards: dict[str, OutboundLink] = {}
        self.forward_types: dict[str, RowType] = {}
        self.sending = asyncio.Lock()  # held while the outbox is handed to the links
        self._outbox: list[Output] = []
        # (endpoint, stream) routes in use since the catalog last changed them: the first batch
        # on a route (re)started tells the receiver where the sequence resumes (Batch.restart).
        self._routed: set[tuple[str, str]] = set()
        self._started = False
        self._chores: set[asyncio.Task] = set()  # links starting or closing after a catalog change
        # the outbox flush() is handing to the links, and how much of it it handed: a snapshot lists the rest
        self._handing: list[Output] = []
        self._handed = 0

    # -- lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        self._started = True
        for link in self.links.values():
            await link.start()

    def _chore(self, coro, name: str) -> None:
        """A link start or close that follows a catalog change: owned here, its failure logged."""
        task = asyncio.get_running_loop().create_task(coro, name=f"node {self.endpoint}: {name}")
        self._chores.add(task)
        task.add_done_callback(self._chore_done)

    def _chore_done(self, task: asyncio.Task) -> None:
        self._chores.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s failed", task.get_name(), exc_info=task.exception())

    async def close(self) -> None:
        for task in list(self._chores):
            task.cancel()
        await asyncio.gather(*self._chores, return_exceptions=True)
        for link in self.links.values():
            await link.close(flush_timeout=1.0)

    # -- the catalog decides where streams go ---------------------------------------

    def follow(self, catalog: Catalog, internal: dict[str, str] | None = None) -> None:
        """Send each stream where the local catalog's ``<subscribe>``s say, and ``internal`` streams

        (stream -> endpoint: those between the parts of a box on several nodes) to their node.
        """
        before, self.destinations = self.destinations, {}
        for sub in catalog.subscriptions.values():
            self.destinations.setdefault(sub.stream, []).append(sub.endpoint)
        for stream, endpoint in (internal or {}).items():
            self.destinations.setdefault(stream, []).append(endpoint)
        self._routed = {(e, s) for e, s in self._routed if e in self.destinations.get(s, ())}
        wanted = {e for targets in self.destinations.values() for e in targets}
        policies = {sub.endpoint: sub.on_slow or DEFAULT_ON_SLOW
                    for sub in catalog.subscriptions.values()}
        names = {sub.endpoint: sub.name for sub in catalog.subscriptions.values() if sub.name}
        members = set((internal or {}).values())
        for endpoint in wanted - set(self.links):
            if endpoint in members:  # another member of a partitioned box: never wait on it
                link = OutboundLink(endpoint, self.token, self.sender, capacity=MEMBER_CAPACITY,
                                    window=MEMBER_WINDOW, down_capacity=DOWN_CAPACITY)
            elif endpoint in catalog.nodes:  # a neighbour node: back-pressure, and room while it restarts
                link = OutboundLink(endpoint, self.token, self.sender, down_capacity=DOWN_CAPACITY)
            elif endpoint in names:  # a named subscriber: its batches wait for it while it is down, and it resumes
                link = OutboundLink(endpoint, self.token, self.sender, name=names[endpoint],
                                    **self.limits.named_options())
            else:  # a client: a bounded buffer of its own, and a policy for when it reads too slowly
                policy = policies.get(endpoint, DEFAULT_ON_SLOW)  # "block" asked for back-pressure: no buffer
                link = OutboundLink(endpoint, self.token, self.sender, drop_when_down=True, on_slow=policy,
                                    **self.limits.link_options(policy))
            self.links[endpoint] = link
            if self._started:
                self._chore(link.start(), f"start link to {endpoint}")
        self._redirect(before)
        resume_elsewhere(self.links, before, self.destinations, catalog, self.endpoint)
        for endpoint in set(self.links) - wanted - set(catalog.nodes):
            link = self.links.pop(endpoint)
            self._chore(link.close(), f"close link to {endpoint}")

    def _redirect(self, before: dict[str, list[str]]) -> None:
        """A stream whose one node consumer was replaced by another: what waits for the old goes to the new.

        That is how a box that moved, or failed over from a dead node, gets
        every batch the old node never acknowledged: the new node drops
        those it already has (its restored positions).
        """
        for stream, targets in self.destinations.items():
            for endpoint in targets:
                self.links[endpoint].unredirect(stream)
        for stream, old in before.items():
            new = self.destinations.get(stream, [])
            gone = [self.links[e] for e in old if e not in new and e in self.links and _node_link(self.links[e])]
            came = [self.links[e] for e in new if e not in old and _node_link(self.links[e])]
            if gone and len(came) == 1:
                moved = sum(link.redirect(stream, came[0]) for link in gone)
                if moved:
                    log.info("node %s: %d unacknowledged batches of %s handed from %s to %s", self.endpoint,
                             moved, stream, ", ".join(link.endpoint for link in gone), came[0].endpoint)

    def take_retained(self, streams: list[str]) -> list[list]:
        """``[[name, encoded Batch], ...]``: what waits for named subscribers of ``streams``, taken off their links
        (sent or queued, not acknowledged) to travel with the box that produces them (a move)."""
        taken: list[list] = []
        for link in [link for link in self.links.values() if link.name]:
            withdrawn = self._unqueue(link.endpoint, set(streams))
            for stream in streams:
                batches = link.take(stream)
                batches += [make_batch(s, producer, seq, rows, "", False, final=final)
                            for _, s, rows, producer, seq, _, final in withdrawn if s == stream]
                taken += [[link.name, encode(batch)] for batch in batches]
        return taken

    def keep_retained(self, retained: list[list]) -> None:
        """Queue what :meth:`take_retained` took (the box arrived here, or came back) for its named subscribers."""
        keep_retained(self.links, self.destinations, retained, self.endpoint)

    def forward_to(self, stream: str, target: str, box: str, row_type: RowType) -> OutboundLink | None:
        """Box ``box`` moved to ``target``: forward its input ``stream`` there; the new link, if one was made.

        The link starts only once the target has the box
        (:func:`~boreas.node.handover.start_forwarding`).
        """
        self.forward_types[stream] = row_type
        if stream in self.forwards:
            return None
        link = OutboundLink(target, self.token, f"{self.sender}/forward", capacity=4096)
        link.forward_to_box = box
        self.forwards[stream] = link
        return link

    def forwarding(self, links: list[OutboundLink]) -> bool:
        return any(link in self.forwards.values() for link in links)

    def unforward(self, link: OutboundLink) -> None:
        """Stop forwarding over ``link`` (a move that failed: the box is back)."""
        for stream in [s for s, fwd in self.forwards.items() if fwd is link]:
            self.forwards.pop(stream)
            self.forward_types.pop(stream, None)

    def forwards_of(self, box: str) -> list[OutboundLink]:
        """The box came back here: stop forwarding its inputs away; the links, to retire."""
        stale = []
        for stream, link in list(self.forwards.items()):
            if link.forward_to_box == box:
                del self.forwards[stream]
                if link not in stale:
                    stale.append(link)
        return stale

    async def stop_forwarding(self, links: list[OutboundLink]) -> None:
        """A moved box's inputs no longer need forwarding (upstream sends to its new node)."""
        for stream, link in list(self.forwards.items()):
            if link not in links:
                continue  # the box came back and left again: a newer forward, not ours to stop
            del self.forwards[stream]
            self.forward_types.pop(stream, None)
            if link not in self.forwards.values():
                await link.close()

    # -- the outbox -----------------------------------------------------------------

    def route(self, stream: str, rows: list[tuple], producer: str, seq: int, resumable: bool,
              consumed_here: bool = False, final: bool = False) -> None:
        """Queue a batch of ``stream`` for every destination (and the forward of a moved box); ``final``: the
        producer's last, empty batch of it (its box's inputs have all ended: node/stream_ends.py)."""
        routes = [(e, self.links[e]) for e in self.destinations.get(stream, ()) if e in self.links]
        if not routes and stream not in self.forwards and not consumed_here:
            self.counters["batches_unrouted"] += 1
            log.debug("node %s: %s/%s#%d has nowhere to go", self.endpoint, stream, producer, seq)
        for endpoint, link in routes:
            restart = resumable and (endpoint, stream) not in self._routed
            self._routed.add((endpoint, stream))
            self._outbox.append((link, stream, rows, producer, seq, restart, final))
        if stream in self.forwards and not final:  # (a moving box orders its own inputs: it takes no end yet)
            self._outbox.append((self.forwards[stream], stream, rows, producer, seq, False, False))

    def relay(self, box: str, stream: str, rows: list[tuple], producer: str, seq: int) -> bool:
        """A batch for ``box``, which left while it queued here: pass it after the box (False: no forward)."""
        relay = self.forwards.get(stream)
        if relay is None or relay.forward_to_box != box:
            return False
        self._outbox.append((relay, stream, rows, producer, seq, False, False))
        return True

    def send_later(self, outputs: list[tuple[str, str, list[tuple], str, int, bool]]) -> list[str]:
        """Queue (endpoint, stream, rows, producer, seq, restart) outputs on the links, ahead of later ones.

        Returns the endpoints with no link here (their outputs are not sent).
        """
        missing = []
        for endpoint, stream, rows, producer, seq, restart in outputs:
            link = self.links.get(endpoint)
            if link is None:
                missing.append(endpoint)
                continue
            self._outbox.append((link, stream, rows, producer, seq, restart, False))
        return missing

    def withdraw(self, endpoint: str, streams: set[str]) -> list[tuple[str, list[tuple], str, int]]:
        """Take back outputs of ``streams`` queued for ``endpoint`` and not yet handed to its link."""
        return [(stream, rows, producer, seq) for _, stream, rows, producer, seq, _, _ in self._unqueue(endpoint, streams)]

    def _unqueue(self, endpoint: str, streams: set[str]) -> list[Output]:
        kept, taken = [], []
        for item in self._outbox:
            (taken if item[0].endpoint == endpoint and item[1] in streams else kept).append(item)
        self._outbox = kept
        return taken

    @property
    def queued(self) -> int:
        return len(self._outbox)

    async def flush(self) -> None:
        """Hand everything queued to the links, in order (waits while a link is full)."""
        async with self.sending:
            outbox, self._outbox = self._outbox, []
            self._handing = outbox
            try:
                for i, (link, stream, rows, producer, seq, restart, final) in enumerate(outbox):
                    await link.send(stream, rows, producer, seq, restart=restart, final=final)
                    self._handed = i + 1
                    self.counters["rows_out"] += len(rows)
            finally:
                self._handing, self._handed = [], 0

    # -- snapshots: what was sent and not acknowledged ----------------------------------

    def unacknowledged(self) -> list[list]:
        """``[[endpoint, encoded Batch], ...]``: every batch that left (or was queued to leave) and that no
        receiver acknowledged yet, in the order each link sends them.

        Called between two batches (a snapshot, under the dataflow lock):
        these outputs derive from inputs before the snapshot's marker, so a
        node restarted from the snapshot replays only the log after it and
        would never produce them again; :meth:`resend` queues them again.  A
        batch being handed to its link right now may be listed twice (on the
        link, and as not yet handed): receivers drop the second copy.
        """
        out: list[list] = []
        links = {id(link): link for link in [*self.links.values(), *self.forwards.values()]}
        for link in links.values():
            out += [[link.endpoint, encode(batch), *named_entry(link)] for batch in link.pending()]
        for link, stream, rows, producer, seq, restart, final in [*self._handing[self._handed:], *self._outbox]:
            batch = make_batch(stream, producer, seq, rows, link.forward_to_box, restart, final=final)
            out.append([link.endpoint, encode(batch), *named_entry(link)])
        return out

    def resend(self, unacknowledged: list[list]) -> int:
        """Queue what :meth:`unacknowledged` listed (a restart from a snapshot) on the links, ahead of
        anything produced from now on; returns how many batches.

        A batch goes to the link of the endpoint it was meant for, or, when
        the local catalog no longer sends its stream there, to the nodes the
        stream goes to now (a box that moved takes its positions along, so
        it drops what it had; a client that subscribed since never asked for
        these).  Receivers drop what they already have.
        """
        queued = 0
        for endpoint, data, *name in unacknowledged:
            batch = decode(bytes(data))
            if not isinstance(batch, Batch):
                continue
            link = self.links.get(endpoint)
            # (a named subscriber that subscribed again elsewhere meanwhile gets what it had not acknowledged)
            targets = [link] if link is not None else [
                self.links[e] for e in self.destinations.get(batch.stream, ())
                if e in self.links and not self.links[e].drop_when_down and self.links[e].name == (name or [None])[0]]
            if not targets:
                log.warning("node %s: %s/%s#%d, not acknowledged by %s before the snapshot, has nowhere to go now",
                            self.endpoint, batch.stream, batch.producer, batch.seq, endpoint)
                continue
            for target in targets:
                target.requeue([batch])
                queued += 1
        self.counters["batches_resent_from_snapshot"] += queued
        return queued

