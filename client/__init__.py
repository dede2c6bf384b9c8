"""The Python client API: publish into input streams, subscribe to streams, read M3 views.

Everything talks to a running cluster through its Head (``head``: its URL,
e.g. ``http://localhost:14000``; ``token``: the cluster's shared token, which
``boreas cluster up`` prints):

* :class:`Publisher` sends rows into an input stream, straight to the nodes
  where it enters; ordered, acknowledged, exactly once per ``producer``.
* :class:`KeyedPublisher` publishes into a partitioned ``m3`` box with
  each row sent to the member owning its key (input partitioned by key).
* :class:`Subscriber` receives a stream's tuples as they are produced (an
  async iterator of tuples in field order).
* :class:`QueryClient` reads the maps and views of ``m3`` boxes where they
  run (:func:`query` does one read without an event loop).
* :class:`Optimizer` changes the running topology as an optimizer does:
  moves boxes, inserts and removes filters, changes a partitioned box's
  layout (:mod:`.optimizer`; docs/client.md "Optimizers").

Example (a cluster running ``examples/xml/sensor_chain.xml``)::

    import asyncio
    from boreas.client import Publisher, Subscriber

    async def main(head: str, token: str) -> None:
        async with Subscriber(head, "Average", token) as averages:
            async with Publisher(head, "Reading", token) as readings:
                await readings.send([(1, t, 20.0 + t % 5) for t in range(120)])  # sensor, time, celsius
                await readings.send([{"sensor": 1, "time": 120, "celsius": 0.0}])  # by field name
            async for row in averages:   # (sensor, time, fahrenheit, readings): one-minute averages
                print(row)
                break

    asyncio.run(main("http://localhost:14000", "s3cret"))

and reading an ``m3`` box's view (``examples/xml/tpch_q3.xml``)::

    from boreas.client import QueryClient

    async with QueryClient("http://localhost:14000") as client:
        total = (await client.query("q3", agg="sum")).value

TLS: a cluster that runs with TLS is reached at ``https://``; the client
classes use the process's TLS settings, from ``$BOREAS_TLS_CA`` (and
``$BOREAS_TLS_CERT``/``$BOREAS_TLS_KEY``, which a :class:`Subscriber` needs
to serve the node's connection, and every client needs where the cluster
requires client certificates), or set once before the first client::

    from boreas.client import TlsConfig, configure_tls

    configure_tls(TlsConfig(ca="ca.pem", cert="me.pem", key="me.key"))

Errors: :class:`UnknownStream` (no such stream, or not an input),
:class:`LinkRefused` (a node refused the token), :class:`PublishRefused` (a
node refused a batch), :class:`SubscribeFailed`, :class:`QueryFailed` (an
unknown box or map, a bad key: the message says which), :class:`OptimizerFailed`
(a change refused or not shown in time: the message says why);
:class:`~boreas.wire.client.PeerError` when the Head cannot be reached or
refuses.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from boreas.wire.tls import TlsConfig  # (light: the process's TLS settings)
from boreas.wire.tls import configure as configure_tls

# ``boreas.client.optimizer`` (``boreas move``) must not import the publisher, the subscriber and M3:
# the names below are imported when first used, not with the package.
#: Each exported name -> the module that defines it (imported on first use, PEP 562).
_EXPORTS = {
    "LinkRefused": "boreas.wire.link_connection",
    "UnknownStream": ".head_api",
    "KeyedPublisher": ".keyed",
    "Optimizer": ".optimizer",
    "OptimizerFailed": ".optimizer",
    "PublishRefused": ".publisher",
    "Publisher": ".publisher",
    "QueryClient": ".query",
    "QueryFailed": ".query",
    "QueryResult": ".query",
    "query": ".query",
    "SubscribeFailed": ".subscriber",
    "SubscribeTimeout": ".subscriber",
    "Subscriber": ".subscriber",
}

__all__ = [
    "KeyedPublisher",
    "LinkRefused",
    "Optimizer",
    "OptimizerFailed",
    "PublishRefused",
    "Publisher",
    "QueryClient",
    "QueryFailed",
    "QueryResult",
    "SubscribeFailed",
    "SubscribeTimeout",
    "Subscriber",
    "TlsConfig",
    "UnknownStream",
    "configure_tls",
    "query",
]

if TYPE_CHECKING:  # what type checkers see; at run time __getattr__ imports on use
    from boreas.wire.link_connection import LinkRefused
    from .head_api import UnknownStream
    from .keyed import KeyedPublisher
    from .optimizer import Optimizer, OptimizerFailed
    from .publisher import PublishRefused, Publisher
    from .query import QueryClient, QueryFailed, QueryResult, query
    from .subscriber import SubscribeFailed, SubscribeTimeout, Subscriber


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value
