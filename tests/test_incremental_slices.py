"""Incremental slicing (catalog/slice_index.py) gives exactly what slicing the whole catalog gives.

After each committed random edit (tests/support/catalog_edits.py), the
nodes :class:`NodeSlices` reports changed must be exactly the nodes whose
slice changed when every node is sliced from scratch
(``node_slices``, the oracle), each with the same slice, so the same
update XML goes to the same nodes; and no other node is sent anything.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest
from boreas.catalog import Catalog
from boreas.catalog.index import CatalogIndex
from boreas.catalog.model import Box, Input, InPort, Output, Publication, Subscription
from boreas.catalog.replicate import update_items
from boreas.catalog import node_slices as slices_owner
from boreas.catalog.layered import Layered
from boreas.catalog.node_slices import NodeSlices
from boreas.catalog.slices import node_slices
from boreas.catalog.updates import update_document
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.catalog_edits import BOX_EDITS, DEPLOY_EDITS, EDITS, NODES, Edit, _origin, chain, layered_everywhere


def _xml(old: Catalog | None, new: Catalog | None) -> str:
    """The update XML a node is sent to go from one slice to the other."""
    return update_document(update_items(old or Catalog(), new or Catalog()), version=1)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.booleans(), st.lists(EDITS, min_size=1, max_size=14))
def test_the_nodes_updated_and_their_update_xml_equal_full_slicing(from_chain: bool, edits: list[Edit]) -> None:
    _compare(from_chain, edits)


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.booleans(), st.lists(st.one_of(BOX_EDITS, DEPLOY_EDITS), min_size=1, max_size=14))
def test_slices_patched_after_placements_equal_full_slicing(from_chain: bool, edits: list[Edit]) -> None:
    """Boxes, moves, connects, publishes and subscribes: the changes whose slices are patched
    (``patch_slice``: only the streams they touch sliced again), not built whole."""
    _compare(from_chain, edits)


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.booleans(), st.lists(EDITS, min_size=1, max_size=14))
def test_slices_of_layered_catalogs_equal_full_slicing(from_chain: bool, edits: list[Edit]) -> None:
    """Every Catalog dict shared between versions as a ``Layered`` one (a Head's large catalog, and the
    slices patched from one another: ``update_items`` compares only what either version wrote)."""
    with layered_everywhere():
        _compare(from_chain, edits)


@st.composite
def view_reader(draw: st.DrawFn) -> Edit:
    """Box r0, r1 or r2 put on a node reading chain()'s view of its stream, or deleted: a box no other edit
    changes, so a node's slice patched for the edits after it must find the view among its other boxes
    (``refinish``'s look for a view held: with the slice's boxes a ``Layered``, it walked their names)."""
    name, stream, node = (draw(st.sampled_from(x)) for x in (["r0", "r1", "r2"], ["s0", "s1", "s2", "s3"], NODES))
    if draw(st.integers(0, 4)) == 0:
        return lambda c: c.boxes.pop(name, None)
    box = Box(name, "filter", (InPort(stream, f"w{stream[1:]}"),), (f"y{name[1:]}",), (("expression.0", "a > 1"),),
              node=node, origin=_origin())
    return lambda c: c.boxes.__setitem__(name, box)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(view_reader(), min_size=1, max_size=3),
       st.lists(st.one_of(view_reader(), BOX_EDITS, DEPLOY_EDITS), min_size=1, max_size=12))
def test_slices_of_layered_catalogs_with_view_readers_equal_full_slicing(readers: list[Edit],
                                                                          edits: list[Edit]) -> None:
    """The layered variant with boxes reading views first placed (``EDITS`` alone seldom leaves one on a
    node whose slice a later edit patches: its property test never took the look for a held view)."""
    with layered_everywhere():
        _compare(True, [*readers, *edits])


@st.composite
def deployment_part(draw: st.DrawFn) -> Edit:
    """One submission that adds many boxes at once, as a part of a deployment does (bench/catalog.py in
    ``--parts``): dozens of filters, each reading a stream already there (chain()'s, an earlier part's,
    or one this part adds) and writing a new one, on any node, some read on other nodes, some
    subscribed or declared outputs.  Every node gets more boxes than it held."""
    count = draw(st.integers(min_value=1, max_value=60))
    picks = draw(st.lists(st.tuples(st.integers(min_value=0, max_value=10**6), st.sampled_from(NODES),
                                    st.sampled_from(["", "", "", "sub", "out"])), min_size=count, max_size=count))

    def edit(c) -> None:
        readable = [s for s in ["s1", "s2", "s3"] if s in c.outputs or any(s in b.outputs for b in c.boxes.values())]
        first = len(c.boxes)
        for i, (pick, node, extra) in enumerate(picks):
            name, out = f"p{first + i}", f"t{first + i}"
            c.boxes[name] = Box(name, "filter", (InPort(readable[pick % len(readable)]),), (out,),
                                (("expression.0", "a > 1"),), node=node)
            readable.append(out)
            if extra == "sub":
                c.subscriptions[Subscription(out, "client:9000").key] = Subscription(out, "client:9000")
            elif extra == "out":
                c.outputs[out] = Output(out, "S")
    return edit


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(deployment_part(), min_size=1, max_size=4), st.lists(BOX_EDITS, max_size=3))
def test_slices_patched_after_many_boxes_in_one_part_equal_full_slicing(parts: list[Edit],
                                                                         edits: list[Edit]) -> None:
    """A part that adds many boxes to a node (``change_reach`` taking a stream the part adds from the
    boxes that name it, ``patch_slice`` knowing which of them are produced or read there): the
    slices patched after each part, and after small edits that follow, equal slicing everything."""
    _compare(True, [*parts, *edits])


class _Records(logging.Handler):
    """The records logged while attached (a patch that failed and fell back to slicing whole logs one)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _compare(from_chain: bool, edits: list[Edit]) -> None:
    """Every patch (none falling back to slicing whole: the fallback would hide a patch's defect) against
    slicing everything."""
    records = _Records()
    logger = logging.getLogger(slices_owner.__name__)
    logger.addHandler(records)
    try:
        _compare_slices(from_chain, edits)
    finally:
        logger.removeHandler(records)
    assert not records.records, [r.getMessage() for r in records.records]


