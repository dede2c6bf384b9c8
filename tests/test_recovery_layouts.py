"""The layouts a durable node's log began under (``DIR/layouts.json``, node/recovery/durability.py): a replay
of the whole log (no snapshot) builds its partitioned members at them (docs/cumulus.md §6.3)."""

from __future__ import annotations


def test_the_first_layout_a_node_ran_is_what_a_replay_of_its_whole_log_begins_under(tmp_path):
    """``layouts.json`` (node/recovery/durability.py): a partition's layout is noted when the node first runs it,
    not overwritten by the layouts the members switched to later (the catalog's); a replay of the whole log
    gets the catalog at the noted layouts, endpoints as now; a new incarnation of the partition is noted anew."""
    from dataclasses import replace

    from boreas.catalog.model import Catalog, Partition, SegmentPlacement
    from boreas.node.recovery.durability import Durability

    first = Partition("t", ("a:1", "b:1"), segments=(SegmentPlacement(0, 0, 2048, 0), SegmentPlacement(1, 2048, 4096, 1)),
                      maps=(("Q", "K", 0),), layout=1, id="p1")
    moved = replace(first, segments=(SegmentPlacement(0, 0, 2048, 0), SegmentPlacement(1, 2048, 4096, 0)), layout=2)
    durable = Durability(tmp_path)
    tmp_path.mkdir(exist_ok=True)
    assert durable.first_layouts(Catalog(partitions={"t": moved})) is None  # nothing noted: as the catalog says
    durable.note_layouts({"t": first})
    durable.note_layouts({"t": moved})  # the members switched: the log still began under layout 1
    failed_over = replace(moved, nodes=("a:1", "c:1"))
    replayed = durable.first_layouts(Catalog(partitions={"t": failed_over}))
    assert replayed is not None and replayed.partitions["t"] == replace(first, nodes=("a:1", "c:1"), members=2,
                                                                        coordinators=2)
    assert durable.first_layouts(Catalog(partitions={"t": first})) is None  # at the noted layout already
    again = replace(moved, id="p2")  # deleted and added again: a new log of its own begins under its layout
    durable.note_layouts({"t": again})
    assert durable.first_layouts(Catalog(partitions={"t": replace(again, layout=3)})).partitions["t"] == replace(
        again, members=2, coordinators=2)


def test_a_noted_layout_keeps_its_member_count_when_the_partition_grows(tmp_path):
    """A resubmission appends a node (the layout and id kept) and a rebalance makes it a member: a replay of a
    log that began before still starts with the members and the modulo it ran (review of topnflake)."""
    from dataclasses import replace

    from boreas.catalog.model import Catalog, Partition, SegmentPlacement
    from boreas.node.recovery.durability import Durability

    first = Partition("t", ("a:1", "b:1", "c:1"), segments=(SegmentPlacement(0, 0, 4096, 0),),
                      maps=(("Q", "K", 0),), layout=1, id="p1")
    durable = Durability(tmp_path)
    durable.note_layouts({"t": first})
    grown = replace(first, nodes=("a:1", "b:1", "c:1", "d:1"), layout=2)
    replayed = durable.first_layouts(Catalog(partitions={"t": grown})).partitions["t"]
    assert replayed.layout == 1 and replayed.layout_nodes == ("a:1", "b:1", "c:1")
    assert replayed.modulo_nodes == ("a:1", "b:1", "c:1")


def test_an_adopted_directory_sets_its_noted_layouts_aside(tmp_path):
    """A node whose boxes were adopted starts a new log: the layouts its old log began under go with it."""
    from boreas.node.adopt_claim import CLAIM, archive_adopted

    for name, text in (("layouts.json", "{}"), ("catalog.xml", "<catalog/>"), (CLAIM, '{"by": "other:1"}')):
        (tmp_path / name).write_text(text)
    archive = archive_adopted(tmp_path)
    assert archive is not None and (archive / "layouts.json").exists() and not (tmp_path / "layouts.json").exists()
