"""The Head's long poll for a move (head/box_wait.py): it answers when the box is on the node and no live node lags.

``GET /boxes/{name}?node=N&wait=S`` saves ``boreas move`` its polling:
these tests drive :func:`~boreas.head.box_wait.box_shown` on a stand-in Head
(its catalog, syncs, membership and status notifications, as
``HeadService`` keeps them) and check when it answers and what: at once
when the condition holds, at the notification that makes it hold, and
after the wait with what holds then (the lagging live nodes named, a node
that is down left out).  In process, no Head or node processes.
"""

from __future__ import annotations

import asyncio
import types

import pytest

from boreas.catalog.model import Box, Catalog, InPort
from boreas.head.box_wait import box_shown, lagging_nodes, wait_seconds


class _Head:
    """What box_shown reads of a Head: catalog, syncs, membership, and revision with its notifications."""

    def __init__(self) -> None:
        self.catalog = Catalog(version=1)
        self.catalog.boxes["b1"] = Box("b1", "filter", (InPort("in"),), ("out",), (), node="n0:1")
        self.syncs = {"n0:1": types.SimpleNamespace(in_sync=True), "n1:1": types.SimpleNamespace(in_sync=True)}
        self.down: set[str] = {"n2:1"}  # (known, down: not waited for)
        self.membership = types.SimpleNamespace(known=lambda: ["n0:1", "n1:1", "n2:1"],
                                                alive=lambda endpoint, now=None: endpoint not in self.down)
        self.revision = 0
        self._changed = asyncio.Event()
        self.waits = 0

    def notify(self) -> None:
        self.revision += 1
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_for_change(self, after: int, timeout: float) -> None:
        self.waits += 1
        if self.revision <= after:
            try:
                await asyncio.wait_for(self._changed.wait(), timeout)
            except asyncio.TimeoutError:
                pass


def test_it_answers_at_the_notification_that_makes_the_move_show_everywhere() -> None:
    async def run() -> tuple[dict, int]:
        head = _Head()
        waiting = asyncio.ensure_future(box_shown(head, "b1", "n1:1", 30.0))  # type: ignore[arg-type]
        await asyncio.sleep(0.01)
        assert not waiting.done()
        head.catalog.boxes["b1"] = Box("b1", "filter", (InPort("in"),), ("out",), (), node="n1:1")  # committed
        head.syncs["n1:1"].in_sync = False  # ... and pushed to n1, which has not acknowledged it yet
        head.notify()
        await asyncio.sleep(0.01)
        assert not waiting.done()
        head.syncs["n1:1"].in_sync = True
        head.notify()
        return await asyncio.wait_for(waiting, 5.0), head.waits

    answer, waits = asyncio.run(run())
    assert answer == {"placed": True, "lagging": []}
    assert waits == 2  # one before the commit, one after it; none once acknowledged (it answered)


def test_it_answers_at_once_when_shown_and_after_the_wait_with_what_holds() -> None:
    async def run() -> list[dict]:
        head = _Head()
        answers = [await box_shown(head, "b1", "n0:1", 30.0)]  # type: ignore[arg-type]
        head.syncs["n1:1"].in_sync = False
        answers.append(await box_shown(head, "b1", "n0:1", 0.05))  # type: ignore[arg-type]
        answers.append(await box_shown(head, "b1", "n1:1", 0.05))  # type: ignore[arg-type]
        head.down = {"n1:1", "n2:1"}
        answers.append(await box_shown(head, "b1", "n0:1", 30.0))  # type: ignore[arg-type]
        return answers

    assert asyncio.run(run()) == [{"placed": True, "lagging": []},
                                  {"placed": True, "lagging": ["n1:1"]},
                                  {"placed": False, "lagging": ["n1:1"]},
                                  {"placed": True, "lagging": []}]


def test_lagging_nodes_are_get_nodes_live_rows_not_in_sync() -> None:
    """A live node the membership knows without a sync counts as not in sync (`GET /nodes` shows it so)."""
    head = _Head()
    head.down = set()
    assert lagging_nodes(head) == ["n2:1"]  # type: ignore[arg-type]
    head.down = {"n2:1"}
    assert lagging_nodes(head) == []  # type: ignore[arg-type]


def test_a_wait_that_is_not_a_finite_number_ends_at_once_or_is_refused() -> None:
    """``wait=nan`` passed ``min(nan, 30)`` and made a deadline never reached, the loop spinning without giving
    way: the handler's parse refuses it (400), and the wait itself ends at once on one."""
    head = _Head()
    answer = asyncio.run(asyncio.wait_for(box_shown(head, "b1", "n1:1", float("nan")), 5))  # type: ignore[arg-type]
    assert answer == {"placed": False, "lagging": []} and head.waits == 0
    for text in ("nan", "inf", "-inf", "x"):
        with pytest.raises(ValueError):
            wait_seconds(text, 30.0)
    assert wait_seconds("1e9", 30.0) == 30.0 and wait_seconds("-2", 30.0) == 0.0
