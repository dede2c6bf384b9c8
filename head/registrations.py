"""Global components and regional components registering with the Head (paper 2.2), committed to the catalog.

A ``<global endpoint>`` in ``POST /update`` registers a global component
(a registered one is sent a fresh full copy instead); ``<delete global>``
removes it; ``<region name endpoint>`` says where a regional component
listens, so the nodes of that region are sent the endpoint in their
slices.  Each is a commit like any other (the Head's ``commit``).

Usage (the Head keeps one; head/api.py calls it)::

    registrations = Registrations(head.commit, head.global_feeds.full_copy)
    await registrations.register_global(GlobalComponent("localhost:16000"))
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from boreas.catalog.model import Catalog, GlobalComponent, Region
from boreas.catalog.store import Change
from boreas.catalog.xmlcodec import to_text

Build = Callable[[Catalog], list[Change] | None]


class Registrations:
    """Commits registrations; holds no state of its own (the catalog is the record)."""

    def __init__(self, commit: Callable[[Build], Awaitable[int | None]], full_copy: Callable[[str], bool]):
        self.commit = commit  # the Head's commit
        self.full_copy = full_copy  # send a registered component a full copy; False: not registered

    async def register_global(self, component: GlobalComponent) -> None:
        """``<global endpoint>``: register, or send a registered component a fresh full copy."""
        if self.full_copy(component.endpoint):
            return

        def build(catalog: Catalog) -> list[Change] | None:
            if component.endpoint in catalog.globals:
                return None
            return [Change("global", component.endpoint, to_text(GlobalComponent(component.endpoint)))]

        await self.commit(build)

    async def register_region(self, registration: Region) -> int | None:
        """``<region name endpoint>``: a regional component says where it listens (paper 2.2).

        The nodes of that region are then sent the endpoint in their slices,
        and start reflecting to it.
        """
        def build(catalog: Catalog) -> list[Change] | None:
            if catalog.regions.get(registration.key) == registration:
                return None
            return [Change("region", registration.key, to_text(registration))]

        return await self.commit(build)

    async def unregister_global(self, endpoint: str) -> bool:
        """``<delete global>``: whether it was registered (and is removed now)."""
        def build(catalog: Catalog) -> list[Change] | None:
            return [Change("global", endpoint, None)] if endpoint in catalog.globals else None

        return await self.commit(build) is not None
