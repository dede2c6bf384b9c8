"""Incremental validation (catalog/index.py) gives exactly what checking the whole catalog gives.

Random sequences of submissions, moves, connects, disconnects and deletes
(tests/support/catalog_edits.py) are checked both ways after every edit:
the index derived from the previous committed version, and
``check_topology`` over the whole catalog (the oracle).  An edit whose
catalog is valid is committed (the next edit is checked against its
index); one that is not is refused, as a submission would be.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from boreas.catalog import Catalog, index_derivation, plan_submission, read_document
from boreas.catalog.index import CatalogIndex
from boreas.catalog.model import Field, FieldType, Schema
from boreas.catalog.schemas_of import schemas_of
from boreas.catalog.validate import Checks, check_topology
from support.catalog_edits import EDITS, Edit, chain, layered_everywhere
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.slow
@SETTINGS
@given(st.booleans(), st.lists(EDITS, min_size=1, max_size=14))
def test_incremental_check_equals_the_whole_check(from_chain: bool, edits: list[Edit]) -> None:
    _check_both_ways(from_chain, edits)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.booleans(), st.lists(EDITS, min_size=1, max_size=14))
def test_incremental_check_of_layered_catalogs_equals_the_whole_check(from_chain: bool, edits: list[Edit]) -> None:
    """Every Catalog dict shared between versions as a ``Layered`` one, as a Head's large catalog is."""
    with layered_everywhere():
        _check_both_ways(from_chain, edits)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.booleans(), st.lists(EDITS, min_size=1, max_size=14))
def test_incremental_check_of_bulk_changes_equals_the_whole_check(from_chain: bool, edits: list[Edit]) -> None:
    """Every change derived as a bulk one (a deployment's part: the new index's dicts plain copies, not
    Layered versions), and the index derived from left as it was."""
    was = index_derivation.BULK_WRITES
    index_derivation.BULK_WRITES = -1_000_000
    try:
        _check_both_ways(from_chain, edits, unchanged=True)
    finally:
        index_derivation.BULK_WRITES = was


def _check_both_ways(from_chain: bool, edits: list[Edit], unchanged: bool = False) -> None:
    index = CatalogIndex.build(chain() if from_chain else Catalog())
    for edit in edits:
        after = index.catalog.copy()
        edit(after)
        held = [dict(getattr(index, name)) for name in ("refs", "states", "typings", "stream_schemas")]
        derived = index.derive(after)
        assert Counter(map(str, derived.problems)) == Counter(map(str, check_topology(after).problems))
        if unchanged:
            assert held == [dict(getattr(index, name)) for name in ("refs", "states", "typings", "stream_schemas")]
        if derived.ok:
            assert derived.stream_schemas == schemas_of(after)
            index = derived


def _reads_t(catalog, box, schemas) -> list[str]:
    """A plugged-in box check: a box reading a stream of schema T (it depends on its in schemas)."""
    return [f"box {box.name!r} reads T"] if any(s is not None and s.name == "T" for s in schemas) else []


def _narrow(catalog, stream, schema) -> list[str]:
    """A plugged-in stream check: a stream of one field."""
    return [f"stream {stream!r} has one field"] if len(schema.fields) == 1 else []


def _unplaced_sinks(catalog, fail) -> None:
    """A plugged-in whole-catalog check: a box whose out streams nothing reads nor subscribes to, unplaced."""
    read = {p.stream for b in catalog.boxes.values() for p in b.inputs} | {s.stream for s in
                                                                         catalog.subscriptions.values()}
    for box in catalog.boxes.values():
        if box.node is None and not read & set(box.outputs):
            fail(box.origin, f"box {box.name!r} is an unplaced sink")


PLUGGED = Checks(boxes=(_reads_t,), streams=(_narrow,), whole=(_unplaced_sinks,))


@pytest.mark.slow
@SETTINGS
@given(st.lists(EDITS, min_size=1, max_size=14))
def test_plugged_in_checks_run_again_where_a_change_reaches(edits: list[Edit]) -> None:
    """Checks other parts plug in (validate.Checks) give the same both ways too."""
    index = CatalogIndex.build(chain(), checks=PLUGGED)
    assert index.ok
    for edit in edits:
        after = index.catalog.copy()
        edit(after)
        derived = index.derive(after)
        assert Counter(map(str, derived.problems)) == Counter(map(str, check_topology(after, checks=PLUGGED).problems))
        if derived.ok:
            index = derived


