"""A partitioned ``m3`` box fed Arrow columns and changelogs, in process (node/cumulus/columnar.py).

Batches reach the coordinators as :class:`~boreas.wire.columns.Columns`: some
plain (the sign field says insert or delete), some changelogs whose weights
say it (-1: the row leaves; a weight of 2 counts the row twice), mixed with
batches of rows on the same ports.  Coordinators route columns by the
vectorised slot hash and send each member its rows as Arrow IPC; messages
are delivered in random order, members restart from their states (held
columns among them) and layouts change.  Once settled the members' maps
equal the single runtime's over the same events, and the members' changelog
out streams add up to what a one-node ``m3`` box, fed the very same batches,
emits.
"""

from __future__ import annotations

import random
import sys
from collections import Counter
from pathlib import Path

import pytest
from boreas.m3 import compile_sql
from boreas.m3.cumulus import place
from boreas.node.cumulus import precopy
from boreas.node.operators.m3box import M3Operator, micros_of
from boreas.wire.columns import Columns, weighted
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent / "m3"))
sys.path.insert(0, str(Path(__file__).parent))
from support.cumulus_sim import Sim  # noqa: E402
from test_cumulus_sim import check_changelog, layouts, run_and_check, workloads  # noqa: E402
from test_views_vs_duckdb import SHAPES  # noqa: E402


class ColumnsSim(Sim):
    """A :class:`Sim` whose publishers send most batches as Arrow columns, some of them as changelogs, and a
    one-node box beside the partition fed the same batches."""

    def __init__(self, sql, layout, rng):
        super().__init__(sql, layout, rng)
        inputs, outputs, _ = self.built_from
        self.one_node = M3Operator(self.box, inputs, outputs)
        self.one_node_folded: dict[int, Counter] = {}

    def publish(self, member, relation, events, batch=None):
        schema = self.built_from[0][self.port_of[relation]]
        style = self.rng.choice(["rows", "columns", "changelog", "changelog"])
        if style == "changelog" and events and self.rng.random() < 0.3:
            events = [*events, events[-1]]  # the last event twice: one row of weight 2 (or -2)
        rows = [tuple(micros_of(v) if hasattr(v, "toordinal") else v for v in row) for _, row in events]
        if style == "rows":
            sent = [row + (sign,) for row, (sign, _) in zip(rows, events)]
        elif style == "columns":
            sent = Columns(weighted([row + (sign,) for row, (sign, _) in zip(rows, events)], [1] * len(rows), schema).batch)
        else:  # the sign field says insert, the weight says whether the row enters or leaves
            weights = [sign for sign, _ in events]
            if len(rows) >= 2 and rows[-1] == rows[-2] and weights[-1] == weights[-2]:
                rows, weights = rows[:-1], [*weights[:-2], 2 * weights[-1]]
            sent = weighted([row + (1,) for row in rows], weights, schema)
        super().publish(member, relation, events, sent)
        for port, out in self.one_node.process(self.port_of[relation], sent, self.now):
            folded = self.one_node_folded.setdefault(port, Counter())
            for row, weight in zip(out.rows(), out.weight_list()):
                folded[row] += weight


def _nonzero(folded: dict[int, Counter]) -> dict[int, dict]:
    """The net rows per port; a port whose rows all cancelled (one side sent +r then -r, the other nothing) is
    no port: what a subscriber ends up holding is the same."""
    return {port: rows for port, c in folded.items() if (rows := {row: n for row, n in c.items() if n})}


SHAPES_HERE = ["group_by_join_key", *(pytest.param(s, marks=pytest.mark.slow) for s in ("two_way", "avg", "tpch_q3"))]


@pytest.mark.parametrize("shape", SHAPES_HERE)
def test_columns_and_changelogs_through_a_partition_equal_a_one_node_box(shape, monkeypatch):
    monkeypatch.setattr(precopy, "COPY_STEP", 2)
    program = compile_sql(SHAPES[shape])
    placement = place(program, box="v")
    relations = {r.name: tuple((c.name, c.type) for c in r.columns) for r in program.relations
                 if any(t.relation == r.name for t in program.triggers)}

    # (no shrinking: a simulated cluster's failing example takes minutes to shrink; the example is printed whole)
    @settings(max_examples=12, deadline=None, phases=(Phase.explicit, Phase.reuse, Phase.generate),
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(layouts([(m.map, m.column) for m in placement.maps]), workloads(relations), st.randoms(use_true_random=False))
    def check(layout, workload, rng):
        sim = ColumnsSim(SHAPES[shape], layout, random.Random(rng.random()))
        run_and_check(sim, workload, rng, relayouts=True)
        check_changelog(sim)
        assert _nonzero(sim.folded) == _nonzero(sim.one_node_folded)

    check()


def test_a_changelog_revision_moves_a_key_between_members():
    """-old/+new of one row whose key changes: the old key's member takes it away, the new key's adds it."""
    from boreas.m3.cumulus import SLOTS, Layout, Segment, slot

    sql = "CREATE STREAM R(a INT, b INT); SELECT a, SUM(b) AS s FROM R GROUP BY a"
    maps = tuple((m.map, m.column) for m in place(compile_sql(sql), box="v").maps)
    layout = Layout("v", ("n0:15000", "n1:15001"), (Segment(0, 0, SLOTS // 2, 0), Segment(1, SLOTS // 2, SLOTS, 1)), maps)
    a, b = next(k for k in range(100) if slot(k) < SLOTS // 2), next(k for k in range(100) if slot(k) >= SLOTS // 2)
    sim = Sim(sql, layout, random.Random(1))
    schema = sim.built_from[0][0]
    sim.publish(0, "R", [(1, (a, 5))], Columns(weighted([(a, 5, 1)], [1], schema).batch))
    sim.settle()
    revision = weighted([(a, 5, 1), (b, 5, 1)], [-1, 1], schema)  # the row's key was a, is b now
    sim.publish(1, "R", [(-1, (a, 5)), (1, (b, 5))], revision)
    sim.settle()
    assert dict(sim.members[0].runtime.store.items("Q1_s")).get((a,), 0) == 0
    assert dict(sim.members[1].runtime.store.items("Q1_s")) == {(b,): 5}
    check_changelog(sim)
