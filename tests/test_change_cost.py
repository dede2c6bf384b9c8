"""A change costs what it touches (issue 37): the mechanisms, each against the plain way it replaces.

* ``catalog/layered.py``: a version written over a shared base reads as a
  dict written the same way, and the versions before it do not change;
* ``catalog/reach.py``: ``closes_cycle`` says what a depth-first search over
  the whole graph says;
* ``elements.diff`` by the keys a merge wrote gives the whole compare's changes;
* a derivation types the changed boxes alone when no schema moves past them
  (the whole-check oracle is tests/test_incremental_validation.py's);
* a disconnect finds its filter and sink by the index, as the walk did.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace

import pytest

from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.elements import KIND_TO_DICT, apply_changes, diff
from boreas.catalog.index import CatalogIndex
from boreas.catalog.index_derivation import Derivation
from boreas.catalog.layered import Layered, LayeredSet
from boreas.catalog.model import Box, Field, FieldType, Input, InPort, Schema
from boreas.catalog.reach import closes_cycle
from boreas.catalog.replicate import update_items
from boreas.catalog.tracked import CATALOG_DICTS, tracked_copy, untracked
from boreas.catalog.validate import check_topology
from boreas.head.learning import disconnect_changes, stream_boxes
from hypothesis import given, settings
from hypothesis import strategies as st
from support.catalog_edits import layered_everywhere
from support.property_scale import SETTINGS, examples

# (keys up to 300 and long runs, so a version's own entries pass the fold bound, 64 + isqrt(base), and
# ``Layered.over`` flattens: both paths are read back against the model)
_OPS = st.lists(st.tuples(st.sampled_from(["set", "set", "del", "pop", "next"]), st.integers(0, 300), st.integers()),
                max_size=300)


@settings(max_examples=examples(200), **SETTINGS)
@given(st.dictionaries(st.integers(0, 300), st.integers(), max_size=10), _OPS)
def test_a_layered_version_reads_as_a_dict_and_leaves_the_versions_before_it_alone(start, ops):
    current, model = Layered.over(dict(start)), dict(start)
    versions = [(current, dict(model))]
    for op, key, value in ops:
        if op == "next":  # (a new version over the last; the last is never written again)
            current = Layered.over(current)
            versions.append((current, dict(model)))
        elif op == "set":
            current[key] = value
            model[key] = value
        elif op == "pop":  # (Layered's own pop: a missing key answers the default without an exception)
            assert current.pop(key, "none") == model.pop(key, "none")
        elif key in model:
            del current[key]
            del model[key]
        else:
            with pytest.raises(KeyError):
                current.pop(key)
        versions[-1] = (current, dict(model))
        assert dict(current) == model and len(current) == len(model) and sorted(current) == sorted(model)
        assert all(current.get(k, "none") == model.get(k, "none") and (k in current) == (k in model)
                   for k in range(13))
    for version, seen in versions:
        assert dict(version) == seen and version.flat() == seen
        assert list(version.flat()) == list(version)  # (folded, in the order a walk reads: base, then new)


@settings(max_examples=examples(200), **SETTINGS)
@given(st.frozensets(st.integers(0, 80), max_size=60),
       st.lists(st.tuples(st.frozensets(st.integers(0, 80), max_size=8), st.frozensets(st.integers(0, 80), max_size=8)),
                max_size=40))
def test_a_layered_set_reads_as_the_frozenset_and_leaves_the_versions_before_it_alone(start, moves):
    """``LayeredSet.moved`` (a reference set changed by a few elements) is ``(old - removed) | added``,
    across folds (the delta passes 64 + isqrt(base) within 40 moves of up to 16), and never changes ``old``."""
    with layered_everywhere():
        current, model = start, set(start)
        versions = [(current, frozenset(model))]
        for removed, added in moves:
            current = LayeredSet.moved(current, removed, added)
            model = (model - removed) | added
            versions.append((current, frozenset(model)))
            assert len(current) == len(model) and all((i in current) == (i in model) for i in range(82))
        for version, seen in versions:
            assert set(version) == seen and version == seen and seen == version


@settings(max_examples=examples(100), **SETTINGS)
@given(st.frozensets(st.integers(0, 80), max_size=60),
       st.lists(st.tuples(st.frozensets(st.integers(0, 80), max_size=8), st.frozensets(st.integers(0, 80), max_size=8)),
                min_size=1, max_size=6),
       st.frozensets(st.integers(0, 80), max_size=10))
def test_a_layered_set_is_a_drop_in_frozenset(start, moves, other):
    """Operators either side, hashing and the named methods give what the equal frozenset gives (``Set``'s
    mixins built their result with ``cls(iterable)``, which a LayeredSet does not take: a TypeError)."""
    with layered_everywhere():
        current = start
        for removed, added in moves:
            current = LayeredSet.moved(current, removed, added)
    plain = frozenset(current)
    for got, want in [(current - other, plain - other), (current | other, plain | other),
                      (current & other, plain & other), (current ^ other, plain ^ other),
                      (other - current, other - plain), (other | current, other | plain),
                      (other & current, other & plain), (other ^ current, other ^ plain),
                      (current.union(other, {1}), plain.union(other, {1})),
                      (current.intersection(other), plain.intersection(other)),
                      (current.difference(other, {2}), plain.difference(other, {2})),
                      (current.symmetric_difference(other), plain.symmetric_difference(other))]:
        assert got == want and type(got) is frozenset
    assert hash(current) == hash(plain) and {current: 1}[plain] == 1 and plain in {current}
    assert current.issubset(plain | other) and current.issuperset(plain & other)
    assert current.isdisjoint(other) == plain.isdisjoint(other)


def test_a_layered_set_over_a_small_change_takes_frozenset_operators():
    """The reviewer's case: each of these raised TypeError (or the method was missing)."""
    with layered_everywhere():
        v = LayeredSet.moved(frozenset({1, 2, 3}), {3}, {4})
    assert isinstance(v, LayeredSet)
    assert v - {1} == frozenset({2, 4}) and v | {1} == frozenset({1, 2, 4}) and v & {1} == frozenset({1})
    assert frozenset({1, 2}) - v == frozenset() and v.union({9}) == frozenset({1, 2, 4, 9})
    assert hash(v) == hash(frozenset({1, 2, 4}))


