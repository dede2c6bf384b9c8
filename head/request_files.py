"""The files of a submission, read out of its multipart body within the Head's limits.

Its own module because reading an untrusted body is a concept of its own (parts,
sizes, names echoed in errors, aiohttp's ways of saying "bad input"), apart
from what the API does with the files.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from aiohttp import web
from aiohttp.helpers import parse_mimetype
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.multipart import BodyPartReader
from boreas.catalog.xmlsafe import DEFAULT_LIMITS
from boreas.wire.server import json_error

#: Files in one submission.
MAX_PARTS = 1000
_UNPRINTABLE = re.compile(r"[^\x20-\x7e\u00a0-\uffff]")


def _boundary(request: web.Request) -> str | None:
    """The multipart boundary the Content-Type names, if it names a usable one."""
    boundary = parse_mimetype(request.headers.get("Content-Type", "")).parameters.get("boundary")
    return boundary or None


async def submitted_files(request: web.Request) -> list[tuple[str, bytes]] | web.Response:
    """The files of a submission (name, bytes), or the error response saying why the body is refused."""
    if not request.content_type.startswith("multipart/"):
        return json_error(415, "send the XML files as multipart/form-data, one part per file")
    try:
        return await _parts(request)
    except web.HTTPException:
        raise
    except (ValueError, LookupError, TypeError, AttributeError, AssertionError,
            UnicodeError, HttpProcessingError) as exc:
        # aiohttp's multipart reader says "bad input" with all of these.
        reason = " ".join(str(getattr(exc, "message", "") or exc).split())[:300] or type(exc).__name__
        return json_error(400, f"malformed multipart body: {reason}; send the XML files as "
                               "multipart/form-data, one part per file")

async def _parts(request: web.Request) -> list[tuple[str, bytes]] | web.Response:
    if not _boundary(request):
        return json_error(400, f"malformed multipart body: Content-Type {request.content_type} "
                               "names no boundary")
    limit = DEFAULT_LIMITS.max_bytes
    total, found = 0, []
    async for part in await request.multipart():
        if not isinstance(part, BodyPartReader):
            return json_error(400, "malformed multipart body: a part is itself multipart; send "
                                   "each XML file as one plain part")
        if len(found) >= MAX_PARTS:
            return json_error(413, f"submission has more than {MAX_PARTS} files")
        name = unquote(part.filename or part.name or f"document{len(found) + 1}")
        name = _UNPRINTABLE.sub("?", name)[:300]  # it is echoed in error messages
        chunks = []
        while chunk := await part.read_chunk(1 << 16):
            total += len(chunk)
            if total > 2 * limit:
                return json_error(413, f"submission is larger than {2 * limit} bytes")
            chunks.append(chunk)
        found.append((name, b"".join(chunks)))
    if not found:
        return json_error(400, "no documents in the submission")
    return found
