"""A learnt move patches the Head's records of its nodes with what each reports it wrote (wire/move_report.py).

The source and the target of a move write the moved boxes' streams' inputs,
publications and subscriptions from the source's catalog as it was
(node/handover.py), which the commit cannot tell the Head.  The report
carries those items with each node's serial before and after; the Head
patches ``held`` with them when its record is at that serial
(``NodeSync.patch``), and reads the node again otherwise: a record missing,
at another serial (the node changed itself meanwhile), of another
incarnation (restarted), items that do not apply, a commit between.  The
fake nodes here apply updates and count serials as a node does
(node/local_catalog.py); the cluster test is in
tests/test_learn_move_report_cluster.py.
"""

from __future__ import annotations

from boreas.catalog.document_model import Delete, Unsubscribe
from boreas.catalog.model import Box, Catalog, InPort, Input, Node, Publication, Subscription
from boreas.catalog.replicate import apply_update, catalog_items
from boreas.catalog.updates import update_document
from boreas.head.learning import Learner
from boreas.wire.move_report import Written, serial_id
from test_learn_assumed import _box, _Head, _modify, _Node


class _Counted(_Node):
    """A fake node that counts its changes as a node does, and says so (push answers, ``GET /catalog``'s id)."""

    def __init__(self, holds: Catalog, incarnation: str):
        super().__init__(holds)
        self.incarnation, self.serial = incarnation, 0

    async def text(self, url: str, **_: object) -> str:
        return update_document(catalog_items(self.holds), version=self.holds.version, origin="test",
                               id=serial_id(self.incarnation, self.serial))

    async def post_update(self, endpoint: str, text: str, timeout: float = 0.0) -> dict:
        await super().post_update(endpoint, text, timeout)
        self.serial += 1
        return {"incarnation": self.incarnation, "serial": self.serial}

    def write(self, items: list) -> Written:
        """The node changes its own catalog (a move's side), as one change: what it reports."""
        self.holds = apply_update(self.holds, items, self.holds.version)
        self.serial += 1
        return Written(self.endpoint, self.incarnation, self.serial - 1, self.serial, update_document(items))

    def restart(self) -> None:
        self.incarnation, self.serial = self.incarnation + "'", 0


def _subscribed(box: str) -> Subscription:
    return Subscription(f"{box}_out", "client:9")


def _cluster(*names: str) -> tuple[_Head, dict[str, _Counted]]:
    """box1 on the first node, its out stream subscribed by client:9; the Head's catalog the same."""
    sub = _subscribed("box1")
    first = names[0]
    nodes = {e: _Counted(Catalog(version=1), e.split(":")[0]) for e in names}
    for endpoint, node in nodes.items():
        node.endpoint = endpoint  # type: ignore[attr-defined]
    head = _Head(Catalog(version=1, boxes={"box1": _box("box1", first)}), nodes)  # type: ignore[arg-type]
    head.catalog.subscriptions[sub.key] = sub
    _set_slices(head)
    return head, nodes


def _set_slices(head: _Head) -> None:
    """As _Head's, with the subscriptions of each node's boxes' streams (a node sends them)."""
    for endpoint, sync in head.syncs.items():
        boxes = {n: b for n, b in head.catalog.boxes.items() if b.node == endpoint}
        subs = {k: s for k, s in head.catalog.subscriptions.items() if any(s.stream in b.outputs for b in boxes.values())}
        sync.set_desired(Catalog(version=head.catalog.version, boxes=boxes, subscriptions=subs), head.catalog.version)


