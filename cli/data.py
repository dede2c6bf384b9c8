"""Commands that move tuples: ``publish`` and ``subscribe``.

``publish`` refuses an input file it cannot read before contacting anyone
(exit 2), shows its progress (rows/s, ETA) on stderr when stderr is a
terminal (or with ``--progress``), and on Ctrl-C says how far it got and
exits 130: the same command run again continues (the node skips the
batches it already took).  ``subscribe`` ends quietly when its reader goes
away (``boreas subscribe S | head -3``).

Reading the input file in batches is :mod:`.input_batches` (pyarrow's
readers, in bounded memory), the progress display :mod:`.progress`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from boreas.catalog.words import counted
from boreas.wire.auth import resolve_token

from .common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    BadInput,
    CommandFailed,
    StdoutClosed,
    add_head_option,
    add_token_option,
    check_readable,
    run_until_stopped,
    the_head,
)
from .progress import Progress, acknowledged
from .publish_end import publish_end
from .subscribe_output import FORMATS, open_output, recorded_positions

#: Refused rows printed one per line; the rest are counted.
SHOWN_PROBLEMS = 20

#: Rows per batch of ``publish --spark`` without ``--batch-size`` (each executor's batches, as before).
SPARK_BATCH = 1000


def cmd_publish(args: argparse.Namespace) -> int:
    import asyncio  # (with ssl: imported when a command runs, not for --help, as everything below)

    from boreas.client.head_api import UnknownStream  # (aiohttp: imported when a command runs, not for --help)
    from boreas.client.publisher import Publisher

    head = the_head(args)
    token = resolve_token(args.token, required=False)
    if args.spark:
        return _publish_with_spark(args, head, token)
    if args.end:
        return publish_end(args, head, token)
    check_readable(args.file)  # before contacting anyone: exit 2, nothing is sent
    show_progress = args.progress if args.progress is not None else sys.stderr.isatty()

    async def main() -> int:
        from boreas.client.publisher import CAPACITY

        from .file_batches import file_batch_rows, file_window  # (pyarrow: only when a file is published)

        publisher = Publisher(head, args.stream, token, batch_size=args.batch_size or 1,
                              producer=args.producer or default_producer(args.stream, args.file))
        try:
            await publisher.locate()  # (the schema first: the batches and the window are sized by it)
            assert publisher.schema is not None
            publisher.batch_size = args.batch_size or file_batch_rows(publisher.schema)
            publisher.capacity = file_window(publisher.batch_size, publisher.schema, CAPACITY)  # (its links' window)
            await publisher.start()
        except UnknownStream as exc:
            raise CommandFailed(str(exc)) from None
        progress: Progress | None = None
        follower: asyncio.Task | None = None

        def begin(source: Any) -> None:
            nonlocal progress, follower
            if show_progress:
                progress = Progress(args.stream, source.total, sys.stderr.isatty(), source.read_share)
                follower = asyncio.create_task(progress.follow(publisher))

        try:
            source = await _publish_file(args, publisher, begin)
        except asyncio.CancelledError:  # Ctrl-C (asyncio.run cancels this task on SIGINT)
            if hasattr(publisher, "abort"):
                await publisher.abort()
            if progress is not None:
                progress.finish(publisher)
            print(f"interrupted: {args.stream} took {acknowledged(publisher):,} rows of {args.file} so far; "
                  "run the same command again to publish the rest (what was taken is skipped)", file=sys.stderr)
            return EXIT_INTERRUPTED
        except BaseException:
            await publisher.abort()  # (its links' sessions: closed, not left for the loop to complain about)
            if progress is not None and progress.tty:
                sys.stderr.write("\n")  # the error goes on a line of its own
            raise
        finally:
            if follower is not None:
                follower.cancel()
                await asyncio.gather(follower, return_exceptions=True)
        if progress is not None:
            progress.finish(publisher, total=source.given)
        return _report_publish(args, publisher, source)

    return asyncio.run(main())


async def _publish_file(args: argparse.Namespace, publisher: Any, begin: Callable[[Any], None]) -> Any:
    """Read the file in batches of the stream's schema and send them (:mod:`.input_batches`); ``begin(the
    input file)`` once its header (or columns) has been accepted, before anything is sent."""
    from boreas.client.publisher import PublishRefused

    from .input_batches import open_input  # (pyarrow: only when a file is published)
    from .read_ahead import read_ahead

    assert publisher.schema is not None
    source = open_input(args.file, publisher.schema, publisher.batch_size, header=not args.no_header,
                        ignore_unknown=args.ignore_unknown)
    begin(source)
    try:
        async with contextlib.aclosing(read_ahead(source.batches())) as pieces:  # (the reader thread joined)
            async for piece in pieces:  # (Columns, one batch each; or rows the node types: JSON lines Arrow
                await publisher.send(piece)  # could not read)
        await publisher.close(final=args.final)
    except PublishRefused as exc:
        raise CommandFailed(str(exc)) from None
    return source


def _report_publish(args: argparse.Namespace, publisher: Any, source: Any) -> int:
    refused = source.refused_here + publisher.refused_count
    named = source.refused(publisher.refused)
    for row, reason in named[:SHOWN_PROBLEMS]:
        print(f"{args.file}: row {row}: {reason}", file=sys.stderr)
    if refused > SHOWN_PROBLEMS:
        print(f"{args.file}: ... and {refused - SHOWN_PROBLEMS} more refused rows", file=sys.stderr)
    print(f"published {counted(publisher.accepted, 'row')} to {args.stream}"
          + (f"; {refused} refused" if refused else ""))
    if publisher.duplicates:
        n = publisher.duplicates
        print(f"{n} {'batch was' if n == 1 else 'batches were'} already taken from producer "
              f"{publisher.producer!r} (an earlier run of this publish of the same file) and skipped; give "
              f"another --producer to publish {'it' if n == 1 else 'them'} again", file=sys.stderr)
    return EXIT_FAILED if refused else EXIT_OK


def _publish_with_spark(args: argparse.Namespace, head: str, token: str | None) -> int:
    from boreas.client.head_api import UnknownStream
    from boreas.client.publisher import PublishRefused

    if importlib.util.find_spec("pyspark") is None:
        raise CommandFailed("--spark needs pyspark, which is not installed: pip install 'boreas[spark]' "
                            "(or publish the file with --file)")
    if "://" not in args.spark and not os.path.exists(args.spark):
        raise BadInput(f"{args.spark}: cannot read file: No such file or directory")
    from boreas.spark import RowsRefused, publish_file

    try:
        count = publish_file(args.spark, args.stream, head=head, token=token,
                             batch_size=args.batch_size or SPARK_BATCH)
    except (UnknownStream, PublishRefused) as exc:
        raise CommandFailed(str(exc)) from None
    except RowsRefused as exc:
        for refused in exc.result.refused[:SHOWN_PROBLEMS]:
            print(f"{args.spark}: {refused}", file=sys.stderr)
        print(f"published {exc.result.published} rows from {args.spark} to {args.stream} with Spark; "
              f"{exc.result.refused_count} refused")
        return EXIT_FAILED
    print(f"published {count} rows from {args.spark} to {args.stream} with Spark")
    return EXIT_OK


def cmd_subscribe(args: argparse.Namespace) -> int:
    import asyncio

    from boreas.client.head_api import UnknownStream  # (aiohttp: imported when a command runs, not for --help)
    from boreas.client.subscriber import SubscribeFailed, Subscriber

    head = the_head(args)
    token = resolve_token(args.token, required=False)
    if args.format == "parquet" and not args.output:
        raise BadInput("--format parquet needs --output FILE (Parquet is not written to a terminal or pipe)")
    if args.name and args.format == "parquet":
        raise BadInput("--name cannot resume into a Parquet file (it is readable only once closed): "
                       "use --format jsonl or csv")
    if args.name and args.on_slow:
        raise BadInput("--on-slow does not apply to a named subscriber (--name): the node keeps its batches "
                       "until it acknowledges them, up to its --subscriber-buffer-mb and --subscriber-retain-for")
    resume = (args.stream, args.name) if args.name else None
    resume_from = recorded_positions(args.output, args.stream, args.name)

    async def main(stop: asyncio.Event) -> int:
        subscriber = Subscriber(head, args.stream, token, listen=args.listen, advertise=args.advertise,
                                on_slow=args.on_slow, retry_for=args.retry_for, name=args.name, resume_from=resume_from)
        try:
            await subscriber.start()
        except (UnknownStream, SubscribeFailed) as exc:
            raise CommandFailed(str(exc)) from None
        assert subscriber.schema is not None
        try:
            output = open_output(args.format, args.output, subscriber.schema, resume)
        except BaseException:
            await subscriber.close()
            raise
        resumed = f" as {args.name!r}" + (", resuming " + args.output if resume_from else "") if args.name else ""
        print(f"subscribed to {args.stream}{resumed} at {subscriber.endpoint}", file=sys.stderr, flush=True)
        seen = 0
        closed = False
        failure: str | None = None

        async def read() -> None:
            nonlocal seen, closed, failure
            try:
                async for batch in subscriber.arrow() if output.arrow else subscriber.batches():
                    # (named: whole batches, so what it records of them is what it wrote)
                    seen += output.write(batch, args.count - seen if args.count and not args.name else None)
                    output.checkpoint(subscriber.positions())  # before the next is asked for: the ack
                    if args.count and seen >= args.count:
                        return
            except BrokenPipeError:  # the reader went away (| head): stop like --count
                closed = True
            except SubscribeFailed as exc:  # cut off, or the producing node gone: never go on silently
                failure = str(exc)
            finally:
                stop.set()

        reader = asyncio.create_task(read())
        try:
            await stop.wait()
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            if not closed:
                try:
                    output.close()
                except BrokenPipeError:
                    closed = True
            if subscriber.ended:  # nothing more will come: a named subscription has nothing left to keep either
                await subscriber.unsubscribe()
            else:
                await subscriber.close()
        if closed:
            raise StdoutClosed()
        if failure is not None:
            raise CommandFailed(f"subscription to {args.stream} ended after {seen} tuples: {failure}")
        if subscriber.ended:
            print(f"{args.stream} ended (every producer of it has ended): {counted(seen, 'tuple')} written",
                  file=sys.stderr)
        elif args.name:
            print(f"subscription {args.name!r} to {args.stream} stays: the node keeps its batches until "
                  f"`boreas subscribe {args.stream} --name {args.name}` resumes it", file=sys.stderr)
        return EXIT_OK

    return run_until_stopped(main)


def default_producer(stream: str, path: str) -> str:
    """``stream@host:/abs/file#identity``: the same command re-run on the same, unchanged file continues,
    not repeats; an edited file is a new publish (all of its rows are sent, as any console producer would).

    The file's identity is its size, modification time and a digest of its first megabyte
    (:func:`file_identity`), so replacing or editing the file gives another producer id.

    >>> import tempfile, os
    >>> with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
    ...     _ = f.write("time,value\\n1,2\\n")
    >>> first = default_producer("Reading", f.name)
    >>> first.startswith("Reading@") and first == default_producer("Reading", f.name)
    True
    >>> with open(f.name, "a") as g:
    ...     _ = g.write("3,4\\n")
    >>> default_producer("Reading", f.name) != first
    True
    >>> os.unlink(f.name)
    """
    return f"{stream}@{socket.gethostname()}:{Path(path).resolve()}#{file_identity(path)}"


def file_identity(path: str) -> str:
    """``size-mtime-digest``: what tells a file apart from an edited or replaced one, without reading it whole."""
    import hashlib

    info = os.stat(path)
    with open(path, "rb") as f:
        head = hashlib.blake2b(f.read(1 << 20), digest_size=6).hexdigest()
    return f"{info.st_size}-{info.st_mtime_ns}-{head}"


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("publish", help="publish rows into an input stream")
    p.add_argument("stream")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--file", help="data.csv (a header row names the columns, in any order), data.jsonl "
                                       "(objects by field name, or arrays in field order) or data.parquet "
                                       "(columns by name); read in batches in bounded memory")
    source.add_argument("--spark", metavar="PATH", help="publish a parquet or CSV file with a Spark job")
    source.add_argument("--end", action="store_true",
                        help="publish no rows: end the producer named by --producer, which published in an earlier "
                             "run without --final (the stream ends once every producer of it has ended)")
    p.add_argument("--no-header", action="store_true",
                   help="the CSV file has no header row: columns are the stream's fields in order")
    p.add_argument("--ignore-unknown", action="store_true",
                   help="skip CSV and Parquet columns and JSON keys that are not fields of the stream "
                        "(default: refuse)")
    p.add_argument("--batch-size", type=int, default=None,
                   help="rows per batch (default: about 2 MB of the stream's columns, e.g. 104,857 rows of a "
                        "long, an int and a double; as many in flight as make 16 MB); batches are cut by rows, never by time, "
                        "so a re-run with the same --batch-size (or none) sends the same batches")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="show rows/s and the ETA on stderr (default: when stderr is a terminal)")
    p.add_argument("--final", action="store_true",
                   help="this is all the producer publishes: once every producer of the stream has ended, "
                        "its aggregates emit their open windows (the last window, at the end of a file)")
    p.add_argument("--producer", metavar="NAME",
                   help="this publisher's stable identity: run again after a crash with the same NAME and the "
                        "same file, and the node drops what it already took, so every row counts once "
                        "(default: derived from the stream, this host, the file's path and its identity: size, "
                        "modification time and a digest of its first megabyte, so an edited file is published "
                        "whole again); the same NAME with other rows is refused")
    add_head_option(p)
    add_token_option(p)
    p.set_defaults(func=cmd_publish)

    p = sub.add_parser("subscribe", help="print a stream's tuples as JSON lines as they arrive",
                       description="Print (or write) a stream's tuples as they arrive, until Ctrl-C, --count, or "
                                   "the end of the stream: once every producer upstream has ended (boreas publish "
                                   "--final), it writes everything, ends its subscription and exits 0.")
    p.add_argument("stream")
    p.add_argument("--format", choices=FORMATS, default="jsonl",
                   help="jsonl: a JSON object per tuple (default); csv: a header row, then a line per tuple; "
                        "parquet: a Parquet file written a batch at a time (needs --output). A timestamp is "
                        "microseconds since the epoch in each, so the output can be published again as it is")
    p.add_argument("--output", metavar="FILE", help="write into FILE instead of stdout (needed for parquet)")
    p.add_argument("--listen", default="localhost:0", help="HOST:PORT to receive on (default: a free port)")
    p.add_argument("--advertise", metavar="HOST[:PORT]",
                   help="where the node sends to, when --listen is not reachable as it is (0.0.0.0, NAT); a HOST "
                        "alone gets the port bound (default: the address bound)")
    p.add_argument("--count", type=int, default=0,
                   help="exit after this many tuples (with --name, after the batch that reaches them)")
    p.add_argument("--retry-for", type=float, default=30.0, metavar="SECONDS",
                   help="when the node sending the stream goes away, wait this long for it (or the node that "
                        "takes its boxes over) to come back, then exit 1 (default 30)")
    p.add_argument("--name", metavar="NAME",
                   help="a named subscription resumes: the node keeps its batches until they are acknowledged, "
                        "and `subscribe --name NAME` started again (after Ctrl-C, a crash, a restart) gets what "
                        "the last one had not; with --output FILE exactly once (FILE.position records how far "
                        "it got), on stdout at least once. One that fell past what the node keeps is told how "
                        "much it missed and exits 1")
    p.add_argument("--on-slow", choices=("disconnect", "drop", "block"), default=None,
                   help="when this subscriber falls a whole buffer behind, the node disconnects it (default; "
                        "it says why), drops batches, or blocks (and with it everything the node sends)")
    add_head_option(p)
    add_token_option(p)
    p.set_defaults(func=cmd_subscribe)
