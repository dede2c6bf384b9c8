"""The request and response shapes of the Head's HTTP API, for its ``GET /openapi.json``.

The paths come from the routes :func:`boreas.head.api.install_routes`
registers (:mod:`boreas.wire.openapi` reads them from the router); what
each takes and answers is kept here, beside it.  ``tests/test_openapi.py``
fails when a route has no entry or an entry names no route.
"""

from __future__ import annotations

from typing import Any

from boreas.wire.openapi import RouteDocs

XML = "application/xml"

_ERROR = {"$ref": "#/components/schemas/Error"}
_OBJECT: dict[str, Any] = {"type": "object"}
_STRINGS = {"type": "array", "items": {"type": "string"}}
_DIAGNOSTICS = {"type": "object", "properties": {
    "error": {"type": "string"},
    "diagnostics": {"type": "array", "items": {"type": "object", "properties": {
        "file": {"type": "string"}, "line": {"type": "integer", "nullable": True},
        "path": {"type": "string"}, "reason": {"type": "string"}}}}}}
_SUBMISSION = {"type": "object", "properties": {
    "id": {"type": "string"}, "version": {"type": "integer"},
    "state": {"type": "string", "enum": ["committed", "deploying", "deployed", "failed"]},
    "nodes": {"type": "object", "description": "per affected node: its state and reason"},
    "changes": {"type": "object", "description": "a replacing submission only: kept, changed, added and "
                "removed, each {boxes: [...], streams: [...]}, and notes: [...] (lines to show)"},
    "revision": {"type": "integer"}}}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "schema": _ERROR}


