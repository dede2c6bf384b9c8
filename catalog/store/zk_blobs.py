"""Blobs beside a ZooKeeper catalog: one value of any size, cut into chunks under ZooKeeper's request limit.

A Head keeps its checked index of a catalog version as a blob
(:mod:`boreas.catalog.index_checkpoint`), tens of MB at 100,000 boxes, far
over one znode's 1 MiB.  Written as :mod:`.zk_snapshot` writes whole copies,
chunks first and the pointer last, so a reader sees the old blob or the new
one whole, never a mix::

    <chroot>/catalog/blobs/<key>                   {"generation": G, "chunks": N}: the chunks (set last)
    <chroot>/catalog/blob_chunks/<key>/<G>/<i:06d> chunk i of generation G

(under the catalog's own subtree: a catalog laid out there again starts from version 0 without the blobs
of the one before, which its version numbers would otherwise match)

A reader that finds a chunk gone (deleted under it by a newer write) gets
None, as for a blob never set: a blob is a cache the caller can do without.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

from kazoo.exceptions import NodeExistsError, NoNodeError

from .zk_snapshot import CHUNK_BYTES
from .znodes import escape_key, wait_reply

log = logging.getLogger(__name__)


class BlobZnodes:
    """Get and put blobs under ``path``; kazoo's exceptions pass through (the store names them)."""

    def __init__(self, client: Any, path: str):
        self.client = client
        self.pointers = path + "/blobs"
        self.chunks = path + "/blob_chunks"

    def get(self, key: str) -> bytes | None:
        pointed = self._pointed(key)
        if pointed is None:
            return None
        generation, count = pointed
        base = f"{self.chunks}/{escape_key(key)}/{generation}"
        pending = [self.client.get_async(f"{base}/{i:06d}") for i in range(count)]
        parts = []
        for result in pending:
            try:
                parts.append(wait_reply(result)[0])
            except NoNodeError:
                return None
        return b"".join(parts)

    def put(self, key: str, data: bytes) -> None:
        generation = uuid.uuid4().hex
        base = f"{self.chunks}/{escape_key(key)}/{generation}"
        self.client.ensure_path(base)
        pending = [self.client.create_async(f"{base}/{i // CHUNK_BYTES:06d}", data[i:i + CHUNK_BYTES])
                   for i in range(0, len(data), CHUNK_BYTES)]
        for result in pending:
            wait_reply(result)
        before = self._pointed(key)
        pointer = json.dumps({"generation": generation, "chunks": len(pending)}).encode()
        path = f"{self.pointers}/{escape_key(key)}"
        self.client.ensure_path(self.pointers)
        try:
            wait_reply(self.client.create_async(path, pointer))
        except NodeExistsError:
            wait_reply(self.client.set_async(path, pointer))
        if before is not None:
            try:  # best effort: chunks left behind are only space
                self.client.delete(f"{self.chunks}/{escape_key(key)}/{before[0]}", recursive=True)
            except Exception as exc:
                log.warning("could not delete the old chunks of blob %r: %r", key, exc)

    def _pointed(self, key: str) -> tuple[str, int] | None:
        try:
            data, _ = wait_reply(self.client.get_async(f"{self.pointers}/{escape_key(key)}"))
        except NoNodeError:
            return None
        pointer = json.loads(data)
        return str(pointer["generation"]), int(pointer["chunks"])
