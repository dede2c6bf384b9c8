"""Whether a change closes a cycle of boxes, at the cost of the smaller side of it.

A derivation (:mod:`.index_derivation`) types again the boxes a change
reaches.  It used to take every box downstream of a changed one, typed in
dataflow order, so that a cycle the change closed shows as boxes never
ready: a filter connected before the 40th box of a 5,000-box chain typed
the 4,960 boxes after it again, to find their typings unchanged.  Now it
types the changed boxes first and goes further only where an out stream's
schema moved, which needs another way to see a cycle: a new edge into or
out of a changed box closes one only if that box reaches itself.
:func:`closes_cycle` walks downstream from the box and upstream from what it
reads at the same pace, and stops when either side runs out (no cycle) or
they meet (a cycle), so it costs about twice the smaller of the two.

>>> from boreas.catalog.model import Box, Catalog, InPort
>>> c = Catalog()
>>> c.boxes.update({n: Box(n, "filter", (InPort(i),), (o,)) for n, i, o in
...                 [("a", "s0", "s1"), ("b", "s1", "s2"), ("c", "s2", "s3")]})
>>> readers = lambda s: [b.name for b in c.boxes.values() if s in [p.stream for p in b.inputs]]
>>> producers = lambda s: [b.name for b in c.boxes.values() if s in b.outputs]
>>> closes_cycle(c, {"b"}, readers, producers)
False
>>> c.boxes["a"] = Box("a", "filter", (InPort("s3"),), ("s1",))
>>> closes_cycle(c, {"a"}, readers, producers)
True
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

from .model import Catalog


def closes_cycle(after: Catalog, seeds: Iterable[str], readers: Callable[[str], Iterable[str]],
                 producers: Callable[[str], Iterable[str]]) -> bool:
    """Whether a box among ``seeds`` reaches itself in ``after`` (readers and producers: box names by
    stream)."""
    return any(_through(after, seed, readers, producers) for seed in seeds)


def _through(after: Catalog, seed: str, readers: Callable[[str], Iterable[str]],
             producers: Callable[[str], Iterable[str]]) -> bool:
    boxes = after.boxes
    box = boxes[seed]
    down = {r for s in box.outputs for r in readers(s)}
    up = {p for port in box.inputs for p in producers(port.stream)}
    if seed in down or seed in up or down & up:
        return True
    queues = (deque(down), deque(up))
    while queues[0] and queues[1]:
        for side, (queue, seen, other) in enumerate(((queues[0], down, up), (queues[1], up, down))):
            name = queue.popleft()
            current = boxes.get(name)
            if current is None:
                continue
            step = ({r for s in current.outputs for r in readers(s)} if side == 0
                    else {p for port in current.inputs for p in producers(port.stream)})
            for found in step - seen:
                if found == seed or found in other:
                    return True
                seen.add(found)
                queue.append(found)
            if not queue:
                return False
    return False
