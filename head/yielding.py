"""Background work in a worker thread that gives the interpreter back to the Head's event loop.

The Head's work costing the catalog's size -- the copy built ahead
(:mod:`.copy_ahead`), the index saved (:mod:`.index_saver`) -- runs in a
worker thread so the event loop keeps serving.  But that thread holds the
GIL while it computes, and CPython hands the GIL to a thread asking for it
only after the switch interval (5 ms): every time the loop wakes up (a
request's bytes in, a node's answer, a timer) it waits for it (measured
with bench/control_plane_lag.py's probe, a 1 ms timer on the loop during an
index encode of 20,000 boxes at load 5-15: 5-22 ms late at the median, 13-39
ms at the 90th percentile, against 0.1 and 1-3 ms with no work), and a CLI
call's request wakes the loop tens of times: work that was not the call's
own, growing with the catalog (issue 37).

A :class:`Yielder` is the worker's checkpoint: the work calls it often (an
element encoded, an index entry written; the call itself is a clock read),
and every ``slice`` seconds it sleeps ``pause`` seconds, releasing the GIL,
so a loop waiting for it takes it at once instead of after the switch
interval.  While the Head serves a request (its :class:`Foreground` not
``idle``), it waits for the request's end, up to ``patience`` seconds in one
run of the work, so the request runs alone, unless a reader awaits the work
(:meth:`Yielder.awaited`).  The work's pieces between two checkpoints are
about ``slice`` long, except the steps no checkpoint cuts, which still grow
with the catalog: listing a copy's elements in order, and the index's
digest, last encode and compression (24-57 ms at 20,000 boxes).  Measured
at load 12-16, the 90th percentile of the probe's lag about halved; its
largest values, 45-240 ms, did not (the machine's load and calls the
checkpoints do not cut, such as the cyclic collector's passes).  The work
takes a little longer (``pause`` per ``slice``, and the waits), which the
:class:`~.quiet_pacer.QuietPacer` pacing it counts in CPU time only.

Usage::

    foreground = Foreground()                                # its middleware counts the requests in flight
    yielder = Yielder(foreground.idle)
    yielder.start()                                          # each run of the work
    await asyncio.to_thread(encode_index, index, yielder)    # the work calls yielder() as it goes
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Awaitable, Callable, Iterator

from aiohttp import web

#: Seconds of work between two yields: under the switch interval (5 ms), so the loop waits less than it.
SLICE = 0.002
#: Seconds slept at a yield: long enough for a waiting thread to take the GIL.
PAUSE = 0.0002
#: Seconds a run of the work waits in all for the Head's foreground work before going on beside it.
PATIENCE = 2.0


class Yielder:
    """A worker thread's checkpoint; owns when it yielded last and how long this run has waited."""

    def __init__(self, idle: threading.Event | None = None, slice: float = SLICE, pause: float = PAUSE,
                 patience: float = PATIENCE, clock: Callable[[], float] = time.perf_counter,
                 sleep: Callable[[float], None] = time.sleep):
        self.idle = idle  # set while the Head serves no request (None: nothing to wait for)
        self.slice = slice
        self.pause = pause
        self.patience = patience
        self.clock = clock
        self.sleep = sleep
        self.wanted = 0  # readers awaiting this work now (changed on the loop): it waits for no request then
        self._last = clock()  # when the work last yielded (or started)
        self._waited = 0.0  # seconds this run waited for the foreground
        self.calls = 0  # checkpoints so far (tests: a run's work is cut into bounded pieces)
        self.yields = 0  # times the GIL was given up
        self.waits = 0  # times the work waited for a request's end

    def start(self) -> None:
        """A new run of the work begins (called on the loop before handing it to the thread)."""
        self._last = self.clock()
        self._waited = 0.0

    def __call__(self) -> None:
        """The checkpoint (in the worker thread): yield if the work ran ``slice`` seconds since the last."""
        self.calls += 1
        now = self.clock()
        if now - self._last < self.slice:
            return
        self.yields += 1
        self.sleep(self.pause)
        left = self.patience - self._waited
        if (self.idle is not None and not self.wanted and left > self.pause  # (a pause's worth or more)
                and not self.idle.is_set()):
            self.waits += 1
            began = self.clock()
            self.idle.wait(left)
            self._waited += self.clock() - began
        self._last = self.clock()


    @contextlib.contextmanager
    def awaited(self) -> Iterator[None]:
        """A reader awaits the work meanwhile (``GET /catalog``, a global component's copy): the work gives the
        GIL back still, but waits for no other request's end, which would make that reader wait for it."""
        self.wanted += 1
        try:
            yield
        finally:
            self.wanted -= 1


class Foreground:
    """Owns the count of the Head's requests in flight, and ``idle``, the event a :class:`Yielder` waits for.

    A watch (a web socket) and a long poll (``?wait=``) mostly wait, so they do not count: the work would
    otherwise wait its whole patience whenever a browser has the UI open.
    """

    def __init__(self) -> None:
        self.in_flight = 0  # changed on the loop only
        self.idle = threading.Event()  # set while in_flight is 0 (worker threads wait on it)
        self.idle.set()

    def _enter(self) -> None:
        self.in_flight += 1
        self.idle.clear()

    def _leave(self) -> None:
        self.in_flight -= 1
        if not self.in_flight:
            self.idle.set()

    @contextlib.contextmanager
    def aside(self, request: web.Request) -> Iterator[None]:
        """``request`` awaits the background work itself (``GET /catalog`` awaiting the copy's build): not
        foreground meanwhile, or the work would wait for the request waiting for it."""
        counted = self.counts(request)
        if counted:
            self._leave()
        try:
            yield
        finally:
            if counted:
                self._enter()

    @staticmethod
    def counts(request: web.Request) -> bool:
        """Whether the middleware counts ``request`` (a watch and a long poll mostly wait: not)."""
        return request.headers.get("Upgrade", "").lower() != "websocket" and "wait" not in request.query

    @web.middleware
    async def middleware(self, request: web.Request,
                         handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        """Count the request as foreground work while it is served (an aiohttp middleware)."""
        if not self.counts(request):
            return await handler(request)
        self._enter()
        try:
            return await handler(request)
        finally:
            self._leave()
