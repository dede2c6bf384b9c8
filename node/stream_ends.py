"""The end of a stream: when every producer that published to it has said it is done.

A publisher closed with ``final=True`` sends a last, empty batch marked
``final`` (wire/frames.py), numbered after its data, so the receiver orders
and deduplicates it, and the input log keeps and replays it, like any
batch.  :class:`StreamEnds` remembers which producers of each stream have
ended; the router asks it after each final batch whether the stream has
ended now, and if so tells the boxes the stream feeds (``end_of_input``:
an aggregate emits its open windows).

The end goes on downstream.  Once every input stream of a box has ended
(and the box has emitted what the end closes), the box has produced all it
ever will: each of its out streams ends too.  The router sends a final
mark on each, numbered as the box's next batch, after everything the box
produced, to wherever the stream goes: a local box reads it as a producer's
end, another node takes it as from any producer (its box's producer id),
and a subscriber is told the stream ended (``boreas subscribe`` then exits 0
once it has written everything).  :meth:`StreamEnds.boxes_done` says which
boxes have just ended, each once.

A box may still owe rows once its inputs ended: a member of a partitioned
windowed view closes its last windows only when the Closes carrying every
coordinator's +inf pass it, later than its own node's producers ended
(docs/cumulus.md §3.13).  Its final mark waits: :meth:`StreamEnds.hold`
keeps the box, the router asks it again after each batch it emits
(``Operator.holds_end``) and sends the mark once it owes nothing
(:meth:`StreamEnds.release`), so a subscriber waiting for the end gets
every row before it.

What has ended is box state: a snapshot keeps :meth:`StreamEnds.state`
(:meth:`BoxStates.capture <boreas.node.box_state.BoxStates.capture>`), so a
durable node killed and restarted still knows, and never ends a stream
twice; a box that moves takes the ends of its inputs along
(:meth:`StreamEnds.of_box`, :meth:`StreamEnds.merge`); a box deleted is
forgotten (:meth:`StreamEnds.forget_box`), so a box added again under its
name ends its out streams when its own inputs end.

>>> ends = StreamEnds()
>>> ends.end("S", "a", published=["a", "b"]), ends.end("S", "b", published=["a", "b"])
(False, True)
>>> ends.end("S", "b", published=["a", "b"])  # a replayed or repeated mark: the stream ended once
False
>>> ends.boxes_done("S", {"f": ["S"], "j": ["S", "T"]}), ends.boxes_done("S", {"f": ["S"]})
(['f'], [])
>>> ends.hold("w"), ends.release("w"), ends.release("w")  # a box whose final mark waited: sent once
(None, True, False)
>>> again = StreamEnds()
>>> again.restore(ends.state())
>>> again == ends
True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class StreamEnds:
    """Per stream, the producers that have ended it and whether it has ended; the boxes whose inputs all ended."""

    producers: dict[str, set[str]] = field(default_factory=dict)  # stream -> producers whose final mark came
    ended: set[str] = field(default_factory=set)
    boxes: set[str] = field(default_factory=set)  # boxes that have ended their out streams
    held: set[str] = field(default_factory=set)  # of those, boxes whose final marks wait for rows they owe

    def end(self, stream: str, producer: str, published: Iterable[str]) -> bool:
        """``producer`` ended ``stream``; True the first time every producer in ``published`` (those that
        published to it here) has ended it."""
        done = self.producers.setdefault(stream, set())
        done.add(producer)
        if stream in self.ended or not done.issuperset(published):
            return False
        self.ended.add(stream)
        return True

    def boxes_done(self, stream: str, inputs: Mapping[str, Iterable[str]]) -> list[str]:
        """The boxes among ``inputs`` (box -> its input streams) that read ``stream``, which just ended, and all
        of whose inputs have now ended: each is named once, ever (it ends its out streams then)."""
        done = []
        for box, streams in inputs.items():
            streams = list(streams)
            if box not in self.boxes and stream in streams and self.ended.issuperset(streams):
                self.boxes.add(box)
                done.append(box)
        return done

    def ends_unheard(self, box: str, published: Mapping[str, Iterable[str]]) -> bool:
        """True once, when ``box``, whose input ended everywhere (a partitioned box's settled end:
        node/cumulus/end_marks.py), may end its out streams though its inputs never ended here: every in
        stream of it, ``published`` (stream -> the producers that published to it here), ended here, or every
        producer in ``published`` ended it here, or it had no producer here.  A node that no producer publishes
        to never sees its input end (:meth:`end` counts the producers that published to it), yet its member
        must end its out stream; one with a producer here that has not ended waits for that producer's final
        mark, as before.  The caller leaves out of ``published`` the producers handed to another node, whose
        final marks go there (so a stream :meth:`end` never ended here may be done: the second case).

        >>> ends = StreamEnds(ended={"S"}, producers={"T": {"c"}})
        >>> ends.ends_unheard("b", {"S": ["a"], "T": ["c", "d"]}), ends.ends_unheard("b", {"S": ["a"], "T": ["c"]})
        (False, True)
        >>> ends.ends_unheard("b", {"S": ["a"], "T": []}), ends.boxes  # (named once, as :meth:`boxes_done`)
        (False, {'b'})
        """
        if box in self.boxes or any(stream not in self.ended and not self.producers.get(stream, set()).issuperset(
                producers) for stream, producers in published.items()):
            return False
        self.boxes.add(box)
        return True

    def hold(self, box: str) -> None:
        """``box``'s inputs all ended but it still owes rows: its final marks wait (:meth:`release`)."""
        self.held.add(box)

    def release(self, box: str) -> bool:
        """True once, when ``box``'s final marks waited and may go now."""
        if box not in self.held:
            return False
        self.held.discard(box)
        return True

    def forget_box(self, box: str, outputs: Iterable[str]) -> None:
        """``box`` was deleted: a later box of its name has ended nothing (it ends its out streams, ``outputs``,
        when its own inputs end) and holds no final mark (else it would send it right after its first batch).

        >>> ends = StreamEnds(ended={"In", "Out"}, producers={"Out": {"b~1"}}, boxes={"b"}, held={"b"})
        >>> ends.forget_box("b", ["Out"])
        >>> ends
        StreamEnds(producers={}, ended={'In'}, boxes=set(), held=set())
        """
        self.boxes.discard(box)
        self.held.discard(box)
        for stream in outputs:
            self.ended.discard(stream)
            self.producers.pop(stream, None)

    # -- snapshots and moves ---------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """What a snapshot keeps (plain containers)."""
        return {"producers": {s: sorted(p) for s, p in self.producers.items()}, "ended": sorted(self.ended),
                "boxes": sorted(self.boxes), "held": sorted(self.held)}

    def restore(self, state: Mapping[str, Any] | None) -> None:
        """Continue from :meth:`state` (a snapshot from before ends were kept has none: nothing ended)."""
        if not state:
            return
        for stream, producers in state.get("producers", {}).items():
            self.producers.setdefault(stream, set()).update(producers)
        self.ended.update(state.get("ended", ()))
        self.boxes.update(state.get("boxes", ()))
        self.held.update(state.get("held", ()))

    def of_box(self, box: str, streams: Iterable[str]) -> dict[str, Any]:
        """The part of :meth:`state` a box that moves takes along: the ends of its input ``streams``, and
        whether it ended its own."""
        streams = set(streams)
        taken = {"producers": {s: sorted(p) for s, p in self.producers.items() if s in streams},
                 "ended": sorted(self.ended & streams), "boxes": [box] if box in self.boxes else []}
        if box in self.held:  # its final marks still wait (:meth:`hold`)
            taken["held"] = [box]
        return taken

    merge = restore  # a moved box's ends (:meth:`of_box`) join those here