def test_a_layered_versions_views_are_live_before_its_first_write():
    """A view taken while the version has written nothing sees the writes after (as a dict's does): it was
    the base dict's view, which no write reaches."""
    v = Layered.over({"a": 1, "b": 2})
    keys, items, values = v.keys(), v.items(), v.values()
    v["c"] = 3
    del v["a"]
    assert "c" in keys and "a" not in keys and len(keys) == 2 and sorted(keys) == ["b", "c"]
    assert ("c", 3) in items and ("a", 1) not in items and sorted(items) == [("b", 2), ("c", 3)]
    assert sorted(values) == [2, 3] and 1 not in values
    w = Layered.over(v)  # (a version over one that wrote: its views, likewise)
    k = w.keys()
    w["d"] = 4
    assert "d" in k and keys == {"b", "c"}


def _dfs_cycle(catalog: Catalog, seeds: set[str]) -> bool:
    """The plain way: a seed reaches itself, by a depth-first search from it over every box."""
    def reads(name: str) -> list[str]:
        outs = set(catalog.boxes[name].outputs)
        return [b.name for b in catalog.boxes.values() if outs & {p.stream for p in b.inputs}]

    for seed in seeds:
        stack, seen = list(reads(seed)), set()
        while stack:
            name = stack.pop()
            if name == seed:
                return True
            if name not in seen:
                seen.add(name)
                stack.extend(reads(name))
    return False


@settings(max_examples=examples(300), **SETTINGS)
@given(st.lists(st.tuples(st.lists(st.integers(0, 6), min_size=1, max_size=2),
                          st.lists(st.integers(0, 6), min_size=1, max_size=2)), min_size=1, max_size=7),
       st.sets(st.integers(0, 6), min_size=1, max_size=3))
