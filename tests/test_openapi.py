"""OpenAPI 3 (issue 16 item 3): the Head's and a node's /openapi.json validate, list every registered
route and nothing else, and docs/api.md names every endpoint -- so none of them can go stale.

A route added without an entry fails here, naming it: describe it with
``boreas.wire.openapi.describe_routes(app, {...})`` beside the code that registers it (the Head's
API: head/api_docs.py; a node's: node/api_docs.py).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from aiohttp.web import UrlDispatcher
from boreas.head.service import HeadService
from boreas.node.service import NodeService
from boreas.wire.client import PeerClient
from boreas.wire.openapi import RouteDocs, described, openapi_document, routes_of
from openapi_spec_validator import validate
from support.cluster import TOKEN, free_port
from support.inprocess import in_process

API_MD = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def undocumented(router: UrlDispatcher, docs: RouteDocs) -> list[tuple[str, str]]:
    """Routes served that have no entry in ``docs``."""
    return sorted(set(routes_of(router)) - set(docs))


def stale(router: UrlDispatcher, docs: RouteDocs) -> list[tuple[str, str]]:
    """Entries of ``docs`` that name no route served."""
    return sorted(set(docs) - set(routes_of(router)))


def components():
    """(name, router, its route entries) for the Head and a node (built, not started)."""
    head = HeadService("memory://", TOKEN, snapshot_interval=0)
    node = NodeService(f"localhost:{free_port()}", None, TOKEN)
    return [(name, app.router, described(app)) for name, app in (("head", head.server.app),
                                                                 ("node", node.server.app))]


@pytest.mark.parametrize("which", ["head", "node"])
async def test_every_registered_route_is_described_and_every_description_names_a_route(which):
    name, router, docs = next(c for c in components() if c[0] == which)
    assert undocumented(router, docs) == [], f"routes of the {name} that describe_routes was given no entry for"
    assert stale(router, docs) == [], f"entries given to describe_routes that name no route of the {name}"
    document = openapi_document(router, docs, title=f"Boreas {name}")
    validate(document)
    described = {(method.upper(), path) for path, ops in document["paths"].items() for method in ops}
    assert described == set(routes_of(router)) and len(described) >= 14
    for path, ops in document["paths"].items():
        for method, op in ops.items():
            assert op["summary"] and op["description"] and op["responses"], (method, path)
            if method != "get":
                assert op["security"] == [{"token": []}] and "401" in op["responses"], (method, path)
            for param in re.findall(r"{(\w+)}", path):
                assert any(p["in"] == "path" and p["name"] == param for p in op["parameters"]), (method, path)


async def test_the_served_documents_validate_and_list_the_routes_the_components_serve():
    async with in_process(nodes=1) as cluster:
        async with PeerClient(None) as peers:
            head_doc = await peers.call("GET", f"{cluster.url}/openapi.json")
            node_doc = await peers.call("GET", f"{cluster.node_url(0)}/openapi.json")
        head_routes = set(routes_of(cluster.head.server.app.router))
        node_routes = set(routes_of(cluster.nodes[0].server.app.router))
    for document, routes in ((head_doc, head_routes), (node_doc, node_routes)):
        validate(document)
        assert {(m.upper(), p) for p, ops in document["paths"].items() for m in ops} == routes
    assert {"/submissions", "/submissions/{id}", "/metrics", "/readyz", "/openapi.json"} <= set(head_doc["paths"])
    assert {"/update", "/data", "/query/{box}", "/segments/{box}/relayout", "/healthz"} <= set(node_doc["paths"])
    query = node_doc["paths"]["/query/{box}"]["get"]
    assert {p["name"] for p in query["parameters"]} >= {"box", "map", "key", "agg", "stable"}


def test_docs_api_md_lists_every_endpoint():
    text = API_MD.read_text()
    missing = [f"{name}: {method} {path}" for name, router, _ in components()
               for method, path in sorted(routes_of(router)) if f"`{method} {path}`" not in text]
    assert missing == [], "docs/api.md does not list these endpoints"


def test_the_doctests_of_the_openapi_module():
    import doctest

    import boreas.wire.openapi

    result = doctest.testmod(boreas.wire.openapi)
    assert result.attempted and not result.failed
