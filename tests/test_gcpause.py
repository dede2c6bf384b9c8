"""A node's bulk update pauses Python's cycle collector and freezes nothing: an operator built during a
deployment's part and deleted later is freed with its state (an ``m3`` box's view memo refers back to the
box, so a frozen box would never be)."""

from __future__ import annotations

import gc
import weakref

from boreas.node.gcpause import BULK_UPDATE_BYTES, bulk_update


class Cyclic:
    """Stands for an operator holding a reference back to itself (node/operators/m3box.py's ``ViewMemo``)."""

    def __init__(self) -> None:
        self.me = self


def test_a_bulk_update_pauses_the_collector_and_what_it_built_is_freed_once_dropped():
    before = gc.get_freeze_count()
    with bulk_update(BULK_UPDATE_BYTES):
        assert not gc.isenabled()
        built = Cyclic()
    assert gc.isenabled() and gc.get_freeze_count() == before
    ref = weakref.ref(built)
    del built
    gc.collect()
    assert ref() is None


def test_a_small_update_leaves_the_collector_running():
    with bulk_update(BULK_UPDATE_BYTES - 1):
        assert gc.isenabled()
