"""ZooKeeper servers that want TLS or SASL, for tests/test_zookeeper_security.py.

Both are Debian's ZooKeeper (catalog/store/zkserver.py's ``LocalZooKeeper``)
with more ``zoo.cfg`` lines.  The TLS one serves a ``secureClientPort``
through Netty with PEM key and trust stores made from the throwaway CA of
``cluster up --tls`` (cli/cluster_certs.py), and wants a client certificate
(ZooKeeper's default ``ssl.clientAuth=need``).  The SASL one takes
DIGEST-MD5 for the users of a JAAS ``Server`` section and, with
``sessionRequireClientSASLAuth``, no session that has not authenticated.
Each keeps its plain ``clientPort`` too: LocalZooKeeper asks it whether the
server is up (the SASL server refuses sessions there all the same).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from boreas.catalog.store.zkserver import ZOOKEEPER_JAR, LocalZooKeeper
from boreas.cli.cluster_certs import ClusterCertificates, make_certificates

from support.cluster import free_port


def skip_without_zookeeper() -> None:
    """Skip (these tests only) when Java, ZooKeeper's jar or openssl is missing, saying which."""
    missing = [what for what, there in (("java", shutil.which("java")), (str(ZOOKEEPER_JAR), ZOOKEEPER_JAR.exists()),
                                        ("openssl", shutil.which("openssl"))) if not there]
    if missing:
        pytest.skip(f"ZooKeeper with TLS/SASL needs {', '.join(missing)} (Debian packages zookeeper, openssl)")


@dataclass(frozen=True)
class TlsZooKeeper:
    """A running TLS ZooKeeper: its TLS port on 127.0.0.1, and the certificates that CA signed."""

    port: int
    certs: ClusterCertificates

    def url(self, chroot: str, ca: bool = True, cert: bool = True) -> str:
        """A ``zk://`` URL of the TLS port; ``ca``/``cert``: give the CA, the client certificate and key."""
        query = ["tls=1", *([f"ca={self.certs.ca}"] if ca else []),
                 *([f"cert={self.certs.cert}", f"key={self.certs.key}"] if cert else [])]
        return f"zk://127.0.0.1:{self.port}/{chroot}?{'&'.join(query)}"


def _tls_settings(workdir: Path) -> tuple[dict[str, str], ClusterCertificates]:
    """zoo.cfg lines for a TLS port on a free port, and the certificates made for it."""
    certs = make_certificates(workdir / "tls", "localhost")
    keystore = workdir / "tls" / "zookeeper.pem"  # ZooKeeper's PEM key store: the key, then the certificate
    keystore.write_text(certs.key.read_text() + certs.cert.read_text())
    keystore.chmod(0o600)
    return {"secureClientPort": str(free_port()),
            "serverCnxnFactory": "org.apache.zookeeper.server.NettyServerCnxnFactory",
            "ssl.keyStore.location": str(keystore), "ssl.keyStore.type": "PEM",
            "ssl.trustStore.location": str(certs.ca), "ssl.trustStore.type": "PEM"}, certs


def _sasl_settings(workdir: Path, user: str, password: str) -> tuple[dict[str, str], list[str]]:
    """zoo.cfg lines and JVM flags for SASL DIGEST-MD5 required of every session, ``user`` its one login."""
    workdir.mkdir(parents=True, exist_ok=True)
    jaas = workdir / "zookeeper-jaas.conf"
    jaas.write_text("Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
                    f'  user_{user}="{password}";\n}};\n')
    return ({"authProvider.1": "org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
             "sessionRequireClientSASLAuth": "true"}, [f"-Djava.security.auth.login.config={jaas}"])


@contextmanager
def tls_zookeeper(workdir: Path, sasl: tuple[str, str] | None = None) -> Iterator[TlsZooKeeper]:
    """A TLS ZooKeeper; with ``sasl=(user, password)`` it wants SASL DIGEST-MD5 too."""
    skip_without_zookeeper()
    settings, certs = _tls_settings(workdir)
    flags: list[str] = []
    if sasl is not None:
        more, flags = _sasl_settings(workdir, *sasl)
        settings.update(more)
    with LocalZooKeeper(workdir=workdir / "zookeeper", settings=settings, jvm_flags=flags):
        yield TlsZooKeeper(int(settings["secureClientPort"]), certs)


@dataclass(frozen=True)
class SaslZooKeeper:
    """A running ZooKeeper that wants SASL DIGEST-MD5 from every session; ``user`` may log in with ``password``."""

    address: str
    user: str
    password: str

    def url(self, chroot: str, sasl: bool = True) -> str:
        return f"zk://{self.address}/{chroot}" + (f"?sasl=DIGEST-MD5&user={self.user}" if sasl else "")


@contextmanager
def sasl_zookeeper(workdir: Path, user: str = "boreas", password: str = "zk-secret-42") -> Iterator[SaslZooKeeper]:
    skip_without_zookeeper()
    settings, flags = _sasl_settings(workdir, user, password)
    with LocalZooKeeper(workdir=workdir / "zookeeper", settings=settings, jvm_flags=flags) as server:
        yield SaslZooKeeper(server.address, user, password)
