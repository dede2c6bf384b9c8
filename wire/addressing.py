"""Endpoints and URLs: how a component reaches another.

Borealis names every receiver by an endpoint, ``host:port``.  Every Boreas
component listens on HTTP at its endpoint, so a URL is the endpoint with a
scheme; the Head is the one component users name by URL.  The scheme is
``https`` when the process has TLS on (:mod:`boreas.wire.tls`), else ``http``.

>>> endpoint_url("localhost:15000", "/update")
'http://localhost:15000/update'
>>> head_url("localhost:14000")
'http://localhost:14000'
>>> head_url("http://example.org:14000/")
'http://example.org:14000'
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from boreas.catalog.endpoints import normalize_endpoint

from .tls import current as current_tls

#: The Head's default port (nodes default to 15000, client listeners to 25000).
DEFAULT_HEAD_PORT = 14000
HEAD_ENV = "BOREAS_HEAD"


def endpoint_url(endpoint: str, path: str = "") -> str:
    return f"{current_tls().scheme}://{endpoint}{path}"


def head_url(text: str | None = None) -> str:
    """The Head's base URL from ``--head``, else ``$BOREAS_HEAD``; a bare endpoint is accepted.

    Several Heads (one leads, :mod:`.heads`) are given comma-separated, each a URL or an endpoint:
    they become one URL naming them all, ``http://a:14000,b:14000``, which every call follows.

    >>> head_url("a,b:14001")
    'http://a:14000,b:14001'
    """
    text = text or os.environ.get(HEAD_ENV)
    if not text:
        raise ValueError(f"no Head given: pass --head URL or set {HEAD_ENV}")
    urls = [_one_head_url(part.strip()) for part in text.split(",") if part.strip()]
    if not urls:
        raise ValueError(f"no Head in {text!r}: expected URL[,URL...]")
    return urls[0].split("://")[0] + "://" + ",".join(url.split("://", 1)[1] for url in urls)


def _one_head_url(text: str) -> str:
    if "://" not in text:
        return endpoint_url(normalize_endpoint(text, default_port=DEFAULT_HEAD_PORT))
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"Head URL {text!r}: expected http://HOST:PORT (https://HOST:PORT with TLS)")
    scheme = current_tls().scheme
    if parts.scheme != scheme:
        raise ValueError(f"Head URL {text!r} is {parts.scheme}, but TLS is "
                         + ("on in this process: use https://" if scheme == "https" else
                            "off: pass --tls-ca (or $BOREAS_TLS_CA) to reach an https:// Head"))
    return f"{scheme}://{parts.netloc}"


def advertised(advertise: str | None, bound: str) -> str:
    """The endpoint a server that bound ``bound`` registers (a subscriber, a global component): ``advertise``, completed with the bound port when it names a host only.

    >>> advertised(None, "0.0.0.0:41234"), advertised("client-7", "0.0.0.0:41234"), advertised("nat:9000", "x:1")
    ('0.0.0.0:41234', 'client-7:41234', 'nat:9000')
    """
    if not advertise:
        return bound
    if advertise.startswith("[") and advertise.endswith("]") or ":" not in advertise:
        return f"{advertise}:{bound.rsplit(':', 1)[1]}"
    return advertise
