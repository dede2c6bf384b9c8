"""The end of an input stream: when every producer that published to it has said it is done.

A publisher closed with ``final=True`` sends a last, empty batch marked
``final`` (wire/frames.py), numbered after its data, so the receiver orders
and deduplicates it, and the input log keeps and replays it, like any
batch.  :class:`StreamEnds` remembers which producers of each stream have
ended; the dataflow asks it after each final batch whether the stream has
ended now, and if so tells the boxes the stream feeds (``end_of_input``:
an aggregate emits its open windows).

>>> ends = StreamEnds()
>>> ends.end("S", "a", published=["a", "b"]), ends.end("S", "b", published=["a", "b"])
(False, True)
>>> ends.end("S", "b", published=["a", "b"])  # a replayed or repeated mark: the stream ended once
False
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass
class StreamEnds:
    """Per input stream, the producers that have ended it and whether it has ended."""

    producers: dict[str, set[str]] = field(default_factory=dict)  # stream -> producers whose final mark came
    ended: set[str] = field(default_factory=set)

    def end(self, stream: str, producer: str, published: Iterable[str]) -> bool:
        """``producer`` ended ``stream``; True the first time every producer in ``published`` (those that
        published to it here) has ended it."""
        done = self.producers.setdefault(stream, set())
        done.add(producer)
        if stream in self.ended or not done.issuperset(published):
            return False
        self.ended.add(stream)
        return True
