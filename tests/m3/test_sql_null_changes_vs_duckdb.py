"""A view's changes over nullable columns, folded batch by batch, are DuckDB's view (issue 33 item 2, issue 34).

Why a module of its own: the NULL tests compare ``view()``; a box's changelog and every subscriber are built
from ``changes()`` instead, so a row that goes from NULL to a value, back, or leaves while NULL must be told
there too.  ``changes()`` says a row left by :data:`boreas.m3.nullable.GONE` in a view with NULL values: there a
row in the view may read all zeros (a SUM of 0, a COUNT(b) of a group of NULLs), so 0 cannot mean "left" (docs/m3.md
"NULLs").  Half the values drawn are NULL over a few values, inserts and deletes, grouped and not, SUM, MIN, MAX,
AVG and COUNT of nullable columns, both backends.
"""

from __future__ import annotations

import pytest
from boreas.m3 import Runtime
from boreas.m3.nullable import GONE
from m3_harness import shape_params
from null_harness import NullKeyHarness, check_rows_against_duckdb

NULLABLE = "CREATE STREAM R(a INT, b INT NULL, c FLOAT NULL);\n"

SHAPES: dict[str, str] = {
    "max_grouped": NULLABLE + "SELECT a, MAX(b) AS m FROM R GROUP BY a",
    "sum_grouped": NULLABLE + "SELECT a, SUM(b) AS s FROM R GROUP BY a",
    "min_and_count_grouped": NULLABLE + "SELECT a, MIN(c) AS lo, COUNT(b) AS n FROM R GROUP BY a",
    "avg_and_sum_grouped": NULLABLE + "SELECT a, AVG(b) AS v, SUM(c) AS s FROM R GROUP BY a",
    "every_aggregate_grouped": NULLABLE + """SELECT a, SUM(b) AS s, MIN(b) AS lo, MAX(c) AS hi, AVG(c) AS v,
        COUNT(b) AS n FROM R GROUP BY a""",
    "max_ungrouped": NULLABLE + "SELECT MAX(b) AS m FROM R",
    "sum_and_count_ungrouped": NULLABLE + "SELECT SUM(b) AS s, COUNT(c) AS n FROM R",
    "min_and_avg_ungrouped": NULLABLE + "SELECT MIN(b) AS lo, AVG(c) AS v FROM R",
}


def fold(into: dict, changes: list) -> None:
    """One batch's ``changes()`` of a view with NULL values folded into its rows so far: GONE removes a row, any
    other value (None, 0 and all-zero tuples included) is the row's value now."""
    for key, value in changes:
        if value is GONE:
            into.pop(key, None)
        else:
            into[key] = value


class Folded:
    """A runtime whose ``view()`` is the rows its ``changes()`` built, batch by batch (maps read as they are)."""

    def __init__(self, rt: Runtime, rows: dict[str, dict]):
        self.rt, self.rows = rt, rows

    def view(self, name: str) -> dict:
        return dict(self.rows[name])

    def __getattr__(self, name: str):
        return getattr(self.rt, name)


class ChangesHarness(NullKeyHarness):
    """:class:`NullKeyHarness` comparing the view a reader of ``changes()`` holds (and ``view()`` too) with
    DuckDB's after every batch."""

    def run(self, batches, **kw):
        self.rows: dict[str, dict] = {v.name: {} for v in self.program.views}
        self.runtime_seen = None
        return super().run(batches, **kw)

    def compare(self, rt: Runtime, con, live, check_maps: bool) -> None:
        if self.runtime_seen is not rt:  # (a new runtime: read whole, its changes folded from here)
            self.runtime_seen = rt
            self.rows = {v.name: dict(rt.view(v.name)) for v in self.program.views}
        else:
            for name, changed in rt.changes().items():
                fold(self.rows[name], changed)
        for v in self.program.views:
            assert self.rows[v.name] == rt.view(v.name), v.name
        super().compare(Folded(rt, self.rows), con, live, check_maps)


@pytest.mark.parametrize("shape", shape_params(SHAPES))
def test_view_matches_duckdb(shape, m3_backend):
    check_rows_against_duckdb(SHAPES[shape], examples=25, harness=ChangesHarness)


@pytest.mark.parametrize("backend", ["python", "native"])
def test_a_group_from_null_to_a_value_and_back_and_gone_is_told_each_time(backend):
    """The concrete case: a group's MAX is NULL, then 5, then NULL, then the group leaves; and the one row of a
    view without GROUP BY is always there (SQL: MAX over no rows, or over NULLs only, is NULL): it changes to 5
    and back, and never leaves."""
    rt = Runtime(NULLABLE + "SELECT a, MAX(b) AS m FROM R GROUP BY a; SELECT MAX(b) AS m FROM R", backend=backend)
    seen = []
    for sign, row in [(1, (1, None, None)), (1, (1, 5, None)), (-1, (1, 5, None)), (-1, (1, None, None))]:
        rt.apply_batch([("R", sign, row)])
        seen.append({name: rows for name, rows in rt.changes().items()})
    assert seen == [{"Q1": [((1,), None)]}, {"Q1": [((1,), 5)], "Q2": [((), 5)]},
                    {"Q1": [((1,), None)], "Q2": [((), None)]}, {"Q1": [((1,), GONE)]}]
    assert seen[-1]["Q1"][0][1] is GONE and rt.view("Q2") == {(): None}
