"""Pausing the garbage collector while large box states are copied (moves, snapshots)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No garbage collection while a box's state is copied: it is all new, live containers.

    Building or decoding the state of an aggregate with 100,000 groups
    allocates millions of containers, and the collector's passes over them
    cost several times the copying itself (measured: 7x); nothing in it is
    garbage, so the pause is pure waste.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
