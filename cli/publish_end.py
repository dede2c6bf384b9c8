"""``boreas publish STREAM --end --producer NAME``: end a producer that published in an earlier run.

A producer ends its part of a stream with ``--final`` on its last publish.
One that did not (the run was interrupted, more might have come) can be
ended later on its own, by its ``--producer`` id, with no rows: the node
takes the end after whatever it took of that producer
(:meth:`~boreas.client.publisher.Publisher.end`), and once every producer
of the stream has ended, the stream ends (node/stream_ends.py).  The same
file published again with ``--final`` and the same id does it too: its
batches are dropped as already taken, and the end follows them.
"""

from __future__ import annotations

import argparse
import sys

from .common import EXIT_OK, BadInput, CommandFailed


def publish_end(args: argparse.Namespace, head: str, token: str | None) -> int:
    """End producer ``args.producer`` of ``args.stream``; exit 0 once the entry nodes took the end."""
    from boreas.client.head_api import UnknownStream  # (aiohttp: imported when a command runs, not for --help)
    from boreas.client.publisher import Publisher, PublishRefused

    if not args.producer:
        raise BadInput("--end needs --producer NAME: the producer to end (the one its earlier publish used)")

    import asyncio

    async def main() -> int:
        publisher = Publisher(head, args.stream, token, producer=args.producer)
        try:
            await publisher.start()
        except UnknownStream as exc:
            raise CommandFailed(str(exc)) from None
        try:
            await publisher.end()
        except (PublishRefused, TimeoutError) as exc:
            raise CommandFailed(f"could not end producer {args.producer!r} of {args.stream}: {exc}") from None
        print(f"ended producer {args.producer!r} of {args.stream}: the stream ends once every producer of it "
              "has ended; anything more under this producer id is dropped", file=sys.stderr)
        return EXIT_OK

    return asyncio.run(main())
