"""An OpenAPI 3 description of a component's HTTP API, generated from its registered routes.

A description written by hand goes stale the day someone adds a route.
Here the paths and methods come from the aiohttp router itself, so every
route served is described; what a route means comes from two places kept
beside it: its handler's docstring (the description) and a small table of
shapes, ``{(METHOD, "/path/{param}"): entry}``, that the code registering
the routes hands to :func:`describe_routes` next to its ``add_get`` and
``add_post`` calls, with

* ``summary`` -- one line;
* ``description`` -- optional, else the handler's docstring;
* ``parameters`` -- query parameters, ``[{"name", "description", "schema"?, "required"?}]``
  (path parameters are taken from the route and need no entry; one given
  here with ``"in": "path"`` adds its description);
* ``body`` -- ``{"content": media type, "description", "schema"?}``;
* ``responses`` -- ``{status: {"description", "content"?: media type
  (default application/json), "schema"?}}``.

Mutating methods need the cluster token (``Authorization: Bearer``): they
get the ``token`` security requirement and a 401 response.
:func:`undocumented` and :func:`stale` tell a test which routes lack an
entry and which entries name no route, so neither can drift.

>>> app = web.Application()
>>> async def status(request):
...     '''Counters.'''
>>> app.router.add_get("/status", status) and None
>>> doc = openapi_document(app.router, {("GET", "/status"): {"summary": "counters",
...                         "responses": {200: {"description": "ok"}}}}, title="demo")
>>> sorted(doc["paths"]), doc["paths"]["/status"]["get"]["description"]
(['/status'], 'Counters.')
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable, Mapping
from typing import Any

import boreas
from aiohttp import web

#: ``{(METHOD, path pattern): entry}``, as described above.
RouteDocs = Mapping[tuple[str, str], Mapping[str, Any]]

_DOCS = web.AppKey("boreas_route_docs", dict)

_PARAM = re.compile(r"{([^}:]+)(?::[^}]*)?}")
_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})
_ERROR = {"$ref": "#/components/schemas/Error"}


def describe_routes(app: web.Application, docs: RouteDocs) -> None:
    """Add the entries of the routes a module registers on ``app`` (call it beside them)."""
    if _DOCS not in app:
        app[_DOCS] = {}
    app[_DOCS].update(docs)


def described(app: web.Application) -> dict[tuple[str, str], Mapping[str, Any]]:
    """Every entry :func:`describe_routes` was given for ``app``."""
    return dict(app.get(_DOCS, {}))


def routes_of(router: web.UrlDispatcher) -> dict[tuple[str, str], Any]:
    """Every ``(METHOD, path pattern)`` the router serves, with its handler (HEAD twins of GETs left out)."""
    found = {}
    for route in router.routes():
        resource = route.resource
        if resource is None or route.method in ("HEAD", "*"):
            continue
        found[(route.method, resource.canonical)] = route.handler
    return found


def openapi_document(router: web.UrlDispatcher, docs: RouteDocs, title: str,
                     description: str = "") -> dict[str, Any]:
    """The OpenAPI 3.0 document of every route ``router`` serves, described by ``docs``."""
    paths: dict[str, dict[str, Any]] = {}
    for (method, path), handler in sorted(routes_of(router).items(), key=lambda kv: (kv[0][1], kv[0][0])):
        paths.setdefault(path, {})[method.lower()] = _operation(method, path, handler, docs.get((method, path), {}))
    return {
        "openapi": "3.0.3",
        "info": {"title": title, "version": boreas.__version__, "description": description},
        "paths": paths,
        "components": {
            "securitySchemes": {"token": {"type": "http", "scheme": "bearer",
                                          "description": "the cluster's shared token (boreas --token, "
                                                         "$BOREAS_TOKEN)"}},
            "schemas": {"Error": {"type": "object", "required": ["error"],
                                  "properties": {"error": {"type": "string"}},
                                  "additionalProperties": True}},
        },
    }


def _operation(method: str, path: str, handler: Any, entry: Mapping[str, Any]) -> dict[str, Any]:
    doc = inspect.cleandoc(getattr(handler, "__doc__", None) or "")
    summary = entry.get("summary") or (doc.splitlines()[0] if doc else f"{method} {path}")
    operation: dict[str, Any] = {
        "operationId": _operation_id(method, path),
        "summary": summary,
        "description": entry.get("description") or doc or summary,
    }
    parameters = _parameters(path, entry.get("parameters", ()))
    if parameters:
        operation["parameters"] = parameters
    body = entry.get("body")
    if body is not None:
        operation["requestBody"] = {"required": True, "description": body.get("description", ""),
                                    "content": {body["content"]: _media(body.get("schema"))}}
    responses = {str(status): _response(reply) for status, reply in entry.get("responses", {}).items()}
    if not responses:
        responses["200"] = {"description": "success"}
    if method not in _SAFE:
        operation["security"] = [{"token": []}]
        responses.setdefault("401", {"description": "missing or wrong cluster token",
                                     "content": {"application/json": {"schema": _ERROR}}})
    operation["responses"] = dict(sorted(responses.items()))
    return operation


def _parameters(path: str, given: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    described = {(p.get("in", "query"), p["name"]): p for p in given}
    out = []
    for name in _PARAM.findall(path):
        extra = described.pop(("path", name), {})
        out.append({"name": name, "in": "path", "required": True,
                    "description": extra.get("description", name), "schema": {"type": "string"}})
    for (where, name), p in described.items():
        out.append({"name": name, "in": where, "required": bool(p.get("required", False)),
                    "description": p.get("description", ""), "schema": p.get("schema", {"type": "string"})})
    return out


def _response(reply: Mapping[str, Any]) -> dict[str, Any]:
    content = reply.get("content", "application/json")
    schema = reply.get("schema")
    if schema is None and content == "application/json":
        schema = {"type": "object"}
    return {"description": reply["description"], "content": {content: _media(schema)}}


def _media(schema: Mapping[str, Any] | None) -> dict[str, Any]:
    return {"schema": dict(schema)} if schema is not None else {"schema": {"type": "string"}}


def _operation_id(method: str, path: str) -> str:
    words = re.sub(r"[^A-Za-z0-9]+", "_", _PARAM.sub(r"by_\1", path)).strip("_") or "root"
    return f"{method.lower()}_{words}"


def add_openapi_route(app: web.Application, title: str, description: str = "") -> None:
    """``GET /openapi.json``: the document, built from the routes and entries as they are when asked for."""

    async def handle_openapi(request: web.Request) -> web.Response:
        """This component's HTTP API as an OpenAPI 3 document, generated from its routes."""
        return web.json_response(openapi_document(app.router, described(app), title, description))

    app.router.add_get("/openapi.json", handle_openapi)
    describe_routes(app, OPENAPI_DOCS)


#: How ``GET /openapi.json`` describes itself.
OPENAPI_DOCS = {
    ("GET", "/openapi.json"): {
        "summary": "This API as an OpenAPI 3 document",
        "responses": {200: {"description": "the OpenAPI document",
                            "schema": {"type": "object", "required": ["openapi", "info", "paths"]}}},
    },
}