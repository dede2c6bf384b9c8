"""Stage 1's execution code (m3/cumulus/member.py): the Router and MemberRuntime the nodes run.

The same property as ``test_local_plans_partition_exactly``, but through the
code a partitioned box really runs: the :class:`Router` sends each event,
whole, to the members that write one of its statements, each member applies
it with a :class:`MemberRuntime` (which drops what lands in slots it does not
own), and the members' maps union to exactly the single-node runtime's, with
every entry on its owner and the view changes of every batch naming owned
keys only.
"""

from __future__ import annotations

import math

import pytest
from boreas.m3 import Runtime
from boreas.m3.cumulus import classify, even_layout, home_slot, place, slot
from boreas.m3.cumulus.member import MemberRuntime, Router, mixed
from boreas.m3.cumulus.native_member import NativeMemberRuntime
from boreas.m3.cumulus.stable import EpochDeltas
from hypothesis import HealthCheck, given, settings
from m3_harness import scaled
from test_cumulus_plan import program
from test_cumulus_plan_exact import LOCAL_PROGRAMS, LOOPS, batches, layouts


#: The member runtimes: on the Python backend's journals, and on the native backend's C maps
MEMBER_RUNTIMES = {"python": MemberRuntime, "native": NativeMemberRuntime}


class Routed:
    def __init__(self, prog, layout, plan, runtime=MemberRuntime):
        self.prog, self.layout = prog, layout
        self.single = Runtime(prog)
        self.members = [runtime(prog, layout, m, plan) for m in range(len(layout.members))]
        if runtime is NativeMemberRuntime:
            assert all(rt.backend == "native" for rt in self.members)
        self.router = Router(plan, layout)
        self.epochs: list[dict] = []  # the single runtime's maps after each batch (an epoch each)

    def apply(self, events) -> None:
        self.single.apply_batch(events)
        self.epochs.append({mp.name: dict(self.single.store.items(mp.name)) for mp in self.prog.maps})
        for rt in self.members:
            rt.epoch = len(self.epochs) - 1
        groups: dict = {}
        for rel, sign, row in events:
            groups.setdefault((rel, sign), []).append(row)
        per_member: dict[int, list] = {}
        for (rel, sign), rows in groups.items():
            for m, share in self.router.route(rel, sign, rows).items():
                per_member.setdefault(m, []).append((rel, sign, share))
        for m, work in per_member.items():
            rt = self.members[m]
            rt.apply_grouped(work)
            for view, changed in rt.changes().items():
                first = self.prog.view(view).maps[0]
                for key, _ in changed:
                    assert self.layout.owner(first, key) == m, f"member {m} reported {view}{key}, owned by another"

    def check(self) -> None:
        for mp in self.prog.maps:
            union: dict = {}
            for m, rt in enumerate(self.members):
                for key, value in rt.store.items(mp.name):
                    assert self.layout.owner(mp.name, key) == m, f"{mp.name}{key} is on member {m}, owned by another"
                    union[key] = value
            single = dict(self.single.store.items(mp.name))
            assert union.keys() == single.keys(), mp.name
            for key, value in single.items():
                assert math.isclose(union[key], value, rel_tol=1e-9, abs_tol=1e-9), (mp.name, key)

    def check_stable(self) -> None:
        """Every member's maps at the end of every epoch (through its deltas) union to the single runtime's."""
        for epoch, maps in enumerate(self.epochs):
            for name, single in maps.items():
                union: dict = {}
                for rt in self.members:
                    union.update(rt.at_epoch(epoch).read_slice(name, *[None] * len(self.prog.map(name).keys)))
                assert union.keys() == single.keys(), (epoch, name)
                for key, value in single.items():
                    assert math.isclose(union[key], value, rel_tol=1e-9, abs_tol=1e-9), (epoch, name, key)


