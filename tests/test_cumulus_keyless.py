"""An aggregate without GROUP BY in a partitioned ``m3`` box (Cumulus; sqlO's ``ALWAYS`` views, docs/m3.md "Rows").

A map without keys is kept whole on its home segment, so only one member holds the query's row; the others must
show none.  Followed as a bag, the members' changelogs give DuckDB's one row while R has rows, and nothing (never
a row at weight -1) while it is empty: a partitioned box's keyless view has no row while empty, as before sqlO.  The
query API's reads of every member, merged as a client merges them, give the same row.
"""

from __future__ import annotations

import random
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from boreas.client.partitioned_merge import combine
from boreas.m3 import compile_sql
from boreas.m3.cumulus import SLOTS, Layout, Segment, place
from boreas.node.cumulus.part import PartOperator
from boreas.node.query import read, resolve

sys.path.insert(0, str(Path(__file__).parent))
from support.cumulus_sim import Sim  # noqa: E402
from support.duck import answer  # noqa: E402

QUERIES = ["SELECT COUNT(*) AS n FROM R", "SELECT COUNT(*) AS n, SUM(b) AS s FROM R"]
#: (member publishing, sign, row): inserts on both members, then every row deleted, then one more
STEPS = [(0, 1, (1, 2)), (1, 1, (2, 3)), (0, -1, (1, 2)), (1, -1, (2, 3)), (1, 1, (5, -4))]


def duck(rows: list[tuple], query: str) -> Counter:
    return answer(rows, query, "a BIGINT, b BIGINT")


def sim_on(backend: str, query: str) -> Sim:
    """Two members, each owning half the slots; every member's box asks for ``backend``."""
    sql = f"CREATE STREAM R(a INT, b INT); {query}"
    maps = tuple((m.map, m.column) for m in place(compile_sql(sql), box="v").maps)
    layout = Layout("v", ("n0:15000", "n1:15001"), (Segment(0, 0, SLOTS // 2, 0), Segment(1, SLOTS // 2, SLOTS, 1)),
                    maps)
    sim = Sim(sql, layout, random.Random(0))
    inputs, outputs, partition = sim.built_from
    sim.box = replace(sim.box, params=(*sim.box.params, ("backend", backend)))
    sim.members = [PartOperator(sim.box, inputs, outputs, partition, node) for node in layout.members]
    return sim


@pytest.mark.parametrize("query", QUERIES)
@pytest.mark.parametrize("backend", ["python", "native"])
def test_a_partitioned_keyless_view_has_one_row_while_it_reads_rows(backend, query):
    if backend == "native":
        from support.native import skip_without_native

        skip_without_native()
    sim = sim_on(backend, query)
    assert {op.backend for op in sim.members} == {backend}
    live: list[tuple] = []
    for step, (member, sign, row) in enumerate(STEPS):
        sim.publish(member, "R", [(sign, row)])
        sim.settle()
        live = live + [row] if sign == 1 else [r for r in live if r != row]
        want = duck(live, query) if live else Counter()  # (no row while empty: the documented limit)
        folded = sim.folded.get(0, Counter())
        assert all(n >= 0 for n in folded.values()), (step, folded)
        assert Counter({r: n for r, n in folded.items() if n}) == want, step
        answers = [read(op, resolve(op, None), "slice", (), False, partial=True)[1] for op in sim.members]
        rows = Counter(v if isinstance(v, tuple) else (v,) for answer in answers for _, v in answer)
        assert rows == want, step
        parts = [read(op, resolve(op, None), "sum", (), False, partial=True)[1][0][1] for op in sim.members]
        row = next(iter(want), None)
        assert combine("sum", parts) == (0 if row is None else row[0] if len(row) == 1 else list(row)), step
