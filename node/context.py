"""What the node's parts (mover, connector, adopter, reports) may use of the node they belong to.

They are given the :class:`~boreas.node.service.NodeService` itself, but
typed by this protocol, so none of them imports the service (which imports
them) and each names exactly what it relies on.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from boreas.catalog.model import Catalog
from boreas.wire.client import PeerClient
from boreas.wire.receiver import DataReceiver
from boreas.wire.supervisor import Supervisor

from .dataflow import Dataflow
from .head_reports import HeadReports
from .local_catalog import LocalCatalog
from .recovery.durability import Durability
from .reflect import Reflector


class NodeContext(Protocol):
    endpoint: str
    incarnation: str  # a new one each start (node/service.py): a move report names it (wire/move_report.py)
    head: str | None
    peers: PeerClient
    local: LocalCatalog
    dataflow: Dataflow
    receiver: DataReceiver
    reflector: Reflector
    durability: Durability | None
    head_reports: HeadReports | None
    tasks: Supervisor
    update_lock: asyncio.Lock

    def catalog_changed(self) -> None: ...

    def apply_local(self, items: list, reflect: list | None = None, keep_state: tuple[str, ...] = ()) -> int: ...

    def restore_local(self, earlier: Catalog, keep_state: tuple[str, ...] = ()) -> int: ...
