"""TLS for every link of a process: its certificate, key and trusted CA, and who must show one.

A Boreas process belongs to one cluster, and a cluster speaks TLS on every
link or on none: the Head, the nodes, the regional and global components
and every client.  So TLS is the *process's* setting, installed once at
start (:func:`configure`; the CLI does it from ``--tls-cert``,
``--tls-key``, ``--tls-ca`` and ``--tls-client-auth`` or their
``$BOREAS_TLS_*`` equivalents) and read by the three places that open
sockets: :class:`~boreas.wire.server.HttpServer` (it listens with
:meth:`TlsConfig.server_context`), :class:`~boreas.wire.client.PeerClient`
and :class:`~boreas.wire.links.OutboundLink` (they connect with
:meth:`TlsConfig.client_context`), and :func:`~boreas.wire.addressing.endpoint_url`,
which names a catalog endpoint (a bare ``host:port``) ``https://`` when
TLS is on.  A library user who never calls :func:`configure` gets the
settings of the ``$BOREAS_TLS_*`` variables (none: plain HTTP).

With TLS on, certificates are verified: the peer's must chain to
``--tls-ca`` (or the system's trust store when no CA is given) and name
the host dialled.  ``client_auth`` makes a server require a client
certificate signed by the CA as well (mutual TLS between nodes and Heads).

The cluster token never crosses the network in clear with TLS on: every
URL is ``https``/``wss``, and :func:`clear_token_refusal` refuses a request
that would carry the token over plain HTTP.  Without TLS, a token sent to
an address other than loopback is allowed (a trusted network), with a
warning once per host (:func:`warn_clear_token`).

>>> TlsConfig().enabled, TlsConfig(ca="ca.pem").scheme
(False, 'https')
>>> is_loopback("localhost"), is_loopback("127.0.0.2"), is_loopback("[::1]"), is_loopback("10.0.0.5")
(True, True, True, False)
>>> clear_token_refusal("http://10.0.0.5:15000/update", "s3cret", TlsConfig(ca="ca.pem")) is not None
True
>>> clear_token_refusal("https://10.0.0.5:15000/update", "s3cret", TlsConfig(ca="ca.pem")) is None
True
"""

from __future__ import annotations

import functools
import ipaddress
import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:  # ssl itself is imported where a context is made: the CLI's parser stays light
    import ssl

log = logging.getLogger(__name__)

CERT_ENV, KEY_ENV, CA_ENV, CLIENT_AUTH_ENV = ("BOREAS_TLS_CERT", "BOREAS_TLS_KEY", "BOREAS_TLS_CA",
                                              "BOREAS_TLS_CLIENT_AUTH")


class TlsError(ValueError):
    """TLS settings that cannot be used (a file missing or not PEM, a key without its certificate, ...)."""


@dataclass(frozen=True)
class TlsConfig:
    """One process's TLS: PEM file paths, and whether its servers require client certificates.

    TLS is on when a certificate or a CA is given.  A server needs ``cert``
    (with ``key``, unless the certificate file holds the key too); a client
    needs only ``ca`` (or none, to trust the system's CAs) and presents
    ``cert`` when it has one (a server with ``client_auth`` requires it).
    """

    cert: str | None = None
    key: str | None = None
    ca: str | None = None
    client_auth: bool = False

    @property
    def enabled(self) -> bool:
        return bool(self.cert or self.ca)

    @property
    def scheme(self) -> str:
        return "https" if self.enabled else "http"

    @classmethod
    def from_env(cls) -> TlsConfig:
        return cls(cert=os.environ.get(CERT_ENV) or None, key=os.environ.get(KEY_ENV) or None,
                   ca=os.environ.get(CA_ENV) or None,
                   client_auth=os.environ.get(CLIENT_AUTH_ENV, "").lower() in ("1", "true", "yes"))

    def check(self) -> None:
        """Load every file now, so that a bad path is a clear error at start and not at the first connection."""
        if self.key and not self.cert:
            raise TlsError("--tls-key was given without --tls-cert")
        if self.client_auth and not self.ca:
            raise TlsError("--tls-client-auth needs --tls-ca: the CA that client certificates must chain to")
        if self.enabled:
            self.client_context()
        if self.cert:
            self.server_context()

    def server_context(self) -> ssl.SSLContext:
        """What a server listens with; a server with TLS on and no certificate is an error."""
        if not self.cert:
            raise TlsError(f"TLS is on (a CA is given) but this process has no certificate to serve with: "
                           f"pass --tls-cert and --tls-key (or ${CERT_ENV} and ${KEY_ENV})")
        return _server_context(self)

    def client_context(self) -> ssl.SSLContext:
        """What a client connects with: verification on, the CA's (or the system's) trust, our certificate."""
        return _client_context(self)


@functools.cache
def _server_context(config: TlsConfig) -> ssl.SSLContext:
    import ssl

    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    _load_chain(ctx, config)
    if config.client_auth:
        ctx.verify_mode = ssl.CERT_REQUIRED
    if config.ca:
        _load_ca(ctx, config.ca)
    return ctx


@functools.cache
def _client_context(config: TlsConfig) -> ssl.SSLContext:
    import ssl

    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)  # CERT_REQUIRED, hostname checked
    if config.ca:
        _load_ca(ctx, config.ca)
    if config.cert:
        _load_chain(ctx, config)
    return ctx


def _load_chain(ctx: ssl.SSLContext, config: TlsConfig) -> None:
    import ssl

    assert config.cert
    try:
        ctx.load_cert_chain(config.cert, config.key)
    except FileNotFoundError as exc:
        raise TlsError(f"{exc.filename}: no such file (--tls-cert/--tls-key)") from None
    except (ssl.SSLError, OSError) as exc:
        raise TlsError(f"{config.cert}{' with ' + config.key if config.key else ''}: cannot load the "
                       f"certificate and its private key ({exc}); both must be PEM and match") from None


def _load_ca(ctx: ssl.SSLContext, ca: str) -> None:
    import ssl

    try:
        ctx.load_verify_locations(cafile=ca)
    except FileNotFoundError:
        raise TlsError(f"{ca}: no such file (--tls-ca)") from None
    except (ssl.SSLError, OSError) as exc:
        raise TlsError(f"{ca}: cannot load the CA certificate ({exc}); it must be PEM") from None


_current: TlsConfig | None = None


def configure(config: TlsConfig) -> TlsConfig:
    """Install this process's TLS settings (checked first: a bad file raises :class:`TlsError`)."""
    global _current
    config.check()
    _current = config
    return config


def current() -> TlsConfig:
    """The process's TLS settings: those :func:`configure` installed, else the environment's."""
    global _current
    if _current is None:
        _current = TlsConfig.from_env()
    return _current


def is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def clear_token_refusal(url: str, token: str | None, config: TlsConfig) -> str | None:
    """Why a request to ``url`` must not be sent (the token would go in clear while TLS is on); None: send it."""
    if token and config.enabled and urlsplit(url).scheme in ("http", "ws"):
        return (f"refusing to send the cluster token to {url} in clear: TLS is on in this process "
                f"(use an https:// URL)")
    return None


_warned: set[str] = set()


def warn_clear_token(url: str, token: str | None, config: TlsConfig) -> None:
    """Warn once per host when the token goes in clear to an address that is not loopback."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if not token or config.enabled or parts.scheme not in ("http", "ws") or is_loopback(host) or host in _warned:
        return
    _warned.add(host)
    log.warning("the cluster token is sent to %s in clear (no TLS): anyone on the network between can read "
                "it; turn TLS on (--tls-ca, --tls-cert, --tls-key; docs/security.md)", host)
