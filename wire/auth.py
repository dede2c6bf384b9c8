"""The cluster token: one shared secret that every mutating request carries.

A Head, its nodes and regional components share a token (``--token`` or
``$BOREAS_TOKEN``; ``boreas cluster up`` makes one).  Requests that change
anything (POST, PUT, DELETE) must carry it as ``Authorization: Bearer ...``;
without it the server answers 401 and changes nothing.  Reads stay open so
monitoring needs no secret.  The comparison is constant-time.

>>> check_token("Bearer s3cret", "s3cret"), check_token("Bearer guess", "s3cret"), check_token(None, "s3cret")
(True, False, False)
"""

from __future__ import annotations

import os

# hmac and secrets are imported where used (a server checks tokens, `cluster up` makes one): a command that
# only sends its token (`boreas move`) loads neither (issue 37).

TOKEN_ENV = "BOREAS_TOKEN"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class MissingToken(ValueError):
    """A component that must authenticate was started without a token."""


def new_token() -> str:
    """160 random bits as hex: safe in shells, URLs and argument lists (never starts with '-')."""
    import secrets

    return secrets.token_hex(20)


def resolve_token(explicit: str | None, required: bool = True) -> str | None:
    token = explicit or os.environ.get(TOKEN_ENV)
    if not token and required:
        raise MissingToken(f"no cluster token: pass --token or set {TOKEN_ENV} "
                           f"(boreas cluster up prints the one it made)")
    return token or None


def auth_headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def check_token(header: str | None, token: str) -> bool:
    import hmac

    if not header or not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header[len("Bearer "):].encode(), token.encode())
