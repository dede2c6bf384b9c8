"""Prometheus metrics for a Boreas component: one registry each, read from the component's own counters.

Every component keeps its figures where its code already counts them: the
``counters`` dicts that ``GET /status`` shows, queue lengths, catalog
versions.  Copying those into Prometheus objects as they change would make
two counts of every number that could drift apart; instead a :class:`View`
reads them when ``/metrics`` is scraped, so ``/status`` (for people) and
``/metrics`` (for Prometheus) are two renderings of the same numbers.  What
only Prometheus shows -- latency histograms -- lives in the registry itself.

Each component has its own :class:`~prometheus_client.CollectorRegistry`
(``HttpServer.registry``), never the process-wide default one: tests run a
Head, several nodes and components in one process, and each must export
only its own series.

Naming follows Prometheus: a ``boreas_`` prefix, base units (seconds,
bytes), ``_total`` on counters, and bounded labels -- box, stream, node and
region names, never row values or producer ids.

>>> registry = new_registry()
>>> counts = {"requests": 3}
>>> registry.register(View(lambda f: f.counter("boreas_demo_requests_total", "Requests.", counts["requests"])))
>>> counts["requests"] += 1
>>> b"boreas_demo_requests_total 4.0" in generate_latest(registry)
True
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.aiohttp import make_aiohttp_handler
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
)
from prometheus_client.registry import Collector

__all__ = ["Families", "View", "new_registry", "add_metrics_route", "request_timer", "generate_latest",
           "counters_view", "sender_view", "supervisor_view", "peers_view", "METRICS_DOCS"]

log = logging.getLogger(__name__)

#: Latency buckets (seconds) for HTTP requests, submissions, moves: 1 ms to 1 min.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

#: HTTP methods kept as label values; anything else a client sends is counted as "other".
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})


def new_registry() -> CollectorRegistry:
    """A component's own registry (``auto_describe`` off: views are read only when scraped)."""
    return CollectorRegistry(auto_describe=False)


class Families:
    """Samples gathered into metric families by name, so a loop over boxes adds to one family.

    The label names of a family are those of its first sample; every later
    sample of that family must give the same ones.
    """

    def __init__(self) -> None:
        self._families: dict[str, Any] = {}

    def counter(self, name: str, doc: str, value: float, **labels: str) -> None:
        self._add(CounterMetricFamily, name, doc, value, labels)

    def gauge(self, name: str, doc: str, value: float, **labels: str) -> None:
        self._add(GaugeMetricFamily, name, doc, value, labels)

    def info(self, name: str, doc: str, **labels: str) -> None:
        family = self._families.get(name)
        if family is None:
            family = self._families[name] = InfoMetricFamily(name, doc, labels=())
        family.add_metric((), {k: str(v) for k, v in labels.items()})

    def _add(self, kind: type, name: str, doc: str, value: float, labels: Mapping[str, str]) -> None:
        family = self._families.get(name)
        if family is None:
            family = self._families[name] = kind(name, doc, labels=list(labels))
        family.add_metric([str(v) for v in labels.values()], float(value))

    def __iter__(self) -> Iterator[Any]:
        return iter(self._families.values())


class View(Collector):
    """A collector that reads a component's figures at scrape time: ``read(families)`` adds samples.

    A ``read`` that raises loses only its own samples (logged): one broken
    view must not take ``/metrics`` down with it.
    """

    def __init__(self, read: Callable[[Families], None]):
        self.read = read

    def collect(self) -> Iterator[Any]:
        families = Families()
        try:
            self.read(families)
        except Exception:
            log.exception("a metrics view failed; its samples are left out of this scrape")
            return iter(())
        return iter(families)

    def describe(self) -> list[Any]:
        return []  # nothing is read at registration


def counters_view(f: Families, counters: Mapping[str, int], names: Mapping[str, tuple[str, str]],
                  **labels: str) -> None:
    """Samples of the keys of ``counters`` that ``names`` maps to ``(metric, help)``.

    Several keys may map to one metric with an extra label, written
    ``"metric{label=value}"``.  Keys not in ``names`` are left out (they are
    still on ``/status``); missing keys read as 0, so a series exists before
    its first event.
    """
    for key, (metric, doc) in names.items():
        extra: dict[str, str] = {}
        if "{" in metric:
            metric, _, rest = metric.partition("{")
            label, _, value = rest.rstrip("}").partition("=")
            extra[label] = value
        f.counter(metric, doc, counters.get(key, 0), **labels, **extra)


