"""The data plane benchmark's socket plumbing for the Flink and Bytewax peers (their child processes).

* :func:`readings_csv`: the same readings as Boreas's publishers send (reading
  ``i`` = sensor ``i % SENSORS`` at time ``i // SENSORS``, plus one closing
  tuple per sensor at time ``times``), as CSV lines ``sensor,time,celsius``.
* :class:`BulkFeeder`: serves those bytes to the first connection, all at
  once when told "go" (as fast as the reader takes them): the throughput
  runs' source.
* :class:`LineReceiver`: accepts any number of connections and stamps every
  line with its arrival time (microseconds): the sink side of a peer that
  writes its output to a socket.
* :class:`PacedFeeder`: the Spark peer's latency source (``socket-feed`` of
  bench/dataplane_workers.py), started as its own process, so every peer's
  latency input comes from the same code at the same rate.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from dataplane_data import LATENCY_BATCH, LATENCY_RATE, SENSORS, celsius
from procs import HOST

WORKERS = Path(__file__).resolve().parent / "dataplane_workers.py"


def readings_csv(times: int) -> bytes:
    lines = [f"{i % SENSORS},{i // SENSORS},{celsius(i)!r}\n" for i in range(SENSORS * times)]
    lines += [f"{s},{times},0.0\n" for s in range(SENSORS)]
    return "".join(lines).encode()


def parse_window(line: str) -> tuple[int, int, float, int]:
    """``sensor,start,average,count`` -> (sensor, start, average, count)."""
    sensor, start, avg, count = line.split(",")
    return int(sensor), int(float(start)), float(avg), int(count)


class BulkFeeder:
    """A listening socket; :meth:`go` sends ``data`` to the connection it accepted, in a thread."""

    def __init__(self, data: bytes):
        self.data = data
        self.server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind((HOST, 0))
        self.server.listen(1)
        self.port = self.server.getsockname()[1]
        self.conn: socket.socket | None = None
        self.connected = threading.Event()
        self.sent_at: float | None = None
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        try:
            self.conn, _ = self.server.accept()
        except OSError:
            return
        self.connected.set()

    def go(self, close_after: bool = False) -> float:
        """Start sending (returns the wall-clock time of "go"); with ``close_after``, close when sent."""
        assert self.conn is not None
        conn = self.conn

        def send() -> None:
            try:
                conn.sendall(self.data)
                self.sent_at = time.time()
                if close_after:
                    conn.shutdown(socket.SHUT_WR)
            except OSError:
                pass

        start = time.time()
        threading.Thread(target=send, daemon=True).start()
        return start

    def close(self) -> None:
        for s in (self.conn, self.server):
            if s is not None:
                try:
                    s.close()
                except OSError:
                    pass


class LineReceiver:
    """Accepts connections; every line that arrives is kept with its arrival time in microseconds."""

    def __init__(self) -> None:
        self.server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.server.bind((HOST, 0))
        self.server.listen(16)
        self.port = self.server.getsockname()[1]
        self.lines: list[tuple[str, int]] = []
        self.lock = threading.Lock()
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        buf = b""
        while True:
            try:
                data = conn.recv(1 << 16)
            except OSError:
                return
            if not data:
                return
            now = int(time.time() * 1_000_000)
            buf += data
            *full, buf = buf.split(b"\n")
            if full:
                with self.lock:
                    self.lines.extend((line.decode(), now) for line in full)

    def count(self) -> int:
        with self.lock:
            return len(self.lines)

    def take(self) -> list[tuple[str, int]]:
        with self.lock:
            return list(self.lines)

    def clear(self) -> None:
        with self.lock:
            self.lines.clear()

    def close(self) -> None:
        for s in [*self.conns, self.server]:
            try:
                s.close()
            except OSError:
                pass


class PacedFeeder:
    """bench/dataplane_workers.py's ``socket-feed`` as a child process: stamped readings
    ``sensor,time,celsius,sent`` at LATENCY_RATE to one connection, once told "go"."""

    def __init__(self, seconds: float, log: Path):
        self.log = open(log, "ab")  # noqa: SIM115 -- closed in stop()
        self.proc = subprocess.Popen([sys.executable, str(WORKERS), "socket-feed", "--batch", str(LATENCY_BATCH),
                                      "--rate", str(LATENCY_RATE), "--seconds", str(seconds)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     bufsize=1)
        self.port = json.loads(self._line())["port"]

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the paced feeder exited ({self.proc.wait()})")
        return line

    def wait_connected(self) -> None:
        self._line()

    def go(self) -> dict:
        """Send at the rate until done; the feeder's figures (rows, elapsed, lag_max)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        return json.loads(self._line())

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write("stop\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.log.close()
