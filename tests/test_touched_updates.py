"""A commit's update items for global feeds, and the web UI's changes, computed from what it wrote.

The Head follows each commit with the keys it wrote (``commit_touched``) and
compares only those (``update_items(before, after, touched)``,
``changes_json(..., touched)``, ``UiIndex.changed(..., touched)``), so a
one-box commit costs one box, not the catalog.  The oracle is the whole
compare: after random edits (tests/support/catalog_edits.py), each named as
a store's commit names its changes (``diff`` -> a :class:`Commit`; checked
or not: the compare does not care), the items a global component is sent,
the changes a browser is sent and the UI's index must be exactly what
comparing everything gives.
"""

from __future__ import annotations

import pytest
from boreas.catalog import Catalog
from boreas.catalog.elements import KIND_TO_DICT, commit_touched, diff
from boreas.catalog.replicate import update_items
from boreas.catalog.store.base import Commit
from boreas.head.ui.feed import changes_json
from boreas.head.ui.index import UiIndex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.catalog_edits import BOX_EDITS, DEPLOY_EDITS, EDITS, Edit, chain


def _index_state(index: UiIndex) -> tuple:
    """What the UI answers from: the overview and the maps behind searches and graphs."""
    return (index.overview(), {k: sorted(v) for k, v in index.node_boxes.items() if v},
            {k: sorted(v) for k, v in index.producers.items() if v},
            {k: sorted(v) for k, v in index.consumers.items() if v},
            {k: sorted(v) for k, v in index.box_queries.items() if v})


def _follow(from_chain: bool, edits: list[Edit]) -> None:
    before = chain() if from_chain else Catalog()
    ui = UiIndex(before)
    for edit in edits:
        edited = before.copy()
        edit(edited)
        commit = Commit(before.version + 1, tuple(diff(before, edited)))
        after, touched = edited, commit_touched(commit)  # (what ``apply_commit`` decodes, equal)
        items = update_items(before, after, touched)
        assert items == update_items(before, after)
        assert changes_json(before, after, touched) == sorted(
            changes_json(before, after), key=lambda i: (list(KIND_TO_DICT).index(i["kind"]), i["key"]))
        ui.changed(before, after, touched)
        assert _index_state(ui) == _index_state(UiIndex(after))
        before = after


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.booleans(), st.lists(st.one_of(BOX_EDITS, DEPLOY_EDITS), min_size=1, max_size=14))
def test_items_from_a_commits_keys_equal_the_whole_compare_for_boxes_and_placements(
        from_chain: bool, edits: list[Edit]) -> None:
    _follow(from_chain, edits)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.booleans(), st.lists(EDITS, min_size=1, max_size=10))
def test_items_from_a_commits_keys_equal_the_whole_compare_for_every_edit(from_chain: bool, edits: list[Edit]) -> None:
    _follow(from_chain, edits)


def test_a_key_the_commit_did_not_name_is_not_compared() -> None:
    """The keys are where to look: what a commit did not write is not sent (nor searched for)."""
    before = chain()
    after = before.copy()
    name = sorted(after.boxes)[0]
    del after.boxes[name]
    assert [i.box for i in update_items(before, after)] == [name]
    assert update_items(before, after, {"boxes": set()}) == []
    assert [i.box for i in update_items(before, after, {"boxes": {name, "no such box"}})] == [name]
