"""Compile a generated C module once per program and cache the shared library by the source's hash.

Why a disk cache: compiling costs a few hundred milliseconds; a box that
restarts, a second runtime of the same program, or the next test run finds
``m3_<hash>.so`` and only loads it.  The hash covers the whole C source (the
fixed runtime part included) and the compiler command, so a change to either
compiles afresh.  Concurrent builds of one program (processes on one host)
take an exclusive ``flock`` on ``<hash>.lock``; the library is written to a
temporary name and renamed, so a reader never sees half a file.

The compiler: ``$BOREAS_CC`` if set, else ``cc``, else ``gcc``.  Cache:
``$BOREAS_M3_CACHE``, else ``$XDG_CACHE_HOME/boreas/m3``, else
``~/.cache/boreas/m3``.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

FLAGS = ("-O2", "-shared", "-fPIC", "-std=gnu11", "-w")


class NoCompiler(Exception):
    """No usable C compiler, or the compiler failed: the native backend cannot run."""


@dataclass(frozen=True)
class Built:
    """A compiled library: its path, and whether it came from the cache (not compiled by this call)."""

    path: Path
    cached: bool


def compiler() -> str:
    """The C compiler's path; :class:`NoCompiler` names what was looked for when none is found."""
    wanted = os.environ.get("BOREAS_CC")
    names = [wanted] if wanted else ["cc", "gcc"]
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    raise NoCompiler(f"no C compiler found (looked for {', '.join(repr(n) for n in names)}; "
                     "install gcc or set BOREAS_CC)")


def cache_dir() -> Path:
    """Where compiled programs are kept (created on first use)."""
    explicit = os.environ.get("BOREAS_M3_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "boreas" / "m3"


def library_name(source: str, cc: str) -> str:
    """The cache file name of ``source`` compiled by ``cc``.

    >>> library_name("int x;", "/usr/bin/cc") == library_name("int x;", "/usr/bin/cc")
    True
    >>> library_name("int x;", "/usr/bin/cc") != library_name("int y;", "/usr/bin/cc")
    True
    """
    h = hashlib.sha256("\0".join([source, cc, *FLAGS]).encode()).hexdigest()[:32]
    return f"m3_{h}.so"


def build(source: str) -> Built:
    """The shared library for ``source``: from the cache, or compiled now (under the lock)."""
    cc = compiler()
    directory = cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / library_name(source, cc)
    if target.exists():
        return Built(target, True)
    with open(directory / (target.stem + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():  # another process built it while we waited
            return Built(target, True)
        with tempfile.TemporaryDirectory(dir=directory) as tmp:
            c_file = Path(tmp) / "m3.c"
            c_file.write_text(source)
            out = Path(tmp) / target.name
            try:
                done = subprocess.run([cc, *FLAGS, "-o", str(out), str(c_file)], capture_output=True, text=True,
                                      timeout=300)
            except OSError as exc:
                raise NoCompiler(f"C compiler {cc} could not run: {exc}") from None
            if done.returncode != 0:
                raise NoCompiler(f"C compiler {cc} failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
            os.replace(out, target)
        log.info("m3 native: compiled %s", target.name)
        return Built(target, False)
