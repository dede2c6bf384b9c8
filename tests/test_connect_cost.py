"""A connect's check, and a disconnect's lookup, by the node's index, not every box the node holds (issue 37).

``boreas connect`` asks the sink's node to insert a filter; the node checks
that the filter keeps its in stream's schema (node/connector.py).  It did
so by inferring the schema of every stream of its catalog with the box
added (``stream_schemas``: typing all 10,000 boxes a node holds at 40,000);
now by its index derived by that one box.  Counted here at two slice sizes
(no whole inference), and the answers are those of the whole inference:
a filter that keeps the schema is taken, one that changes it, reads
another stream or writes an existing one is refused with the same reason.
A disconnect finds the stream's sink, producer, subscriptions and
publications by the index's references (no walk over every box), with the
changes and refusals of that walk.
In process, no node processes.
"""

from __future__ import annotations

import asyncio
import types

import pytest
from boreas.catalog.documents import Connect
from boreas.catalog.model import Box, InPort
from boreas.catalog.slices import node_slice
from boreas.node import connector
from boreas.node.connector import ConnectRefused, FilterConnector
from test_handover_cost import NODES, _catalog, _Node


def _filter(name: str, reads: str, writes: str, expression: str = "value > 0.25", type_: str = "filter") -> Box:
    params = (("expression.0", expression),) if type_ == "filter" else (("expression.0", "value * 2"),
                                                                        ("output-field-name.0", "doubled"))
    return Box(name, type_, (InPort(reads),), (writes,), params)


def _checks(boxes: int, whole: bool) -> tuple[int, list[str]]:
    """Connects checked on n0 holding half of ``boxes``: whole inferences made, and each check's answer."""
    async def run() -> tuple[int, list[str]]:
        node = _Node(NODES[0], node_slice(_catalog(boxes), NODES[0]))
        fake = types.SimpleNamespace(endpoint=node.endpoint, local=node.local, dataflow=node.flow)
        check = FilterConnector(fake)._check_connect  # type: ignore[arg-type]
        sink, upstream = f"b{boxes - 2}", f"b{boxes - 4}_t"
        requests = [Connect(_filter("f", upstream, "f_t"), sink, 0),
                    Connect(_filter("g", upstream, "g_t", type_="map"), sink, 0),  # another schema
                    Connect(_filter("h", "in0", "h_t"), sink, 0),  # not what the port reads
                    Connect(_filter("k", upstream, f"b{boxes - 6}_t"), sink, 0)]  # an existing stream
        answers = []
        whole_inferences = 0
        inferred = connector.stream_schemas

        def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
            nonlocal whole_inferences
            whole_inferences += 1
            return inferred(*args, **kwargs)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(connector, "stream_schemas", counted)
            if whole:  # (the node's index not of its catalog: what every check did before)
                patch.setattr(node.flow.host.index, "catalog", None)
            for request in requests:
                try:
                    found = check(request)
                    answers.append(f"taken: {found[2]} -> {found[3]}")
                except ConnectRefused as exc:
                    answers.append(f"{exc.status}: {exc}")
        return whole_inferences, answers
    return asyncio.run(run())


def test_a_connect_is_checked_by_the_box_it_adds_with_the_whole_inferences_answers() -> None:
    small, large, oracle = _checks(40, whole=False), _checks(400, whole=False), _checks(400, whole=True)
    assert small[0] == large[0] == 0 and oracle[0] >= 2
    assert large[1] == oracle[1]
    assert large[1][0].startswith("taken") and all(not a.startswith("taken") for a in large[1][1:])


def _disconnects(boxes: int, whole: bool) -> tuple[int, list[str]]:
    """Disconnects asked of n0 holding half of ``boxes``: the walks over all its boxes, subscriptions and
    publications, and what each would change (its items) or why it is refused."""
    from test_handover_cost import _Walks

    async def run() -> tuple[int, list[str]]:
        node = _Node(NODES[0], node_slice(_catalog(boxes), NODES[0]))
        fake = types.SimpleNamespace(endpoint=node.endpoint, local=node.local, dataflow=node.flow)
        connector_ = FilterConnector(fake)  # type: ignore[arg-type]
        answers: list[str] = []

        async def change(items, keep=None, check=None, bridge=None, unbridge=None):  # type: ignore[no-untyped-def]
            answers.append(f"change {sorted(map(repr, items))} keep={keep}")

        async def report(item, written=None):  # type: ignore[no-untyped-def]
            answers.append(f"report {item!r}")

        connector_._change, connector_._report = change, report  # type: ignore[method-assign]
        held = node.local.catalog
        held.boxes, held.subscriptions, held.publications = (_Walks(held.boxes), _Walks(held.subscriptions),
                                                             _Walks(held.publications))
        streams = [f"b{boxes - 4}_t",  # a filter's stream with its sink here: the filter goes, the sink reads on
                   f"b{boxes - 2}_t",  # no sink here, a client subscribes: as a forwarded disconnect
                   "in0",  # no box writes it: not added by a connect
                   "nowhere"]  # nothing reads or writes it
        with pytest.MonkeyPatch.context() as patch:
            if whole:  # (the node's index not of its catalog: a walk over every box, as every disconnect did)
                patch.setattr(node.flow.host.index, "catalog", None)
            _Walks.walks = 0
            for stream in streams:
                try:
                    await connector_.disconnect(stream)
                except ConnectRefused as exc:
                    answers.append(f"{exc.status}: {exc}")
        return _Walks.walks, answers

    return asyncio.run(run())


def test_a_disconnect_finds_the_streams_ends_by_the_index_with_the_walks_answers() -> None:
    """node/connector.py's disconnect asks the node's index what writes and reads the stream (StreamEnds): no walk
    over the boxes, subscriptions or publications held, at 40 boxes as at 400; the same changes and refusals as
    the walk over every box (the index not of the catalog held)."""
    small, large, oracle = _disconnects(40, whole=False), _disconnects(400, whole=False), _disconnects(400, whole=True)
    assert small[0] == large[0] == 0 and oracle[0] > 0
    assert large[1] == oracle[1]
    assert [a.split(" ")[0] for a in large[1]] == ["change", "report", "change", "409:", "409:"], large[1]
    assert "box='b396'" in large[1][0] and "InPort(stream='b394_t'" in large[1][0] and "keep=b398" in large[1][0]
    assert "Unsubscribe(stream='b398_t'" in large[1][2]
