"""Sending one full copy of the catalog to a global component as one streamed request.

A full copy used to go as 2,000-element update documents, one request each,
the next sent only once the component had decoded the one before, so the
Head's sending and the component's decoding never overlapped, and every
part paid a round trip.  Now the kept serialization of the version
(:class:`~.catalog_copy.Serialized`'s ``document``, the bytes ``GET
/catalog`` serves, built ahead by :mod:`.copy_ahead`) is sent as one
chunked ``POST /copy``: the component parses and decodes it as the chunks
arrive (:mod:`boreas.regional.copy_stream`) and answers once it holds the
catalog, with its version.  Nothing is encoded here: the chunks are slices
of bytes already kept.

A component of a Boreas without ``POST /copy`` answers 404 or 405:
:func:`send_copy` raises :class:`CopyNotTaken` and the feed sends the parts
as before (:mod:`.global_feed`).

Usage::

    version = await send_copy(peers, "localhost:25000", built.document)
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from boreas.wire.addressing import endpoint_url
from boreas.wire.client import XML, PeerRefused
from boreas.wire.peer_calls import PeerCalls

#: Bytes a chunk of the streamed copy: small enough that the component decodes while the rest is sent.
CHUNK_BYTES = 256 * 1024
#: The answer may take this long at least, and this much more per MB sent (a loaded component decodes
#: about 10 MB a second of CPU; a wall-clock bound, generous for a machine shared by many).
TIMEOUT_LEAST = 30.0
TIMEOUT_PER_MB = 5.0


class CopyNotTaken(Exception):
    """The component has no ``POST /copy`` (an older Boreas): send the copy in parts instead."""


def copy_url(endpoint: str) -> str:
    """``/copy`` of a component's endpoint.

    >>> copy_url("localhost:25000")
    'http://localhost:25000/copy'
    """
    return endpoint_url(endpoint, "/copy")


async def chunks(data: bytes, size: int = CHUNK_BYTES) -> AsyncIterator[bytes]:
    """``data`` in slices of ``size`` bytes, for a chunked request body (aiohttp writes each and waits
    until the socket takes it, so the event loop serves others meanwhile)."""
    for start in range(0, len(data), size):
        yield data[start:start + size]


async def send_copy(peers: PeerCalls, endpoint: str, document: bytes) -> int:
    """Stream ``document`` (one update document of the whole catalog) to the component at ``endpoint``;
    the catalog version it then holds.  Raises :class:`~boreas.wire.client.PeerError` as any call does,
    and :class:`CopyNotTaken` for a component that cannot take a streamed copy."""
    timeout = TIMEOUT_LEAST + TIMEOUT_PER_MB * len(document) / 1e6
    try:
        answer = await peers.call("POST", copy_url(endpoint), data=chunks(document), content_type=XML,
                                  timeout=timeout)
    except PeerRefused as exc:
        if exc.status in (404, 405):
            raise CopyNotTaken(str(exc)) from None
        raise
    return int(answer.get("version", -1)) if isinstance(answer, dict) else -1
