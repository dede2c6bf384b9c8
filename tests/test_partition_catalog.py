"""``<partition>`` in the catalog (issue 13 stage 1, docs/cumulus.md §2): XSD, codec, validation with file,
line and element, planning on commit, growth by resubmission, export → apply (update XML, the Head's
``/boxes`` and the stores: :mod:`test_partition_updates`)."""

from __future__ import annotations

import pytest
from boreas.catalog import (
    Catalog,
    ValidationFailed,
    apply_submission,
    open_store,
    plan_submission,
    read_document,
)
from boreas.catalog.boxtypes import BoxType, builtin_registry, infer_filter
from boreas.catalog.elements import catalog_from_elements, to_elements
from boreas.catalog.export import describe_partition, export_application, export_deployment, summary
from boreas.catalog.partition_model import Partition, SegmentPlacement
from boreas.catalog.slices import SliceMaker, stream_route
from boreas.catalog.validate import partition_problems
from boreas.catalog.xmlcodec import decode, to_text
from boreas.m3.boxtype import box_types
from boreas.schemas import xsd_errors
from lxml import etree
from support.partition_docs import GROUP_BY, JOIN, MEMBERS, NODES, PARTITION, app, committed, deploy, plan, refused


# -- XSD ------------------------------------------------------------------------------


def _xsd(text: str) -> list[str]:
    return [p.reason for p in xsd_errors(etree.fromstring(text))]


def test_the_deployment_and_catalog_forms_pass_the_xsd():
    assert _xsd(deploy(PARTITION)) == []
    catalog_form = ('<partition box="v" layout="1" epoch-ms="100" id="7f3a9c01d2e4" key="a">'
                    '<node endpoint="localhost:15001" member="0"/><map name="Q1_total" key="A" position="0"/>'
                    '<map name="home"/><segment id="0" slots="0 4096" member="0"/></partition>')
    assert _xsd(f"<deploy>{catalog_form}</deploy>") == []
    assert _xsd(f'<update version="3">{catalog_form}<delete partition="v"/></update>') == []


@pytest.mark.parametrize("text,word", [
    ('<borealis><partition box="v"/></borealis>', "<partition>"),
    ('<borealis><delete partition="v"/></borealis>', "'partition'"),
    ('<deploy><partition/></deploy>', "'box'"),
    ('<deploy><partition box="v"><bogus/></partition></deploy>', "<bogus>"),
    ('<deploy><partition box="v"><node endpoint=":1" query="q"/></partition></deploy>', "'query'"),
    ('<deploy><partition box="v" segments="many"/></deploy>', "segments"),
    ('<deploy><partition box="v"><segment id="0" member="0"/></partition></deploy>', "'slots'"),
    ('<deploy><partition box="v"><map key="A"/></partition></deploy>', "'name'"),
])
def test_the_xsd_refuses_partitions_where_they_do_not_belong(text, word):
    reasons = _xsd(text)
    assert reasons and any(word in r for r in reasons), reasons


# -- codec and store ------------------------------------------------------------------


def test_the_catalog_form_round_trips_through_xml_and_the_store():
    part = Partition("v", NODES, (SegmentPlacement(0, 0, 2048, 0), SegmentPlacement(1, 2048, 4096, 2)), 2, "a",
                     (("Q1_total", "a"),), (("Q1_total", "A", 0), ("home", None, None)), 3, 250, "abc123")
    text = to_text(part)
    assert ('<map name="Q1_total" key="A" position="0"/>' in text and '<map name="home"/>' in text
            and '<map name="Q1_total" key="a"/>' in text and 'slots="2048 4096"' in text)
    assert decode(etree.fromstring(text)) == part
    catalog = Catalog(partitions={"v": part})
    assert to_elements(catalog) == {("partition", "v"): text}
    assert catalog_from_elements(to_elements(catalog)) == catalog


