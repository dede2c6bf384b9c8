"""The open windows of an aggregate box, per group: where a tuple goes, when a window closes, timeouts.

:class:`GroupWindows` is the one owner of an aggregate's window state: each
group's next window start, open windows and horizon, the window counter
(``seq``), the timeout queue, the *hot* windows of the value loop
(:mod:`.aggregate_loop`) and the ``ignored``/``late`` counts.  The box
(:mod:`.aggregate`) reads its parameters and hands tuples here, by rows
(:meth:`by_values`, :meth:`by_tuples`) or, for the columnar path
(:mod:`.aggregate_columns`), one hot run at a time (:meth:`hot`,
:meth:`place_hot`); what a closed window becomes is the :class:`Emit`
callable's business.  The semantics are the module doc of :mod:`.aggregate`.

>>> from boreas.node.operators.accumulators import COUNT
>>> def add(w, row): w[COUNT] += 1
>>> spec = WindowSpec(by_values=True, size=10, advance=10, slack=0, timeout=None, aligned=True, slots=())
>>> book = GroupWindows(spec, add, emit=lambda key, w, out: out.append((key, w[0], w[COUNT])))
>>> out = []
>>> for t in (1, 5, 12, 25): book.place_hot((t,), "a", t, 0.0, out)
>>> out, book.hot("a")[:2]
([('a', 0, 2), ('a', 10, 1)], [20, 30])
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .accumulators import COUNT, END, FIRST_SLOT, SEQ, START, T0
from .aggregate_loop import CLOSED, BatchLoop, hot_window

log = logging.getLogger(__name__)

#: More empty windows than this for one gap are skipped rather than opened.
MAX_GAP_WINDOWS = 10_000

#: What a window becomes when it leaves: ``emit(key, window, out)`` appends its out row (or nothing).
Emit = Callable[[Any, list, list], None]


@dataclass(frozen=True)
class WindowSpec:
    """The window parameters of one aggregate box, as read and checked by the box."""

    by_values: bool
    size: float
    advance: float
    slack: int
    timeout: float | None
    aligned: bool
    slots: tuple  # the accumulators' initial slots of a new window
    label: str = ""

    @property
    def beyond(self) -> int:
        """The slot of a value window's closing-tuple count (or CLOSED), after the functions' slots."""
        return FIRST_SLOT + len(self.slots)


class GroupWindows:
    """Owns every group's windows (``key -> [next start, [windows], horizon]``), timeouts and counts."""

    def __init__(self, spec: WindowSpec, add: Callable[[list, tuple], None], emit: Emit):
        self.spec = spec
        self._add, self._emit = add, emit
        self._beyond = spec.beyond
        self.groups: dict[Any, list] = {}
        # key -> the group's hot window (aggregate_loop.hot_window); only ever a subset of the truth:
        # a missing key sends its next tuple through place, which puts it back.
        self._hot: dict[Any, list] = {}
        self._timeouts: dict[int, tuple[Any, list]] | None = {} if spec.timeout is not None else None
        self.seq = 0
        self.ignored = 0  # tuples in no window (late, a None order value, between hopping windows)
        self.late = 0     # of those, the ones whose window had already closed

    # -- windows by VALUES -------------------------------------------------------------

    def by_values(self, rows: list[tuple], key: Callable[[tuple], Any] | None, order: int, now: float,
                  out: list[tuple], loop: BatchLoop | None) -> None:
        """A batch of rows: through the generated loop when there is one, else tuple by tuple."""
        if loop is not None:
            loop(rows, now, out, self._hot, self.place_hot)
            return
        place = self.place
        for row in rows:
            place(row, key(row) if key is not None else None, row[order], now, out)

    def hot(self, key: Any) -> list | None:
        """The group's hot window (a tuple inside it only adds to it), or None: ask :meth:`place_hot`."""
        return self._hot.get(key)

    def place_hot(self, row: tuple, key: Any, v: Any, now: float, out: list[tuple]) -> None:
        """:meth:`place`, then the group's hot window as it is now."""
        self.place(row, key, v, now, out)
        g = self.groups.get(key)
        w = hot_window(g, self._beyond) if g is not None else None
        if w is not None:
            self._hot[key] = w
        else:
            self._hot.pop(key, None)

    def roll(self, key: Any, lo: Any, hi: Any, now: float, out: list[tuple]) -> list | None:
        """:meth:`place` for the first of a run of tuples (order values ``lo`` to ``hi``) past their group's hot
        window, in the case an in-order stream meets at every window's end, done once for the run: the first
        tuple closes the hot window (slack 0, not empty) and opens exactly the next one, which holds the whole
        run.  Returns that window (now hot: the run goes into it), or None when this is not the case.

        The steps are :meth:`place`'s for that tuple: ``_open`` opens one window, since ``lo < next + size <=
        next + advance``; the hot window takes a closing tuple and closes, its end becomes the horizon; it
        is emitted; the tuple enters the new window (the caller adds the run).
        """
        w = self._hot.get(key)
        spec = self.spec
        if w is None or spec.slack or spec.advance < spec.size or not w[COUNT] or w[self._beyond] != 0:
            return None
        g = self.groups[key]
        nxt = g[0]
        if not (w[END] <= lo and nxt <= lo and hi < nxt + spec.size):
            return None
        self._open(key, g, lo, now)
        w[self._beyond] = CLOSED
        g[2] = max(g[2], w[END])
        self._emit_closed(key, g[1], out)
        new = g[1][0]
        self._hot[key] = new
        return new

    def chains(self) -> bool:
        """Whether :meth:`next_window` may stand for :meth:`roll`: tumbling value windows (advance = size),
        slack 0, no timeout (nothing but the tuples closes a window)."""
        spec = self.spec
        return spec.by_values and not spec.slack and spec.advance == spec.size and self._timeouts is None

    def next_window(self, key: Any, now: float, out: list[tuple]) -> list:
        """:meth:`roll` where the caller has checked its case already (:meth:`chains`, and a run in the window
        that starts at the group's next start, past a hot window that holds tuples and is the group's only
        one): the hot window closes and is emitted, the next opens and is hot; returns it.  The columnar
        path checks a whole batch's runs first, then rolls each group's windows over in batch order."""
        w = self._hot[key]
        g = self.groups[key]
        spec = self.spec
        nxt = g[0]
        new = [nxt, nxt + spec.size, now, self.seq, 0, *spec.slots, 0]
        self.seq += 1
        g[0] = nxt + spec.advance
        g[1] = [new]  # w was the only window: it leaves (what _emit_closed would do)
        w[self._beyond] = CLOSED
        if w[END] > g[2]:
            g[2] = w[END]
        self._emit(key, w, out)
        self._hot[key] = new
        return new

    @property
    def emit(self) -> Emit:
        """What a closed window becomes (:mod:`.aggregate_emit` reads its row shape to emit many at once)."""
        return self._emit

    def close_hot(self, key: Any, out: list[tuple]) -> None:
        """The group's hot window closes and is emitted, as :meth:`next_window` does; the caller
        (:mod:`.aggregate_emit`) then emits the windows its batch opened and closed itself, and hands the
        group its new open window with :meth:`carry_on`."""
        w = self._hot[key]
        w[self._beyond] = CLOSED
        g = self.groups[key]
        if w[END] > g[2]:
            g[2] = w[END]
        self._emit(key, w, out)

    def carry_on(self, key: Any, new: list, next_start: Any, horizon: Any) -> None:
        """After :meth:`close_hot` and the batch's own windows: ``new`` is the group's only open window, and
        hot; ``horizon`` the end of the last window that closed."""
        g = self.groups[key]
        g[0] = next_start
        g[1] = [new]
        if horizon > g[2]:
            g[2] = horizon
        self._hot[key] = new

    def number(self, n: int) -> int:
        """The window number (``seq``) of the first of ``n`` windows opened at once; the next ``n`` are taken."""
        first = self.seq
        self.seq += n
        return first

    def place(self, row: tuple, key: Any, v: Any, now: float, out: list[tuple]) -> None:
        """One tuple of a value-window aggregate, any case: the reference semantics of the data path."""
        if v is None:
            self.ignored += 1
            return
        spec, groups, beyond = self.spec, self.groups, self._beyond
        slack = spec.slack
        g = groups.get(key)
        if g is None:
            start = v - v % spec.advance if spec.aligned else v
            g = groups[key] = [start, [], start]
        if v >= g[0]:
            self._open(key, g, v, now)
        placed = closed = False
        for w in g[1]:
            if v < w[START]:
                break  # windows are in start order: none further holds v
            seen = w[beyond]
            if seen == CLOSED:
                continue
            if v >= w[END]:  # a closing tuple for w
                seen += 1
                if seen > slack and (seen > 1 or w[COUNT]):
                    w[beyond] = CLOSED
                    closed = True
                    g[2] = max(g[2], w[END])
                else:
                    w[beyond] = seen
            else:
                self._add(w, row)
                placed = True
        if closed:
            self._emit_closed(key, g[1], out)
        if not placed:
            self.ignored += 1
            if v < g[2]:
                self.late += 1

    def ignores(self, key: Any, hi: Any) -> Any:
        """The group's horizon when :meth:`place` would only count tuples whose order values are at most
        ``hi`` (ignored, and late below the horizon): no window opens (``hi`` is before the next start) and
        none holds them (``hi`` is before the first window's start); else None.  The columnar walk counts a
        run of such tuples at once (:meth:`count_ignored`) instead of placing them one by one."""
        g = self.groups.get(key)
        if g is None or not hi < g[0] or (g[1] and not hi < g[1][0][START]):
            return None
        return g[2]

    def count_ignored(self, n: int, late: int) -> None:
        """``n`` tuples :meth:`ignores` said :meth:`place` would only count, ``late`` of them below the horizon."""
        self.ignored += n
        self.late += late

    def _open(self, key: Any, g: list, v: Any, now: float) -> None:
        """Open every window that starts at or before ``v`` (Borealis: ``while value >= next``)."""
        spec = self.spec
        nxt, adv = g[0], spec.advance
        n = int((v - nxt) // adv) + 1
        if n > MAX_GAP_WINDOWS:
            keep = int(spec.size // adv) + 2  # enough to still hold every window containing v
            log.warning("aggregate box %r: skipping %d empty windows before %r in group %r",
                        spec.label, n - keep, v, key)
            nxt += (n - keep) * adv
            g[2] = max(g[2], nxt)  # the skipped windows count as closed: tuples in them are late
        wins, timeouts, size, initial = g[1], self._timeouts, spec.size, spec.slots
        while v >= nxt:
            w = [nxt, nxt + size, now, self.seq, 0, *initial, 0]
            self.seq += 1
            wins.append(w)
            if timeouts is not None:
                timeouts[w[SEQ]] = (key, w)
            nxt += adv
        g[0] = nxt

    def _emit_closed(self, key: Any, wins: list, out: list[tuple]) -> None:
        """Emit the closed windows at the front of a group's list, in start order."""
        timeouts, beyond = self._timeouts, self._beyond
        while wins and wins[0][beyond] == CLOSED:
            w = wins.pop(0)
            if timeouts is not None:
                timeouts.pop(w[SEQ], None)
            self._emit(key, w, out)

    # -- windows by TUPLES -------------------------------------------------------------

    def by_tuples(self, rows: list[tuple], key: Callable[[tuple], Any] | None, order: int | None, now: float,
                  out: list[tuple]) -> None:
        groups, add, spec, timeouts = self.groups, self._add, self.spec, self._timeouts
        size, adv, initial = spec.size, spec.advance, spec.slots
        for row in rows:
            k = key(row) if key is not None else None
            g = groups.get(k)
            if g is None:
                g = groups[k] = [None, [], None]
            wins = g[1]
            if not wins or wins[-1][COUNT] >= adv:
                w = [row[order] if order is not None else None, None, now, self.seq, 0, *initial]
                self.seq += 1
                wins.append(w)
                if timeouts is not None:
                    timeouts[w[SEQ]] = (k, w)
            for w in wins:
                add(w, row)
            while wins and wins[0][COUNT] >= size:
                w = wins.pop(0)
                if timeouts is not None:
                    timeouts.pop(w[SEQ], None)
                self._emit(k, w, out)

    def tuple_windows(self, key: Any) -> list:
        """A group's open tuple windows, oldest first (empty for a new group); the columnar path
        (:mod:`.aggregate_tuples`) reads them and hands the group its new list with :meth:`set_tuple_windows`."""
        g = self.groups.get(key)
        return g[1] if g is not None else []

    def set_tuple_windows(self, key: Any, wins: list) -> None:
        """A group's open tuple windows after a batch taken at once, as :meth:`by_tuples` leaves them."""
        g = self.groups.get(key)
        if g is None:
            self.groups[key] = [None, wins, None]
        else:
            g[1] = wins

    def retime(self, closed: list, opened: list[tuple[Any, list]]) -> None:
        """The timeouts after a batch of tuple windows taken at once: the ``closed`` windows' go, the
        ``opened`` ones' (``(key, window)`` still open, in window-number order, as :meth:`by_tuples` opens
        them) start."""
        timeouts = self._timeouts
        if timeouts is None:
            return
        for w in closed:
            timeouts.pop(w[SEQ], None)
        for key, w in opened:
            timeouts[w[SEQ]] = (key, w)

    # -- timeouts and the end of the input ---------------------------------------------

    def pending(self) -> bool:
        """Whether a window waits for its timeout."""
        return bool(self._timeouts)

    def expire(self, now: float, out: list[tuple]) -> None:
        """Emit every window opened ``timeout`` seconds ago or more, oldest first."""
        timeouts, timeout = self._timeouts, self.spec.timeout
        if not timeouts or timeout is None:
            return
        while timeouts:
            seq = next(iter(timeouts))
            key, w = timeouts[seq]
            if w[T0] + timeout > now:
                break
            del timeouts[seq]
            self._hot.pop(key, None)  # its windows change here, not in place
            g = self.groups[key]
            wins = g[1]
            for i, other in enumerate(wins):
                if other is w:
                    del wins[i]
                    break
            self._emit(key, w, out)
            if self.spec.by_values:
                g[2] = max(g[2], w[END])
                self._emit_closed(key, wins, out)  # windows that closed and only waited for w

    def next_deadline(self) -> float | None:
        if not self._timeouts or self.spec.timeout is None:
            return None
        _, w = next(iter(self._timeouts.values()))
        return w[T0] + self.spec.timeout

    def close_all(self, out: list[tuple]) -> None:
        """Emit every open window, in start order per group; a tuple below a group's next start is late."""
        for key, g in self.groups.items():
            for w in g[1]:
                self._emit(key, w, out)
            g[1], g[2] = [], (max(g[2], g[0]) if self.spec.by_values else None)
        self._hot = {}
        self._timeouts = {} if self._timeouts is not None else None

    # -- state -------------------------------------------------------------------------

    def shift_times(self, delta: float) -> None:
        for g in self.groups.values():
            for w in g[1]:
                w[T0] += delta

    def restore(self, groups: dict[Any, list], seq: int, ignored: int, late: int) -> None:
        """Continue from saved groups (``key -> [next start, [windows], horizon]``) and counts."""
        self.groups, self.seq, self.ignored, self.late = groups, seq, ignored, late
        self._hot = {}
        if self._timeouts is not None:
            opened = sorted(((w[SEQ], key, w) for key, g in groups.items() for w in g[1]),
                            key=operator.itemgetter(0))
            self._timeouts = {s: (key, w) for s, key, w in opened}
