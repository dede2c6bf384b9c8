"""Who owns a failed node's data directory: the adopter's claim, and the failed node's archive when it comes back.

A claim (``adopted.json``, created exclusively) is what keeps two nodes from
running the same boxes: the adopter takes it before reading the directory
(:mod:`boreas.node.adopt`), and the failed node checks it at start and on
every heartbeat; one that finds its boxes adopted sets its old state aside
(:func:`archive_adopted`) and starts empty.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

from .recovery.snapshots import write_atomic

log = logging.getLogger(__name__)

CLAIM = "adopted.json"
class AdoptionRefused(RuntimeError):
    """The directory cannot be adopted (not a node's data, claimed by another node, unreadable)."""


def claimed_by(directory: Path) -> str | None:
    """Which node adopted the boxes of the node whose data directory this is (None: nobody)."""
    try:
        return str(json.loads((directory / CLAIM).read_text())["by"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        return "?"  # a claim being written, or damaged: someone claimed it


def claim(directory: Path, by: str) -> None:
    """Claim ``directory`` for ``by``; a retry by the same adopter is allowed."""
    path = directory / CLAIM
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        owner = claimed_by(directory)
        if owner != by:
            raise AdoptionRefused(f"{directory} was already adopted by {owner}") from None
        return
    with os.fdopen(fd, "w") as f:
        json.dump({"by": by, "at": time.time()}, f)
        f.flush()
        os.fsync(f.fileno())


def archive_adopted(directory: Path) -> Path | None:
    """A node starting on a directory whose boxes were adopted: set its old state aside, start empty.

    The catalog, log, snapshots, positions and noted layouts (a new log begins under the layouts it meets)
    move to ``adopted-<time>/``;
    the identity stays (the node's sender name).  Returns the archive.
    """
    owner = claimed_by(directory)
    if owner is None:
        return None
    archive = directory / f"adopted-{int(time.time())}"
    archive.mkdir(exist_ok=True)
    for name in ("catalog.xml", "catalog.log", "log", "snapshots", "positions.json", "layouts.json", CLAIM):
        path = directory / name
        if path.exists():
            path.rename(archive / name)
    (directory / "snapshots").mkdir()
    write_atomic(archive / "README", f"boxes adopted by {owner}; kept for inspection\n".encode())
    log.warning("the boxes of this node's data in %s were adopted by %s: starting empty (old state in %s)",
                directory, owner, archive)
    return archive
