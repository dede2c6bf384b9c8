"""The Python client API as a user meets it (issue 15 items 9, 12, 20, 23).

* ``from boreas.client import Publisher, Subscriber, QueryClient`` works and
  is documented; ``boreas.__version__`` comes from the package metadata.
* A node that refuses the token fails a publisher at once with the reason
  (``LinkRefused``), where it used to wait 30 s for a bare TimeoutError.
* A misspelt map name is refused naming it and listing the box's maps, on
  the node (``GET /query``) and in the client.
* The packaging metadata: license, bounds, extras, ``py.typed``.

Everything here runs in process: a receiver and a stand-in Head on loopback.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import re
import tomllib
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

import boreas
from boreas.catalog import Catalog, plan_submission, read_document
from boreas.catalog.validate import stream_schemas
from boreas.node.operators import build_operator
from boreas.node.query import QueryApi
from boreas.wire.frames import Ack, Batch
from boreas.wire.link_connection import LinkRefused
from boreas.wire.links import OutboundLink
from boreas.wire.receiver import DataReceiver
from boreas.wire.server import HttpServer

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "the-cluster-token"


# -- the package ---------------------------------------------------------------------


def test_the_client_api_imports_from_one_place_and_is_documented():
    from boreas.client import LinkRefused as Refused
    from boreas.client import Publisher, QueryClient, Subscriber, UnknownStream

    assert Refused is LinkRefused and issubclass(UnknownStream, LookupError)
    import boreas.client as client

    assert "Example" in client.__doc__ and "async with Publisher(" in client.__doc__
    for cls in (Publisher, Subscriber, QueryClient):
        assert cls.__doc__ and len(cls.__doc__.split()) > 10, cls
        for name in ("start", "close") if cls is not QueryClient else ("query", "maps", "close"):
            assert getattr(cls, name).__doc__, f"{cls.__name__}.{name}"
    assert set(client.__all__) >= {"Publisher", "Subscriber", "QueryClient", "LinkRefused", "QueryFailed"}


def test_version_comes_from_the_package_metadata():
    assert boreas.__version__ == importlib.metadata.version("boreas")
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", boreas.__version__)


def test_packaging_metadata():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    license_text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert any(c.startswith("Programming Language :: Python :: 3") for c in project["classifiers"])
    assert "Typing :: Typed" in project["classifiers"]
    assert {"Homepage", "Repository", "Issues"} <= set(project["urls"])
    requirement = next(r for r in project["dependencies"] if r.startswith("sqlglot"))
    assert "<" in requirement, "sqlglot's majors change the trees the M3 compiler walks: bound it"
    assert "boreas[spark]" in project["optional-dependencies"]["test"]
    assert (Path(boreas.__file__).parent / "py.typed").exists()
    assert importlib.metadata.metadata("boreas")["License-Expression"] == "Apache-2.0"


# -- a refused token -----------------------------------------------------------------


class Node:
    """A data receiver with the cluster token, as a node's ``/data`` is."""

    def __init__(self) -> None:
        self.rows: list = []
        self.server = HttpServer("test node", TOKEN)
        self.receiver = DataReceiver(self._accept, TOKEN)
        self.server.app.router.add_get("/data", self.receiver.handle)
        self.endpoint = ""

    async def _accept(self, batch: Batch) -> Ack:
        self.rows.append(batch.seq)
        return Ack(batch.stream, batch.producer, batch.seq, 1, [])

    async def __aenter__(self) -> "Node":
        self.endpoint = await self.server.start("localhost", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.server.close()


class Head:
    """Answers ``GET /streams/{name}`` as the Head does: the stream enters at ``entry``."""

    def __init__(self, entry: str) -> None:
        self.entry = entry
        self.server = HttpServer("test head", TOKEN)
        self.server.app.router.add_get("/streams/{name}", self._route)
        self.url = ""

    async def _route(self, request: web.Request) -> web.Response:
        return web.json_response({"stream": request.match_info["name"], "input": True, "entries": [self.entry],
                                  "producer": None,
                                  "schema": {"name": "T", "fields": [["n", "int", None]]}})

    async def __aenter__(self) -> "Head":
        self.url = f"http://{await self.server.start('localhost', 0)}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.server.close()


@pytest.mark.parametrize("token", [None, "another-clusters-token"])
async def test_a_link_refused_at_the_handshake_fails_for_good_with_the_reason(token):
    async with Node() as node:
        link = OutboundLink(node.endpoint, token, "test-publisher", capacity=2, refusal_is_final=True)
        await link.start()
        try:
            for n in range(2):
                await link.send("S", [(n,)])
            with pytest.raises(LinkRefused) as refused:
                await asyncio.wait_for(link.flush(), 10)  # bound only the test: it used to hang
            assert refused.value.status == 401 and link.failure is refused.value
            reason = "wrong cluster token (another cluster's?)" if token else "no cluster token was sent"
            assert str(refused.value) == f"{node.endpoint} refused the data connection (401): {reason}"
            with pytest.raises(LinkRefused):  # and every later send
                await link.send("S", [(3,)])
        finally:
            await link.abort()
        assert node.rows == [] and node.receiver.counters["unauthenticated"] >= 1


async def test_a_send_waiting_for_room_is_woken_by_the_refusal():
    async with Node() as node:
        link = OutboundLink(node.endpoint, "wrong", "test-publisher", capacity=1, refusal_is_final=True)
        await link.start()
        try:
            async def fill() -> None:
                for n in range(5):  # capacity 1: the second send waits for room that never comes
                    await link.send("S", [(n,)])

            with pytest.raises(LinkRefused):
                await asyncio.wait_for(fill(), 10)
        finally:
            await link.abort()


async def test_a_nodes_link_keeps_trying_and_names_the_refusal():
    """Between nodes a refusal is not final (the other node may be restarted with the right token)."""
    async with Node() as node:
        link = OutboundLink(node.endpoint, "wrong", "node-a")
        await link.start()
        try:
            await link.send("S", [(1,)])
            for _ in range(200):
                if link.last_error:
                    break
                await asyncio.sleep(0.02)
            assert link.failure is None and "(401): wrong cluster token" in (link.last_error or "")
        finally:
            await link.abort()


async def test_a_publisher_with_a_wrong_token_fails_at_once_saying_why():
    from boreas.client import Publisher

    async with Node() as node, Head(node.endpoint) as head:
        publisher = Publisher(head.url, "S", "wrong", batch_size=10)
        await publisher.start()
        with pytest.raises(LinkRefused, match=r"refused the data connection \(401\): wrong cluster token"):
            await asyncio.wait_for(_send_and_close(publisher, 100), 10)
        await publisher.abort()
        assert node.rows == []

        right = Publisher(head.url, "S", TOKEN, batch_size=10)  # and the right token still publishes
        await right.start()
        await asyncio.wait_for(_send_and_close(right, 100), 10)
        assert right.accepted == 10 and right.acknowledged_rows == 10 and right.sent_rows == 100


async def _send_and_close(publisher, rows: int) -> None:
    await publisher.send([(n,) for n in range(rows)])
    await publisher.close()


# -- a misspelt map name -------------------------------------------------------------


@pytest.fixture(scope="module")
def q3_box():
    from boreas.m3.boxtype import box_types

    registry = box_types()
    plan = plan_submission(Catalog(), [read_document((ROOT / "examples" / "xml" / "tpch_q3.xml").read_text(),
                                                     "tpch_q3.xml")], registry)
    assert plan.ok, plan.problems
    schemas = stream_schemas(plan.catalog, registry)
    box = plan.catalog.boxes["q3"]
    return build_operator(box, [schemas[p.stream] for p in box.inputs], [schemas[s] for s in box.outputs])


class _Dataflow:
    def __init__(self, op):
        self.operators = {"q3": op}


async def _get(api: QueryApi, query: str, maps: bool = False) -> tuple[int, dict]:
    path = "/query/q3/maps" if maps else f"/query/q3?{query}"
    request = make_mocked_request("GET", path, match_info={"box": "q3"})
    response = await (api.handle_maps(request) if maps else api.handle(request))
    return response.status, json.loads(response.body)


async def test_the_node_names_a_misspelt_map_and_lists_the_boxs_maps(q3_box):
    api = QueryApi(_Dataflow(q3_box), "localhost:15001")
    status, body = await _get(api, "key=Revnue")
    assert status == 422
    assert body["error"].startswith("key 0 (l_orderkey INT): 'Revnue' is not an INT, nor a map, view or out "
                                    "stream of m3 box 'q3' (out streams: Revenue; views: Q1; maps: Q1_revenue")
    status, body = await _get(api, "map=Revnue")
    assert status == 404 and "no map, view or out stream 'Revnue' (did you mean 'Revenue'?) (out streams: " \
        "Revenue;" in body["error"]
    status, body = await _get(api, "key=_&key=soon")  # a bad key that is not the first stays as it was
    assert status == 422 and body["error"] == "key 1 (o_orderdate DATE): 'soon' is not a date (YYYY-MM-DD)"


async def test_the_query_words_a_user_types_are_split_by_the_boxs_maps(q3_box):
    from boreas.client.query import QueryFailed, split_words

    status, described = await _get(QueryApi(_Dataflow(q3_box), "localhost:15001"), "", maps=True)
    assert status == 200
    assert split_words("q3", described, ["Revenue", "_", "1995-03-01"]) == ("Revenue", ["_", "1995-03-01"])
    assert split_words("q3", described, ["7", "_"]) == (None, ["7", "_"])
    assert split_words("q3", described, ["_", "1995-03-01"]) == (None, ["_", "1995-03-01"])
    with pytest.raises(QueryFailed) as failed:
        split_words("q3", described, ["Revnue"])
    assert failed.value.status == 404
    assert str(failed.value) == ("box 'q3' has no map, view or out stream 'Revnue' (did you mean 'Revenue'?); "
                                 "out streams: Revenue; views: Q1; maps: Q1_revenue, m1, m2, m3, m4, m5")