def _compare_slices(from_chain: bool, edits: list[Edit]) -> None:
    index = CatalogIndex.build(chain() if from_chain else Catalog())
    slices = NodeSlices()
    slices.advance(index)
    full = node_slices(index.catalog)
    assert slices.slices == full
    for edit in edits:
        after = index.catalog.copy()
        edit(after)
        derived = index.derive(after)
        if not derived.ok:
            continue  # refused: nothing committed, nothing sent
        held = dict(slices.slices)
        changed = slices.advance(derived)
        full_after = node_slices(after)
        expected = {n for n in set(full) | set(full_after) if full.get(n) != full_after.get(n)}
        assert set(changed) == expected
        for node in expected:
            assert changed[node] == full_after.get(node)
            assert _xml(held.get(node), changed[node]) == _xml(full.get(node), full_after.get(node))
        assert slices.slices == full_after
        index, full = derived, full_after


@pytest.mark.parametrize("node", NODES)
def test_an_input_declared_and_published_in_one_commit_reaches_the_publishers_node(node: str) -> None:
    """A stream nothing named before, declared and published at once: the publication is the only thing that
    names the node where it enters (``change_reach``'s new-stream path; the generated edits commit one
    element at a time, so they never make this)."""
    def declare_and_publish(c) -> None:
        c.inputs["s4"] = Input("s4", "S", origin=_origin())
        pub = Publication("s4", node, origin=_origin())
        c.publications[pub.key] = pub

    _compare(True, [declare_and_publish])


def _many_boxes_and_a_view() -> Catalog:
    """chain() with box v0 on n0 reading view w1, and 600 filters p0..p599 on n0 reading s1: n0's slice holds
    more than ``model.LAYER_FROM`` boxes, so the slice patched from it holds them as a ``Layered``."""
    catalog = chain()
    catalog.boxes["v0"] = Box("v0", "filter", (InPort("s1", "w1"),), ("u0",), (("expression.0", "a > 1"),), node="n0")
    for i in range(600):
        catalog.boxes[f"p{i}"] = Box(f"p{i}", "filter", (InPort("s1"),), (f"t{i}",), (("expression.0", "a > 1"),),
                                     node="n0")
    return catalog


def _change_p5(c: Catalog) -> None:
    c.boxes["p5"] = replace(c.boxes["p5"], params=(("expression.0", "b > 1.5"),))


def test_a_patched_slice_of_many_boxes_keeps_the_view_a_box_not_changed_reads(caplog) -> None:
    """At the default thresholds: n0's slice, patched after p5 changed, looks for view w1 among its other
    boxes, a ``Layered`` there (``_views`` took only a dict for a mapping and walked its names: raised on
    every patch), and equals slicing everything; so does the change after it."""
    index = CatalogIndex.build(_many_boxes_and_a_view())
    slices = NodeSlices()
    slices.advance(index)
    for expression in ["b > 1.5", "a > 1"]:
        after = index.catalog.copy()
        after.boxes["p5"] = replace(after.boxes["p5"], params=(("expression.0", expression),))
        derived = index.derive(after)
        assert derived.ok
        changed = slices.advance(derived)
        assert isinstance(slices.slices["n0"].boxes, Layered)
        assert set(changed) == {"n0"} and "w1" in changed["n0"].views
        assert slices.slices == node_slices(after)
        index = derived
    assert "slicing it whole" not in caplog.text  # (patched, not the fallback)


