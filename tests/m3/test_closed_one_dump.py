"""A closing reads its closed entries and deletes them with one dump of each windowed map on the native backend
(m3/runtime/native/backend.py keeps the codes ``items_at_most`` read until the maps change), and deletes what is
closed at the time of the deletion however the maps changed since the read."""

from __future__ import annotations

import random

import pytest

from boreas.m3 import Runtime

WINDOWED = """CREATE STREAM bid(auction INT, price INT, window_start INT, window_end INT);
SELECT window_start, window_end, MAX(price) AS top, COUNT(*) AS n FROM bid GROUP BY window_start, window_end"""


class CountingLib:
    """The C library, its ``rt_dump`` calls counted."""

    def __init__(self, lib):
        self.lib, self.dumps = lib, 0

    def __getattr__(self, name):
        if name == "rt_dump":
            self.dumps += 1
        return getattr(self.lib, name)


def windowed(seed: int) -> tuple[Runtime, dict[str, int], CountingLib]:
    rt = Runtime(WINDOWED, backend="native")
    rnd = random.Random(seed)
    for _ in range(3):
        rt.apply_grouped([("bid", 1, [(rnd.randrange(6), rnd.randrange(1, 50), w, w + 10)
                                      for w in (rnd.choice((0, 10, 20, 30)) for _ in range(30))])])
    ends = {m.name: [k.name for k in m.keys].index("WINDOW_END") for m in rt.program.maps
            if "WINDOW_END" in [k.name for k in m.keys]}
    native = rt.native_maps()
    assert native is not None and ends
    native.lib = counting = CountingLib(native.lib)
    return rt, ends, counting


def left(rt: Runtime, ends: dict[str, int]) -> dict[str, dict]:
    return {name: rt.entries_at_most(name, at, float("inf")) for name, at in ends.items()}


@pytest.mark.parametrize("seed", [1, 2])
def test_read_then_removed_with_one_dump_per_map(seed):
    rt, ends, counting = windowed(seed)
    everything = left(rt, ends)
    counting.dumps = 0
    closed = {name: rt.entries_at_most(name, at, 20) for name, at in ends.items()}
    gone = rt.remove_at_most({name: (at, 20) for name, at in ends.items()})
    assert counting.dumps == len(ends)  # two per map without the kept codes
    assert gone == sum(map(len, closed.values())) > 0
    assert left(rt, ends) == {name: {k: v for k, v in entries.items() if k[ends[name]] > 20}
                              for name, entries in everything.items()}


def test_entries_written_after_the_read_are_removed_too():
    """A batch between the read and the deletion (a closed window written again) makes the read's codes stale:
    the deletion dumps the map again and removes every entry closed then."""
    rt, ends, counting = windowed(3)
    for name, at in ends.items():
        rt.entries_at_most(name, at, 20)
    rt.apply_grouped([("bid", 1, [(7, 99, 0, 10), (8, 98, 30, 40)])])  # a new auction in window 0-10
    counting.dumps = 0
    rt.remove_at_most({name: (at, 20) for name, at in ends.items()})
    assert counting.dumps == len(ends)
    assert all(k[ends[name]] > 20 for name, entries in left(rt, ends).items() for k in entries)
    assert rt.view("Q1") and all(k[1] > 20 for k in rt.view("Q1"))


def test_another_bound_or_map_removed_is_read_again():
    """The kept codes serve only the same map and bound: a wider bound dumps again; removing one map leaves the
    other maps' kept codes good (its entries untouched)."""
    rt, ends, counting = windowed(4)
    names = sorted(ends)
    closed = {name: rt.entries_at_most(name, ends[name], 10) for name in names}
    counting.dumps = 0
    rt.remove_at_most({names[0]: (ends[names[0]], 30)})
    assert counting.dumps == 1
    if len(names) > 1:
        counting.dumps = 0
        assert rt.remove_at_most({names[1]: (ends[names[1]], 10)}) == len(closed[names[1]])
        assert counting.dumps == 0
    now = left(rt, ends)
    assert all(k[ends[names[0]]] > 30 for k in now[names[0]])
    assert all(k[ends[name]] > 10 for name in names[1:] for k in now[name])