def test_members_are_ordered_by_their_member_number():
    text = ('<deploy><partition box="v"><node endpoint=":15002" member="1"/><node endpoint=":15001" member="0"/>'
            '</partition></deploy>')
    (part,) = read_document(text, "d.xml").partitions
    assert part.nodes == ("localhost:15001", "localhost:15002")
    with pytest.raises(ValidationFailed) as info:
        read_document(text.replace('member="0"', 'member="5"'), "d.xml")
    assert "numbers the members 0 to 1, each once" in str(info.value)


def test_bad_slots_are_named_at_their_segment():
    text = deploy('<partition box="v">\n<node endpoint=":1"/>\n<segment id="2" slots="0-512" member="0"/></partition>')
    with pytest.raises(ValidationFailed) as info:
        read_document(text, "d.xml")
    (d,) = info.value.diagnostics
    assert d.line == 5 and d.path.endswith("/partition/segment")
    assert "segment 2 of box 'v': slots='0-512'" in d.reason


def test_positions_in_a_partition_resolve_like_other_nodes():
    members = '<node endpoint="#1"/><node endpoint="#2"/>'
    result = plan(app(), deploy(f'<partition box="v">{members}</partition>', '<node endpoint="#1" query="f"/>'))
    assert result.ok, result.problems
    assert result.catalog.partitions["v"].nodes == ("localhost:15001", "localhost:15002")


# -- planning on commit ---------------------------------------------------------------


def test_a_group_by_is_planned_into_eight_segments_dealt_round_robin():
    result = plan(app(), deploy(PARTITION))
    assert result.ok, result.problems
    part = result.catalog.partitions["v"]
    assert part.nodes == NODES and part.count == 8 and part.key == "a" and part.pins == (("Q1_total", "A"),)
    assert part.maps == (("Q1_total", "A", 0), ("Q1_n", "A", 0))
    assert [(s.id, s.lo, s.hi, s.member) for s in part.segments] == [
        (i, 512 * i, 512 * (i + 1), i % 3) for i in range(8)]
    assert part.layout == 1 and len(part.id) == 12 and part.planned
    # Members are declared nodes; the box runs on no one node.
    assert set(NODES) <= set(result.catalog.nodes) and result.catalog.boxes["v"].node is None
    assert result.catalog.placement("v") == NODES
    # Each plan is a fresh incarnation.
    assert plan(app(), deploy(PARTITION)).catalog.partitions["v"].id != part.id


def test_segments_default_to_one_per_member_and_home_maps_have_no_column():
    sql = "SELECT SUM(b) AS total FROM R"
    result = plan(app(sql), deploy(f'<partition box="v">{MEMBERS}</partition>'))
    assert result.ok, result.problems
    part = result.catalog.partitions["v"]
    # (the keyless SUM's hidden count of rows, for SQL's NULL over no rows, is a home map too)
    assert len(part.segments) == 3 and part.maps == (("Q1_total", None, None), ("Q1_total__null", None, None))


def test_a_plan_with_a_cross_segment_read_is_planned_too():
    result = plan(app(JOIN), deploy(f'<partition box="v" segments="8">{MEMBERS}</partition>'))
    assert result.ok, result.problems
    part = result.catalog.partitions["v"]
    assert len(part.segments) == 8 and part.layout == 1 and {name for name, _, _ in part.maps} == {"Q1_sum_1", "m1", "m2"}


@pytest.mark.parametrize("partition,expected", [
    (f'<partition box="v" key="zz">{MEMBERS}</partition>',
     "key 'zz' is not a column of any relation of box 'v' (R: a, b)"),
    (f'<partition box="v">{MEMBERS}<map name="m9" key="A"/></partition>',
     "box 'v' has no map 'm9' (maps: Q1_total, Q1_n)"),
    (f'<partition box="v">{MEMBERS}<map name="Q1_total" key="X"/></partition>',
     "map 'Q1_total' has no key 'X' (keys: A)"),
])
def test_key_and_pin_mistakes_are_named(partition, expected):
    assert refused(app(), deploy(partition)) == [expected]


