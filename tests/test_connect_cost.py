"""A connect's check types the inserted box by the node's index, not every box the node holds (issue 37).

``boreas connect`` asks the sink's node to insert a filter; the node checks
that the filter keeps its in stream's schema (node/connector.py).  It did
so by inferring the schema of every stream of its catalog with the box
added (``stream_schemas``: typing all 10,000 boxes a node holds at 40,000);
now by its index derived by that one box.  Counted here at two slice sizes
(no whole inference), and the answers are those of the whole inference:
a filter that keeps the schema is taken, one that changes it, reads
another stream or writes an existing one is refused with the same reason.
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
