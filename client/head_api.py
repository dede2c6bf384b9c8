"""Calls to the Head that clients make: read and submit documents, follow a submission, look up a stream.

Every call takes either transport (:class:`~boreas.wire.peer_calls.PeerCalls`): a component's aiohttp pool,
or a command's standard-library connections (:mod:`boreas.wire.one_shot`), which spare ``boreas submit``
importing aiohttp (about a quarter of a second) for its two or three requests.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from boreas.catalog.diagnostics import Diagnostic, ValidationFailed
from boreas.catalog.sql_files import inline_sql_files
from boreas.catalog.words import close_matches, did_you_mean
from boreas.catalog.xmlsafe import DEFAULT_LIMITS
from boreas.wire.peer_calls import PeerCalls
from boreas.wire.peer_errors import PeerRefused

ProgressCallback = Callable[[dict[str, Any]], None]


class UnknownStream(LookupError):
    """The Head's catalog has no such stream (or it is not the kind asked for)."""


def read_documents(paths: Sequence[str | Path]) -> list[tuple[str, bytes]]:
    """Read XML files for :func:`submit_documents`, each ``<parameter name="sql-file">`` replaced by
    the SQL of the file it names (relative to the XML file): the Head never reads files, so they
    are read here, where the XML file is trusted.  ``ValidationFailed`` with every file's problems
    (an unreadable file, a missing SQL file: file, line and element)."""
    files, problems = [], []
    for path in paths:
        try:
            with open(path, "rb") as fh:
                files.append((str(path), inline_sql_files(fh.read(DEFAULT_LIMITS.max_bytes + 1), path)))
        except OSError as exc:
            problems.append(Diagnostic(str(path), None, "", f"cannot read file: {exc.strerror}"))
        except ValidationFailed as exc:
            problems += exc.diagnostics
    if problems:
        raise ValidationFailed(problems)
    return files


async def submit_documents(peers: PeerCalls, head: str, files: Sequence[tuple[str, bytes]],
                           replace: bool = False, app: str | None = None) -> dict[str, Any]:
    """POST application/deployment XML; the first status, or ``PeerRefused`` (422 carries diagnostics).

    ``replace``: the documents are the new version of an application (docs/xml.md, "The edit loop"):
    the status then carries ``changes``, what was kept, changed, added and removed.  ``app``: the
    application the documents declare (default: each application file's base name)."""
    body, content_type = multipart_documents(files)
    query = {**({"replace": "1"} if replace else {}), **({"app": app} if app else {})}
    return await peers.call("POST", f"{head}/submissions" + (f"?{urlencode(query)}" if query else ""), data=body,
                            content_type=content_type)


def multipart_documents(files: Sequence[tuple[str, bytes]]) -> tuple[bytes, str]:
    """``files`` as a ``multipart/form-data`` body (one part named ``document`` per file, its name the part's
    filename) and its Content-Type: what ``POST /submissions`` reads (head/request_files.py).

    >>> body, kind = multipart_documents([("a.xml", b"<borealis/>")])
    >>> kind.startswith("multipart/form-data; boundary="), body.count(b"<borealis/>")
    (True, 1)
    """
    boundary = secrets.token_hex(16)
    while any(boundary.encode() in data for _, data in files):  # (128 random bits: never, in practice)
        boundary = secrets.token_hex(16)
    parts = []
    for name, data in files:
        parts.append(f"--{boundary}\r\nContent-Disposition: form-data; name=\"document\"; "
                     f"filename=\"{quote(name, safe='')}\"\r\nContent-Type: application/xml\r\n\r\n".encode()
                     + data + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


async def wait_submission(peers: PeerCalls, head: str, status: dict[str, Any], timeout: float,
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


async def deploy_and_wait(peers: PeerCalls, head: str, xml: str, name: str, timeout: float = 30.0) -> None:
    """Submit one small deployment document and wait until every node acknowledged it."""
    status = await wait_submission(peers, head, await submit_documents(peers, head, [(name, xml.encode())]),
                                   timeout)
    if status["state"] != "deployed":
        failed = {n: i.get("reason") for n, i in status["nodes"].items() if i["state"] != "acknowledged"}
        raise RuntimeError(f"{name}: not deployed ({status['state']}): {failed}")


async def stream_route(peers: PeerCalls, head: str, stream: str) -> dict[str, Any]:
    """The Head's ``GET /streams/{stream}``; :class:`UnknownStream` (with the closest names) if it has none."""
    try:
        return await peers.call("GET", f"{head}/streams/{stream}")
    except PeerRefused as exc:
        if exc.status == 404:
            message = exc.payload.get("error") or f"no stream {stream!r}"
            raise UnknownStream(await with_suggestions(peers, head, message, "stream", stream)) from None
        raise


async def catalog_names(peers: PeerCalls, head: str, kind: str) -> list[str]:
    """The names of the Head's catalog's streams, boxes or nodes (``kind``); none when it cannot be read."""
    from boreas.catalog.documents import Update, read_document
    from boreas.catalog.model import Catalog
    from boreas.catalog.replicate import apply_update

    try:
        doc = read_document(await peers.text(f"{head}/catalog"), f"{head}/catalog")
        assert isinstance(doc, Update)
        catalog = apply_update(Catalog(), doc.items, doc.version or 0)
    except Exception:  # only for a suggestion: the error it adds to is what matters
        return []
    if kind == "stream":
        return list(catalog.producers())
    return list(catalog.boxes if kind == "box" else catalog.nodes)


async def with_suggestions(peers: PeerCalls, head: str, message: str, kind: str, name: str) -> str:
    """The Head's "no such ``kind``" message with "did you mean" added (unless it says it already)."""
    if "did you mean" in message:
        return message
    return message + did_you_mean(close_matches(name, await catalog_names(peers, head, kind)))