@pytest.mark.slow
@SETTINGS
@given(st.lists(EDITS, min_size=1, max_size=10), st.lists(EDITS, min_size=1, max_size=4))
def test_an_index_built_whole_equals_one_derived_edit_by_edit(first: list[Edit], then: list[Edit]) -> None:
    """Whatever path led to a catalog, its index checks the next change the same."""
    index = CatalogIndex.build(chain())
    for edit in first:
        after = index.catalog.copy()
        edit(after)
        derived = index.derive(after)
        if derived.ok:
            index = derived
    rebuilt = CatalogIndex.build(index.catalog)
    assert (rebuilt.states, rebuilt.stream_schemas, rebuilt.refs) == (index.states, index.stream_schemas, index.refs)
    after = index.catalog.copy()
    for edit in then:
        edit(after)
    assert Counter(map(str, index.derive(after).problems)) == Counter(map(str, rebuilt.derive(after).problems))


APP = """<borealis><input stream="R" schema="S"/><schema name="S"><field name="a" type="int"/></schema>
  <box name="f" type="filter"><in stream="R"/><out stream="F"/><parameter name="expression.0" value="a &gt; 1"/>
  </box><output stream="F"/></borealis>"""
DEP = '<deploy><node endpoint="localhost:15000" query="f"/></deploy>'


def test_a_submission_planned_on_an_index_is_refused_for_the_same_reasons() -> None:
    base = plan_submission(Catalog(), [read_document(APP, "app.xml"), read_document(DEP, "dep.xml")]).catalog
    index = CatalogIndex.build(base)
    bad = read_document("""<borealis><box name="g" type="map"><in stream="R"/><out stream="G"/>
      <parameter name="expression.0" value="b + 1"/><parameter name="output-field-name.0" value="m"/></box>
      <box name="h" type="filter"><in stream="Nowhere"/><out stream="F"/>
      <parameter name="expression.0" value="a &gt;"/></box></borealis>""", "bad.xml")
    whole = plan_submission(base, [bad, read_document(DEP.replace("query=\"f\"", "query=\"g h\""), "d.xml")])
    indexed = plan_submission(base, [bad, read_document(DEP.replace("query=\"f\"", "query=\"g h\""), "d.xml")],
                              index=index)
    assert whole.problems and Counter(map(str, indexed.problems)) == Counter(map(str, whole.problems))
    assert any("unknown field 'b'" in p.reason for p in indexed.problems)
    assert any("2 producers" in p.reason for p in indexed.problems)


def test_a_plugged_in_box_check_runs_again_for_the_boxes_whose_in_schema_moved() -> None:
    """Declaring the chain's input with another schema reaches every box downstream, unchanged as they are."""
    index = CatalogIndex.build(chain(), checks=PLUGGED)
    after = index.catalog.copy()
    after.schemas["T"] = Schema("T", (Field("a", FieldType.INT), Field("b", FieldType.DOUBLE)))
    after.inputs["s0"] = replace(after.inputs["s0"], schema="T")
    derived = index.derive(after)
    assert Counter(map(str, derived.problems)) == Counter(map(str, check_topology(after, checks=PLUGGED).problems))
    assert sorted(p.reason for p in derived.problems) == ["box 'b0' reads T", "box 'b1' reads T", "box 'b2' reads T"]


def test_a_committed_submission_read_back_is_checked_once_with_the_same_result(tmp_path) -> None:
    """A Head checks a submission on its index, commits it, then derives its index for the catalog decoded
    from its own commit: the same index as checking that catalog afresh, without typing its boxes again."""
    from boreas.catalog import open_store
    from boreas.catalog.elements import apply_commit, commit_touched
    from boreas.catalog.submission import apply_submission

    base = chain()
    index = CatalogIndex.build(base)
    app = read_document('<borealis><box name="g" type="filter"><in stream="s0"/><out stream="g_out"/>'
                        '<parameter name="expression.0" value="a &gt; 2"/></box></borealis>', "g.xml")
    with open_store(f"sqlite:///{tmp_path}/c.db") as store:
        applied = apply_submission(store, [app], base=base, index=index)
    committed = apply_commit(base, applied.commit)
    again = index.derive(committed, commit_touched(applied.commit))
    fresh = CatalogIndex.build(base).derive(committed, commit_touched(applied.commit))
    assert again.catalog is committed and again.ok and fresh.ok
    assert again.stream_schemas == fresh.stream_schemas == schemas_of(committed)
    assert again.refs == fresh.refs and again.states == fresh.states
    assert again.typings["g"] is index.derive(applied.after).typings["g"]  # typed once, when planned
