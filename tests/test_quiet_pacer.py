"""head/quiet_pacer.py: catalog-sized background work waits for quiet, and for the Head to finish a change.

A copy built or an index saved while nodes are still taking a change slows
that change's end (issue 37: a 2.5 s index save landed inside a move at
100,000 boxes), so a run also waits until ``busy()`` is false; a Head that
stays busy runs it anyway after :data:`BUSY_WAIT` quiet spells since its last
run (changes meanwhile do not start the count again), and a node down or
failing does not count as busy (:func:`~boreas.head.node_sync.catching_up`).
"""

from __future__ import annotations

import asyncio

from boreas.catalog.model import Box, Catalog
from boreas.head.node_sync import NodeSync, catching_up
from boreas.head.pending import PendingRequests
from boreas.head.quiet_pacer import BUSY_WAIT, HELD_WAIT, QuietPacer


async def _run_until(pacer: QuietPacer, runs: list[int], count: int, step) -> int:
    """Run the pacer until ``count`` runs; ``step()`` is called every 10 ms meanwhile; the steps taken."""
    task = asyncio.create_task(pacer.run(lambda: _work(runs)))
    steps = 0
    try:
        while len(runs) < count:
            await asyncio.sleep(0.01)
            steps += 1
            step(steps)
    finally:
        task.cancel()
    return steps


async def _work(runs: list[int]) -> float:
    runs.append(1)
    return 0.0


async def test_a_run_waits_until_the_head_is_no_longer_busy():
    state = {"busy": True, "busy_checks": 0}

    def busy() -> bool:
        state["busy_checks"] += 1
        return state["busy"]

    pacer = QuietPacer(quiet=0.001, ratio=0.0, least=0.0, busy=busy)
    runs: list[int] = []
    pacer.changed()

    def step(steps: int) -> None:
        assert not runs or not state["busy"] or state["busy_checks"] > BUSY_WAIT  # never while busy
        if state["busy_checks"] >= 3:
            state["busy"] = False

    await _run_until(pacer, runs, 1, step)
    assert runs == [1] and not state["busy"] and state["busy_checks"] >= 3


async def test_a_head_busy_for_good_runs_it_after_busy_wait_quiet_spells():
    checks = []
    pacer = QuietPacer(quiet=0.001, ratio=0.0, least=0.0, busy=lambda: checks.append(1) or True)
    runs: list[int] = []
    pacer.changed()
    await _run_until(pacer, runs, 1, lambda steps: None)
    assert runs == [1] and len(checks) == BUSY_WAIT + 1


async def test_without_busy_it_runs_after_the_quiet_spell():
    pacer = QuietPacer(quiet=0.001, ratio=0.0, least=0.0)
    runs: list[int] = []
    pacer.changed()
    await _run_until(pacer, runs, 1, lambda steps: None)
    assert runs == [1]


async def test_a_head_busy_for_good_with_changes_every_few_spells_still_runs_it():
    """A change every 5 quiet spells, fewer than BUSY_WAIT apart, and busy() true for good (a node down):
    the spells waited count from the last run, not from the last change, so the run is not starved."""
    checks: list[int] = []
    pacer = QuietPacer(quiet=0.001, ratio=0.0, least=0.0)
    runs: list[int] = []

    def busy() -> bool:
        checks.append(1)
        if len(checks) % 5 == 0:
            pacer.changed()  # a periodic change (the next spell starts over; the count goes on)
        return True

    pacer.busy = busy
    pacer.changed()
    task = asyncio.create_task(pacer.run(lambda: _work(runs)))
    try:
        while not runs and len(checks) < 10 * BUSY_WAIT:
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
    assert runs and len(checks) <= 2 * BUSY_WAIT


def test_a_node_down_or_failing_does_not_keep_the_head_busy():
    syncs = {e: NodeSync(e, None, PendingRequests(), lambda: None) for e in ("a:1", "b:1", "c:1")}  # type: ignore
    for sync in syncs.values():
        sync.set_desired(Catalog(boxes={"x": Box("x", "filter", (), (), node=sync.endpoint)}), 2)  # not acked
    syncs["b:1"].failure = "node unreachable"
    down = {"c:1"}
    assert catching_up(syncs.values(), lambda e: e not in down)  # a:1 alive, taking the change
    down.add("a:1")
    assert not catching_up(syncs.values(), lambda e: e not in down)
    down.clear()
    syncs["a:1"].acked_version = syncs["c:1"].acked_version = 2  # the live ones in sync: b:1 failing only
    assert not catching_up(syncs.values(), lambda e: True)