def sender_view(f: Families, sender: Any, prefix: str, **labels: str) -> None:
    """A :class:`~boreas.wire.sender.ReliableSender`'s figures (its ``stats()``), under ``prefix``."""
    stats = sender.stats()
    f.gauge(f"{prefix}_queued_documents", "Update documents queued, not yet delivered.", stats["queued"], **labels)
    f.counter(f"{prefix}_sent_documents_total", "Update documents delivered.", stats["sent"], **labels)
    f.counter(f"{prefix}_retries_total", "Transient delivery failures retried.", stats["retries"], **labels)
    f.counter(f"{prefix}_refused_documents_total", "Documents the destination refused (not retried).",
              stats["refused"], **labels)


def supervisor_view(f: Families, supervisor: Any) -> None:
    """Restarts and state of every background task of a :class:`~boreas.wire.supervisor.Supervisor`."""
    for name, entry in supervisor.status().items():
        f.counter("boreas_task_restarts_total", "Times a background task crashed and was restarted.",
                  entry["restarts"], task=name)
        f.gauge("boreas_task_running", "1 while a background task runs, 0 while it restarts or has failed.",
                1 if entry["state"] == "running" else 0, task=name)


_PEER_COUNTERS = {
    "requests": ("boreas_peer_requests_total", "HTTP calls this component made to its peers."),
    "bytes_sent": ("boreas_peer_sent_bytes_total", "Request body bytes sent to peers."),
    "unreachable": ("boreas_peer_failures_total{reason=unreachable}",
                    "Calls to peers that failed, by reason (unreachable: no answer; refused: a 4xx/5xx)."),
    "refused": ("boreas_peer_failures_total{reason=refused}",
                "Calls to peers that failed, by reason (unreachable: no answer; refused: a 4xx/5xx)."),
}


def peers_view(f: Families, peers: Any) -> None:
    """A :class:`~boreas.wire.client.PeerClient`'s counters."""
    counters_view(f, peers.counters, _PEER_COUNTERS)


def request_timer(registry: CollectorRegistry) -> Callable[..., Any]:
    """aiohttp middleware timing every request into ``boreas_http_request_duration_seconds``.

    Labels are the method, the route's pattern (``/query/{box}``, never the
    path a client typed: ``unmatched`` for a path no route serves) and the
    status.  A WebSocket (``/data``) is not timed: its duration is the
    connection's life, not a request's latency.
    """
    duration = Histogram("boreas_http_request_duration_seconds",
                         "Time from a request's header to its handler's response, by route and status.",
                         ["method", "route", "status"], registry=registry, buckets=LATENCY_BUCKETS)

    @web.middleware
    async def timer(request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
        started = time.perf_counter()
        status = 500
        response = None
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as exc:
            status = exc.status
            raise
        finally:
            if not isinstance(response, web.WebSocketResponse):
                resource = request.match_info.route.resource
                route = resource.canonical if resource is not None else "unmatched"
                method = request.method if request.method in _METHODS else "other"
                duration.labels(method, route, str(status)).observe(time.perf_counter() - started)

    return timer


def add_metrics_route(app: web.Application, registry: CollectorRegistry) -> None:
    """``GET /metrics``: the registry in Prometheus text format (OpenMetrics when asked for)."""
    from .openapi import describe_routes

    app.router.add_get("/metrics", make_aiohttp_handler(registry))
    describe_routes(app, METRICS_DOCS)


#: How :mod:`boreas.wire.openapi` describes ``GET /metrics``.
METRICS_DOCS = {
    ("GET", "/metrics"): {
        "summary": "Prometheus metrics of this component",
        "description": "The component's own registry in the Prometheus text exposition format "
                       "(OpenMetrics when the Accept header asks for it).  Counters are read from the "
                       "same figures GET /status shows, at scrape time.",
        "responses": {200: {"description": "metrics", "content": "text/plain"}},
    },
}
