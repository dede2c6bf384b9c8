"""The request and response shapes of a node's HTTP API, for its ``GET /openapi.json``.

The paths come from the routes the node registers (:mod:`boreas.wire.openapi`
reads them from the router); what each one takes and answers is kept here,
next to :mod:`.api`, :mod:`.query` and :mod:`.cumulus.api` that serve
them, and the handlers' docstrings.  ``tests/test_openapi.py`` fails when a
route has no entry here or an entry names no route.
"""

from __future__ import annotations

from typing import Any

from boreas.wire.openapi import RouteDocs

XML = "application/xml"
MSGPACK = "application/msgpack"

_ERROR = {"$ref": "#/components/schemas/Error"}
_OBJECT: dict[str, Any] = {"type": "object"}
_REJECTIONS = {"type": "object", "properties": {
    "error": {"type": "string"},
    "rejections": {"type": "array", "items": {"type": "object", "properties": {
        "index": {"type": "integer"}, "kind": {"type": "string"}, "key": {"type": "string"},
        "reason": {"type": "string"}}}}}}
_DIAGNOSTICS = {"type": "object", "properties": {"error": {"type": "string"},
                                                 "diagnostics": {"type": "array", "items": _OBJECT}}}


def _error(description: str) -> dict[str, Any]:
    return {"description": description, "schema": _ERROR}


_BOX = {"in": "path", "name": "box", "description": "an m3 box on this node (a partitioned box: this member's part)"}

