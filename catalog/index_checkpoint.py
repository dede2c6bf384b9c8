"""A checked catalog index kept in the store beside its catalog, so a Head's start decodes it instead of checking.

A Head's start at 100,000 boxes spent 12.3-12.5 s CPU checking the catalog
whole (:meth:`~.index.CatalogIndex.build`).  The leading Head saves the
index of the catalog it holds as a store blob (:meth:`~.store.base.CatalogStore.put_blob`,
under :data:`KEY`; :mod:`.index_codec` says what is in it) now and then,
after commits, not with them (``head/index_saver.py`` decides when), so no
commit costs the catalog's size.  A Head that starts reads the blob and
uses it when it was saved for exactly the catalog version it read (and the
same elements and box types: the codec's digest); an older index, another
catalog's, a corrupt blob or none falls back to the whole check, and the
log says which and why.  The decoded index equals the one the whole check
makes (tests/test_index_checkpoint.py, over random catalogs).

>>> from boreas.catalog.store import open_store
>>> with open_store("memory://") as store:
...     index, decoded = load_index(store, Catalog())  # nothing saved: checked whole
...     saved = save_index(store, index)
...     load_index(store, Catalog())[1]                # decoded
True
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from .boxtypes import BoxTypeRegistry, builtin_registry
from .index import CatalogIndex
from .index_codec import StaleIndex, decode_index, encode_index
from .model import Catalog
from .saved_boxes import save_boxes
from .store import CatalogStore, StoreError

log = logging.getLogger(__name__)

#: The store blob holding the last saved index.
KEY = "catalog-index"


def load_index(store: CatalogStore, catalog: Catalog,
               registry: BoxTypeRegistry | None = None) -> tuple[CatalogIndex, bool]:
    """The index of ``catalog`` (as read from ``store``): the saved one when it is ``catalog``'s, else built
    whole; logged either way.  With it, whether it was the saved one."""
    start = time.process_time()
    try:
        data = store.get_blob(KEY)
    except StoreError as exc:
        log.warning("the saved catalog index could not be read (%s): checking the catalog whole", exc)
        data = None
    registry = registry or builtin_registry()
    if data is not None:
        try:
            decoded = decode_index(data, catalog, registry)
        except StaleIndex as exc:
            log.warning("the saved catalog index is not used: %s; checking catalog version %d whole",
                        exc, catalog.version)
        else:
            log.info("catalog index of version %d decoded from the store (%d bytes) in %.2f s CPU",
                     catalog.version, len(data), time.process_time() - start)
            return decoded, True
    elif catalog.version:
        log.info("no saved catalog index: checking catalog version %d whole", catalog.version)
    index = CatalogIndex.build(catalog, registry)
    if catalog.version:
        log.info("catalog version %d checked whole in %.2f s CPU", catalog.version, time.process_time() - start)
    return index, False


def save_index(store: CatalogStore, index: CatalogIndex, checkpoint: Callable[[], None] | None = None) -> int:
    """Save ``index`` as the one to start from; the bytes written (``checkpoint``: see :func:`.index_codec.encode_index`)."""
    data = encode_index(index, checkpoint)
    store.put_blob(KEY, data)
    # The same version's boxes beside it, so the next start reads them in bulk (:mod:`.saved_boxes`).
    return len(data) + save_boxes(store, index.catalog, checkpoint)