def test_closes_cycle_says_what_a_search_over_every_box_says(boxes, seeds):
    catalog = Catalog()
    for i, (ins, outs) in enumerate(boxes):
        catalog.boxes[f"b{i}"] = Box(f"b{i}", "filter", tuple(InPort(f"s{s}") for s in ins),
                                     tuple(dict.fromkeys(f"s{s}" for s in outs)))
    names = {f"b{i}" for i in seeds if i < len(boxes)} or {"b0"}

    def readers(stream: str) -> list[str]:
        return [b.name for b in catalog.boxes.values() if stream in {p.stream for p in b.inputs}]

    def producers(stream: str) -> list[str]:
        return [b.name for b in catalog.boxes.values() if stream in b.outputs]

    assert closes_cycle(catalog, names, readers, producers) == _dfs_cycle(catalog, names)


APP = """<borealis><schema name="S"><field name="a" type="int"/><field name="b" type="double"/></schema>
  <input stream="in" schema="S"/>{boxes}</borealis>"""


def _chain(n: int) -> Catalog:
    boxes = "".join(f'<box name="b{i}" type="filter"><in stream="{"in" if i == 0 else f"s{i - 1}"}"/>'
                    f'<out stream="s{i}"/><parameter name="expression.0" value="a &gt; {i}"/></box>'
                    for i in range(n))
    plan = plan_submission(Catalog(), [read_document(APP.format(boxes=boxes), "app.xml")])
    assert plan.ok, plan.problems
    return plan.catalog


@settings(max_examples=examples(60), **SETTINGS)
@given(st.integers(1, 12), st.sampled_from(["filter", "map", "delete", "rename", "loop"]), st.integers(0, 11),
       st.booleans())
def test_a_diff_by_the_keys_a_merge_wrote_is_the_whole_compare(n, what, at, layered):
    """(``layered``: every Catalog dict shared between versions, the merge's copy a ``TrackedLayered``.)"""
    with layered_everywhere() if layered else contextlib.nullcontext():
        _diff_both_ways(n, what, at)


def _diff_both_ways(n: int, what: str, at: int) -> None:
    before = _chain(n)
    at = min(at, n - 1)
    if what == "delete":
        text = f'<borealis><delete box="b{n - 1}"/></borealis>'
    elif what == "loop":  # a cycle: refused, but planned all the same
        text = f'<borealis><box name="b{at}" type="filter"><in stream="s{n - 1}"/><out stream="s{at}"/>' \
               '<parameter name="expression.0" value="a &gt; 0"/></box></borealis>'
    else:
        kind = "map" if what == "map" else "filter"
        param = '<parameter name="expression.0" value="a"/><parameter name="output-field-name.0" value="a"/>' \
            if kind == "map" else '<parameter name="expression.0" value="b &gt; 0.5"/>'
        name = f"x{at}" if what != "rename" else f"b{at}"
        text = f'<borealis><box name="{name}" type="{kind}"><in stream="s{at}"/><out stream="y{at}"/>' \
               f'{param}</box><input stream="more" schema="S"/></borealis>'
    plan = plan_submission(before, [read_document(text, "change.xml")], index=CatalogIndex.build(before))
    assert plan.touched is not None
    by_key = diff(before, plan.catalog, plan.touched)
    whole = diff(before, plan.catalog)
    # (the same changes; existing keys changed come in name order by the keys, in the catalog's by the whole)
    assert sorted(by_key, key=repr) == sorted(whole, key=repr)
    assert _new_keys(before, by_key) == _new_keys(before, whole)  # (new keys in the catalog's order both ways)
    assert _contents(apply_changes(before, by_key, 2)) == _contents(apply_changes(before, whole, 2))


def _new_keys(before: Catalog, changes) -> list[tuple[str, str]]:
    return [(c.kind, c.key) for c in changes if c.key not in getattr(before, KIND_TO_DICT[c.kind][0])]


def _contents(catalog: Catalog) -> list:
    """Every element dict's items in order: what a follower applying the changes holds."""
    return [(attr, list(getattr(catalog, attr).items())) for attr, _ in KIND_TO_DICT.values()]