HEAD_DOCS: RouteDocs = {
    ("POST", "/submissions"): {
        "summary": "Submit application and deployment XML: validated, then committed as one catalog version",
        "body": {"content": "multipart/form-data", "description": "one part per XML file; the part's filename "
                 "names the file in diagnostics", "schema": {"type": "object", "additionalProperties": {
                     "type": "string", "format": "binary"}}},
        "parameters": [{"name": "replace", "description": "1: the documents are the new version of an "
                        "application: what they declare differently replaces what is there, what the same "
                        "application no longer declares goes, and the status says what was kept, changed, "
                        "added and removed (docs/xml.md, \"The edit loop\")",
                        "schema": {"type": "integer", "enum": [0, 1]}},
                       {"name": "app", "description": "the application the documents declare (default: each "
                        "application file's base name without .xml)", "schema": {"type": "string"}}],
        "responses": {202: {"description": "committed; nodes are being brought up to date", "schema": _SUBMISSION},
                      400: _error("not well-formed multipart"),
                      413: _error("too many files, too large, or over the validation budget"),
                      415: _error("not multipart"),
                      422: {"description": "invalid: every problem, nothing committed", "schema": _DIAGNOSTICS},
                      503: _error("the catalog store failed")},
    },
    ("GET", "/submissions/{id}"): {
        "summary": "A submission's status, per node (long poll with after and wait)",
        "parameters": [{"in": "path", "name": "id", "description": "the id POST /submissions answered"},
                       {"name": "after", "description": "status revision already seen",
                        "schema": {"type": "integer"}},
                       {"name": "wait", "description": "seconds to wait for a newer revision (at most 30)",
                        "schema": {"type": "number"}}],
        "responses": {200: {"description": "status", "schema": _SUBMISSION},
                      400: _error("after or wait is not a number"), 404: _error("no such submission")},
    },
    ("POST", "/update"): {
        "summary": "Update XML from components and nodes: registrations, and changes nodes made themselves",
        "body": {"content": XML, "description": "<global endpoint>, <delete global>, <region name endpoint>, "
                                                "<move>, <connect>, <disconnect>, <partition>"},
        "responses": {200: {"description": "done", "schema": {"type": "object", "properties": {
                          "version": {"type": "integer"}, "done": {"type": "array", "items": _OBJECT}}}},
                      413: _error("over the validation budget"),
                      422: {"description": "invalid, or an element the Head does not take here",
                            "schema": _DIAGNOSTICS},
                      503: _error("the catalog store failed")},
    },
    ("POST", "/members"): {
        "summary": "A node's heartbeat (registers it)",
        "body": {"content": "application/json", "description": "{endpoint, incarnation, version, recovery}",
                 "schema": {"type": "object", "required": ["endpoint", "incarnation"], "properties": {
                     "endpoint": {"type": "string"}, "incarnation": {"type": "string"},
                     "version": {"type": "integer"}, "recovery": _OBJECT}}},
        "responses": {200: {"description": "what the node should know", "schema": {"type": "object", "properties": {
                          "membership": {"type": "string", "nullable": True},
                          "timeout": {"type": "number"},
                          "snapshot_complete": {"type": "integer", "nullable": True},
                          "in_sync": {"type": "boolean", "nullable": True},
                          "desired_version": {"type": "integer", "nullable": True}}}},
                      400: _error("bad heartbeat")},
    },
    ("GET", "/catalog"): {
        "summary": "The global catalog as one update document; with ?box=B&stream=S (repeatable) only the "
                   "named boxes, the boxes writing or reading the named streams, and their nodes",
        "responses": {200: {"description": "update XML", "content": XML}},
    },
    ("GET", "/nodes"): {
        "summary": "Every node: alive, in sync, failures, pending requests, recovery, failover",
        "responses": {200: {"description": "nodes", "schema": {"type": "object", "properties": {
            "version": {"type": "integer"}, "nodes": {"type": "array", "items": _OBJECT},
            "snapshot_complete": {"type": "object", "nullable": True}}}}},
    },
    ("GET", "/status"): {
        "summary": "Catalog version and counters (for people; /metrics for Prometheus)",
        "responses": {200: {"description": "status", "schema": {"type": "object", "properties": {
            "catalog": {"type": "string"}, "version": {"type": "integer"}, "revision": {"type": "integer"},
            "nodes": {"type": "integer"}, "globals": _STRINGS, "pending_requests": {"type": "integer"},
            "http": _OBJECT, "peers": _OBJECT, "snapshots": _OBJECT, "failover": _OBJECT,
            "leadership": {"type": "object", "properties": {  # head/leadership.py: several Heads, one leads
                "url": {"type": "string"}, "leading": {"type": "boolean"},
                "leader": {"type": "string", "nullable": True}, "epoch": {"type": "integer"},
                "elected_at": {"type": "number", "nullable": True}}},
            "catalog_full_reads": {"type": "integer"}}}}},
    },
    ("POST", "/snapshots"): {
        "summary": "Take a snapshot of every durable node now",
        "responses": {200: {"description": "complete: {id, complete, nodes}"},
                      503: {"description": "not complete: reason names each failing node"}},
    },
    ("GET", "/streams/{name}"): {
        "summary": "Where a stream enters, which node produces it, and its schema",
        "parameters": [{"in": "path", "name": "name", "description": "a stream of the catalog"}],
        "responses": {200: {"description": "the stream's route"}, 404: _error("no such stream")},
    },
    ("GET", "/boxes/{name}"): {
        "summary": "A box and the node it runs on (a partitioned box: its layout)",
        "parameters": [{"in": "path", "name": "name", "description": "a box of the catalog"},
                       {"in": "query", "name": "node", "description": "with wait: the node the box should be on"},
                       {"in": "query", "name": "wait", "description": "long poll: answer once the box is on node "
                        "and every live node is in sync, or after this many seconds (at most 30)"}],
        "responses": {200: {"description": "{box, type, node, partition, version}; with wait also {placed, "
                            "lagging}", "schema": {
                          "type": "object", "properties": {
                              "box": {"type": "string"}, "type": {"type": "string"},
                              "node": {"type": "string", "nullable": True},
                              "partition": {"type": "object", "nullable": True},
                              "version": {"type": "integer"}, "placed": {"type": "boolean"},
                              "lagging": {"type": "array", "items": {"type": "string"}}}}},
                      400: _error("wait without node, or not a number"), 404: _error("no such box")},
    },
}


