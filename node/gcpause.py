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


def bulk_update(size: int, keep: bool = False) -> contextlib.AbstractContextManager[None]:
    """The collector paused while an update of ``size`` bytes is handled, when it is a bulk one
    (:data:`BULK_UPDATE_BYTES` or more); ``keep``: what the node holds afterwards is frozen out of the
    collector's reach (``gc.freeze``), as the Head does after a deployment's part (head/bulk.py).

    A node of a 100,000-box deployment holds 5,000 boxes (their declarations, typings, operators: millions
    of live containers) and gets them in parts of 500: with the collector on, its passes over all it holds
    were a quarter to a third of the node's CPU for the deployment (bench/deploy_node.py).  What is frozen
    is freed by its reference count only, so garbage in cycles at that moment stays: a few objects per
    bulk update.
    """
    return collector_paused(keep) if size >= BULK_UPDATE_BYTES else contextlib.nullcontext()