def test_a_connect_types_the_new_filter_and_its_sink_not_the_chain_after_them(monkeypatch):
    """A filter before the 2nd of 40 boxes, its schema the same: only it and its sink are typed again; a map
    that changes the schema instead reaches every box after it.  Each time the same as the whole check."""
    walks: list[set[str]] = []
    downstream = Derivation._downstream

    def counted(self, seeds):
        region = downstream(self, seeds)
        walks.append(region)
        return region

    monkeypatch.setattr(Derivation, "_downstream", counted)
    before = _chain(40)
    index = CatalogIndex.build(before)
    walks.clear()
    for kind, params, reached in (("filter", (("expression.0", "a > 3"),), False),
                                  ("map", (("expression.0", "a"), ("output-field-name.0", "z")), True)):
        after = before.copy()
        after.boxes["ins"] = Box("ins", kind, (InPort("s0"),), ("ins_out",), params)
        after.boxes["b1"] = before.boxes["b1"].rewired(0, "ins_out")
        derived = index.derive(after, {"boxes": {"ins", "b1"}})
        assert [str(p) for p in derived.problems] == [str(p) for p in check_topology(after).problems]
        assert bool(walks) == reached and (not reached or len(walks[-1]) == 40)
        walks.clear()


def test_a_disconnect_finds_the_filter_and_its_sink_by_the_index():
    before = _chain(5)
    after = before.copy()
    after.boxes["ins"] = Box("ins", "filter", (InPort("s1"),), ("ins_out",), (("expression.0", "a > 3"),))
    after.boxes["b2"] = before.boxes["b2"].rewired(0, "ins_out")
    index = CatalogIndex.build(after)
    assert stream_boxes(after, "ins_out", index) == stream_boxes(after, "ins_out", None) == (
        [after.boxes["ins"]], [after.boxes["b2"]])
    by_index, walked = set(), set()
    changes = disconnect_changes(after, "ins_out", by_index, index)
    assert changes == disconnect_changes(after, "ins_out", walked, None) and by_index == walked
    assert [(c.kind, c.key, c.text is None) for c in changes] == [("box", "ins", True), ("box", "b2", False)]


def test_a_schema_equal_input_added_is_a_diff_of_that_input():
    before = _chain(3)
    after = before.copy()
    after.inputs["more"] = Input("more", "S")
    after.schemas["T"] = Schema("T", (Field("a", FieldType.INT),))
    touched = {"inputs": {"more"}, "schemas": {"T"}}
    assert diff(before, after, touched) == diff(before, after) and len(diff(before, after, touched)) == 2


CHANGELOG_APP = """<borealis>
  <schema name="S"><field name="k" type="int"/><field name="v" type="int"/></schema>
  <input stream="R" schema="S"/>
  <box name="view" type="m3"><in stream="R"/><out stream="V"/>
    <parameter name="sql" value="CREATE STREAM r(k INT, v INT);&#10;SELECT k, SUM(v) AS v FROM r GROUP BY k"/></box>
  <box name="big" type="filter"><in stream="V"/><out stream="F"/><parameter name="expression.0" value="v &gt; 1"/></box>
  <box name="d" type="delay"><in stream="F"/><out stream="D"/><parameter name="delay-ms" value="5"/></box>
</borealis>"""


def test_an_index_refuses_what_reads_a_changelog_whichever_came_first():
    """The changelog check is skipped while no box makes a changelog (the references name them): the box
    refused for reading one is refused whether it or the m3 box came first, as the whole check refuses it."""
    from boreas.m3.boxtype import box_types

    registry = box_types()
    whole = plan_submission(Catalog(), [read_document(CHANGELOG_APP, "app.xml")], registry).catalog
    expected = [p.reason for p in check_topology(whole, registry).problems]
    assert len(expected) == 1 and "delay box 'd' cannot read stream 'F'" in expected[0]
    reader_last = whole.copy()
    del reader_last.boxes["d"]
    maker_last = whole.copy()
    maker_last.boxes["view"] = Box("view", "filter", (InPort("R"),), ("V",), (("expression.0", "v > 0"),))
    for first in (reader_last, maker_last):
        index = CatalogIndex.build(first, registry)
        assert index.ok, index.problems
        assert [p.reason for p in index.derive(whole).problems] == expected


