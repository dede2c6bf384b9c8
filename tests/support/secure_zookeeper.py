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


@contextmanager
def tls_zookeeper(workdir: Path) -> Iterator[TlsZooKeeper]:
    skip_without_zookeeper()
    certs = make_certificates(workdir / "tls", "localhost")
    keystore = workdir / "tls" / "zookeeper.pem"  # ZooKeeper's PEM key store: the key, then the certificate
    keystore.write_text(certs.key.read_text() + certs.cert.read_text())
    keystore.chmod(0o600)
    port = free_port()
    settings = {"secureClientPort": str(port),
                "serverCnxnFactory": "org.apache.zookeeper.server.NettyServerCnxnFactory",
                "ssl.keyStore.location": str(keystore), "ssl.keyStore.type": "PEM",
                "ssl.trustStore.location": str(certs.ca), "ssl.trustStore.type": "PEM"}
    with LocalZooKeeper(workdir=workdir / "zookeeper", settings=settings):
        yield TlsZooKeeper(port, certs)


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
    workdir.mkdir(parents=True, exist_ok=True)
    jaas = workdir / "zookeeper-jaas.conf"
    jaas.write_text("Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
                    f'  user_{user}="{password}";\n}};\n')
    settings = {"authProvider.1": "org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
                "sessionRequireClientSASLAuth": "true"}
    with LocalZooKeeper(workdir=workdir / "zookeeper", settings=settings,
                        jvm_flags=[f"-Djava.security.auth.login.config={jaas}"]) as server:
        yield SaslZooKeeper(server.address, user, password)
