"""A node's reflection of its changes costs nothing when it is in no region (issue 37: a deployment's updates).

Reflector.reflect wrote every applied update as text again, for regions to
take, before it looked whether the node is in any: half of a node's handling
of a 500-box update in a profile of a deployment, for no reader.  Driven by
hand, in process: the text is written only for a region that takes it.
"""

from __future__ import annotations

import asyncio

import pytest

from boreas.catalog.deployment_model import Region
from boreas.catalog.model import Catalog
from boreas.catalog.replicate import catalog_items
from boreas.node import reflect
from boreas.node.reflect import Reflector
from boreas.wire.client import PeerClient
from boreas.wire.supervisor import Supervisor


@pytest.fixture
def written(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many items each update text the reflector wrote held."""
    calls: list[int] = []
    real = reflect.update_document

    def counting(items, *args, **kwargs):
        calls.append(len(items))
        return real(items, *args, **kwargs)

    monkeypatch.setattr(reflect, "update_document", counting)
    return calls


def test_no_region_writes_no_text(written: list[int]) -> None:
    catalog = Catalog()  # (no <region>: the node is in none)
    catalog.version = 3
    reflector = Reflector("localhost:15000", None, Supervisor("test"))  # type: ignore[arg-type]
    reflector.reflect(catalog, [Region("r", "", endpoint="localhost:1")])  # (a registration: not a membership)
    assert written == []
    assert reflector.regions == []


def test_a_region_gets_the_change_as_text(written: list[int]) -> None:
    async def body() -> None:
        catalog = Catalog()
        catalog.version = 4
        region = Region("r", "localhost:15000", endpoint="localhost:1")
        catalog.regions[region.key] = region
        tasks = Supervisor("test")
        async with PeerClient(None, timeout=0.1) as peers:
            reflector = Reflector("localhost:15000", peers, tasks)
            items = catalog_items(catalog)  # (a change made of the catalog's own items)
            reflector.reflect(catalog, items)
            assert reflector.regions == ["localhost:1"]
            assert written == [len(items), len(items)]  # the full copy a new region gets, then the change
            reflector.reflect(catalog, [])  # (no change: no text)
            assert written == [len(items), len(items)]
            await reflector.close()
            await tasks.close()

    asyncio.run(body())
