"""One layout change as a member follows it (docs/cumulus.md §6.1-6.2): the record and its plain-data form.

A :class:`Change` is what a ``Relayout`` announced, and what this member
learned of it since: its first epoch (``Flip``), which sources copied
(the leader's count), which sources' final chunks came in (a target's), the
copy under way here (a source's :class:`~.precopy.SourceCopy`) and what was
staged here (a target's :class:`~.staging.Staging`).  The layout change
(:mod:`~boreas.node.cumulus.relayouts`) keeps the changes announced and not
yet done here, in order, and is the only code that changes them.

>>> from boreas.m3.cumulus import even_layout
>>> c = Change("c1", even_layout("g", ["a", "b"], 2, version=2), None, [(1, 1, 0)], me=0)
>>> c.sources, c.moves_from(1), c.waiting      # member 0 waits for member 1's final chunk
([1], True, True)
>>> c.finals.append(1); c.waiting
False
"""

from __future__ import annotations

from dataclasses import dataclass, field

from boreas.m3.cumulus import Layout
from boreas.m3.cumulus.member import MemberRuntime

from .native_copy import restore_copy
from .precopy import Codecs, SourceCopy
from .staging import Staging


@dataclass
class Change:
    change: str  # its id (the API draws it)
    layout: Layout  # the layout it makes
    first: int | None  # the epoch that layout runs from (None: not fixed yet)
    moves: list[tuple[int, int, int]]  # (segment, source, target)
    me: int = field(default=0, repr=False)  # the member following it
    flipped: bool = False  # this member switched to its layout
    finals: list[int] = field(default_factory=list)  # sources whose final chunk came in (a target's)
    copied: list[int] = field(default_factory=list)  # sources that copied (the leader's)
    copy: SourceCopy | None = None  # the copy of this member's leaving slots (a source's)
    staging: Staging = field(default_factory=Staging)  # what came in of the moving entries (a target's)
    final_sent: bool = False  # this member sent its final chunks (a source's)
    steps: int = 0  # copy steps taken (the log says how long a copy took)
    copy_from: float | None = None  # flow-clock time of its first copy step
    carried: list[dict] = field(default_factory=list)  # what the sources' final chunks carried (a target's)

    @property
    def sources(self) -> list[int]:
        """The members sending this member entries."""
        return sorted({s for _, s, t in self.moves if t == self.me})

    def moves_from(self, member: int) -> bool:
        """Whether ``member`` is a source of this change."""
        return any(source == member for _, source, _ in self.moves)

    @property
    def waiting(self) -> bool:
        """Whether a flipped change still waits for a source's final chunk."""
        return not set(self.sources) <= set(self.finals)

    def state(self, codecs: Codecs) -> dict:
        return {"change": self.change, "layout": self.layout.to_dict(), "first": self.first,
                "moves": [list(x) for x in self.moves], "flipped": self.flipped, "finals": list(self.finals),
                "copied": list(self.copied), "copy": None if self.copy is None else self.copy.state(codecs),
                "staging": self.staging.state(codecs), "final_sent": self.final_sent, "steps": self.steps,
                "copy_from": self.copy_from, "carried": list(self.carried)}

    @classmethod
    def of(cls, r: dict, me: int, runtime: MemberRuntime, codecs: Codecs) -> Change:
        """A change from :meth:`state`; a copy under way continues from the same listed, dirty and sent keys."""
        p = cls(r["change"], Layout.from_dict(r["layout"]), None if r.get("first") is None else int(r["first"]),
                [tuple(x) for x in r["moves"]], me, bool(r.get("flipped")), list(r.get("finals", [])),
                list(r.get("copied", [])), None, Staging.of(r.get("staging", []), codecs),
                bool(r.get("final_sent")), int(r.get("steps", 0)), r.get("copy_from"), list(r.get("carried", [])))
        if r.get("copy") is not None:
            p.copy = restore_copy(r["copy"], runtime, p.layout, p.moves, me, codecs)
        return p
