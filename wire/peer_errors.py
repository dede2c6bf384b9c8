"""What a call to another component can fail with, apart from any HTTP library.

Both clients raise these: :class:`~boreas.wire.client.PeerClient` (aiohttp, for
components that keep connections open) and
:class:`~boreas.wire.one_shot.OneShotPeers` (the standard library's
``http.client``, for a CLI command that makes a few calls and exits), so a
caller catches the same two kinds whichever one it was handed:
:class:`PeerUnreachable` (nothing answered) and :class:`PeerRefused` (the peer
answered with an error status; its JSON body says why).  This module imports
nothing heavy: a light command may name these without loading aiohttp.

>>> str(PeerRefused("http://h/x", 404, {"error": "no box 'b'"}))
"http://h/x refused the request (404): no box 'b'"
>>> json_body(b"not json")
{'error': 'not json'}
"""

from __future__ import annotations

import json
from typing import Any

#: The content type of update XML.
XML = "application/xml"


class PeerError(Exception):
    """A call to another component failed."""


class PeerUnreachable(PeerError):
    def __init__(self, target: str, reason: str):
        super().__init__(f"{target} is unreachable: {reason}")
        self.target = target
        self.reason = reason


class PeerRefused(PeerError):
    def __init__(self, target: str, status: int, payload: dict[str, Any]):
        message = payload.get("error") or f"HTTP {status}"
        super().__init__(f"{target} refused the request ({status}): {message}")
        self.target = target
        self.status = status
        self.payload = payload


def json_answer(url: str, status: int, body: bytes) -> Any:
    """A call's JSON answer; an error status raises :class:`PeerRefused` with its JSON (both transports')."""
    payload = json_body(body)
    if status >= 400:
        raise PeerRefused(url, status, payload if isinstance(payload, dict) else {})
    return payload


def json_body(body: bytes) -> Any:
    """An answer's JSON; a body that is not JSON becomes ``{"error": its first 200 bytes}``."""
    try:
        return json.loads(body) if body else {}
    except ValueError:
        return {"error": body[:200].decode(errors="replace")}


#: What to say when a peer hung up without answering, with TLS off / on without a client certificate.
CLOSED_PLAIN = ("it closed the connection without answering: if it serves TLS, use https:// and "
                "--tls-ca (or $BOREAS_TLS_CA)")
CLOSED_NO_CERT = ("it closed the connection without answering: if it requires a client certificate "
                  "(--tls-client-auth), pass --tls-cert and --tls-key signed by its CA")


def untrusted_certificate(why: object) -> str:
    return (f"its TLS certificate is not trusted ({why}): is --tls-ca ($BOREAS_TLS_CA) this cluster's CA, "
            "and does the certificate name the host dialled?")


def handshake_failed(reason: str) -> str:
    """What a failed TLS handshake means, by the reason OpenSSL gave."""
    if "WRONG_VERSION_NUMBER" in reason.upper() or "wrong version number" in reason:
        return "TLS handshake failed: it answers plain HTTP, not TLS (turn TLS off here, or on there)"
    if "CERTIFICATE_REQUIRED" in reason.upper() or "certificate required" in reason:
        return ("it requires a client certificate (--tls-client-auth): pass --tls-cert and --tls-key "
                "signed by its CA")
    return f"TLS handshake failed ({reason})"
