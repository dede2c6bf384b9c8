"""What waits for named subscribers on a node's links, and where it goes when they resume elsewhere.

A named subscriber (``<subscribe name=>``) has a link of its own
(:class:`~boreas.wire.links.OutboundLink` with ``name``) that keeps every
batch it has not acknowledged, while it is down too.  When it subscribes
again at another endpoint (it restarted), the Head commits the new
subscription in place of the old, and what waited at the old endpoint is
handed to the new one (:func:`resume_elsewhere`).  When the box producing
the stream moves, what waited travels in the box's handover and is queued
here for the subscribers of the same names (:func:`keep_retained`).
:class:`~boreas.node.outputs.Outputs` owns the links; these functions are
how it pairs them by name.
"""

from __future__ import annotations

import logging

from boreas.catalog.model import Catalog
from boreas.wire.frames import Batch, decode
from boreas.wire.links import OutboundLink

log = logging.getLogger("boreas.node.outputs")


def resume_elsewhere(links: dict[str, OutboundLink], before: dict[str, list[str]],
                     destinations: dict[str, list[str]], catalog: Catalog, node: str) -> None:
    """A named subscriber that subscribed again elsewhere: what waited for it goes there.

    ``before`` and ``destinations`` are where each stream went before and
    after the catalog change.  Its new subscription replaced the old one in
    the same commit (paired by stream and name); what it had not
    acknowledged is handed to the new link, and its receiver drops what it
    already has.
    """
    heirs = {(sub.stream, sub.name): links[sub.endpoint] for sub in catalog.subscriptions.values()
             if sub.name and sub.endpoint in links}
    for stream, old in before.items():
        for endpoint in old:
            link = links.get(endpoint)
            heir = heirs.get((stream, link.name)) if link is not None and link.name else None
            if link is None or heir is None or heir is link or endpoint in destinations.get(stream, ()):
                continue
            moved = link.redirect(stream, heir)
            log.info("node %s: subscriber %r of %s resumes at %s (was %s): %d batches it had not acknowledged "
                     "handed over", node, link.name, stream, heir.endpoint, endpoint, moved)


def keep_retained(links: dict[str, OutboundLink], destinations: dict[str, list[str]], retained: list[list],
                  node: str) -> None:
    """Queue ``[[name, encoded Batch], ...]`` (what a moved box brought) for the named subscribers here."""
    for name, data in retained:
        batch = decode(bytes(data))
        assert isinstance(batch, Batch)
        targets = [link for e, link in links.items() if link.name == name and e in destinations.get(batch.stream, ())]
        if not targets:
            log.warning("node %s: %s/%s#%d, kept for subscriber %r, has nowhere to go here", node, batch.stream,
                        batch.producer, batch.seq, name)
        for link in targets:
            link.requeue([batch])


def named_entry(link: OutboundLink) -> list[str]:
    """A named subscriber's batches in a snapshot carry its name: it may resume at another endpoint."""
    return [link.name] if link.name else []