def test_a_failed_patch_slices_the_node_whole_and_leaves_no_slice_stale(monkeypatch, caplog) -> None:
    """A patch that raises (a defect) is logged and the node sliced whole; every node's slice is what slicing
    everything gives, this change and the next."""
    index = CatalogIndex.build(_many_boxes_and_a_view())
    slices = NodeSlices()
    slices.advance(index)

    def broken(*args, **kwargs):
        raise RuntimeError("a defect in patching")

    monkeypatch.setattr(slices_owner, "patch_slice", broken)
    after = index.catalog.copy()
    _change_p5(after)
    derived = index.derive(after)
    with caplog.at_level(logging.ERROR, logger=slices_owner.__name__):
        changed = slices.advance(derived)
    assert "slicing it whole" in caplog.text
    assert set(changed) == {"n0"} and slices.slices == node_slices(after)
    monkeypatch.undo()
    later = derived.catalog.copy()
    later.boxes["b1"] = replace(later.boxes["b1"], node="n0")
    changed = slices.advance(derived.derive(later))
    full, full_later = node_slices(after), node_slices(later)
    assert slices.slices == full_later and set(changed) == {n for n in full if full[n] != full_later.get(n)}


def test_an_advance_that_raises_leaves_the_slices_as_they_were_and_the_next_slices_whole(monkeypatch) -> None:
    """Nothing is written until every node is sliced: an advance that raises part way leaves the previous
    version's slices and index, so the next advance (whose index is not a child of it) slices every node
    whole and reports every node whose slice differs from what it last reported (the Head's retry,
    ``head/service.py`` ``_install``, takes ``whole=True``)."""
    index = CatalogIndex.build(chain())
    slices = NodeSlices()
    slices.advance(index)
    held = dict(slices.slices)
    after = index.catalog.copy()
    for i, node in enumerate(["n0", "n1", "n2"]):
        after.boxes[f"q{i}"] = Box(f"q{i}", "filter", (InPort("s0"),), (f"r{i}",), (("expression.0", "a > 1"),),
                                   node=node)
    derived = index.derive(after)
    real = slices_owner.SliceMaker.slice

    def fails_on_n2(self, node, ledger=None):
        if node == "n2":
            raise RuntimeError("a defect in slicing")
        return real(self, node, ledger)

    monkeypatch.setattr(slices_owner.SliceMaker, "slice", fails_on_n2)
    monkeypatch.setattr(slices_owner, "patchable", lambda *args: False)  # (slice, not patch, each node)
    with pytest.raises(RuntimeError):
        slices.advance(derived)
    assert slices.slices == held and slices.index is index
    monkeypatch.undo()
    changed = slices.advance(derived, whole=True)
    assert set(changed) == {"n0", "n1", "n2"} and slices.slices == node_slices(after)


_APP = """<borealis><schema name="R"><field name="a" type="int"/></schema><input stream="in" schema="R"/>
  <box name="f" type="filter"><in stream="in"/><out stream="mid"/><parameter name="expression.0" value="a &gt; 1"/>
  </box><box name="g" type="filter"><in stream="mid"/><out stream="out"/>
  <parameter name="expression.0" value="a &gt; 2"/></box><output stream="out"/></borealis>"""


async def test_a_head_whose_slicing_raises_slices_whole_and_hands_every_node_its_slice(tmp_path, caplog) -> None:
    """``HeadService._install``: an advance that raises (a defect) is logged and done again whole, so every
    node's desired slice is what slicing the committed catalog gives; it left the Head's catalog and
    index moved on and the nodes it had not reached stale, for good."""
    from boreas.catalog import read_document
    from boreas.head.service import HeadService

    nodes = ["localhost:15001", "localhost:15002"]
    head = HeadService(f"sqlite:///{tmp_path}/c.db", token=None, snapshot_interval=0, nodes=nodes)
    await head.start("127.0.0.1", 0)
    try:
        first = await head.submit([read_document(_APP, "app.xml"), read_document(
            '<deploy><node endpoint="localhost:15001" query="f"/><node endpoint="localhost:15001" query="g"/>'
            '<node endpoint="localhost:15002"/>'
            '</deploy>', "dep.xml")])
        await head.caught_up(first.version)
        advance = head.slices.advance

        def fails_unless_whole(index, whole=False):
            if not whole:
                raise RuntimeError("a defect in slicing by the change")
            return advance(index, whole=whole)

        head.slices.advance = fails_unless_whole  # type: ignore[method-assign]
        with caplog.at_level(logging.ERROR, logger="boreas.head.service"):
            moved = await head.submit([read_document('<deploy><move box="g" node="localhost:15002"/></deploy>',
                                                     "move.xml")])
            await head.caught_up(moved.version)
        full = node_slices(head.catalog)
        assert head.catalog.boxes["g"].node == "localhost:15002"
        assert {n: s.desired for n, s in head.syncs.items()} == {n: full.get(n, Catalog()) for n in head.syncs}
        assert "slicing every node whole" in caplog.text
    finally:
        await head.close()
