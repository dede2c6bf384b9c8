"""``bench/recovery.py``'s shared parts: the apps it deploys, its processes' status and stopping, what looked wrong.

Every measured part (recovery_ingest.py, recovery_chain.py, recovery_restart.py)
starts its own Head and nodes, deploys filter boxes or the chain, asks nodes for
``/status``, sizes their logs on disk and notes in one :class:`Findings` what
looked wrong without stopping the run; the report reads the same notes.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import quoteattr

sys.path.insert(0, str(Path(__file__).resolve().parent))

from procs import BenchError, Run, progress  # noqa: E402

DEFAULT_COMMIT = (256, 2.0)  # the node's defaults (boreas node --commit-every / --commit-ms)

SCHEMA = '<schema name="P"> <field name="value" type="double"/> <field name="time" type="int"/> </schema>'

# Lines in a process's log that say something went wrong (Python logging levels, tracebacks).
TROUBLE = re.compile(r"\b(WARNING|ERROR|CRITICAL|Traceback)\b")


def disk_log_bytes(data_dir: Path) -> int:
    """Bytes of the input log's segment files in a node's data directory, as on disk now."""
    return sum(f.stat().st_size for f in (data_dir / "log").glob("*.log") if f.is_file())


def filters_app(keys: list[str], expression: str) -> str:
    """One filter box ``f<k>`` from ``In<k>`` to ``Out<k>`` per key."""
    parts = ["<borealis>", SCHEMA]
    for k in keys:
        parts.append(f'<input stream="In{k}" schema="P"/> <output stream="Out{k}" schema="P"/>'
                     f'<box name="f{k}" type="filter"> <in stream="In{k}"/> <out stream="Out{k}"/>'
                     f' <parameter name="expression.0" value={quoteattr(expression)}/> </box>')
    parts.append("</borealis>")
    return "\n".join(parts)


def filters_deploy(nodes: dict[str, str]) -> str:
    """Key -> endpoint: ``In<k>`` enters at that node, which runs ``f<k>``."""
    return "<deploy>" + "".join(f'<publish stream="In{k}" node="{e}"/> <node endpoint="{e}" query="f{k}"/>'
                                for k, e in nodes.items()) + "</deploy>"



async def deploy(run: Run, head: str, app: str, dep: str, name: str) -> None:
    from boreas.client.head_api import deploy_and_wait
    from boreas.wire.client import PeerClient

    async with PeerClient(run.token, timeout=60.0) as peers:
        try:
            await deploy_and_wait(peers, head, app, f"{name}.xml", timeout=60.0)
            await deploy_and_wait(peers, head, dep, f"{name}_deploy.xml", timeout=60.0)
        except Exception as exc:
            raise BenchError(f"deploying {name}: {exc}") from None


def stop_nodes_then_head(run: Run, findings: Findings, nodes: list[subprocess.Popen],
                         head: subprocess.Popen) -> None:
    """The nodes first, so none logs a failed heartbeat to a Head already gone; what the processes log
    from here on (a Head's snapshot of nodes being stopped, ...) is not looked through."""
    findings.freeze()
    run.procs.stop(nodes)
    run.procs.stop([head])


async def node_status(peers, endpoint: str) -> dict:
    return await peers.call("GET", f"http://{endpoint}/status")


@dataclass
class Findings:
    """What looked wrong without stopping the run, and the processes' logs to look through."""

    notes: list[str] = field(default_factory=list)
    logs: dict[str, Path] = field(default_factory=dict)  # name -> log file
    ends: dict[str, int] = field(default_factory=dict)  # name -> bytes of its log to look through

    def note(self, message: str) -> None:
        progress(f"  NOTE: {message}")
        self.notes.append(message)

    def check_log_bytes(self, endpoint: str, status_log: dict, on_disk: int) -> None:
        """Note (once) when /status's recovery.log.size_bytes is not the size of the log on disk."""
        said = status_log.get("size_bytes", 0)
        if abs(said - on_disk) > max(1_000_000, on_disk / 10) and not getattr(self, "_bytes_noted", False):
            self._bytes_noted = True
            self.note(f"node {endpoint}: /status recovery.log.size_bytes says {said:,} bytes but its log segments on "
                      f"disk hold {on_disk:,} (log positions {status_log.get('first')}..{status_log.get('next')}); "
                      f"the figures below use the size on disk")

    def watch(self, run: Run, procs: list[subprocess.Popen]) -> None:
        for p in procs:
            path = run.procs.log_path(p)
            name = next(c.name for c in run.procs.children if c.proc is p)
            if path is not None:
                self.logs[name] = path

    def freeze(self) -> None:
        """Look through the logs only up to here (the processes are about to be stopped)."""
        for name, path in self.logs.items():
            if name not in self.ends:
                try:
                    self.ends[name] = path.stat().st_size
                except OSError:
                    self.ends[name] = 0

    def log_trouble(self, limit: int = 6) -> list[str]:
        out = []
        for name, path in self.logs.items():
            try:
                with path.open("rb") as fh:
                    lines = fh.read(self.ends.get(name, -1)).decode(errors="replace").splitlines()
            except OSError:
                continue
            bad = [line for line in lines if TROUBLE.search(line)]
            if bad:
                out.append(f"{name}: {len(bad)} warning/error lines, e.g.:")
                seen: set[str] = set()
                for line in bad:
                    key = re.sub(r"\d+", "#", line)[:160]
                    if key not in seen:
                        seen.add(key)
                        out.append(f"    {line[:300]}")
                    if len(seen) >= limit:
                        break
        return out