async def _moved(head: _Head, nodes: dict[str, _Counted], box: str, source: str, target: str,
                 report: tuple[str, ...] = ("source", "target")) -> None:
    """``box`` moved from ``source`` to ``target`` as the nodes move it: the target takes the box, its
    subscription, and the source forwarding its input; the source drops them and keeps a forwarding
    input; the source reports it with what each wrote (those named in ``report``)."""
    moved = head.catalog.boxes[box]
    sub = _subscribed(box)
    written = [nodes[target].write([Node(source), Node(target), Input("S", "Schema", target),
                                    Publication("S", target, source), _box(box, target, moved.param("expression.0")),
                                    sub]),
               nodes[source].write([Delete(box=box), Node(target), Unsubscribe(sub.stream, sub.endpoint),
                                    Input("S", "Schema", source), Publication("S", source, target)])]
    written = [w for w, side in zip(written, ("target", "source")) if side in report]
    learner = Learner(head)  # type: ignore[arg-type]
    await learner.move([box], target, written)
    _set_slices(head)  # (the fake Head's commit set slices without subscriptions)
    await head.settle()


def _reads(head: _Head) -> dict[str, int]:
    return {e: s.counters["catalog_reads"] for e, s in head.syncs.items()}


def _each_holds_its_slice(head: _Head, nodes: dict[str, _Counted]) -> None:
    for endpoint, node in nodes.items():
        assert node.holds == head.syncs[endpoint].desired, endpoint
        assert head.syncs[endpoint].held == node.holds, endpoint  # the Head's record is what the node holds


async def test_a_reported_move_patches_both_nodes_with_what_they_wrote_and_reads_neither():
    head, nodes = _cluster("s:1", "t:1")
    _set_slices(head)
    await head.settle()
    reads = _reads(head)
    await _moved(head, nodes, "box1", "s:1", "t:1")
    assert _reads(head) == reads
    assert {e: s.counters["patched"] for e, s in head.syncs.items()} == {"s:1": 1, "t:1": 1}
    _each_holds_its_slice(head, nodes)  # the forwarding input and publication sent away as the slice has none
    assert "box1" in nodes["t:1"].holds.boxes and "box1_out|client:9" in nodes["t:1"].holds.subscriptions


async def test_chained_moves_are_each_patched_and_every_record_is_what_its_node_holds():
    head, nodes = _cluster("a:1", "b:1", "c:1")
    await head.settle()
    reads = _reads(head)
    for source, target in (("a:1", "b:1"), ("b:1", "c:1"), ("c:1", "a:1"), ("a:1", "c:1")):
        await _moved(head, nodes, "box1", source, target)
        _each_holds_its_slice(head, nodes)
    assert _reads(head) == reads and head.catalog.boxes["box1"].node == "c:1"


async def test_a_node_whose_part_of_the_report_is_missing_is_read_the_other_patched():
    head, nodes = _cluster("s:1", "t:1")
    await head.settle()
    reads = _reads(head)
    await _moved(head, nodes, "box1", "s:1", "t:1", report=("source",))  # (an older target's answer)
    assert {e: s.counters["catalog_reads"] - reads[e] for e, s in head.syncs.items()} == {"s:1": 0, "t:1": 1}
    _each_holds_its_slice(head, nodes)


async def test_a_node_that_changed_itself_between_is_read_not_patched():
    """t:1 made a change of its own the Head has not learnt (its serial moved on): its report's base is not
    the Head's record's serial, so the patch would miss that change; it is read."""
    head, nodes = _cluster("s:1", "t:1")
    await head.settle()
    nodes["t:1"].write([Node("elsewhere:1")])  # e.g. a filter it inserted, not reported yet
    reads = _reads(head)
    await _moved(head, nodes, "box1", "s:1", "t:1")
    assert {e: s.counters["catalog_reads"] - reads[e] for e, s in head.syncs.items()} == {"s:1": 0, "t:1": 1}
    assert head.syncs["t:1"].counters["patch_mismatch"] == 1
    _each_holds_its_slice(head, nodes)


async def test_a_node_restarted_mid_move_is_read_not_patched():
    """s:1 restarted (a new incarnation, counting from 0) after writing its side and before the Head learnt
    the move; its report names the incarnation it wrote in, and what it holds now is read."""
    head, nodes = _cluster("s:1", "t:1")
    await head.settle()
    reads = _reads(head)
    nodes["s:1"].restart()
    sub = _subscribed("box1")
    nodes["s:1"].holds = Catalog(version=1, boxes={"box1": _box("box1", "s:1", "time > 0")},  # restored, older
                                 subscriptions={sub.key: sub})
    nodes["s:1"].serial = 1  # (its new serial may even equal the old one: the incarnation tells them apart)
    await _moved(head, nodes, "box1", "s:1", "t:1")
    assert head.syncs["s:1"].counters["catalog_reads"] - reads["s:1"] == 1
    _each_holds_its_slice(head, nodes)


