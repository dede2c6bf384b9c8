"""Helpers for tests that read streams."""

from __future__ import annotations

import asyncio

from boreas.client.subscriber import Subscriber


async def collect(subscriber: Subscriber, count: int, timeout: float = 60.0) -> list[tuple]:
    """The first ``count`` rows the subscriber yields; ``TimeoutError`` if they do not come in time."""
    got: list[tuple] = []

    async def read() -> None:
        async for row in subscriber:
            got.append(row)
            if len(got) >= count:
                return

    await asyncio.wait_for(read(), timeout)
    return got
