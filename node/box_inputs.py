"""What feeds a box's in port besides its stream's own batches: a :class:`Bridge`.

A filter inserted or removed across two nodes switches a port from one
stream to another; batches of the old stream still on their way go to the
port until the first batch of the new one arrives.  (A box that arrived by a
move orders its own inputs with a :meth:`Sequencer.for_box
<boreas.wire.sequencing.Sequencer.for_box>`.)
"""

from __future__ import annotations

from dataclasses import dataclass

from boreas.wire.tuples import RowType


@dataclass(frozen=True)
class Bridge:
    box: str
    port: int
    successor: str
    row_type: RowType