async def test_a_move_whose_handover_failed_midway_leaves_the_target_read_at_its_next_move():
    """The target applied the handover but the source did not hear it (a timeout): the source took the box
    back and reported nothing.  The target's serial moved on unseen, so the Head's next push cannot count
    it, and the next move's report for the target does not match: the target is read."""
    head, nodes = _cluster("s:1", "t:1")
    await head.settle()
    nodes["t:1"].write([Node("s:1"), _box("box1", "t:1")])  # the handover it applied; no report
    nodes["t:1"].write([Delete(box="box1")])  # (the box is dropped there again, e.g. by a restart of the move)
    await head.commit(_modify("box1", "time > 5"))  # a push to s:1 only
    _set_slices(head)
    await head.settle()
    reads = _reads(head)
    await _moved(head, nodes, "box1", "s:1", "t:1")
    assert {e: s.counters["catalog_reads"] - reads[e] for e, s in head.syncs.items()} == {"s:1": 0, "t:1": 1}
    _each_holds_its_slice(head, nodes)


async def test_items_that_do_not_apply_to_the_record_make_the_node_read():
    head, nodes = _cluster("s:1", "t:1")
    await head.settle()
    sync = head.syncs["s:1"]
    assert sync.serial is not None
    incarnation, serial = sync.serial
    assert not sync.patch(Written("s:1", incarnation, serial, serial + 1, update_document([Delete(box="nothere")])))
    assert sync.held is None and sync.counters["patch_mismatch"] == 1


async def test_a_head_commit_between_reads_both_nodes():
    head, nodes = _cluster("s:1", "t:1")
    await head.settle()
    reads = _reads(head)
    head.between = _modify("box1", "time > 3")
    await _moved(head, nodes, "box1", "s:1", "t:1")
    assert {e: s.counters["catalog_reads"] - reads[e] for e, s in head.syncs.items()} == {"s:1": 1, "t:1": 1}
    _each_holds_its_slice(head, nodes)
    assert nodes["t:1"].holds.boxes["box1"].param("expression.0") == "time > 3"


def test_box_in_port_is_a_filter_on_s():  # (the fixtures' box reads S, as the moved inputs say)
    assert _box("b").inputs == (InPort("S"),)


async def test_a_node_unreachable_elsewhere_does_not_make_the_move_read_its_nodes():
    """A third node whose last push failed (its record unknown) is read again; the move's own nodes, in sync, are
    still patched (every move read both nodes whole while any node anywhere was down)."""
    head, nodes = _cluster("s:1", "t:1", "d:1")
    await head.settle()
    down = head.syncs["d:1"]
    down.held, down.failure = None, "unreachable"
    reads = _reads(head)
    await _moved(head, nodes, "box1", "s:1", "t:1")
    assert {e: s.counters["patched"] for e, s in head.syncs.items()} == {"s:1": 1, "t:1": 1, "d:1": 0}
    assert {e: s.counters["catalog_reads"] - reads[e] for e, s in head.syncs.items()} == {"s:1": 0, "t:1": 0, "d:1": 1}
    _each_holds_its_slice(head, nodes)


def test_a_restored_catalog_is_a_change_of_the_serial():
    """A durable node restores its saved catalog after its first heartbeat: a Head that read the empty catalog
    before must not see the restored one at the same serial (its pushes' serials would then confirm a record
    that lacks what the saved catalog held, a stale subscription kept for good)."""
    from boreas.node.local_catalog import LocalCatalog

    local = LocalCatalog("n:1")
    before = local.serial
    local.restore(Catalog(version=3, boxes={"f": _box("f", "n:1")}))
    assert local.serial == before + 1