NODE_DOCS: RouteDocs = {
    ("POST", "/update"): {
        "summary": "Apply update XML to the local catalog (or move a box, insert or remove a filter)",
        "body": {"content": XML, "description": "an <update> document; <move>, <connect> or <disconnect> alone "
                                                "asks this node to change the topology"},
        "responses": {200: {"description": "applied", "schema": {"type": "object", "properties": {
                          "endpoint": {"type": "string"}, "version": {"type": "integer"},
                          "applied": {"type": "integer"}, "moved": {"type": "array"}}}},
                      409: {"description": "refused: names something not here, or a box that moved away; "
                                           "nothing applied", "schema": _REJECTIONS},
                      413: _error("took longer than the validation budget"),
                      422: {"description": "not valid update XML, or a box this node cannot run",
                            "schema": _DIAGNOSTICS},
                      502: _error("a move failed")},
    },
    ("GET", "/catalog"): {
        "summary": "The local catalog as one update document",
        "responses": {200: {"description": "update XML", "content": XML}},
    },
    ("GET", "/status"): {
        "summary": "Endpoint, incarnation, version, boxes, counters, recovery (for people; /metrics for "
                   "Prometheus)",
        "responses": {200: {"description": "status", "schema": {"type": "object", "properties": {
            "endpoint": {"type": "string"}, "incarnation": {"type": "string"}, "version": {"type": "integer"},
            "boxes": {"type": "array", "items": {"type": "string"}}, "counters": _OBJECT,
            "recovery": _OBJECT, "http": _OBJECT, "data": _OBJECT}}}},
    },
    ("GET", "/data"): {
        "summary": "WebSocket: batches of tuples for the streams that enter this node",
        "description": "Upgrades to a WebSocket carrying msgpack frames (Hello, Batch; answered with Ack or "
                       "Refused), see boreas.wire.frames.  Needs the cluster token although it is a GET.  "
                       "Publishers and upstream nodes send here.",
        "responses": {101: {"description": "switching to the WebSocket protocol", "content": "text/plain"},
                      401: _error("missing or wrong cluster token")},
    },
    ("POST", "/handover"): {
        "summary": "Take boxes moving in (one, or a table's boxes together), with their state",
        "body": {"content": MSGPACK, "description": "[update XML, [each box's state, sequence positions, "
                                                    "detach time]]"},
        "responses": {200: {"description": "the box runs here now"},
                      400: _error("not a handover"), 422: _error("the box cannot be taken")},
    },
    ("POST", "/snapshot"): {
        "summary": "Capture and write snapshot N (the Head asks)",
        "body": {"content": "application/json", "description": '{"id": N}',
                 "schema": {"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}}},
        "responses": {200: {"description": "written", "schema": {"type": "object", "properties": {
                          "id": {"type": "integer"}, "position": {"type": "integer"}, "bytes": {"type": "integer"},
                          "pause_seconds": {"type": "number"}, "seconds": {"type": "number"}}}},
                      400: _error("no snapshot id"), 409: _error("the node runs without --data-dir")},
    },
    ("POST", "/adopt"): {
        "summary": "Failover: adopt every box of a failed node from its shared data dir",
        "body": {"content": "application/json", "description": '{"node", "data_dir", "snapshots"}',
                 "schema": {"type": "object", "required": ["node", "data_dir"], "properties": {
                     "node": {"type": "string"}, "data_dir": {"type": "string"}, "snapshots": {"type": "string"}}}},
        "responses": {200: {"description": "adopted: boxes, snapshot, replayed and returned batches, seconds"},
                      400: _error("bad request body"),
                      409: _error("claimed by another node, or unreadable")},
    },
    ("GET", "/query/{box}"): {
        "summary": "Read an m3 box's maps: slice, sum, min, max (READ_STABLE with stable=1)",
        "parameters": [
            _BOX,
            {"name": "map", "description": "a map, a view, or an out stream of the box (default: the view on "
                                           "its first out stream)"},
            {"name": "key", "description": "key values in column order, repeated; _ is a wildcard",
             "schema": {"type": "array", "items": {"type": "string"}}},
            {"name": "agg", "description": "slice (default), sum, min or max",
             "schema": {"type": "string", "enum": ["slice", "sum", "min", "max"]}},
            {"name": "stable", "description": "1: read the last completed batch (a partitioned box: epoch=S)"},
            {"name": "epoch", "description": "a partitioned box's stable epoch (with stable=1)"},
            {"name": "layout", "description": "a partitioned box's layout version the client expects"},
        ],
        "responses": {200: {"description": "{box, node, map, version, agg, stable, keys, rows}"},
                      404: _error("no such box or map here (the box may have moved)"),
                      409: _error("another layout version: the answer carries this member's layout"),
                      410: _error("that stable epoch is no longer (or not yet) readable"),
                      422: _error("a bad key or aggregate")},
    },
    ("GET", "/query/{box}/maps"): {
        "summary": "An m3 box's maps and views with their key columns",
        "parameters": [_BOX],
        "responses": {200: {"description": "maps, views, and the view each out stream carries"},
                      404: _error("no such m3 box here")},
    },
    ("GET", "/segments/{box}"): {
        "summary": "A partitioned box's entries per segment and map on this member",
        "parameters": [_BOX, {"name": "member", "description": "only this hosted member (a node hosting a guest "
                                                           "after a failover answers for each member it hosts)"}],
        "responses": {200: {"description": "{box, node, member, members, version, layout, segments}"},
                      404: _error("this node is no member of that box")},
    },
    ("GET", "/segments/{box}/members/{member}/query"): {
        "summary": "GET /query/{box} of one member hosted here (a guest member after a failover)",
        "parameters": [_BOX, {"name": "member", "in": "path", "required": True,
                              "description": "the member's number in the box's partition"}],
        "responses": {200: {"description": "as GET /query/{box}"},
                      404: _error("that member of that box is not hosted here")},
    },
    ("GET", "/segments/{box}/stable"): {
        "summary": "On the leader: the stable epoch of a partitioned box",
        "parameters": [_BOX],
        "responses": {200: {"description": "{epoch, age, current, positions}"},
                      404: _error("not the leader of that box")},
    },
    ("POST", "/segments/{box}/load"): {
        "summary": "Bulk-load initial map values into this member (a Spark task)",
        "parameters": [_BOX, {"name": "job", "required": True, "description": "the load job"},
                       {"name": "part", "required": True, "description": "the task's part"}],
        "body": {"content": MSGPACK, "description": "[[map, key, value], ...] of entries this member owns, or "
                                                    "(application/vnd.apache.arrow.stream) an Arrow IPC stream of "
                                                    "one map's columns k0, ..., value, the map named in its schema "
                                                    "metadata"},
        "responses": {200: {"description": "loaded (a retried job and part adds nothing)"},
                      409: _error("the box already holds data or has taken input"),
                      422: _error("entries of other members, or unknown maps")},
    },
    ("POST", "/segments/{box}/relayout"): {
        "summary": "On the leader: move, split or rebalance segments, or retire the last member, while events flow",
        "parameters": [_BOX],
        "body": {"content": "application/json",
                 "description": '{"move": [segment, member]}, {"split": segment}, {"move_all": member}, '
                                '{"rebalance": {segment: entries}, "guests": [member, ...]}, {"retire": member} or '
                                '{"cancel": true}', "schema": _OBJECT},
        "responses": {200: {"description": "{layout, moves, seconds} once switched"},
                      409: _error("another change is under way, or this is not the leader"),
                      422: _error("a change that does not fit the layout")},
    },
}
