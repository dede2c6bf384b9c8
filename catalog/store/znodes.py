"""ZooKeeper addressing shared by the catalog store and node membership: URLs, znode names, bounded waits.

Both :mod:`.zookeeper` (the catalog) and :mod:`.membership` (live nodes) parse
the same ``zk://hosts/chroot`` URLs, spell keys as znode names the same
reversible way, and bound every kazoo reply in time; the catalog's log
entries (zlib-compressed JSON of the commit's changes) are encoded here too,
next to the other znode formats.  Keeping this apart lets membership use it
without importing the catalog store.  :class:`ElementNames` remembers which
element znodes exist, so the store's commits need not ask.
"""

from __future__ import annotations

import json
import os
import threading
import zlib
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from .base import Change, Commit, StoreError

CONNECT_TIMEOUT = 5.0  # seconds to reach a server before open fails
REQUEST_TIMEOUT = 30.0  # seconds to wait for a reply (or for a lost connection to return)


def escape_key(key: str) -> str:
    """A znode name for ``key``: percent-encoding makes '/', control and
    non-ASCII characters safe and stays reversible; '.' and '..' are reserved."""
    name = quote(key, safe="")
    return name.replace(".", "%2E") if name in (".", "..") else name


def unescape_key(name: str) -> str:
    return unquote(name)


def encode_log(changes: Sequence[Change]) -> bytes:
    data = json.dumps([[c.kind, c.key, c.text] for c in changes], separators=(",", ":"))
    return zlib.compress(data.encode("utf-8"))


def decode_log(data: bytes) -> tuple[Change, ...]:
    return tuple(Change(k, key, t) for k, key, t in json.loads(zlib.decompress(data)))


def _rename(names: dict[str, set[str]], changes: Iterable[Change]) -> None:
    """Apply ``changes`` to per-kind sets of escaped element names."""
    for c in changes:
        (names[c.kind].discard if c.text is None else names[c.kind].add)(escape_key(c.key))


def wait_reply(result: Any) -> Any:
    """A kazoo reply, bounded in time: while the connection is down kazoo
    queues requests until it is back, which would otherwise hang forever."""
    return result.get(timeout=REQUEST_TIMEOUT)


def parse_url(url: str) -> tuple[str, str]:
    """Split ``zk://hosts/chroot``; a chroot is required so catalogs can share a cluster."""
    if not url.startswith("zk://"):
        raise StoreError(f"not a ZooKeeper store URL: {url!r}")
    hosts, slash, chroot = url[len("zk://"):].split("?", 1)[0].partition("/")  # the query: kazoo_options
    chroot = "/" + chroot.strip("/")
    if not hosts or not slash or chroot == "/" or "//" in chroot:
        raise StoreError(
            f"bad ZooKeeper store URL {url!r}: expected zk://HOST:PORT[,HOST:PORT...]/CHROOT"
        )
    return hosts, chroot


#: The ``zk://`` URL's query keys and the KazooClient arguments they set (see :func:`kazoo_options`).
ZK_QUERY = {"tls": "use_ssl", "ca": "ca", "cert": "certfile", "key": "keyfile", "check_hostname": "check_hostname",
            "sasl": "mechanism", "user": "username", "password": "password", "service": "service",
            "principal": "principal"}

#: Where a SASL password comes from when the URL does not give one (so it stays out of logs and ``ps``).
ZK_PASSWORD_ENV = "BOREAS_ZK_PASSWORD"


def kazoo_options(url: str) -> dict[str, Any]:
    """TLS and SASL for ZooKeeper from the ``zk://`` URL's query: keyword arguments for ``KazooClient``.

    ``tls=1`` (implied by ``ca``/``cert``), ``ca=PEM``, ``cert=PEM``,
    ``key=PEM``, ``check_hostname=1``; ``sasl=DIGEST-MD5`` (or ``GSSAPI``)
    with ``user=``, ``password=`` (better: ``$BOREAS_ZK_PASSWORD``),
    ``service=``, ``principal=``.  An unknown key is an error naming it.

    >>> kazoo_options("zk://zk1:2281/boreas?ca=/etc/zk/ca.pem&sasl=DIGEST-MD5&user=boreas&password=pw")
    {'ca': '/etc/zk/ca.pem', 'use_ssl': True, 'sasl_options': {'mechanism': 'DIGEST-MD5', 'username': 'boreas', \
'password': 'pw'}}
    >>> kazoo_options("zk://localhost:2181/boreas"), parse_url("zk://zk1:2281/boreas?tls=1")
    ({}, ('zk1:2281', '/boreas'))
    """
    query = urlsplit(url).query
    options: dict[str, Any] = {}
    sasl: dict[str, str] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key not in ZK_QUERY:
            raise StoreError(f"ZooKeeper store URL {url.split('?', 1)[0]}: unknown query key {key!r} (known: "
                             f"{', '.join(ZK_QUERY)})")
        if key in ("tls", "check_hostname"):
            options[ZK_QUERY[key]] = value.lower() in ("1", "true", "yes")
        elif key in ("ca", "cert", "key"):
            options[ZK_QUERY[key]] = value
            options["use_ssl"] = True
        else:
            sasl[ZK_QUERY[key]] = value
    if sasl:
        if "mechanism" not in sasl:
            raise StoreError(f"ZooKeeper store URL {url.split('?', 1)[0]}: user/password without sasl=MECHANISM")
        if "password" not in sasl and os.environ.get(ZK_PASSWORD_ENV):
            sasl["password"] = os.environ[ZK_PASSWORD_ENV]
        options["sasl_options"] = sasl
    return options


class ElementNames:
    """The catalog store's element znode names per kind, valid at one catalog version (thread-safe).

    Saves an exists() per element when a commit must choose create or set:
    the names are learnt from a snapshot, rolled forward over the store's own
    commits and the log entries it reads, and forgotten when a commit's
    outcome is unknown.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: dict[str, set[str]] = {}
        self._at: int | None = None

    def at(self, version: int) -> dict[str, set[str]] | None:
        """The names if they are known at ``version``, else None."""
        with self._lock:
            return self._names if self._at == version else None

    def set(self, names: dict[str, set[str]], version: int) -> None:
        with self._lock:
            self._names, self._at = names, version

    def forget(self) -> None:
        self._at = None

    def note_commit(self, base: int, existing: dict[str, set[str]], changes: Iterable[Change]) -> None:
        """The element names were right at ``base`` (the commit proved it); roll them forward.

        In place when they are the names held for ``base``: a commit costs the names it changes, not a copy of
        every element's (100,000 at 100,000 boxes).  A commit that read them for ``base`` meanwhile is on a
        stale version and fails its compare-and-set whatever it saw."""
        with self._lock:
            if self._at == base and self._names is existing:
                _rename(self._names, changes)
                self._at = base + 1
            elif self._at in (None, base):
                names = {k: set(v) for k, v in existing.items()}
                _rename(names, changes)
                self._names, self._at = names, base + 1

    def note_log(self, commits: Sequence[Commit]) -> None:
        """Roll the element names forward over commits read from the log (others' commits).

        A writer that lost a race reads the log to catch up; then its next
        commit needs no get_children of every kind to know what exists.
        """
        with self._lock:
            at = self._at
            run = [c for c in commits if at is not None and c.version > at]
            if not run or run[0].version != at + 1:
                return
            for commit in run:  # (in place, as in note_commit)
                _rename(self._names, commit.changes)
            self._at = run[-1].version
