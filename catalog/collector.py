"""The cyclic garbage collector kept off a whole catalog while it is built, and off it afterwards.

A catalog of 100,000 boxes is millions of small tuples and dataclasses, all
live: decoding it, checking it whole (:class:`~.index.CatalogIndex`) and
slicing it allocate them faster than the collector's thresholds, and each
of its passes walks everything built so far (measured at a Head's start
over 100,000 boxes: about a quarter of the CPU).  Nothing built there is
garbage, and decoding makes no reference cycles, so the collector is paused
for the bulk step (:func:`collector_paused`), and what a process keeps for
good (a Head's catalog as read at start) is moved out of the collector's
reach (``gc.freeze``): later passes then walk only what came after.

>>> with collector_paused():
...     gc.isenabled()
False
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused(keep: bool = False) -> Iterator[None]:
    """The collector off for one bulk step, then as it was; ``keep``: what the process holds after the
    step is long-lived, so no later pass need walk it (``gc.freeze``)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if keep:
            gc.freeze()
        if was:
            gc.enable()