@pytest.mark.parametrize("backend", sorted(MEMBER_RUNTIMES))
@pytest.mark.parametrize("name", sorted(LOCAL_PROGRAMS))
def test_routed_members_equal_the_single_runtime(name, backend):
    text, key = LOCAL_PROGRAMS[name]
    prog = program(text)
    placement = place(prog, key=key, box=name)
    plan = classify(prog, placement.columns, box=name)
    relations = Runtime(prog).relations
    used = {t.relation for t in prog.triggers if t.statements}

    @settings(max_examples=scaled(25), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(layouts(name, [(m.map, m.column) for m in placement.maps]),
           batches({r: c for r, c in relations.items() if r in used}))
    def check(layout, workload):
        routed = Routed(prog, layout, plan, MEMBER_RUNTIMES[backend])
        for events in workload:
            routed.apply(events)
            routed.check()
        routed.check_stable()

    check()


@pytest.mark.parametrize("backend", sorted(MEMBER_RUNTIMES))
def test_mixed_triggers_are_the_ones_that_drop(backend):
    """LOOPS' +S writes q (loop over B), w and v (at A) and home maps: mixed; a member drops foreign writes."""
    prog = program(LOOPS)
    plan = classify(prog, place(prog, key="r.b").columns)
    assert {(t.relation, t.sign) for t in plan.triggers if mixed(t)} == {("S", 1), ("S", -1)}
    lay = even_layout("loops", ["a", "b", "c"], 6, maps=dict(plan.columns).items())
    routed = Routed(prog, lay, plan, MEMBER_RUNTIMES[backend])
    routed.apply([("R", 1, (a, b)) for a in range(5) for b in range(9)] + [("S", 1, (a, 2)) for a in range(5)])
    routed.check()
    routed.apply([("S", -1, (a, 2)) for a in range(3)] + [("R", -1, (1, b)) for b in range(4)])
    routed.check()
    routed.check_stable()
    assert sum(rt.store.size("t") for rt in routed.members) == 1  # the home map lives on one member only


def test_segment_entries_counts_each_entry_once():
    prog = program(LOOPS)
    plan = classify(prog, place(prog, key="r.b").columns)
    lay = even_layout("loops", ["a", "b"], 5, maps=dict(plan.columns).items())
    routed = Routed(prog, lay, plan)
    routed.apply([("R", 1, (a, b)) for a in range(7) for b in range(11)] + [("S", 1, (a, 1)) for a in range(7)])
    total = {m.name: 0 for m in prog.maps}
    for m, rt in enumerate(routed.members):
        counts = rt.segment_entries()
        assert all(lay.segments[[s.id for s in lay.segments].index(sid)].member == m for sid in counts)
        for per_map in counts.values():
            for name, n in per_map.items():
                total[name] += n
    assert total == {m.name: routed.single.store.size(m.name) for m in prog.maps}
    for m, rt in enumerate(routed.members):  # and each in its segment, counted naively
        naive: dict = {}
        for mp in prog.maps:
            col = lay.column(mp.name)
            for key, _ in rt.store.items(mp.name):
                s = lay.segment_of_slot(home_slot("loops") if col is None else slot(key[col])).id
                naive.setdefault(s, {}).setdefault(mp.name, 0)
                naive[s][mp.name] += 1
        assert {s: c for s, c in rt.segment_entries().items() if c} == naive


def test_column_counts_read_off_the_indexes_equal_counting_every_key():
    """``MapStore.column_counts`` (what ``segment_entries`` sums) at every key column of every map, whether
    the column is the primary index's, in the rest of an indexed key, or in an unindexed one."""
    from collections import Counter

    prog = program(LOOPS)
    plan = classify(prog, place(prog, key="r.b").columns)
    lay = even_layout("loops", ["a", "b"], 5, maps=dict(plan.columns).items())
    routed = Routed(prog, lay, plan)
    routed.apply([("R", 1, (a, b)) for a in range(7) for b in range(11)] + [("S", 1, (a, 1)) for a in range(7)])
    store = routed.single.store
    assert any(store.primary[m.name] for m in prog.maps)  # an indexed map is among them
    for mp in prog.maps:
        for column in range(len(mp.keys)):
            counted: Counter = Counter()
            for value, n in store.column_counts(mp.name, column):
                counted[value] += n
            assert counted == Counter(key[column] for key, _ in store.items(mp.name)), (mp.name, column)


KINDS = """
CREATE STREAM R(S STRING, D DATE, F FLOAT);
DECLARE MAP a[S: STRING] : INT; DECLARE MAP b[D: DATE] : INT; DECLARE MAP c[F: FLOAT] : INT;
DECLARE VIEW VA[S](n := a);
ON +R(S, D, F) DO { a[S] += 1; b[D] += 1; c[F] += 1 }
ON -R(S, D, F) DO { a[S] += -1; b[D] += -1; c[F] += -1 }
"""
"""Hand-written: a mixed trigger writing maps keyed by a STRING, a DATE and a FLOAT (each member drops the keys of
the other two maps it does not own: the native member hashes those key kinds over the C maps' codes)."""


@pytest.mark.parametrize("backend", sorted(MEMBER_RUNTIMES))
def test_members_drop_what_they_do_not_own_at_every_key_kind(backend):
    import datetime as dt

    prog = program(KINDS)
    plan = classify(prog, place(prog).columns)
    assert all(mixed(t) for t in plan.triggers)
    lay = even_layout("kinds", ["a", "b", "c"], 7, maps=dict(plan.columns).items())
    routed = Routed(prog, lay, plan, MEMBER_RUNTIMES[backend])
    rows = [(s, dt.date(1969, 12, 1) + dt.timedelta(days=d), f)
            for s in ("x", "ü", "", "BUILDING") for d in range(0, 60, 7) for f in (0.0, -0.0, 2.5, 3.0, -1e300)]
    routed.apply([("R", 1, row) for row in rows])
    routed.check()
    routed.apply([("R", -1, row) for row in rows[::3]])
    routed.check()
    routed.check_stable()


def test_a_native_member_whose_sum_outgrows_64_bits_carries_on_in_python():
    """A sum beyond int64 moves a native member to the Python backend for good; its maps, and its stable reads of
    the epochs it applied in C, stay exact."""
    prog = program("CREATE STREAM R(a INT, b INT); SELECT a, SUM(b) AS total FROM R GROUP BY a")
    plan = classify(prog, place(prog).columns)
    lay = even_layout("big", ["a", "b"], 4, maps=dict(plan.columns).items())
    routed = Routed(prog, lay, plan, NativeMemberRuntime)
    routed.apply([("R", 1, (a, a * 10)) for a in range(20)])
    routed.apply([("R", 1, (a, 2 ** 62)) for a in range(3)] * 2)
    assert {rt.backend for rt in routed.members} == {"native", "python"}  # (keys 0-2 are on one member)
    routed.apply([("R", -1, (a, a * 10)) for a in range(0, 20, 2)])
    routed.check()
    routed.check_stable()
    for rt in routed.members:  # a snapshot's deltas (those of the C epochs too) restore to the same stable reads
        again = EpochDeltas()
        again.restore(rt.deltas.state(lambda name, k: k), lambda name, k: k)
        for epoch in range(-1, 3):
            assert _summed(again.after(epoch, "Q1_total")) == _summed(rt.deltas.after(epoch, "Q1_total"))


def _summed(pairs) -> dict:
    """``(key, delta)`` pairs added up per key (the ones that sum to 0 left out)."""
    out: dict = {}
    for k, v in pairs:
        out[k] = out.get(k, 0) + v
    return {k: v for k, v in out.items() if v}
