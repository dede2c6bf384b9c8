"""Where a server listens and the address it gives out: ``--listen``, ``--advertise`` and ``--endpoint``.

A process in a container or behind NAT binds one address (``0.0.0.0:15000``,
every interface) and is reached at another (its pod's or host's name).  So
every command that receives connections takes both:

* ``--listen HOST:PORT``: what the server binds;
* ``--advertise HOST:PORT``: what it tells others -- the catalog knows a node
  by this endpoint, a region or global component registers with it, and it is
  what peers connect to (and what a TLS certificate must name);
* ``--endpoint HOST:PORT``: both at once, the spelling for the common case.

Given only one of ``--listen`` and ``--advertise``, the other is the same
address, except that a wildcard listen address (``0.0.0.0``, ``[::]``) is
nobody's address to connect to: then ``--advertise`` must be given, and
the command says so instead of registering an endpoint no one can reach.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from .common import CommandFailed, endpoint_of

#: Hosts that mean "every interface of this machine" when bound, and no machine when connected to.
WILDCARDS = frozenset({"0.0.0.0", "[::]"})


@dataclass(frozen=True)
class Addresses:
    """A server's two addresses; they are the same unless the command was told otherwise."""

    listen: str  #: HOST:PORT the server binds
    advertise: str  #: HOST:PORT others reach it at: its name in the catalog


def add_address_options(parser: argparse.ArgumentParser, what: str, *, default: str | None = None) -> None:
    """``--endpoint``, ``--listen`` and ``--advertise`` for a command whose server is ``what``."""
    fallback = f" (default {default})" if default else ""
    parser.add_argument("--endpoint", metavar="HOST:PORT",
                        help=f"HOST:PORT {what} listens on and is reached at{fallback}: --listen and --advertise "
                             "at once")
    parser.add_argument("--listen", metavar="HOST:PORT",
                        help=f"HOST:PORT {what} binds, e.g. 0.0.0.0:PORT in a container (default: --endpoint, "
                             "or --advertise)")
    parser.add_argument("--advertise", metavar="HOST:PORT",
                        help=f"HOST:PORT others reach {what} at, and its name in the catalog (default: "
                             "--endpoint, or --listen unless that is a wildcard address)")


def addresses_of(args: argparse.Namespace, default_port: int, *, default: str | None = None) -> Addresses:
    """The two addresses the options say, or ``CommandFailed`` naming what is missing or unusable."""
    endpoint = getattr(args, "endpoint", None) or None
    listen_text = args.listen or endpoint
    advertise_text = args.advertise or endpoint
    if listen_text is None and advertise_text is None:
        if default is None:
            raise CommandFailed("say where to listen: --endpoint HOST:PORT (or --listen and --advertise)")
        listen_text = advertise_text = default
    listen = endpoint_of(listen_text or advertise_text or "", default_port)
    if advertise_text is None:
        if host_of(listen) in WILDCARDS:
            raise CommandFailed(f"--listen {listen} is every address of this machine, not one others can reach: "
                                "say which with --advertise HOST:PORT")
        return Addresses(listen, listen)
    advertise = endpoint_of(advertise_text, default_port)
    if host_of(advertise) in WILDCARDS:
        raise CommandFailed(f"--advertise {advertise}: a wildcard address is not one others can reach; give the "
                            "host name or address they connect to")
    return Addresses(listen, advertise)


def host_of(endpoint: str) -> str:
    """The host part of a normalised ``HOST:PORT``.

    >>> host_of("0.0.0.0:15000"), host_of("[::]:15000")
    ('0.0.0.0', '[::]')
    """
    return endpoint.rsplit(":", 1)[0]