@pytest.mark.parametrize("layered", [False, True])
def test_a_deployment_planned_on_an_index_refuses_every_unplaced_box_as_the_walk_does(layered):
    """A deployment needs every box placed: by an index, the base's unplaced boxes (its references) and the
    submission's own are looked at, and refused as the walk over every box refuses them (``layered``: the
    merge's copy a ``TrackedLayered``, whose written keys are looked at as a ``TrackedDict``'s)."""
    with layered_everywhere() if layered else contextlib.nullcontext():
        _refuses_unplaced()


def _refuses_unplaced() -> None:
    before = _chain(4)  # (submitted without a deployment: no box placed)
    index = CatalogIndex.build(before)
    assert sorted(index.unplaced_boxes()) == ["b0", "b1", "b2", "b3"]
    placed = '<deploy><node endpoint="n:1" query="b0 b1 x"/></deploy>'
    extra = '<borealis><box name="x" type="filter"><in stream="s3"/><out stream="x_t"/>' \
            '<parameter name="expression.0" value="a &gt; 0"/></box><box name="y" type="filter"><in stream="s3"/>' \
            '<out stream="y_t"/><parameter name="expression.0" value="a &gt; 0"/></box></borealis>'
    docs = [read_document(extra, "extra.xml"), read_document(placed, "deploy.xml")]
    walked = plan_submission(before, docs)
    indexed = plan_submission(before, docs, index=index)
    reasons = sorted(p.reason for p in indexed.problems)
    assert reasons == sorted(p.reason for p in walked.problems)
    assert [r.split("'")[1] for r in reasons if "is not placed on any node" in r] == ["b2", "b3", "y"]


def test_a_large_catalog_copy_shares_its_dicts_and_neither_side_sees_the_others_writes():
    """``Catalog.copy`` of a dict of ``LAYER_FROM`` entries or more: both catalogs hold a ``Layered``
    version over the one base (no copy of it), each written without the other seeing it; the copy's
    update items against the original compare only what either wrote, and give what comparing all gives."""
    with layered_everywhere():
        first = _plain(_chain(30))
        plain = first.boxes
        assert type(plain) is dict
        second = first.copy()
        assert isinstance(first.boxes, Layered) and isinstance(second.boxes, Layered)
        assert first.boxes.written_since(second.boxes) == set()
        moved = replace(second.boxes["b3"], node="n:1")
        second.boxes["b3"] = moved
        del second.boxes["b4"]
        first.boxes["b5"] = replace(first.boxes["b5"], node="n:2")
        assert first.boxes["b3"].node is None and "b4" in first.boxes and second.boxes["b5"].node is None
        assert plain["b3"].node is None and "b4" in plain and plain["b5"].node is None  # (the base: never written)
        assert first.boxes.written_since(second.boxes) == {"b3", "b4", "b5"}
        assert dict(second.boxes) == {k: v for k, v in {**plain, "b3": moved}.items() if k != "b4"}
        assert update_items(first, second) == update_items(_plain(first), _plain(second))
        assert first != second and first.copy() == first
        tracked = tracked_copy(second)
        tracked.boxes["b6"] = replace(tracked.boxes["b6"], node="n:3")
        tracked.boxes.pop("b7")
        plain_again, touched = untracked(tracked)
        assert touched["boxes"] == {"b6", "b7"} and second.boxes["b6"].node is None and "b7" in second.boxes
        assert list(reversed(plain_again.boxes))[:2] == list(reversed(list(plain_again.boxes)))[:2]


def _plain(catalog: Catalog) -> Catalog:
    """The catalog with plain dicts (what comparing all compares)."""
    return Catalog(catalog.version, **{k: dict(getattr(catalog, k)) for k in CATALOG_DICTS})