def test_keys_and_pins_ignore_case():
    result = plan(app(), deploy(f'<partition box="v" key="R.A">{MEMBERS}<map name="Q1_n" key="a"/></partition>'))
    assert result.ok, result.problems


def test_an_explicit_layout_is_kept_not_planned_again():
    segments = ('<segment id="0" slots="0 1000" member="2"/><segment id="1" slots="1000 4096" member="0"/>'
                '<map name="Q1_total" key="A" position="0"/><map name="Q1_n" key="A" position="0"/>')
    result = plan(app(), deploy(f'<partition box="v" layout="4" id="feedbeef0000">{MEMBERS}{segments}</partition>'))
    assert result.ok, result.problems
    part = result.catalog.partitions["v"]
    assert part.layout == 4 and part.id == "feedbeef0000"
    assert part.segments == (SegmentPlacement(0, 0, 1000, 2), SegmentPlacement(1, 1000, 4096, 0))


def test_a_type_without_the_hook_cannot_be_partitioned_and_the_registry_is_passed():
    plain = builtin_registry([BoxType("m3", infer_filter)])  # an m3 type that plans no partitions
    docs = [read_document(app().replace('type="m3"', 'type="filter"').replace(
        f'name="sql" value="{GROUP_BY}"', 'name="expression.0" value="a &gt; 0"'), "app.xml"),
        read_document(deploy(PARTITION), "dep.xml")]
    result = plan_submission(Catalog(), docs, plain)
    assert [p.reason for p in result.problems] == ["box 'v' is a filter box; only m3 boxes can be partitioned"]


# -- validation: every rule, located ------------------------------------------------


@pytest.mark.parametrize("partition,node,expected", [
    (f'<partition box="x">{MEMBERS}</partition>', "f v", "partition names unknown box 'x'"),
    (f'<partition box="f">{MEMBERS}</partition>', "v", "box 'f' is a filter box; only m3 boxes can be partitioned"),
])
def test_the_box_of_a_partition(partition, node, expected):
    assert refused(app(), deploy(partition, f'<node endpoint="localhost:15001" query="{node}"/>')) == [expected]


@pytest.mark.parametrize("partition,expected", [
    ('<partition box="v"/>', "partition of box 'v' lists no <node>"),
    ('<partition box="v"><node endpoint=":15001"/><node endpoint="localhost:15001"/></partition>',
     "partition of box 'v' lists node 'localhost:15001' twice"),
    (f'<partition box="v" segments="5000">{MEMBERS}</partition>',
     "partition of box 'v': segments=5000, at most 4096 (one per hash slot)"),
    (f'<partition box="v" segments="0">{MEMBERS}</partition>', "partition of box 'v': segments=0, at least 1"),
    (f'<partition box="v" epoch-ms="5">{MEMBERS}</partition>', "partition of box 'v': epoch-ms=5: between 10 and 60000"),
    (f'<partition box="v" epoch-ms="60001">{MEMBERS}</partition>',
     "partition of box 'v': epoch-ms=60001: between 10 and 60000"),
    (f'<partition box="v">{MEMBERS}<segment id="0" slots="0 1024" member="0"/>'
     '<segment id="1" slots="1536 4096" member="1"/></partition>',
     "segments of box 'v' leave slots 1024-1535 unowned"),
    (f'<partition box="v">{MEMBERS}<segment id="0" slots="0 600" member="0"/>'
     '<segment id="1" slots="512 4096" member="1"/></partition>', "segments of box 'v' overlap at slot 512"),
    (f'<partition box="v">{MEMBERS}<segment id="2" slots="0 600" member="0"/>'
     '<segment id="2" slots="600 4096" member="1"/></partition>', "segments of box 'v' have id 2 twice"),
    (f'<partition box="v">{MEMBERS}<segment id="2" slots="0 4096" member="5"/></partition>',
     "segment 2 of box 'v' is on member 5; the partition has 3"),
    (f'<partition box="v">{MEMBERS}<segment id="0" slots="0 4000" member="0"/></partition>',
     "segments of box 'v' leave slots 4000-4095 unowned"),
])
def test_partition_rules(partition, expected):
    assert refused(app(), deploy(partition)) == [expected]


