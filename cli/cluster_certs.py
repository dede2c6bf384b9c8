"""``boreas cluster up --tls``: a throwaway CA and one certificate for the whole development cluster.

Made with the ``openssl`` binary (the ``cryptography`` package is not a
dependency of Boreas), in the cluster's directory: ``ca.pem`` (the CA's
certificate, which every client trusts with ``--tls-ca``), ``ca.key``
(kept only so the directory can sign more: nothing reads it), and
``cluster.pem``/``cluster.key``, the certificate every process of the
cluster serves with and shows as a client (for ``--tls-client-auth``).  It
names ``localhost``, ``127.0.0.1``, ``::1`` and the cluster's ``--host``,
is valid for both server and client use, and expires after
:data:`DAYS` days: a development cluster's, not a production one's (see
docs/security.md for real certificates).

A directory that already holds the four files is used as it is, so a
restarted ``cluster up`` keeps the CA its clients were given.
"""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

#: Days the throwaway certificates are valid.
DAYS = 30

#: The elliptic curve of the keys (fast to make and to handshake with, accepted everywhere).
CURVE = "prime256v1"


class CertificatesFailed(RuntimeError):
    """``openssl`` is missing or failed; the message says which command and why."""


@dataclass(frozen=True)
class ClusterCertificates:
    """Paths of the cluster's CA and its one certificate and key."""

    ca: Path
    cert: Path
    key: Path


def subject_alt_names(host: str) -> str:
    """The names the cluster's certificate is valid for: loopback, and ``host``.

    >>> subject_alt_names("localhost")
    'DNS:localhost,IP:127.0.0.1,IP:::1'
    >>> subject_alt_names("10.1.2.3")
    'DNS:localhost,IP:127.0.0.1,IP:::1,IP:10.1.2.3'
    >>> subject_alt_names("node-a.example")
    'DNS:localhost,IP:127.0.0.1,IP:::1,DNS:node-a.example'
    """
    names = ["DNS:localhost", "IP:127.0.0.1", "IP:::1"]
    try:
        extra = f"IP:{ipaddress.ip_address(host.strip('[]'))}"
    except ValueError:
        extra = f"DNS:{host}"
    if extra not in names:
        names.append(extra)
    return ",".join(names)


def make_certificates(directory: Path, host: str) -> ClusterCertificates:
    """Make (or reuse) the CA and the cluster's certificate in ``directory``."""
    made = ClusterCertificates(ca=directory / "ca.pem", cert=directory / "cluster.pem", key=directory / "cluster.key")
    ca_key = directory / "ca.key"
    if all(p.exists() for p in (made.ca, made.cert, made.key, ca_key)):
        return made
    openssl = shutil.which("openssl")
    if openssl is None:
        raise CertificatesFailed("cluster up --tls makes its certificates with the openssl command, which is "
                                 "not installed (or not on PATH)")
    directory.mkdir(parents=True, exist_ok=True)
    csr, ext = directory / "cluster.csr", directory / "cluster.ext"
    ext.write_text(f"subjectAltName={subject_alt_names(host)}\nbasicConstraints=critical,CA:FALSE\n"
                   "keyUsage=critical,digitalSignature,keyEncipherment\n"
                   "extendedKeyUsage=serverAuth,clientAuth\n"
                   "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid,issuer\n")
    newkey = ["-newkey", "ec", "-pkeyopt", f"ec_paramgen_curve:{CURVE}", "-nodes"]
    _run([openssl, "req", "-x509", *newkey, "-keyout", str(ca_key), "-out", str(made.ca), "-days", str(DAYS),
          "-subj", "/CN=Boreas throwaway cluster CA", "-addext", "basicConstraints=critical,CA:TRUE",
          "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
    _run([openssl, "req", *newkey, "-keyout", str(made.key), "-out", str(csr), "-subj", "/CN=boreas-cluster"])
    _run([openssl, "x509", "-req", "-in", str(csr), "-CA", str(made.ca), "-CAkey", str(ca_key), "-CAcreateserial",
          "-out", str(made.cert), "-days", str(DAYS), "-extfile", str(ext)])
    for path in (ca_key, made.key):
        path.chmod(0o600)
    csr.unlink()
    ext.unlink()
    return made


def _run(argv: list[str]) -> None:
    try:
        subprocess.run(argv, check=True, capture_output=True, text=True)
    except subprocess.CalledProcessError as exc:
        raise CertificatesFailed(f"{' '.join(argv[:2])} failed (exit {exc.returncode}): "
                                 f"{(exc.stderr or '').strip()[-300:]}") from None
