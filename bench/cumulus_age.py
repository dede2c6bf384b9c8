"""``bench/cumulus.py --parts age``: the age of READ_STABLE answers under saturating and paced load."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cumulus_q3 import AGE_TARGET, producers  # noqa: E402

def percentile(values: list[float], p: float) -> float:
    """The ``p``-th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]


class StableAges:
    """READ_STABLE of one view key of ``box`` every ``every`` s (from the first publisher's batch until every
    batch is acknowledged); the ``age`` of each answer (seconds since its stable epoch ended)."""

    def __init__(self, token: str, box: str, keys: list[Any], every: float, delay: float = 0.0):
        self.token, self.box, self.keys, self.every, self.delay = token, box, keys, every, delay
        self.ages: list[float] = []
        self.latencies: list[float] = []  # seconds per read (leader's stable epoch, then the member's maps)
        self.epochs: list[int] = []
        self.began: float | None = None
        self.first: float | None = None  # seconds from the first read to the first stable epoch

    async def __call__(self, head: str) -> None:
        from boreas.client.query import QueryClient

        await asyncio.sleep(self.delay)
        async with QueryClient(head, self.token) as reader:
            self.began = time.perf_counter()
            while True:
                t0 = time.perf_counter()
                # waits (up to the client's moved_wait) while the box has no stable epoch yet
                result = await reader.query(self.box, keys=self.keys, stable=True)
                t1 = time.perf_counter()
                if self.first is None:
                    self.first = t1 - self.began
                self.ages.append(result.age or 0.0)
                self.latencies.append(t1 - t0)
                self.epochs.append(result.epoch)
                await asyncio.sleep(max(0.0, self.every - (time.perf_counter() - t0)))

    def summary(self, epoch_ms: int) -> dict[str, Any]:
        if not self.ages:  # a run too short for a stable epoch (the first takes a few epochs)
            return {"reads": 0, "epoch_ms": epoch_ms, "every_s": self.every, "target_epochs": AGE_TARGET,
                    "target_met": None, "max_under_target": None}
        per_epoch = [a * 1000 / epoch_ms for a in self.ages]
        return {"reads": len(self.ages), "epoch_ms": epoch_ms, "every_s": self.every,
                "p50_epochs": percentile(per_epoch, 50), "p95_epochs": percentile(per_epoch, 95),
                "max_epochs": max(per_epoch), "mean_epochs": statistics.fmean(per_epoch),
                "stable_epochs_seen": len(set(self.epochs)), "first_stable_s": self.first,
                "read_ms_p50": percentile(self.latencies, 50) * 1000, "read_ms_max": max(self.latencies) * 1000,
                "target_epochs": AGE_TARGET, "target_met": percentile(per_epoch, 95) < AGE_TARGET,
                "max_under_target": max(per_epoch) < AGE_TARGET}


def paced_rate(age_rate: float, saturated: float) -> int:
    """Rows/s of the paced phase: ``--age-rate`` itself, or that fraction of the saturating phase's rows/s.

    "Under load" is a box kept busy below what it can take: a fixed rate is a
    different share of the box on every machine (and on a busy one may be
    overload again), a fraction of the rows/s just measured is not.

    >>> paced_rate(20_000, 150_000), paced_rate(0.6, 150_000)
    (20000, 90000)
    """
    return int(age_rate if age_rate > 1 else age_rate * saturated)


async def paced_ages(args: argparse.Namespace, token: str, head: str, saturated: float, rows: list[list],
                     key: list[Any]) -> dict:
    """Lineitems (``rows`` again) into q3 at :func:`paced_rate` rows/s, by one producer per member, for
    ``--age-seconds``; the stable reads' ages meanwhile (from half a second in: an idle box's stable
    epoch is old).  ``saturated``: the rows/s the same box took from the saturating publishers."""
    from boreas.client.publisher import Publisher

    ages = StableAges(token, "q3", key, args.age_every, delay=0.5)
    pubs = [Publisher(head, "Lineitem", token, producer=p, batch_size=args.batch, capacity=args.window)
            for p in producers("Lineitem-paced", 2, 2)]
    for p in pubs:
        await p.start()
    rate = paced_rate(args.age_rate, saturated)
    interval = args.batch / (rate / len(pubs))
    behind = [0.0]

    async def stream(publisher: Publisher, offset: int) -> None:
        t0, i = time.perf_counter(), 0
        while (due := t0 + i * interval) < t0 + args.age_seconds:
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                behind[0] = max(behind[0], -delay)
            start = (offset + i * args.batch) % max(1, len(rows) - args.batch)
            await publisher.send(rows[start:start + args.batch])
            i += 1
        await publisher.flush(timeout=60.0)

    sampling = asyncio.create_task(ages(head))
    await asyncio.gather(*(stream(p, k * len(rows) // 2) for k, p in enumerate(pubs)))
    sampling.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await sampling
    for p in pubs:
        await p.close()
    return {**ages.summary(args.epoch_ms), "rate_rows_per_s": rate, "saturated_rows_per_s": saturated,
            "share_of_saturated": rate / saturated, "seconds": args.age_seconds,
            "publisher_behind_s": behind[0]}
