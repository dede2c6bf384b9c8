"""Pausing the garbage collector while large box states are copied (moves, snapshots) or a big update is applied."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

from boreas.catalog.collector import collector_paused

#: An update document of this many bytes or more (a deployment's part: 500 boxes are about 130 kB) is read,
#: checked and applied with the collector paused (:func:`bulk_update`).
BULK_UPDATE_BYTES = 64 * 1024


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


def bulk_update(size: int) -> contextlib.AbstractContextManager[None]:
    """The collector paused while an update of ``size`` bytes is handled, when it is a bulk one
    (:data:`BULK_UPDATE_BYTES` or more).

    A node of a 100,000-box deployment holds 5,000 boxes (their declarations, typings, operators: millions
    of live containers) and gets them in parts of 500: with the collector on, its passes over what one part
    allocates were a large share of the node's CPU for the deployment (bench/deploy_node.py).  Unlike the
    Head after a deployment's part (head/bulk.py), the node does not freeze what it then holds: its
    operators hold cycles (an ``m3`` box's view memo refers back to the box), and a frozen cycle is never
    freed, so a box deleted or rebuilt later would keep its whole state for the life of the process.
    """
    return collector_paused() if size >= BULK_UPDATE_BYTES else contextlib.nullcontext()
