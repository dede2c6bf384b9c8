"""Endpoint normalisation: one spelling per TCP endpoint.

Borealis XML writes endpoints loosely (``:15000``, ``15000``, ``localhost``,
``host:15000``).  The catalog keys nodes, regions and subscribers by
endpoint, so every spelling is reduced to ``host:port`` before it is stored
or compared.

>>> normalize_endpoint(":15000")
'localhost:15000'
>>> normalize_endpoint("Node7")
'node7:15000'
>>> normalize_endpoint("25000", default_port=25000)
'localhost:25000'
>>> normalize_endpoint("[::1]:15100")
'[::1]:15100'
>>> normalize_endpoint("host:0")
Traceback (most recent call last):
...
ValueError: endpoint 'host:0': port must be 1..65535
"""

from __future__ import annotations

import re

#: The default Borealis node port (update XML and data).
DEFAULT_NODE_PORT = 15000
#: The default port of a client's output listener (DEFAULT_MONITOR_PORT).
DEFAULT_MONITOR_PORT = 25000

_HOST = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+)$")


def normalize_endpoint(
    text: str, default_host: str = "localhost", default_port: int = DEFAULT_NODE_PORT
) -> str:
    """Return ``host:port`` for any Borealis spelling of an endpoint."""
    raw = text.strip()
    if not raw:
        raise ValueError("endpoint is empty")
    if raw.isdigit():
        host, port_text = "", raw
    elif raw.startswith("[") and "]" in raw:
        close = raw.index("]")
        host, rest = raw[: close + 1], raw[close + 1 :]
        if rest and not rest.startswith(":"):
            raise ValueError(f"endpoint {text!r}: expected [address]:port")
        port_text = rest[1:]
    elif raw.count(":") == 1:
        host, port_text = raw.split(":")
    elif ":" in raw:
        raise ValueError(f"endpoint {text!r}: write IPv6 addresses as [address]:port")
    else:
        host, port_text = raw, ""
    host = (host or default_host).lower()
    if not _HOST.match(host):
        raise ValueError(f"endpoint {text!r}: bad host name {host!r}")
    if not port_text:
        port = default_port
    elif port_text.isdigit():
        port = int(port_text)
    else:
        raise ValueError(f"endpoint {text!r}: port {port_text!r} is not a number")
    if not 0 < port < 65536:
        raise ValueError(f"endpoint {text!r}: port must be 1..65535")
    return f"{host}:{port}"


#: A node position, ``#`` and a number: the n-th node of the cluster (see :mod:`.positions`).
_POSITION = re.compile(r"^#([0-9]{1,6})$")


def parse_position(text: str | None) -> int | None:
    """The position ``text`` names (``"#3"`` -> 3), or None when it is not a position.

    >>> parse_position("#3"), parse_position(":15003")
    (3, None)
    """
    if text is None:
        return None
    match = _POSITION.match(text.strip())
    return int(match.group(1)) if match else None


def split_endpoint(endpoint: str) -> tuple[str, int]:
    """Split a normalised endpoint into host and port.

    >>> split_endpoint("localhost:15000")
    ('localhost', 15000)
    """
    host, _, port = endpoint.rpartition(":")
    return host.strip("[]"), int(port)
