"""A stream's watermark: how far its event time has surely come, from what each of its producers has sent.

A producer's own watermark is the newest event time it has sent minus the
stream's delay (``WATERMARK FOR ts AS ts - INTERVAL '5' SECOND``, or the
``<input watermark>`` attribute): rows up to that far behind its newest are
still on time.  The stream's watermark is the least of its producers': the
slowest producer holds every window open, as in Flink.  Two exceptions:

* a producer that sent nothing for ``idle`` seconds of flow clock stops
  holding the watermark back (it is *idle*) until it sends again; when every
  producer that has not ended is idle, the watermark is the greatest of
  theirs, so a quiet stream still closes what its last rows closed;
* a producer that ended its input (its ``final`` mark) counts as +infinity,
  and once every producer ended, so is the watermark: every window closes.

The watermark never goes back (a producer waking from idleness with older
rows makes them late, not the watermark earlier).  It moves at batch
boundaries only: a batch's rows are judged against the watermark before it
(:meth:`WatermarkTracker.watermark` is read before :meth:`observe`).

The tracker is the one owner of this: the ``m3`` box reading the stream asks
it (node/operators/m3windows.py) and keeps its :meth:`state` with its own, so
it moves and is snapshotted with the box.

>>> w = WatermarkTracker(delay=5, idle=10.0)
>>> w.watermark(0.0)                                  # nothing seen: nothing closes
-inf
>>> w.observe("a", 100, now=1.0); w.observe("b", 40, now=1.0); w.watermark(1.0)
35
>>> w.observe("a", 200, now=5.0); w.watermark(5.0)    # b is the slowest
35
>>> w.next_deadline()                                 # b turns idle 10s after it was heard
11.0
>>> w.watermark(12.0), w.next_deadline(after=12.0)    # b idle: a alone holds it, and turns idle at 15
(195, 15.0)
>>> w.observe("b", 50, now=13.0); w.watermark(13.0)   # b back, older: the watermark stays
195
>>> w.end("a"); w.end("b"); w.watermark(13.0)
inf
>>> again = WatermarkTracker(delay=5, idle=10.0)
>>> again.restore(w.state()); again.watermark(13.0)
inf
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass
class WatermarkTracker:
    """Owns one stream's watermark: per producer its newest event time, when it was last heard, whether it ended."""

    delay: float = 0
    idle: float | None = None  # seconds of flow clock after which a silent producer stops holding it back
    newest: dict[str, float] = field(default_factory=dict)  # producer -> newest event time it sent
    heard: dict[str, float] = field(default_factory=dict)  # producer -> flow clock of its last batch
    ended: set[str] = field(default_factory=set)
    all_ended: bool = False
    current: float = -math.inf  # the watermark last read: it never goes back

    def declare(self, delay: float, idle: float | None) -> None:
        """The stream's declared delay and idle timeout (its ``<input>``'s, which may change with the catalog)."""
        self.delay, self.idle = delay, idle

    def observe(self, producer: str, newest: float, now: float) -> None:
        """``producer`` sent a batch whose newest event time is ``newest`` at flow clock ``now``."""
        old = self.newest.get(producer)
        if old is None or newest > old:
            self.newest[producer] = newest
        self.heard[producer] = now

    def heard_from(self, producer: str, now: float) -> None:
        """``producer`` sent a batch without event times (every row late, or none): it is not idle."""
        if producer in self.newest:
            self.heard[producer] = now

    def end(self, producer: str | None = None) -> None:
        """``producer`` ended its input (None: every producer of the stream has)."""
        if producer is None:
            self.all_ended = True
        else:
            self.ended.add(producer)

    def watermark(self, now: float) -> float:
        """The stream's watermark at flow clock ``now`` (-inf before any row; +inf once every producer ended)."""
        if self.all_ended or (self.newest and self.ended.issuperset(self.newest)):
            self.current = math.inf
            return self.current
        active, idle = self.split(now)
        # every open producer idle: the quiet stream closes what its last rows closed
        mark = active if active is not None else idle if idle is not None else -math.inf
        if mark > self.current:
            self.current = mark
        return self.current

    def split(self, now: float) -> tuple[float | None, float | None]:
        """The least mark of the producers active at ``now`` and the greatest of the idle ones (None: no such
        producer; ended producers count in neither).  One tracker takes the first, or the second when no producer
        is active; a stream whose producers are tracked in several places (the coordinators of a partitioned box,
        node/cumulus/event_marks.py) takes the least of the first over all of them, the greatest of the second
        only when no place has an active producer."""
        open_ = [p for p in self.newest if p not in self.ended]
        active = [p for p in open_ if self.idle is None or now - self.heard[p] < self.idle]
        idle = [p for p in open_ if p not in active]
        return (min(self.newest[p] for p in active) - self.delay if active else None,
                max(self.newest[p] for p in idle) - self.delay if idle else None)

    def next_deadline(self, after: float = -math.inf) -> float | None:
        """The flow clock after ``after`` at which the next producer turns idle (None: no idle timeout, or no
        producer to turn idle): a box polls then, and asks again with ``after`` its poll's clock."""
        if self.idle is None or self.all_ended:
            return None
        times = [t for p in self.newest if p not in self.ended and (t := self.heard[p] + self.idle) > after]
        return min(times) if times else None

    def hand_away(self, producer: str, now: float) -> list | None:
        """What another owner of ``producer``'s watermark continues from (a partitioned box's coordinator handing
        it over, node/cumulus/handing.py): ``[newest, silent, ended]``, ``silent`` the seconds since it was last
        heard (flow clocks differ between nodes).  None: never heard.  It holds here until :meth:`forget`."""
        newest, heard = self.newest.get(producer), self.heard.get(producer)
        ended = producer in self.ended
        if newest is None and not ended:
            return None
        return [newest, None if heard is None else now - heard, ended]

    def forget(self, producer: str) -> None:
        """``producer``'s watermark is kept elsewhere now (:meth:`hand_away`)."""
        self.newest.pop(producer, None)
        self.heard.pop(producer, None)
        self.ended.discard(producer)

    def take_over(self, producer: str, entry: list, now: float) -> None:
        """Continue ``producer``'s watermark from :meth:`hand_away`'s ``entry`` at flow clock ``now`` (what this
        tracker heard of it already is kept if newer)."""
        newest, silent, ended = entry
        if newest is not None and (producer not in self.newest or newest > self.newest[producer]):
            self.newest[producer] = newest
        if silent is not None:
            self.heard[producer] = max(now - silent, self.heard.get(producer, -math.inf))
        if ended:
            self.ended.add(producer)

    def state(self) -> dict:
        """Plain data: what a moved or recovered box continues from."""
        return {"newest": dict(self.newest), "heard": dict(self.heard), "ended": sorted(self.ended),
                "all_ended": self.all_ended, "current": None if self.current == -math.inf else self.current}

    def restore(self, state: dict, shift: float = 0.0) -> None:
        """Continue from :meth:`state`; ``shift`` is added to the flow clock values (another node's clock)."""
        self.newest = dict(state.get("newest", {}))
        self.heard = {p: t + shift for p, t in state.get("heard", {}).items()}
        self.ended = set(state.get("ended", ()))
        self.all_ended = bool(state.get("all_ended", False))
        current = state.get("current")
        self.current = -math.inf if current is None else current
