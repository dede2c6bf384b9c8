"""The layout's coordinator list in the catalog: publishers that start after a change pick by it, and members
rebuilt from the catalog do too (docs/cumulus.md §6.5).

The change that grows a partition lists its coordinators; once the Head
commits that layout, the catalog's ``<partition coordinator-list>`` carries
the list, the Head's route for the box's input stream answers it, and a
publisher's pick over that route is the member the running members
coordinate the producer by (the rendezvous pick), from its first batch: no
forwarding hop.  A catalog without the list (every partition never grown,
and old catalogs) routes by ``crc32 % coordinators`` as before.
"""

from __future__ import annotations

import dataclasses
import random
import sys
import zlib
from pathlib import Path

from boreas.catalog.slice_topology import partition_consumers
from boreas.catalog.slices import SliceMaker, stream_route
from boreas.catalog.xmlcodec import decode, to_text
from boreas.client.entries import pick_entries
from boreas.m3.cumulus import relayout as changes
from boreas.m3.cumulus.coordinators import pick
from boreas.m3.cumulus.layout import even_layout
from boreas.node.cumulus.api import partition_of_layout
from boreas.node.cumulus.part import PartOperator, layout_of
from lxml import etree
from support.partition_docs import NODES, PARTITION, app, committed, deploy, plan
from test_partition_catalog import _xsd

sys.path.insert(0, str(Path(__file__).parent / "m3"))
from support.cumulus_sim import Sim  # noqa: E402
from test_cumulus_failover_sim import _shape  # noqa: E402
from test_views_vs_duckdb import SHAPES  # noqa: E402

GROWN = "localhost:15004"
PRODUCERS = [f"producer-{i}" for i in range(300)]


def grown_catalog():
    """The partition over ``NODES`` grown by a fourth node, before and after the change that made it a member
    and a coordinator was committed (as the Head commits a reported layout: head/learning.py)."""
    _, base = committed(app(), deploy(PARTITION))
    more = PARTITION.replace("</partition>", f'<node endpoint="{GROWN}"/></partition>')
    catalog = plan(deploy(more, ""), base=base).catalog
    joining = catalog.partitions["v"]
    layout = layout_of(joining)
    layout = dataclasses.replace(changes.move(dataclasses.replace(layout, members=(*NODES, GROWN)), 0, 3),
                                 coordinators=(0, 1, 2, 3))  # (as node/cumulus/api.py decides a growth)
    reported = partition_of_layout(joining, layout)
    committed_part = dataclasses.replace(joining, segments=reported.segments, layout=reported.layout, members=None,
                                         coordinator_list=reported.coordinator_list)
    return catalog, dataclasses.replace(catalog, partitions={**catalog.partitions, "v": committed_part})


def test_the_committed_list_round_trips_and_routes_new_publishers_by_the_rendezvous_pick():
    before, after = grown_catalog()
    part = after.partitions["v"]
    text = to_text(part)
    assert 'coordinator-list="0 1 2 3"' in text and not _xsd(f"<deploy>{text}</deploy>")
    assert decode(etree.fromstring(text)) == part
    route = stream_route(after, "R")
    assert route["entries"] == [*NODES, GROWN] and route["coordinators"] == [0, 1, 2, 3]
    for producer in PRODUCERS:  # the publisher's pick is the members' pick (node/cumulus/handing.py)
        assert pick_entries(route, producer) == [route["entries"][pick(producer, (0, 1, 2, 3))]]
    assert sum(pick_entries(route, p) == [GROWN] for p in PRODUCERS) > 30  # the grown node coordinates its share
    assert "R" in SliceMaker(after).slice(GROWN).inputs  # and the stream enters there
    # a stream another box produces still goes to the one member it went to before the list
    for stream in ("F", "G", "H", "other"):
        assert (partition_consumers(after, stream, part)
                == partition_consumers(before, stream, before.partitions["v"]))
    # before the change (and in an old catalog) the route has no list: crc32 over the first members, as before
    old = stream_route(before, "R")
    assert "coordinators" not in old and old["entries"] == list(NODES)
    assert all(pick_entries(old, p) == [NODES[zlib.crc32(p.encode()) % 3]] for p in PRODUCERS)


def test_a_bad_coordinator_list_is_named():
    _, after = grown_catalog()
    text = to_text(after.partitions["v"])
    for bad in ("0 1 1", "0 7", "one", ""):
        broken = text.replace('coordinator-list="0 1 2 3"', f'coordinator-list="{bad}"')
        try:
            decode(etree.fromstring(broken))
        except Exception as exc:  # (DecodeError)
            assert f"coordinator-list={bad!r}" in str(exc) and "box 'v'" in str(exc), exc
        else:
            raise AssertionError(f"coordinator-list={bad!r} was taken")


def test_a_member_rebuilt_from_the_catalog_without_its_state_coordinates_by_the_list():
    """A grown partition's layout committed to the catalog (through its XML); a node that builds its members from
    it alone, hosting member 0 and member 2 as a guest, gives each producer's batch to the member its publisher
    picked over the Head's route: the list's pick, not the count's (which never picks member 2)."""
    _, placement, relations = _shape(SHAPES["group_by_join_key"])
    layout = even_layout("v", ["n0:1", "n1:1"], 4, tuple((m.map, m.column) for m in placement.maps))
    sim = Sim(SHAPES["group_by_join_key"], layout, random.Random(5))
    new = sim.grow("n2:1")
    base = sim.members[0].joinable_layout()
    sim.request("grow", dataclasses.replace(changes.move(base, 1, new), coordinators=(0, 1, new)))
    sim.settle()
    part = partition_of_layout(sim.members[0].partition, sim.members[0].layout)
    part = decode(etree.fromstring(to_text(part)))  # what the catalog holds
    assert part.coordinator_list == (0, 1, 2)
    inputs, outputs, _ = sim.built_from
    failed_over = dataclasses.replace(part, nodes=("n0:1", "n1:1", "n0:1"))  # member 2 hosted by n0:1
    op = PartOperator(sim.box, inputs, outputs, failed_over, "n0:1")
    assert sorted(op.hosted) == [0, 2] and op.layout.coordinators == (0, 1, 2)
    rel = sorted(relations)[0]
    row = tuple(1 for _ in relations[rel]) + (1,)
    route = {"entries": list(failed_over.entry_nodes), "pick": "member", "coordinators": [0, 1, 2]}
    producers = [p for p in PRODUCERS if pick(p, (0, 1, 2)) in (0, 2)][:20]
    assert any(pick(p, (0, 1, 2)) == 2 for p in producers)
    for producer in producers:
        assert pick_entries(route, producer) == ["n0:1"]
        op.process_from(sim.port_of[rel], [row], 0.0, (rel, producer, 0))
    for member in (0, 2):
        seen = {p for _, p in op.hosted[member].parts.handing.seen}
        assert seen == {p for p in producers if pick(p, (0, 1, 2)) == member}
