"""A standalone ZooKeeper server on loopback, for tests, benchmarks and development.

Starts the Debian ``zookeeper`` package's server (``/usr/share/java/zookeeper.jar``;
its manifest's Class-Path names the dependency jars) on a free 127.0.0.1
port with a throw-away data directory, and stops it on exit.

Usage::

    with LocalZooKeeper() as zk:
        store = open_store(f"zk://{zk.address}/boreas")
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from .base import StoreError

ZOOKEEPER_JAR = Path(os.environ.get("BOREAS_ZOOKEEPER_JAR", "/usr/share/java/zookeeper.jar"))
ZOOKEEPER_CONF = Path("/etc/zookeeper/conf")  # log4j.properties, when present
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
#: Netty's codec jar: the Netty connection factory (which ZooKeeper's TLS port needs) uses it, but the Debian
#: jar's manifest Class-Path leaves it out, so a TLS port fails every handshake with NoClassDefFoundError.
NETTY_CODEC_JAR = Path("/usr/share/java/netty-codec.jar")
#: The test server accepts requests up to 16 MB, so the benchmark-sized commit
#: (~3,000 elements in one multi-op) fits; ZooKeeper's default is ~1 MB.
JUTE_MAXBUFFER = 16 * 1024 * 1024
#: ZooKeeper keeps every transaction log and snapshot file it writes unless
#: told to purge them: keep the newest 3 snapshots (the minimum) and the logs
#: they need, checking every hour (the shortest interval; the first purge runs
#: at start).  Production settings are in docs/architecture.md.
AUTOPURGE = {"autopurge.snapRetainCount": "3", "autopurge.purgeInterval": "1"}
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


def _start_zookeeper(java: str, workdir: Path, maxbuffer: int | None, settings: Mapping[str, str],
                     jvm_flags: Sequence[str]) -> tuple[subprocess.Popen, int]:
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
        + "".join(f"{key}={value}\n" for key, value in settings.items())
    )
    classpath = os.pathsep.join(str(p) for p in (ZOOKEEPER_CONF, ZOOKEEPER_JAR, NETTY_CODEC_JAR) if p.exists())
    cmd = [
        java,
        "-Xmx512m",
        *([f"-Djute.maxbuffer={maxbuffer}"] if maxbuffer else []),
        "-Dzookeeper.admin.enableServer=false",
        "-Dzookeeper.jmx.log4j.disable=true",
        f"-Dzookeeper.log.dir={workdir}",
        *jvm_flags,
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


class ZooKeeperUnavailable(StoreError):
    """Java or the ZooKeeper jar is missing, or the server would not start."""


class LocalZooKeeper:
    """A ZooKeeper server process; ``address`` is ``"127.0.0.1:PORT"`` once started.

    ``maxbuffer`` is its ``jute.maxbuffer`` (None: ZooKeeper's ~1 MB default);
    ``settings`` are further ``zoo.cfg`` lines (default: :data:`AUTOPURGE`);
    ``jvm_flags`` further arguments to ``java`` (a JAAS file for SASL:
    ``-Djava.security.auth.login.config=...``, which zoo.cfg cannot set).
    The plain ``clientPort`` is always served, so readiness is asked there
    even when ``settings`` add a ``secureClientPort``.
    """

    def __init__(self, workdir: Path | None = None, maxbuffer: int | None = JUTE_MAXBUFFER,
                 settings: Mapping[str, str] | None = None, jvm_flags: Sequence[str] = ()):
        self.maxbuffer = maxbuffer
        self.settings = dict(AUTOPURGE if settings is None else settings)
        self.jvm_flags = tuple(jvm_flags)
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="boreas-zk-"))
        self._proc: subprocess.Popen | None = None
        self.address = ""

    def start(self) -> str:
        java = shutil.which("java")
        if java is None or not ZOOKEEPER_JAR.exists():
            raise ZooKeeperUnavailable(
                f"ZooKeeper is not installed (need `java` on PATH and {ZOOKEEPER_JAR}); "
                "run `make test` or `make demo`, which install it (Debian package `zookeeper`)"
            )
        self.workdir.mkdir(parents=True, exist_ok=True)
        port = 0
        for _attempt in range(3):  # the free port can be taken before Java binds it
            proc, port = _start_zookeeper(java, self.workdir, self.maxbuffer, self.settings, self.jvm_flags)
            if _wait_serving(proc, port):
                self._proc = proc
                self.address = f"127.0.0.1:{port}"
                return self.address
            _stop(proc)
        tail = (self.workdir / f"zookeeper-{port}.out").read_text(errors="replace")[-3000:]
        raise ZooKeeperUnavailable(f"ZooKeeper did not start; its output ends with:\n{tail}")

    def close(self) -> None:
        if self._proc is not None:
            _stop(self._proc)
            self._proc = None
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> LocalZooKeeper:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
