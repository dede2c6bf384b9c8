"""Metrics and readiness of regional and global components.

As for the Head and nodes, the figures stay where the components count them
(the regional catalog's counters and per-node versions, the global
component's counters and catalog) and are read when ``/metrics`` is
scraped.  Readiness means *registered and in sync*:

* a regional component registered its endpoint with the Head, and every
  member node's local catalog version has been reflected here (each member
  is asked for its ``GET /status``);
* a global component registered, holds a full copy, and is at the Head's
  catalog version (the Head is asked for its ``GET /status``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import boreas
from boreas.wire.addressing import endpoint_url
from boreas.wire.health import Check
from boreas.wire.metrics import Families, counters_view, peers_view, sender_view

#: Seconds a readiness check waits for a member node or the Head.
ASK_TIMEOUT = 1.5

_REGION = {
    "copies": ("boreas_region_reflections_total{kind=copy}", "Reflections taken from member nodes, by kind "
               "(copy: a node's whole local catalog; update: one change)."),
    "updates": ("boreas_region_reflections_total{kind=update}", "Reflections taken from member nodes, by kind "
                "(copy: a node's whole local catalog; update: one change)."),
    "declarations_ignored": ("boreas_region_declarations_ignored_total",
                             "Box declarations ignored because the region has the box elsewhere (a move in flight)."),
}
_GLOBAL = {
    "updates_received": ("boreas_global_updates_received_total", "Update documents received from the Head."),
    "full_copies": ("boreas_global_full_copies_total", "Full copies of the catalog loaded."),
    "changes_applied": ("boreas_global_changes_applied_total", "Commits applied in order."),
    "copies_streamed": ("boreas_global_copies_streamed_total", "Full copies received streamed (POST /copy)."),
    "copies_stale": ("boreas_global_copies_stale_total",
                     "Full copies not installed because the catalog held was newer."),
    "copy_read_timeouts": ("boreas_global_copy_read_timeouts_total",
                           "Streamed copies dropped because the next chunk did not arrive in time."),
}


def read_region(region: Any, f: Families) -> None:
    """A :class:`~boreas.regional.component.RegionalComponent`'s figures (its ``GET /status``'s)."""
    catalog = region.catalog
    f.info("boreas_component", "What this component is.", component="region", region=region.name,
           endpoint=region.endpoint or "", version=boreas.__version__)
    f.gauge("boreas_region_members", "Nodes reflecting to this region.", len(catalog.members))
    f.gauge("boreas_region_boxes", "Boxes in the regional catalog.", len(catalog.boxes))
    f.gauge("boreas_region_registered", "1 once the Head took the registration.", 1 if region.registered else 0)
    counters_view(f, catalog.counters, _REGION)
    for node, version in sorted(catalog.versions.items()):
        f.gauge("boreas_region_member_version", "The last local catalog version a member reflected here.",
                version, node=node)
    peers_view(f, region.peers)


def read_global(component: Any, f: Families) -> None:
    """A :class:`~boreas.regional.global_component.GlobalComponent`'s figures."""
    f.info("boreas_component", "What this component is.", component="global", endpoint=component.endpoint or "",
           version=boreas.__version__)
    f.gauge("boreas_catalog_version", "Version of the catalog this component holds (a global component: its "
            "copy of the global catalog).", component.catalog.version)
    f.gauge("boreas_global_ready", "1 once a full copy is loaded.", 1 if component.ready.is_set() else 0)
    counters_view(f, component.counters, _GLOBAL)
    sender_view(f, component.asks, "boreas_global_copy_requests")
    peers_view(f, component.peers)


def region_checks(region: Any) -> dict[str, Check]:
    """Registered with the Head; every member's local catalog version reflected here."""

    def registered() -> str | None:
        if region.head and not region.registered:
            return f"not registered with the Head at {region.head}"
        return None

    async def in_sync() -> str | None:
        members = sorted(region.catalog.members)

        async def behind(node: str) -> str | None:
            try:
                status = await region.peers.call("GET", endpoint_url(node, "/status"), timeout=ASK_TIMEOUT)
            except Exception as exc:
                return f"{node}: cannot ask it ({exc})"
            reflected = region.catalog.versions.get(node, 0)
            if reflected < int(status.get("version", 0)):
                return f"{node}: local catalog version {status.get('version')}, version {reflected} reflected here"
            return None

        problems = [p for p in await asyncio.gather(*(behind(n) for n in members)) if p]
        return "; ".join(problems) or None

    return {"registered": registered, "in_sync": in_sync}


def global_checks(component: Any) -> dict[str, Check]:
    """Registered with the Head; holds a full copy at the Head's catalog version."""

    def registered() -> str | None:
        return None if component.registered else f"not registered with the Head at {component.head}"

    async def in_sync() -> str | None:
        if not component.ready.is_set():
            return "waiting for the full copy of the catalog from the Head"
        try:
            status = await component.peers.call("GET", f"{component.head}/status", timeout=ASK_TIMEOUT)
        except Exception as exc:
            return f"cannot ask the Head for its catalog version: {exc}"
        if component.catalog.version < int(status.get("version", 0)):
            return f"at catalog version {component.catalog.version}, the Head at {status.get('version')}"
        return None

    return {"registered": registered, "in_sync": in_sync}
