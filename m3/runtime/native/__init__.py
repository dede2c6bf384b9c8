"""The native (C) trigger backend of the M3 runtime: see docs/m3_native.md.

:func:`open_native` generates C for a program (:mod:`.cgen`), compiles it
once per program hash (:mod:`.build`) and loads it (:mod:`.backend`); it
raises :class:`Unsupported` or :class:`NoCompiler` with the reason when it
cannot, and :func:`choose` turns that into ``Runtime(backend="auto")``
running the Python backend and saying why.  ``cffi`` is imported only here,
when a native runtime is opened, so ``boreas.m3`` imports without it.
"""

from __future__ import annotations

import logging

from ...errors import RuntimeStateError
from .build import NoCompiler
from .cexpr import Unsupported
from .overflow import BEYOND_64_BITS, IntOverflow

log = logging.getLogger("boreas.m3.runtime.program")

BACKENDS = ("auto", "native", "python")
def open_native(program, epsilon: float):
    """The loaded :class:`.backend.NativeMaps` of ``program`` (generated, built or found in the cache)."""
    try:
        from .backend import open_native as _open
    except ImportError as exc:  # cffi missing: the same as no compiler, the Python backend runs
        raise NoCompiler(f"cffi is not importable: {exc}") from None
    return _open(program, epsilon)


def choose(program, epsilon: float, backend: str, member: str | None = None):
    """``(backend that runs, reason when auto fell back, NativeMaps or None)`` for a runtime of ``program``.

    ``member``: the runtime class's name when it is a partition member (it
    builds on the Python runtime's internals: always Python).
    """
    if backend not in BACKENDS:
        raise RuntimeStateError(f"backend must be 'auto', 'native' or 'python', not {backend!r}")
    if backend == "python":
        return "python", None, None
    if member is not None:
        reason = f"partition member ({member} builds on the Python runtime's internals)"
    else:
        try:
            return "native", None, open_native(program, epsilon)
        except (Unsupported, NoCompiler) as exc:
            reason = str(exc)
    if backend == "native":
        raise RuntimeStateError(f"the native backend cannot run this program: {reason}")
    log.info("m3 runtime: Python backend, native unavailable: %s", reason)
    return "python", reason, None


__all__ = ["BACKENDS", "BEYOND_64_BITS", "IntOverflow", "NoCompiler", "Unsupported", "choose", "open_native"]
