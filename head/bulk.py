"""The cyclic collector kept off the Head's bulk steps: a part of a deployment checked, committed, installed.

A deployment of 100,000 boxes comes as parts of about 10,000, each of them
millions of small tuples and dataclasses, all live once committed.  With the
collector on, each full pass during a part walks every box already held, so
a part costs more the more the Head holds (about a fifth of the Head's CPU
for a 20,000-box deployment, in process: issue 37).  As at the Head's start
(catalog/collector.py), the collector is paused for such a step, and what
the Head holds after installing it is frozen out of the collector's reach.
A small commit (a move, a connect) changes nothing here.  What is frozen is
never collected as a cycle again (freed by its reference count only), so
garbage in cycles at that moment stays: a few objects per deployment part,
against a full pass over every box per part.

>>> import gc
>>> with bulk_step(BULK):
...     gc.isenabled()
False
>>> with bulk_step(3):
...     gc.isenabled()
True
>>> with bulk_read(BULK_BYTES):
...     gc.isenabled()
False
"""

from __future__ import annotations

import contextlib

from boreas.catalog.collector import collector_paused
from boreas.catalog.document_model import Document

#: A step over this many elements or more is a bulk one.
BULK = 2_000
#: Submitted XML of this many bytes or more is read as a bulk step (about :data:`BULK` boxes of a deployment).
BULK_BYTES = 512 * 1024


def bulk_step(elements: int, keep: bool = False) -> contextlib.AbstractContextManager[None]:
    """The collector paused for a step over ``elements`` elements when they are :data:`BULK` or more; with
    ``keep``, what the process holds after it is frozen (``gc.freeze``: later passes walk only what came
    after)."""
    return collector_paused(keep) if elements >= BULK else contextlib.nullcontext()


def bulk_read(size: int) -> contextlib.AbstractContextManager[None]:
    """The collector paused while submitted documents of ``size`` bytes in all are read (parsed, checked
    against the XSD, decoded), when they make a bulk step (:data:`BULK_BYTES` or more): the elements
    decoded are all live, and the collector's passes over them were a fifth of reading a deployment's part
    (10,000 boxes: 0.39 s against 0.32 s paused, issue 37).  Nothing is frozen: the documents are dropped
    once committed."""
    return collector_paused() if size >= BULK_BYTES else contextlib.nullcontext()


def declared(document: Document) -> int:
    """How many elements a submitted document declares or changes (a deployment's: none)."""
    return len(getattr(document, "declarations", None) or getattr(document, "items", None) or ())
