"""The static Head: deploy a topology to its nodes, then exit (paper section 2).

``boreas deploy APP.xml DEPLOY.xml`` validates the documents on their own
(there is no global catalog to check against), breaks the topology into
node slices, and brings each listed node to its slice with the same
:class:`~boreas.head.node_sync.NodeSync` the persistent Head uses: read what
the node holds, send the difference.  Nodes are updated concurrently; the
result says, per node, whether it acknowledged and why not.

Usage::

    results = await deploy_static([read_file("app.xml"), read_file("deploy.xml")], token="s3cret")
    failed = {node: why for node, why in results.items() if why}
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from boreas.catalog.diagnostics import ValidationFailed
from boreas.catalog.document_model import Document
from boreas.catalog.model import Catalog
from boreas.catalog.slices import node_slices
from boreas.catalog.submission import plan_submission
from boreas.m3.boxtype import box_types
from boreas.wire.client import PeerClient, PeerError

from .node_sync import NodeSync
from .pending import PendingRequests


async def deploy_static(documents: Sequence[Document], token: str | None,
                        timeout: float = 10.0) -> dict[str, str | None]:
    """Per node: None when it acknowledged its slice, else the reason it did not."""
    registry = box_types()
    plan = plan_submission(Catalog(), documents, registry)
    if not plan.ok:
        raise ValidationFailed(plan.problems)
    plan.catalog.version = 1
    slices = node_slices(plan.catalog, registry=registry)
    async with PeerClient(token, timeout=timeout) as peers:
        pending = PendingRequests(timeout)

        async def deploy(node: str, desired: Catalog) -> str | None:
            sync = NodeSync(node, peers, pending, on_change=lambda: None, origin="static head")
            sync.set_desired(desired, 1)
            try:
                await asyncio.wait_for(sync.sync_once(), timeout)
            except (TimeoutError, PeerError) as exc:
                return str(exc) or "timed out"
            requests = pending.for_node(node)
            return requests[0].describe() if requests else None

        results = await asyncio.gather(*(deploy(n, s) for n, s in slices.items()))
    return dict(zip(slices, results))
