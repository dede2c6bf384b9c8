"""Shared fixtures: a real ZooKeeper server and one catalog store per implementation.

The ZooKeeper server is started once per session from the Debian ``zookeeper``
package (``/usr/share/java/zookeeper.jar``; its manifest's Class-Path names
the dependency jars), on a free loopback port with a throw-away data dir.
It is deliberately not skipped when missing: the ZooKeeper store would then
go untested without anyone noticing.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ZOOKEEPER_JAR = Path(os.environ.get("BOREAS_ZOOKEEPER_JAR", "/usr/share/java/zookeeper.jar"))
ZOOKEEPER_CONF = Path("/etc/zookeeper/conf")  # log4j.properties, when present
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
#: The test server accepts requests up to 16 MB, so the benchmark-sized commit
#: (~3,000 elements in one multi-op) fits; ZooKeeper's default is ~1 MB.
JUTE_MAXBUFFER = 16 * 1024 * 1024
START_TIMEOUT = 30.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _four_letter(port: int, word: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
        s.sendall(word)
        chunks = []
        while chunk := s.recv(4096):
            chunks.append(chunk)
        return b"".join(chunks)


def _start_zookeeper(java: str, workdir: Path) -> tuple[subprocess.Popen, int]:
    port = _free_port()
    data = workdir / f"data-{port}"
    data.mkdir()
    cfg = workdir / f"zoo-{port}.cfg"
    cfg.write_text(
        "tickTime=500\n"
        f"dataDir={data}\n"
        f"clientPort={port}\n"
        "clientPortAddress=127.0.0.1\n"
        "maxClientCnxns=0\n"
        "forceSync=no\n"
        "admin.enableServer=false\n"
        "4lw.commands.whitelist=ruok,srvr\n"
    )
    classpath = os.pathsep.join(p for p in (str(ZOOKEEPER_CONF), str(ZOOKEEPER_JAR)) if Path(p).exists())
    cmd = [
        java,
        "-Xmx512m",
        f"-Djute.maxbuffer={JUTE_MAXBUFFER}",
        "-Dzookeeper.admin.enableServer=false",
        "-Dzookeeper.jmx.log4j.disable=true",
        f"-Dzookeeper.log.dir={workdir}",
        "-cp",
        classpath,
        ZOOKEEPER_MAIN,
        str(cfg),
    ]
    out = open(workdir / f"zookeeper-{port}.out", "wb")
    proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    out.close()
    return proc, port


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _wait_serving(proc: subprocess.Popen, port: int) -> bool:
    """True once the server says it serves requests ('srvr' answers with its mode)."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if b"Mode:" in _four_letter(port, b"srvr"):
                return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


@pytest.fixture(scope="session")
def zookeeper_server() -> Iterator[str]:
    """A real standalone ZooKeeper on 127.0.0.1; yields ``"127.0.0.1:PORT"``."""
    java = shutil.which("java")
    if java is None or not ZOOKEEPER_JAR.exists():
        pytest.fail(
            f"ZooKeeper is not installed (need `java` on PATH and {ZOOKEEPER_JAR}); "
            "run `make test`, which installs it (Debian package `zookeeper`)",
            pytrace=False,
        )
    workdir = Path(tempfile.mkdtemp(prefix="boreas-zk-"))
    try:
        for _attempt in range(3):  # the free port can be taken before Java binds it
            proc, port = _start_zookeeper(java, workdir)
            if _wait_serving(proc, port):
                break
            _stop(proc)
        else:
            tail = (workdir / f"zookeeper-{port}.out").read_text(errors="replace")[-3000:]
            pytest.fail(f"ZooKeeper did not start; its output ends with:\n{tail}", pytrace=False)
        try:
            yield f"127.0.0.1:{port}"
        finally:
            _stop(proc)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


STORE_KINDS = ["memory", "sqlite", pytest.param("zookeeper", marks=pytest.mark.zookeeper)]


@pytest.fixture(params=STORE_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def store_url(store_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """The URL of a fresh, empty catalog of the parametrized kind."""
    if store_kind == "memory":
        return "memory://"
    if store_kind == "sqlite":
        return f"sqlite:///{tmp_path}/c.db"
    server = request.getfixturevalue("zookeeper_server")
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name)[:60]
    return f"zk://{server}/boreas-test/{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def store(store_url: str) -> Iterator["CatalogStore"]:  # noqa: F821
    """A fresh, empty store of every kind (memory, sqlite, zookeeper)."""
    from boreas.catalog.store import open_store

    s = open_store(store_url)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def shared_store_url(store_kind: str, store_url: str) -> str:
    """The ``store`` fixture's URL, for a second store object or another process
    to open the SAME catalog; skips for memory://, which is private to one object."""
    if store_kind == "memory":
        pytest.skip("a memory:// catalog is private to one store object")
    return store_url