def test_a_submission_on_its_way_in_holds_the_heads_catalog_sized_work():
    """A deployment's next part being read and checked: the copy ahead and the index save wait for it (their
    CPU would slow the part, which makes them stale anyway: issue 37), as they wait for nodes taking one."""
    from boreas.head.service import HeadService

    head = HeadService("memory://", token=None, snapshot_interval=0)
    pacers = (head.copy_ahead.pacer, head.index_saver.pacer)
    assert not head.submission_coming() and not any(p.held() or p.busy() for p in pacers)
    with head.taking_submission():
        with head.taking_submission():
            assert head.submission_coming() and all(p.held() for p in pacers)
        assert all(p.held() for p in pacers)  # (one still on its way)
    assert not head.submission_coming() and not any(p.held() for p in pacers)


async def test_held_spells_do_not_count_against_busy_wait_and_are_bounded_apart():
    """Held for good (submissions back to back): the run comes after HELD_WAIT spells, not BUSY_WAIT; held
    then busy: the held spells do not use up the spells busy() may take."""
    held_checks: list[int] = []
    pacer = QuietPacer(quiet=0.001, ratio=0.0, least=0.0, held=lambda: held_checks.append(1) or True)
    runs: list[int] = []
    pacer.changed()
    await _run_until(pacer, runs, 1, lambda steps: None)
    assert runs == [1] and len(held_checks) == HELD_WAIT

    state = {"held": 5, "busy": 0}

    def held() -> bool:
        state["held"] -= 1
        return state["held"] >= 0

    def busy() -> bool:
        state["busy"] += 1
        return True

    pacer = QuietPacer(quiet=0.001, ratio=0.0, least=0.0, busy=busy, held=held)
    runs = []
    pacer.changed()
    await _run_until(pacer, runs, 1, lambda steps: None)
    assert runs == [1] and state["busy"] == BUSY_WAIT + 1  # (as without held: the 5 held spells came first)


async def test_a_submission_that_begins_while_the_rate_limit_waits_holds_the_run():
    """The quiet spell ended and the pacer waits out its rate limit (``least``) when a submission begins: the
    run waits for it as for one that began before (the check for held comes after the rate limit)."""
    state = {"held": False}
    log: list[bool] = []

    async def work() -> float:
        log.append(state["held"])
        return 0.0

    pacer = QuietPacer(quiet=0.05, ratio=0.0, least=1.0, held=lambda: state["held"])
    task = asyncio.create_task(pacer.run(work))
    try:
        pacer.changed()
        while not log:
            await asyncio.sleep(0.01)
        pacer.changed()
        await asyncio.sleep(0.2)  # quiet: the pacer waits for the rate limit (1 s after the first run)
        state["held"] = True
        await asyncio.sleep(1.2)
        assert log == [False]  # no run while the submission is on its way in
        state["held"] = False
        while len(log) < 2:
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
    assert log == [False, False]


async def test_a_cancel_that_meets_a_change_stops_the_pacer():
    """The Head's close cancels the pacer's task; a change arriving at that same moment must not swallow the
    cancel (``asyncio.wait_for`` of Python 3.11 does: the task then waited for a change forever and the Head's
    close hung).  The quiet spell's wait is ``asyncio.timeout``'s, which keeps the cancel."""
    pacer = QuietPacer(quiet=30.0, ratio=1.0, least=0.0)

    async def work() -> float:
        return 0.0

    task = asyncio.create_task(pacer.run(work))
    pacer.changed()
    for _ in range(5):  # into the quiet spell's wait
        await asyncio.sleep(0)
    pacer.changed()  # (the wait's event set) ...
    task.cancel()  # ... and the cancel, in one step of the loop
    done, _ = await asyncio.wait({task}, timeout=5.0)
    assert task in done and task.cancelled()
