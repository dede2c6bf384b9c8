"""head/quiet_pacer.py: catalog-sized background work waits for quiet, and for the Head to finish a change.

A copy built or an index saved while nodes are still taking a change slows
that change's end (issue 37: a 2.5 s index save landed inside a move at
100,000 boxes), so a run also waits until ``busy()`` is false; a Head that
stays busy (a node down) runs it anyway after :data:`BUSY_WAIT` quiet spells.
"""

from __future__ import annotations

import asyncio

from boreas.head.quiet_pacer import BUSY_WAIT, QuietPacer


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
