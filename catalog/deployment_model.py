"""Where a topology runs and who talks to it: nodes, regions, replica sets, publishers, subscribers, clients.

These elements come from deployment XML (or update XML) rather than the
application: they place and connect the topology of :mod:`.model` without
changing what it computes.  They are kept apart from the topology so each
module holds one concept; :mod:`.model` re-exports them and its
:class:`~boreas.catalog.model.Catalog` holds them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .diagnostics import Origin, origin_field


@dataclass(frozen=True, slots=True)
class Node:
    """A Borealis node, known by its (normalised) listening endpoint."""

    endpoint: str
    origin: Origin = origin_field()


@dataclass(frozen=True, slots=True)
class Region:
    """Membership of one node in one region, or where a region's component listens.

    ``region`` names the region: its name, or its regional component's
    endpoint, or ``"default"`` when the XML gives neither (real Borealis
    deployments write ``<region node=":15000"/>`` for the one regional
    component of a test).  A region named without an endpoint learns it
    from a *registration*: ``<region name=... endpoint=...>`` with no node
    (``node == ""``), which a regional component sends the Head when it
    starts.
    """

    region: str
    node: str
    endpoint: str | None = None
    name: str | None = None
    origin: Origin = origin_field()

    @property
    def key(self) -> str:
        return f"{self.region}|{self.node}"

    @property
    def is_registration(self) -> bool:
        return not self.node


@dataclass(frozen=True, slots=True)
class ReplicaSet:
    name: str
    queries: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()
    origin: Origin = origin_field()


@dataclass(frozen=True, slots=True)
class Publication:
    """A client publishes into an input stream at the node where it enters."""

    stream: str
    node: str | None = None
    client: str | None = None  # the <client> it was declared in, if any
    origin: Origin = origin_field()

    @property
    def key(self) -> str:
        return f"{self.stream}|{self.node or ''}"


@dataclass(frozen=True, slots=True)
class Subscription:
    """A client listener at ``endpoint`` receives a stream."""

    stream: str
    endpoint: str
    gap: str | None = None
    origin: Origin = origin_field()
    on_slow: str | None = None  # block | drop | disconnect (None: the node's default, disconnect)
    # A named subscriber resumes: its batches are kept for it until acknowledged, and a subscription with
    # the same stream and name replaces it (the subscriber restarted, listening elsewhere).
    name: str | None = None

    @property
    def key(self) -> str:
        return f"{self.stream}|{self.endpoint}"


@dataclass(frozen=True, slots=True)
class Client:
    endpoint: str
    prefix: str | None = None
    origin: Origin = origin_field()


@dataclass(frozen=True, slots=True)
class GlobalComponent:
    """A monitoring tool that receives the whole catalog and every change."""

    endpoint: str
    origin: Origin = origin_field()
