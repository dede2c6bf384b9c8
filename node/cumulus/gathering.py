"""A partitioned window join's closed leaf rows, gathered to member 0 (docs/cumulus.md §3.13, "Window joins").

A window join's stages above its leaves (m3/winstages.py) read every leaf row of a closed window at once; in a
partitioned box each member holds the leaf rows of its own groups.  Every member passes the same ``Close``\\s
at the same point of the version order, so the frontier takes the same steps on every member, and a window
closes at the same step everywhere.  **Decision: gather at the step.**  At each step a member sends the leaf
rows it closed (maybe none) to member 0, in a ``Gathered`` message; member 0 evaluates the stages once it has
every member's rows of that step (its own when it passed the step itself, which also says how many members
there are), in step order, and emits the query's rows.  One message per member and step, no extra round;
the cost is that the stages run on one member, over every member's rows of the closed windows.

:class:`Gathered` is the one owner of member 0's waiting steps and rides in its state (snapshots, failover).
A step at or before the last evaluated is a resend (a member replaying from an older state): ignored.
Leaf rows travel and wait as msgpack carries them: a DATE key column as its day number (:meth:`Gathered.encode`,
as messages.key_codecs does for Push keys; msgpack would make a date a string), a date again when evaluated.

>>> g = Gathered()
>>> g.offer(10.0, 1, {"Q1": [[10, [1, 0, 10], 2]]})
>>> g.ready()
[]
>>> g.offer(10.0, 0, {"Q1": [[10, [2, 0, 10], 1]]}, members=2)
>>> [(step, sorted(rows["Q1"])) for step, rows in g.ready()]
[(10.0, [(10, (1, 0, 10), 2), (10, (2, 0, 10), 1)])]
>>> g.offer(10.0, 1, {"Q1": [[10, [1, 0, 10], 2]]}); g.ready()   # a resend of a step already evaluated
[]
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field

Leaves = dict[str, list]  # per leaf view its closed rows [end, key, value]


_EPOCH = dt.date(1970, 1, 1).toordinal()


def _row(end, key, value, dates: tuple[int, ...] = ()) -> tuple:
    """A leaf row as the stages read it (a message carries lists; ``dates``: its key's DATE positions, day numbers)."""
    if dates:
        key = [dt.date.fromordinal(v + _EPOCH) if i in dates else v for i, v in enumerate(key)]
    return end, tuple(key), tuple(value) if isinstance(value, list) else value


@dataclass
class Gathered:
    """Member 0's steps of the frontier waiting for members' leaf rows (module docstring)."""

    steps: dict[float, dict[int, Leaves]] = field(default_factory=dict)  # step -> member -> its rows
    members: dict[float, int] = field(default_factory=dict)  # step -> members there are (once 0 passed it)
    done: float = -math.inf  # the last step evaluated
    dates: dict[str, tuple[int, ...]] = field(default_factory=dict)  # per leaf view its DATE key positions

    @classmethod
    def of(cls, views) -> Gathered:
        """For leaf views ``views`` (:class:`~boreas.m3.runtime.ports.ViewInfo`: their key types)."""
        return cls(dates={v.name: at for v in views if (at := tuple(i for i, (_, t) in enumerate(v.keys)
                                                                    if t == "DATE"))})

    def encode(self, leaves: Leaves) -> Leaves:
        """``leaves`` (rows ``[end, key, value]``) with each DATE key column as its day number."""
        out = {}
        for view, rows in leaves.items():
            at = self.dates.get(view)
            out[view] = rows if not at else [[end, [v.toordinal() - _EPOCH if i in at else v
                                                    for i, v in enumerate(key)], value] for end, key, value in rows]
        return out

    def offer(self, step: float, member: int, leaves: Leaves, members: int | None = None) -> None:
        """``member``'s leaf rows closed at ``step`` (in :meth:`encode`'s form); ``members``: member 0's own, with
        how many there are."""
        if step <= self.done:
            return
        self.steps.setdefault(step, {})[member] = leaves
        if members is not None:
            self.members[step] = members

    def ready(self) -> list[tuple[float, dict[str, list[tuple]]]]:
        """The steps every member's rows of which are in, in order (each step's rows merged per leaf), taken."""
        out = []
        for step in sorted(self.steps):
            count = self.members.get(step)
            got = self.steps[step]
            if count is None or any(m not in got for m in range(count)):
                break
            merged: dict[str, list[tuple]] = {}
            for leaves in got.values():
                for view, rows in leaves.items():
                    at = self.dates.get(view, ())
                    merged.setdefault(view, []).extend(_row(*r, at) for r in rows)
            out.append((step, merged))
            del self.steps[step]
            self.members.pop(step, None)
            self.done = step
        return out

    @property
    def waiting(self) -> bool:
        """Whether some step waits for a member's rows (the box's out stream must not end yet)."""
        return bool(self.steps)

    def state(self) -> dict:
        return {"steps": [[_enc(s), [[m, leaves] for m, leaves in by.items()]] for s, by in self.steps.items()],
                "members": [[_enc(s), n] for s, n in self.members.items()], "done": _enc(self.done)}

    def restore(self, state: dict) -> None:
        self.steps = {_dec(s): {int(m): leaves for m, leaves in by} for s, by in state.get("steps", [])}
        self.members = {_dec(s): int(n) for s, n in state.get("members", [])}
        self.done = _dec(state.get("done", "-inf"))


def _enc(x: float) -> float | str:
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf")


def _dec(x: float | str) -> float:
    return float(x)
