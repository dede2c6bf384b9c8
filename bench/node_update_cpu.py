"""A durable node's CPU for a one-box update, at a small and a large slice, two builds side by side (issue 37).

Starts one ``boreas node --data-dir`` per build (no Head: the bench is the Head, posting update XML to
``POST /update`` as the Head does) on a data directory that already holds a slice of ``--boxes`` filter boxes
(``catalog.xml`` and ``identity.json``, as a node that ran them leaves it: the node starts by recovering them,
which the bench waits out with one unmeasured update; a build that saves a new box's producer id by rewriting
the whole identity per box would take hours to be sent 20,000 boxes), then sends
them one-box updates (a new box each) in rounds, each build ``--per-round`` updates in turn, and reads each
node process's CPU time (``/proc/PID/stat``: user + system) around a build's updates in a round (an update
returns once the node applied it and saved its local catalog).  Builds are named by their ``boreas`` executables (a venv each), so that a
change is measured against the code before it in the same minutes::

    python bench/node_update_cpu.py --boxes 50 20000 --build main=/work/main/.venv/bin/boreas \\
        --build new=.venv/bin/boreas

Prints per build and slice size the median and range over the rounds of the node's CPU per one-box update, and the load
average.  Timing only: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

TOKEN = "bench-node-update-cpu"
TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    """The process's user + system CPU seconds (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def post(endpoint: str, xml: str, timeout: float = 600.0) -> dict:
    request = urllib.request.Request(f"http://{endpoint}/update", data=xml.encode(), method="POST",
                                     headers={"Content-Type": "application/xml", "Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=timeout) as reply:
        return json.loads(reply.read())


def box(name: str, endpoint: str, threshold: int) -> str:
    return (f'<box name="{name}" type="filter" node="{endpoint}"><in stream="S"/><out stream="O_{name}"/>'
            f'<parameter name="expression.0" value="x &gt; {threshold}"/></box>')


def slice_document(endpoint: str, boxes: int) -> str:
    return (f'<update version="1"><schema name="T"><field name="x" type="int"/></schema>'
            f'<node endpoint="{endpoint}"/><input stream="S" schema="T" node="{endpoint}"/>'
            + "".join(box(f"b{i}", endpoint, i) for i in range(boxes)) + "</update>")


def seed(directory: Path, endpoint: str, boxes: int) -> None:
    """A data directory holding the slice, as a node that ran it leaves it (catalog and producer ids)."""
    directory.mkdir(parents=True)
    (directory / "catalog.xml").write_text(slice_document(endpoint, boxes))
    ids = {f"b{i}": f"b{i}~{i:012x}" for i in range(boxes)}
    (directory / "identity.json").write_text(json.dumps({"sender": f"{endpoint}#bench", "boxes": ids}))


class Node:
    """One build's node process on a data directory holding a slice of ``boxes`` boxes."""

    def __init__(self, name: str, executable: str, workdir: Path, boxes: int):
        self.name = name
        self.endpoint = f"localhost:{free_port()}"
        self.dir = workdir / name
        seed(self.dir, self.endpoint, boxes)
        env = {**os.environ, "BOREAS_TOKEN": TOKEN}
        self.log = open(workdir / f"{name}.log", "wb")
        self.proc = subprocess.Popen([executable, "node", "--endpoint", self.endpoint, "--data-dir", str(self.dir)],
                                     env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://{self.endpoint}/status", timeout=2).read()
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"{name}: the node did not start (see {self.log.name})") from None
                time.sleep(0.2)
        self.version = 1

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def run(builds: dict[str, str], boxes: int, rounds: int, per_round: int, workdir: Path) -> dict[str, list[float]]:
    nodes = {name: Node(f"{name}-{boxes}", exe, workdir, boxes) for name, exe in builds.items()}
    try:
        for node in nodes.values():  # (waits until the node recovered its slice: not measured)
            node.version += 1
            post(node.endpoint, f'<update version="{node.version}">{box("warm", node.endpoint, 0)}</update>')
        time.sleep(1.0)  # (the recovery's own after-work settles)
        costs: dict[str, list[float]] = {name: [] for name in builds}
        for i in range(rounds):
            order = list(nodes.items())
            for name, node in order if i % 2 == 0 else order[::-1]:  # (alternating: neither always goes first)
                before = cpu_seconds(node.proc.pid)
                for j in range(per_round):  # (several a round: the kernel counts CPU in 10 ms ticks)
                    node.version += 1
                    post(node.endpoint, f'<update version="{node.version}">'
                                        f'{box(f"new{i}_{j}", node.endpoint, j)}</update>')
                costs[name].append((cpu_seconds(node.proc.pid) - before) / per_round)
        return costs
    finally:
        for node in nodes.values():
            node.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boxes", type=int, nargs="+", default=[50, 20_000])
    parser.add_argument("--rounds", type=int, default=6, help="rounds: each build's updates, in turn")
    parser.add_argument("--per-round", type=int, default=10, help="one-box updates a build gets in a round")
    parser.add_argument("--build", action="append", required=True, metavar="NAME=BOREAS",
                        help="a build: a name and its boreas executable (repeat: measured side by side)")
    args = parser.parse_args()
    builds = dict(b.split("=", 1) for b in args.build)
    with tempfile.TemporaryDirectory(prefix="node-update-cpu-") as tmp:
        for boxes in args.boxes:
            costs = run(builds, boxes, args.rounds, args.per_round, Path(tmp))
            for name, values in costs.items():
                ms = [v * 1000 for v in values]
                print(f"{boxes:>6} boxes  {name:>8}: node CPU per one-box update {statistics.median(ms):.1f} ms "
                      f"(median of {len(ms)} rounds' means; range {min(ms):.1f}-{max(ms):.1f})", flush=True)
    print("load average", " ".join(Path("/proc/loadavg").read_text().split()[:3]))


if __name__ == "__main__":
    main()
