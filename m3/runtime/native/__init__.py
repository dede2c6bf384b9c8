"""The native (C) trigger backend of the M3 runtime: see docs/m3_native.md.

:func:`open_native` generates C for a program (:mod:`.cgen`), compiles it
once per program hash (:mod:`.build`) and loads it (:mod:`.backend`); it
raises :class:`Unsupported` or :class:`NoCompiler` with the reason when it
cannot, and ``Runtime(backend="auto")`` then runs the Python backend.
"""

from .backend import NativeMaps, open_native
from .build import NoCompiler
from .cgen import Unsupported

__all__ = ["NativeMaps", "NoCompiler", "Unsupported", "open_native"]