#: The web UI's routes (:mod:`boreas.head.ui`, registered by ``install_ui``).  They are kept here so
#: that the Head's description is whole; their place is beside ``install_ui``'s ``add_get`` calls,
#: which can hand them to ``describe_routes`` itself.
UI_DOCS: RouteDocs = {
    ("GET", "/"): {
        "summary": "The web UI: the live topology in the browser",
        "responses": {200: {"description": "the page", "content": "text/html"}},
    },
    ("GET", "/ui/static/{name}"): {
        "summary": "One of the page's static files (script, style sheet)",
        "parameters": [{"in": "path", "name": "name", "description": "index.html, app.js, overview.js or style.css"}],
        "responses": {200: {"description": "the file", "content": "text/plain"}, 404: _error("no such file")},
    },
    ("GET", "/ui/feed"): {
        "summary": "WebSocket: the catalog's elements (none with summary=1), then every commit's changes, in order",
        "responses": {101: {"description": "switching to the WebSocket protocol", "content": "text/plain"}},
    },
    ("GET", "/ui/stats"): {
        "summary": "Rates, counters, state sizes and recent errors of the nodes, from the last poll",
        "responses": {200: {"description": "the figures"}},
    },
    ("GET", "/ui/overview"): {
        "summary": "The catalog in counts: boxes and streams, boxes per node and per query (the UI's overview)",
        "responses": {200: {"description": "the counts"}},
    },
    ("GET", "/ui/search"): {
        "summary": "Boxes, streams, queries and nodes whose name holds a text, exact and prefix matches first",
        "parameters": [{"name": "q", "description": "the text (any case)"}],
        "responses": {200: {"description": "at most 50 matches, and whether there are more"}},
    },
    ("GET", "/ui/graph"): {
        "summary": "The elements of one graph: a query's, a node's, a stream's boxes, or a box and its neighbours",
        "parameters": [{"name": "query", "description": "a query's name"}, {"name": "node", "description": "an endpoint"},
                       {"name": "stream", "description": "a stream"}, {"name": "box", "description": "a box"}],
        "responses": {200: {"description": "the elements, as the feed sends them"},
                      400: _error("not exactly one of query, node, stream, box"), 404: _error("no such name")},
    },
    ("GET", "/ui/query/{box}"): {
        "summary": "Read an m3 box's map or view through the Head (the UI's query form)",
        "parameters": [{"in": "path", "name": "box", "description": "an m3 box"},
                       {"name": "map", "description": "a map or view (default: the box's first view)"},
                       {"name": "key", "description": "key values in column order, repeated; _ is a wildcard",
                        "schema": {"type": "array", "items": {"type": "string"}}},
                       {"name": "agg", "description": "slice (default), sum, min or max"},
                       {"name": "stable", "description": "1: a stable read"}],
        "responses": {200: {"description": "rows"}, 404: _error("no such box or map"),
                      422: _error("a bad key or aggregate"), 503: _error("the box's node does not answer")},
    },
    ("GET", "/ui/query/{box}/maps"): {
        "summary": "An m3 box's maps and views, through the Head",
        "parameters": [{"in": "path", "name": "box", "description": "an m3 box"}],
        "responses": {200: {"description": "maps and views"}, 404: _error("no such m3 box"),
                      503: _error("the box's node does not answer")},
    },
    ("POST", "/ui/move"): {
        "summary": "Move a box (or a partitioned box's segment, BOX/SEGMENT) to a node",
        "body": {"content": "application/json", "description": '{"box": name or BOX/SEGMENT, "node": endpoint}',
                 "schema": {"type": "object", "required": ["box", "node"], "properties": {
                     "box": {"type": "string"}, "node": {"type": "string"}}}},
        "responses": {200: {"description": "moved"}, 404: _error("no such box"), 422: _error("bad request body")},
    },
    ("POST", "/ui/connect"): {
        "summary": "Insert a filter box before a box's in port (as boreas connect); it writes a stream of its name",
        "body": {"content": "application/json",
                 "description": '{"box": sink, "port": N, "expression": filter expression, "name": the filter, '
                                '"upstream": false}',
                 "schema": {"type": "object", "required": ["box", "expression"], "properties": {
                     "box": {"type": "string"}, "port": {"type": "integer"}, "expression": {"type": "string"},
                     "name": {"type": "string"}, "upstream": {"type": "boolean"}}}},
        "responses": {200: {"description": "inserted"}, 404: _error("no such box"),
                      409: _error("the name is taken, or the box is not placed"),
                      422: _error("bad request body or port"), 502: _error("the node refused the filter (why)"),
                      503: _error("the node does not answer")},
    },
    ("POST", "/ui/disconnect"): {
        "summary": "Remove a filter a connect inserted, named by the stream it writes (as boreas disconnect)",
        "body": {"content": "application/json", "description": '{"stream": the stream the filter writes}',
                 "schema": {"type": "object", "required": ["stream"], "properties": {"stream": {"type": "string"}}}},
        "responses": {200: {"description": "removed"}, 409: _error("not a stream a connect added"),
                      422: _error("bad request body"), 502: _error("the node refused"),
                      503: _error("the node does not answer")},
    },
}
