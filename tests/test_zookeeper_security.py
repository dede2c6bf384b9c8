"""The catalog on a ZooKeeper that wants TLS or SASL, set in the ``zk://`` URL's query (docs/security.md).

Real processes: Debian's ZooKeeper 3.8 with a ``secureClientPort`` (PEM
stores from a throwaway CA, client certificates required) or with SASL
DIGEST-MD5 required of every session (tests/support/secure_zookeeper.py),
and a Head and a node started with ``--catalog zk://...?tls=1&ca=...`` or
``?sasl=DIGEST-MD5&user=...`` and ``$BOREAS_ZK_PASSWORD``.  An application
submitted to the Head is read back from the Head and from ZooKeeper itself;
the node's membership znode shows it joined over the same settings.  A
client ZooKeeper will not take is refused within the connect time-out with
a message that says why (catalog/store/zk_session.py), not left hanging.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from boreas.catalog.store import open_store
from boreas.catalog.store.base import Change, StoreError
from boreas.catalog.store.membership import ZooKeeperMembers
from boreas.catalog.store.znodes import ZK_PASSWORD_ENV
from test_end_of_input import one_node_app

from support.cluster import Cluster, free_port
from support.secure_zookeeper import SaslZooKeeper, TlsZooKeeper, sasl_zookeeper, tls_zookeeper

pytestmark = [pytest.mark.slow, pytest.mark.zookeeper]


@pytest.fixture(scope="module")
def tls_zk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsZooKeeper]:
    with tls_zookeeper(tmp_path_factory.mktemp("zk-tls")) as server:
        yield server


@pytest.fixture(scope="module")
def sasl_zk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslZooKeeper]:
    with sasl_zookeeper(tmp_path_factory.mktemp("zk-sasl")) as server:
        yield server


def chroot() -> str:
    return f"boreas-secure/{uuid.uuid4().hex[:12]}"


def run_app_on(url: str, workdir: Path, env: dict[str, str] | None = None) -> None:
    """A Head and a node on the catalog at ``url``: submit an application, read it back from the Head and from
    ZooKeeper, and see the node's membership znode (the node joins ZooKeeper with the URL the Head gives it)."""
    cluster = Cluster(workdir, url)
    cluster.env.update(env or {})
    try:
        node = one_node_app(cluster)
        assert cluster.head_catalog().boxes["per_ten"].node == node
        assert cluster.nodes()[node]["zookeeper"] is True  # joined membership on ZooKeeper, not heartbeats only
        with open_store(url, create=False) as store:  # ZooKeeper itself holds the submitted box
            assert ("box", "per_ten") in store.snapshot().elements
        members = ZooKeeperMembers(url)
        try:
            assert node in members.members()
        finally:
            members.close()
    finally:
        cluster.close()


def test_head_and_node_keep_the_catalog_on_zookeeper_over_tls(tls_zk: TlsZooKeeper, tmp_path: Path) -> None:
    run_app_on(tls_zk.url(chroot()), tmp_path)


def test_check_hostname_takes_a_certificate_that_names_the_host(tls_zk: TlsZooKeeper) -> None:
    """``check_hostname=1``: the throwaway certificate names 127.0.0.1, the host the URL dials."""
    with open_store(tls_zk.url(chroot()) + "&check_hostname=1") as store:
        assert store.version() == 0


def test_zookeeper_refuses_a_client_without_the_ca_or_without_a_certificate_and_says_why(
        tls_zk: TlsZooKeeper) -> None:
    with pytest.raises(StoreError, match="TLS with 127.0.0.1:[0-9]+ failed: CERTIFICATE_VERIFY_FAILED"):
        open_store(tls_zk.url(chroot(), ca=False))
    with pytest.raises(StoreError, match="TLS with .* failed: .*(ZooKeeper did not accept this client's certificate"
                                         "|ZooKeeper wants a client certificate)"):
        open_store(tls_zk.url(chroot(), cert=False))


def test_a_head_whose_certificate_zookeeper_refuses_exits_saying_why(tls_zk: TlsZooKeeper, tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "boreas.cli.main", "head", "--catalog", tls_zk.url(chroot(), ca=False),
                             "--listen", f"localhost:{free_port()}"],
                            env={**os.environ, "BOREAS_TOKEN": "t" * 20}, capture_output=True, text=True, timeout=120,
                            cwd=tmp_path)
    assert result.returncode != 0
    assert "CERTIFICATE_VERIFY_FAILED" in result.stderr + result.stdout


def test_head_and_node_keep_the_catalog_on_zookeeper_with_sasl_digest(sasl_zk: SaslZooKeeper, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ZK_PASSWORD_ENV, sasl_zk.password)  # this process's store and membership clients
    run_app_on(sasl_zk.url(chroot()), tmp_path, env={ZK_PASSWORD_ENV: sasl_zk.password})


# kazoo's connection thread dies on ZooKeeper's SessionClosedRequireSasl reply (kazoo handles only AuthFailed); the
# store has closed the session and said why by then (docs/security.md).
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_zookeeper_refuses_a_wrong_password_or_no_sasl_and_says_why(sasl_zk: SaslZooKeeper,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ZK_PASSWORD_ENV, "not-the-password")
    with pytest.raises(StoreError, match=f"SASL DIGEST-MD5 as user '{sasl_zk.user}'.*{ZK_PASSWORD_ENV}"):
        open_store(sasl_zk.url(chroot()))
    with pytest.raises(StoreError, match="ZooKeeper requires SASL: add sasl=DIGEST-MD5"):
        open_store(sasl_zk.url(chroot(), sasl=False))


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # as above
def test_tls_and_sasl_together(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One ZooKeeper wanting both: the store commits and reads back over TLS with SASL; a wrong password over TLS
    is refused saying so."""
    with tls_zookeeper(tmp_path, sasl=("boreas", "both-secret")) as server:
        monkeypatch.setenv(ZK_PASSWORD_ENV, "both-secret")
        url = server.url(chroot()) + "&sasl=DIGEST-MD5&user=boreas"
        with open_store(url) as store:
            store.commit(store.version(), [Change("schema", "Greeting", "<schema name=\"Greeting\" />")])
        with open_store(url, create=False) as store:
            assert store.snapshot().elements[("schema", "Greeting")] == "<schema name=\"Greeting\" />"
        monkeypatch.setenv(ZK_PASSWORD_ENV, "wrong")
        with pytest.raises(StoreError, match="SASL DIGEST-MD5 as user 'boreas'"):
            open_store(url)