def test_a_partitioned_box_is_not_also_placed_by_a_node():
    reasons = refused(app(), deploy(PARTITION, '<node endpoint="localhost:15001" query="f v"/>'), line=4,
                      element="node")
    assert reasons == ["box 'v' is placed by <partition> and by <node endpoint='localhost:15001' query='f v'>; "
                       "a partitioned box is placed by its <partition> only"]


def test_a_partitioned_box_is_not_placed_by_its_box_node_either():
    text = app().replace('<box name="v" type="m3">', '<box name="v" type="m3" node="localhost:15002">')
    reasons = refused(text, deploy(PARTITION), file="app.xml", line=7, element="box")
    assert reasons == ["box 'v' is placed by <partition> and by <box name='v' node='localhost:15002'>; "
                       "a partitioned box is placed by its <partition> only"]


def test_a_running_box_cannot_be_partitioned_yet():
    _, base = committed(app(), deploy("", '<node endpoint="localhost:15001" query="f v"/>'))
    assert refused(deploy(PARTITION, ""), base=base, file="app.xml") == [
        "box 'v' runs on node 'localhost:15001'; a running box cannot be partitioned yet "
        "(delete it, then declare it again with its <partition>)"]


def test_a_partitioned_box_is_not_moved_whole():
    _, base = committed(app(), deploy(PARTITION))
    assert refused(deploy('<move box="v" node="localhost:15003"/>', ""), base=base, file="app.xml",
                   element="move") == ["box 'v' is partitioned; move its segments (boreas move v/0 NODE)"]


def test_two_partitions_of_one_box_in_a_submission():
    assert refused(app(), deploy(PARTITION, PARTITION + '\n<node endpoint="localhost:15001" query="f"/>'), line=4) == [
        "box 'v' has more than one <partition> in this submission"]


# -- a committed partition submitted again ------------------------------------------------


def test_the_same_partition_again_changes_nothing():
    store, base = committed(app(), deploy(PARTITION))
    again = apply_submission(store, [read_document(deploy(PARTITION), "dep.xml")], registry=box_types())
    assert again.after.partitions == base.partitions and not again.commit.changes


@pytest.mark.parametrize("partition", [
    f'<partition box="v" segments="4" key="a">{MEMBERS}<map name="Q1_total" key="A"/></partition>',
    f'<partition box="v" segments="8" key="b">{MEMBERS}</partition>',
    f'<partition box="v" segments="8" key="a">{MEMBERS}</partition>',  # the pin is gone
])
def test_a_resubmission_cannot_change_the_layout(partition):
    _, base = committed(app(), deploy(PARTITION))
    assert refused(deploy(partition, ""), base=base, file="app.xml") == [
        "box 'v' is partitioned into 8 segments; change the layout with boreas split/move/rebalance"]


def test_a_resubmission_changes_the_epoch_and_appends_members_but_keeps_the_layout():
    _, base = committed(app(), deploy(PARTITION))
    slower = PARTITION.replace('key="a"', 'key="a" epoch-ms="50"')
    result = plan(deploy(slower, ""), base=base)
    assert result.ok, result.problems
    part, was = result.catalog.partitions["v"], base.partitions["v"]
    assert part.nodes == NODES and part.epoch_ms == 50 and part.joining == ()
    assert (part.segments, part.maps, part.layout, part.id) == (was.segments, was.maps, was.layout, was.id)
    # Appended nodes join at the next layout change; publishers keep picking among the first three.
    more = PARTITION.replace("</partition>", '<node endpoint="localhost:15004"/></partition>')
    grown = plan(deploy(more, ""), base=base)
    assert grown.ok, grown.problems
    part = grown.catalog.partitions["v"]
    assert part.nodes == (*NODES, "localhost:15004") and part.joining == ("localhost:15004",)
    assert part.layout_nodes == part.entry_nodes == NODES and part.segments == was.segments
    assert "localhost:15004" in grown.catalog.nodes
    assert describe_partition(part) == "partition v: 3 members, 8 segments, layout 1, key a, joining localhost:15004"
    # Removing or reordering running members is refused, naming them.
    members = f"box 'v' runs on 3 members ({', '.join(NODES)}); a running partition grows by <node>s added " \
              "after these, in this order; removing or reordering its members is not supported"
    reordered = PARTITION.replace('<node endpoint="localhost:15001"/>', "").replace(
        "</partition>", '<node endpoint="localhost:15001"/></partition>')
    assert refused(deploy(reordered, ""), base=base, file="app.xml") == [members]


