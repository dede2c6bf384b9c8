"""What the Head's HTTP interface (:mod:`boreas.head.api`) uses of the Head.

The API is given the :class:`~boreas.head.service.HeadService` itself, typed
by this protocol, so it does not import the service that imports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from boreas.catalog.boxtypes import BoxTypeRegistry
from boreas.catalog.document_model import Connect, Document
from boreas.catalog.index import CatalogIndex
from boreas.catalog.model import Catalog, GlobalComponent, Region
from boreas.wire.client import PeerClient
from boreas.wire.server import HttpServer

from .catalog_copy import CatalogCopies
from .failover import Failover
from .global_feed import GlobalFeed
from .leadership import Leadership
from .learning import Learner
from .membership import Membership
from .node_sync import NodeSync
from .pending import PendingRequests
from .snapshots import SnapshotCoordinator
from .submissions import Submission, SubmissionLog


class HeadContext(Protocol):
    store_url: str
    catalog: Catalog
    index: CatalogIndex  # the current catalog's (index.catalog is the catalog the slices reflect)
    revision: int
    server: HttpServer
    peers: PeerClient
    membership: Membership
    pending: PendingRequests
    submissions: SubmissionLog
    snapshots: SnapshotCoordinator
    failover: Failover
    leadership: Leadership
    learner: Learner  # commits what the nodes report they changed (moves, connects, layouts)
    syncs: dict[str, NodeSync]
    feeds: dict[str, GlobalFeed]
    copies: CatalogCopies
    catalog_full_reads: int
    box_types: BoxTypeRegistry

    @property
    def origin(self) -> str: ...

    async def wait_for_change(self, after: int, timeout: float) -> None: ...

    async def submit(self, documents: Sequence[Document]) -> Submission: ...

    def taking_submission(self) -> AbstractContextManager[None]: ...

    async def register_global(self, component: GlobalComponent) -> None: ...

    async def register_region(self, registration: Region) -> int | None: ...

    async def unregister_global(self, endpoint: str) -> bool: ...

    def heartbeat(self, endpoint: str, incarnation: str, version: int, recovery: dict | None = None) -> None: ...
