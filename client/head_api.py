"""Calls to the Head that clients make: submit documents, follow a submission, look up a stream."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import aiohttp

from boreas.wire.client import PeerClient, PeerRefused

ProgressCallback = Callable[[dict[str, Any]], None]


class UnknownStream(LookupError):
    """The Head's catalog has no such stream (or it is not the kind asked for)."""


async def submit_documents(peers: PeerClient, head: str, files: Sequence[tuple[str, bytes]]) -> dict[str, Any]:
    """POST application/deployment XML; the first status, or ``PeerRefused`` (422 carries diagnostics)."""
    form = aiohttp.FormData()
    for name, data in files:
        form.add_field("document", data, filename=name, content_type="application/xml")
    return await peers.call("POST", f"{head}/submissions", data=form())


async def wait_submission(peers: PeerClient, head: str, status: dict[str, Any], timeout: float,
                          progress: ProgressCallback | None = None) -> dict[str, Any]:
    """Follow a submission until it is deployed or failed, or ``timeout`` passes (then its last status)."""
    deadline = time.monotonic() + timeout
    while status["state"] in ("committed", "deploying"):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        if progress:
            progress(status)
        status = await peers.call("GET", f"{head}/submissions/{status['id']}?after={status['revision']}"
                                         f"&wait={min(remaining, 10):.1f}")
    if progress:
        progress(status)
    return status


async def deploy_and_wait(peers: PeerClient, head: str, xml: str, name: str, timeout: float = 30.0) -> None:
    """Submit one small deployment document and wait until every node acknowledged it."""
    status = await wait_submission(peers, head, await submit_documents(peers, head, [(name, xml.encode())]),
                                   timeout)
    if status["state"] != "deployed":
        failed = {n: i.get("reason") for n, i in status["nodes"].items() if i["state"] != "acknowledged"}
        raise RuntimeError(f"{name}: not deployed ({status['state']}): {failed}")


async def stream_route(peers: PeerClient, head: str, stream: str) -> dict[str, Any]:
    try:
        return await peers.call("GET", f"{head}/streams/{stream}")
    except PeerRefused as exc:
        if exc.status == 404:
            raise UnknownStream(exc.payload.get("error") or f"no stream {stream!r}") from None
        raise
