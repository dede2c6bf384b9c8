"""Starting a kazoo session so that a ZooKeeper refusing TLS or SASL says so, quickly.

kazoo hides both refusals.  A TLS handshake that can never succeed (a
certificate that does not chain to ``ca=``, a client certificate ZooKeeper
will not take, a plain port) is retried until the connect time-out, which
then reads "Connection time-out".  SASL is worse: kazoo reports the session
CONNECTED before it authenticates, so a wrong password surfaces later, as a
``ConnectionLoss`` of some unrelated request.  :func:`start_session` proves
the session with one request before anyone uses it and, when that fails,
says why: the TLS handshake's own error (found by one more handshake with the
same settings, through kazoo's own connection function) or the SASL
mechanism and user ZooKeeper refused.  The catalog store, node membership
and the Head election all start their sessions here.
"""

from __future__ import annotations

import socket
import ssl
from typing import Any

from kazoo.exceptions import AuthFailedError, ConnectionLoss, KazooException, SessionClosedRequireSaslError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.handlers.utils import create_tcp_connection

from .base import StoreError
from .znodes import ZK_PASSWORD_ENV, kazoo_options, parse_url

#: Seconds the diagnostic handshake may take (it runs only after a session failed to start).
PROBE_TIMEOUT = 3.0

#: What an OpenSSL reason means here, for the message.
TLS_HINTS = {
    "CERTIFICATE_VERIFY_FAILED": "ZooKeeper's certificate chains neither to ca= nor to the system's CAs",
    "SSLV3_ALERT_BAD_CERTIFICATE": "ZooKeeper did not accept this client's certificate (cert=, key=)",
    "TLSV13_ALERT_CERTIFICATE_REQUIRED": "ZooKeeper wants a client certificate: give cert= and key=",
    "WRONG_VERSION_NUMBER": "the port does not speak TLS: is it ZooKeeper's secureClientPort?",
}


def start_session(client: Any, url: str, purpose: str, timeout: float) -> None:
    """Start kazoo ``client`` for ``url`` and prove its session; else stop it and raise StoreError saying why.

    ``purpose`` names what the session is for in the message ("catalog
    store zk://...", "membership", "the Head election").
    """
    hosts, _ = parse_url(url)
    try:
        client.start(timeout=timeout)
        client.exists_async("/").get(timeout=timeout)  # after SASL, which kazoo does not wait for
    except (KazooTimeoutError, KazooException, OSError) as exc:
        try:
            client.stop()
            client.close()
        except Exception:  # the connection thread may already be dead (kazoo lets it die on a SASL refusal)
            pass
        raise StoreError(f"cannot connect to ZooKeeper at {hosts} for {purpose} within {timeout:g}s: "
                         f"{type(exc).__name__} {exc}".rstrip() + why_refused(url, exc)) from exc


def why_refused(url: str, exc: BaseException) -> str:
    """``"; <reason>"`` when TLS or SASL is why a session did not start, else ``""``.

    >>> why_refused("zk://zk1:2181/boreas", SessionClosedRequireSaslError())
    '; ZooKeeper requires SASL: add sasl=DIGEST-MD5&user=NAME to the URL, the password in $BOREAS_ZK_PASSWORD'
    >>> why_refused("zk://zk1:2181/boreas?sasl=DIGEST-MD5&user=boreas&password=x", AuthFailedError())
    "; ZooKeeper refused SASL DIGEST-MD5 as user 'boreas': check user= and $BOREAS_ZK_PASSWORD"
    """
    options = kazoo_options(url)
    sasl = options.get("sasl_options")
    who = f"SASL {sasl['mechanism']} as user {sasl.get('username', '')!r}" if sasl else ""
    if sasl and isinstance(exc, (SessionClosedRequireSaslError, AuthFailedError)):
        return f"; ZooKeeper refused {who}: check user= and ${ZK_PASSWORD_ENV}"
    if sasl and isinstance(exc, ConnectionLoss):  # kazoo's connection thread died on the refusal
        return f"; the session was lost right after {who}: wrong user= or ${ZK_PASSWORD_ENV}?"
    if isinstance(exc, SessionClosedRequireSaslError):
        return f"; ZooKeeper requires SASL: add sasl=DIGEST-MD5&user=NAME to the URL, the password in ${ZK_PASSWORD_ENV}"
    if options.get("use_ssl"):
        return _tls_trouble(parse_url(url)[0], options)
    return ""


def _tls_trouble(hosts: str, options: dict[str, Any]) -> str:
    """One handshake with the first server, with kazoo's own settings: its error, if any, for the message."""
    host, _, port = hosts.split(",")[0].rpartition(":")
    tls = {k: options[k] for k in ("ca", "certfile", "keyfile", "check_hostname") if k in options}
    try:
        sock = create_tcp_connection(socket, (host, int(port)), hostname=host, timeout=PROBE_TIMEOUT,
                                     use_ssl=True, **tls)
        with sock:
            sock.settimeout(PROBE_TIMEOUT)
            sock.recv(1)  # TLS 1.3 delivers the server's verdict on our certificate only now
    except ssl.SSLError as exc:
        reason = exc.reason or str(exc)
        hint = TLS_HINTS.get(reason, "")
        return f"; TLS with {host}:{port} failed: {reason}" + (f" ({hint})" if hint else "")
    except (OSError, ValueError):  # a time-out is ZooKeeper waiting for our request: TLS was fine
        return ""
    return ""
