"""A deployment's part costs what it adds, not the catalog it lands in (issue 37), counted in process.

A part of new boxes checked against the index does per new box the same work
at 40 and at 400 boxes already in the catalog, and builds no list of a new
stream's producers (a stream with one producer has no problem to report; the
list is built only where a second producer makes one).  The diagnostics are
the whole check's (tests/test_incremental_validation.py's property test is the
general oracle).
"""

from __future__ import annotations

from collections import Counter

import pytest

from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog import index_derivation
from boreas.catalog.index import CatalogIndex
from boreas.catalog.validate import check_topology

APP = """<borealis><schema name="S"><field name="a" type="int"/><field name="b" type="double"/></schema>
  <input stream="in" schema="S"/>{boxes}</borealis>"""


def _boxes(first: int, n: int, upstream: str = "in") -> str:
    return "".join(f'<box name="b{i}" type="filter"><in stream="{upstream if i == first else f"s{i - 1}"}"/>'
                   f'<out stream="s{i}"/><parameter name="expression.0" value="a &gt; {i} and b &lt; {i}.5"/></box>'
                   for i in range(first, first + n))


def _catalog(n: int) -> Catalog:
    plan = plan_submission(Catalog(), [read_document(APP.format(boxes=_boxes(0, n)), "app.xml")])
    assert plan.ok, plan.problems
    return plan.catalog


@pytest.fixture()
def counted(monkeypatch) -> Counter:
    """Calls of the derivation's per-stream producer list and per-box typing."""
    calls: Counter = Counter()
    for name in ("producers_of", "type_box"):
        real = getattr(index_derivation, name)

        def wrapper(*args, _real=real, _name=name, **kwargs):
            calls[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(index_derivation, name, wrapper)
    return calls


def _part(before: Catalog, index: CatalogIndex, new: int, upstream: str):
    """The plan of ``new`` boxes submitted onto ``before``, checked by its ``index``."""
    text = f"<borealis>{_boxes(len(before.boxes), new, upstream)}</borealis>"
    return plan_submission(before, [read_document(text, "part.xml")], index=index)


def test_a_part_of_new_boxes_costs_the_same_at_40_and_400_boxes(counted):
    """20 new boxes: 20 typings and no producer list, at either size; the result is the whole check's."""
    seen = []
    for size in (40, 400):
        before = _catalog(size)
        index = CatalogIndex.build(before)
        counted.clear()
        plan = _part(before, index, 20, upstream=f"s{size - 1}")
        seen.append(dict(counted))  # (before the whole check, which lists every stream's producers)
        assert plan.ok and not plan.problems and not check_topology(plan.catalog).problems
        assert len(plan.catalog.boxes) == size + 20
    assert seen[0] == seen[1] == {"type_box": 20}


def test_a_second_producer_is_still_reported_as_the_whole_check_reports_it(counted):
    """A new box writing a stream a box already writes: the derive sends the change to the whole check, which
    reports it (the indexed plan's problems are the whole check's)."""
    before = _catalog(40)
    index = CatalogIndex.build(before)
    text = ('<borealis><box name="twin" type="filter"><in stream="in"/><out stream="s7"/>'
            '<parameter name="expression.0" value="a &gt; 1"/></box></borealis>')
    counted.clear()
    plan = plan_submission(before, [read_document(text, "twin.xml")], index=index)
    indexed = sorted(p.reason for p in plan.problems)
    assert indexed == sorted(p.reason for p in check_topology(plan.catalog).problems)
    assert any("has 2 producers" in reason for reason in indexed)
