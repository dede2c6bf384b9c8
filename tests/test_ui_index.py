"""The web UI's index of the catalog (head/ui/index.py; docs/ui.md "Large catalogs").

The index is followed commit by commit; after random sequences of commits (boxes added, removed,
moved, rewired, partitioned; queries written and dropped) it must answer exactly as one built afresh
from the same catalog: the overview, searches, and every query's, node's, stream's and box's graph.
"""

from __future__ import annotations

import doctest
import random

import pytest
from boreas.catalog.model import Box, Catalog, InPort, Node, Query
from boreas.catalog.partition_model import Partition
from boreas.head.ui import index as ui_index
from boreas.head.ui.index import ScopeError, UiIndex

NODES = ("n:1", "n:2", "n:3")


def test_doctests_of_the_index():
    assert doctest.testmod(ui_index).failed == 0


def _edit(cat: Catalog, rng: random.Random, serial: int) -> Catalog:
    """One random commit: a copy of ``cat`` with one box, partition or query changed."""
    after = cat.copy()
    after.version = cat.version + 1
    names = sorted(after.boxes)
    streams = ["in"] + [s for b in after.boxes.values() for s in b.outputs]
    op = rng.choice(["add", "add", "remove", "move", "rewire", "partition", "query", "drop_query"])
    if op == "add" or not names:
        name = f"b{serial}"
        after.boxes[name] = Box(name, "filter", (InPort(rng.choice(streams)),), (f"{name}_t", f"{name}_f"),
                                node=rng.choice(NODES + (None,)))
    elif op == "remove":
        name = rng.choice(names)
        del after.boxes[name]
        after.partitions.pop(name, None)
    elif op == "move":
        name = rng.choice(names)
        after.boxes[name] = Box(name, "filter", after.boxes[name].inputs, after.boxes[name].outputs,
                                node=rng.choice(NODES))
    elif op == "rewire":
        name = rng.choice(names)
        box = after.boxes[name]
        after.boxes[name] = Box(name, box.type, (InPort(rng.choice(streams)),), box.outputs, node=box.node)
    elif op == "partition":
        name = rng.choice(names)
        if name in after.partitions:
            del after.partitions[name]
        else:
            after.partitions[name] = Partition(name, tuple(rng.sample(NODES, 2)))
    elif op == "query":
        name = f"q{rng.randrange(4)}"
        after.queries[name] = Query(name, tuple(rng.sample(names, min(3, len(names)))))
    elif after.queries:
        del after.queries[rng.choice(sorted(after.queries))]
    return after


def _answers(index: UiIndex) -> dict:
    cat = index.catalog
    streams = {s for b in cat.boxes.values() for s in b.outputs} | {p.stream for b in cat.boxes.values() for p in b.inputs}
    graphs = {}
    for kind, names in (("query", cat.queries), ("node", NODES), ("box", cat.boxes), ("stream", streams)):
        for name in names:
            try:
                graphs[(kind, name)] = sorted((i["kind"], i["key"]) for i in index.graph(**{kind: name})["items"])
            except ScopeError as exc:
                graphs[(kind, name)] = str(exc)
    return {"overview": index.overview(), "graphs": graphs,
            "search": [index.search(text) for text in ("b", "b1", "_t", "n:", "q", "nosuch")]}


@pytest.mark.parametrize("seed", range(5))
def test_the_index_followed_commit_by_commit_answers_as_one_built_afresh(seed: int):
    rng = random.Random(seed)
    cat = Catalog(nodes={n: Node(n) for n in NODES})
    index = UiIndex(cat)
    for serial in range(120):
        after = _edit(cat, rng, serial)
        index.changed(cat, after)
        cat = after
        if serial % 10 == 9:
            assert _answers(index) == _answers(UiIndex(cat)), f"seed {seed}, commit {serial}"
    assert index.overview()["boxes"] == len(cat.boxes) > 0


def test_a_graph_of_a_scope_the_catalog_lacks_says_what_is_missing():
    index = UiIndex(Catalog(boxes={"a": Box("a", "filter", (InPort("S"),), ("T",), node="n:1")}))
    for scope, why in ((dict(query="q"), "no query 'q'"), (dict(node="n:9"), "no node 'n:9'"),
                       (dict(box="z"), "no box 'z'"), (dict(stream="Z"), "no stream 'Z'"), ({}, "name a query")):
        with pytest.raises(ScopeError, match=why):
            index.graph(**scope)
    assert [i["key"] for i in index.graph(stream="S")["items"] if i["kind"] == "box"] == ["a"]
    assert index.search("")["matches"] == [] and index.search("zzz")["matches"] == []
