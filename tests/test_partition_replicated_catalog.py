"""``<partition replicate="...">`` in the catalog (docs/cumulus.md §3.11): XSD, codec, planning on commit,
the catalog form and its export, ``boreas catalog show``'s line, and the mistakes named with file, line and
element, growth by resubmission."""

from __future__ import annotations

import pytest
from boreas.catalog import ValidationFailed, apply_submission, open_store, read_document
from boreas.catalog.export import describe_partition, export_application, export_deployment
from boreas.catalog.xmlcodec import decode, to_text
from boreas.m3.boxtype import box_types
from boreas.node.cumulus.part import layout_of
from boreas.schemas import xsd_errors
from lxml import etree
from support.partition_docs import JOIN, MEMBERS, app, committed, deploy, plan, refused

REPLICATED = f'<partition box="v" segments="6" replicate="m1">{MEMBERS}</partition>'


def test_a_replicated_map_is_planned_on_every_member_and_round_trips():
    assert not [p.reason for p in xsd_errors(etree.fromstring(deploy(REPLICATED)))]
    result = plan(app(JOIN), deploy(REPLICATED))
    assert result.ok, result.problems
    part = result.catalog.partitions["v"]
    assert part.replicate == ("m1",) and "m1" not in {name for name, _, _ in part.maps}
    layout = layout_of(part)
    assert layout.replicated == {"m1"} and layout.column("m1") == "*"
    assert layout.holders("m1", (3,)) == (0, 1, 2)
    assert describe_partition(part) == "partition v: 3 members, 6 segments, layout 1, replicated m1"
    text = to_text(part)
    assert 'replicate="m1"' in text and not xsd_errors(etree.fromstring(f"<deploy>{text}</deploy>"))
    assert decode(etree.fromstring(text)) == part
    _, catalog = committed(app(JOIN), deploy(REPLICATED))
    exported = [read_document(export_application(catalog), "app.xml"),
                read_document(export_deployment(catalog), "dep.xml")]
    rebuilt = apply_submission(open_store("memory://"), exported, registry=box_types()).after
    assert rebuilt.partitions["v"] == catalog.partitions["v"]


def test_replication_mistakes_are_named_at_the_partition():
    assert refused(app(JOIN), deploy(REPLICATED.replace('replicate="m1"', 'replicate="m7"'))) == [
        "box 'v' replicates map 'm7', which it does not have (maps: Q1_sum_1, m1, m2)"]
    assert refused(app(JOIN), deploy(REPLICATED.replace('replicate="m1"', 'replicate="Q1_sum_1"'))) == [
        "box 'v': map Q1_sum_1 is replicated, but view Q1 reads it (members' answers are summed, so every entry "
        "would count once per member): replicate maps no view reads"]
    for bad, reason in [
        ('replicate="m1 m1"', "partition of box 'v' replicates map 'm1' twice (replicate='m1 m1')"),
        ('replicate="m1"><map name="m1" key="B"/', "partition of box 'v' both replicates map 'm1' and places it "
                                                  "with a <map> element: a replicated map has no partition key; "
                                                  "drop one")]:
        with pytest.raises(ValidationFailed) as info:
            read_document(deploy(REPLICATED.replace('replicate="m1"', bad)), "dep.xml")
        (d,) = info.value.diagnostics
        assert (d.file, d.line, d.path, d.reason) == ("dep.xml", 3, "/deploy/partition", reason)


def test_a_replicated_partition_keeps_its_maps_and_grows():
    _, base = committed(app(JOIN), deploy(REPLICATED))
    assert plan(deploy(REPLICATED, ""), base=base).ok  # the same again
    assert refused(deploy(REPLICATED.replace(' replicate="m1"', ""), ""), base=base, file="app.xml") == [
        "box 'v' replicates m1; a resubmission cannot change replicate= (it asks for none): delete the box and "
        "submit it again to change what it replicates"]
    more = REPLICATED.replace("</partition>", '<node endpoint="localhost:15004"/></partition>')
    grown = plan(deploy(more, ""), base=base)
    assert grown.ok, grown.problems
    part = grown.catalog.partitions["v"]
    assert part.replicate == ("m1",) and part.joining == ("localhost:15004",)
    assert describe_partition(part) == ("partition v: 3 members, 6 segments, layout 1, replicated m1, "
                                        "joining localhost:15004")


def test_replicating_one_map_of_a_view_names_that_map():
    """A view's maps share their placement: the refusal names the map the user listed, not another of the view."""
    avg = "SELECT a, AVG(b) AS av FROM R GROUP BY a"
    reasons = refused(app(avg), deploy(REPLICATED.replace('replicate="m1"', 'replicate="Q1_av_count"')))
    assert reasons == ["box 'v': map Q1_av_count is replicated, but view Q1 reads it (members' answers are summed, "
                       "so every entry would count once per member): replicate maps no view reads"]