def test_a_grown_partition_round_trips_and_routes_publishers_to_its_first_members():
    _, base = committed(app(), deploy(PARTITION))
    more = PARTITION.replace("</partition>", '<node endpoint="localhost:15004"/></partition>')
    catalog = plan(deploy(more, ""), base=base).catalog
    text = to_text(catalog.partitions["v"])
    assert 'members="3"' in text and 'coordinators="3"' in text and not _xsd(f"<deploy>{text}</deploy>")
    exported = [read_document(export_application(catalog), "app.xml"),
                read_document(export_deployment(catalog), "dep.xml")]
    rebuilt = apply_submission(open_store("memory://"), exported, registry=box_types()).after
    assert rebuilt.partitions["v"] == catalog.partitions["v"]
    route = stream_route(catalog, "R")
    assert route["entries"] == list(NODES) and route["pick"] == "member"
    assert "localhost:15004" in SliceMaker(catalog).slice("localhost:15004").partitions["v"].nodes
    # members beyond the nodes, or coordinators beyond the members, are named
    bad = text.replace('members="3"', 'members="5"').replace('coordinators="3"', 'coordinators="6"')
    assert partition_problems(decode(etree.fromstring(bad))) == [
        "partition of box 'v': members=5: between 1 and its 4 <node>s",
        "partition of box 'v': coordinators=6: between 1 and its 4 members"]


def test_a_removed_member_must_hold_no_segment():
    _, base = committed(app(), deploy(PARTITION))
    fewer = PARTITION.replace('<node endpoint="localhost:15003"/>', "")
    assert refused(deploy(fewer, ""), base=base, file="app.xml") == [
        "node 'localhost:15003' still holds segments 2, 5 of box 'v'; move them first"]


def test_deleting_the_box_deletes_its_partition_and_a_new_program_is_planned_again():
    store, base = committed(app(), deploy(PARTITION))
    gone = plan('<borealis><delete box="v"/></borealis>', base=base)
    assert gone.ok and "v" not in gone.catalog.partitions
    sql = "SELECT a, SUM(b) AS total FROM R GROUP BY a"
    modify = f'<borealis><modify box="v"><parameter name="sql" value="{sql}"/></modify></borealis>'
    after = apply_submission(store, [read_document(modify, "m.xml")], registry=box_types()).after
    part = after.partitions["v"]
    assert part.planned and part.id != base.partitions["v"].id and part.maps == (("Q1_total", "A", 0),)


# -- export, summary, update XML ------------------------------------------------------------


def test_export_then_apply_rebuilds_an_equal_catalog():
    _, catalog = committed(app(), deploy(PARTITION))
    exported = [read_document(export_application(catalog), "app.xml"),
                read_document(export_deployment(catalog), "dep.xml")]
    rebuilt = apply_submission(open_store("memory://"), exported, registry=box_types()).after
    assert rebuilt == catalog and rebuilt.partitions["v"].id == catalog.partitions["v"].id


def test_the_summary_names_the_partition_and_each_nodes_segments():
    _, catalog = committed(app(), deploy(PARTITION))
    lines = summary(catalog).splitlines()
    assert "partition v: 3 members, 8 segments, layout 1, key a" in lines
    assert "node localhost:15001: f, v/0, v/3, v/6" in lines and "node localhost:15003: v/2, v/5" in lines
    assert not any(line.startswith("not yet deployed") for line in lines)
