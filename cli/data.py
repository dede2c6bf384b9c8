"""Commands that move tuples: ``publish`` and ``subscribe``.

``publish`` refuses an input file it cannot read before contacting anyone
(exit 2), shows its progress (rows/s, ETA) on stderr when stderr is a
terminal (or with ``--progress``), and on Ctrl-C says how far it got and
exits 130: the same command run again continues (the node skips the
batches it already took).  ``subscribe`` ends quietly when its reader goes
away (``boreas subscribe S | head -3``).

Reading the input file's rows is :mod:`.input_rows`, the progress display
:mod:`.progress`.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import importlib.util
import json
import os
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from boreas.client.head_api import UnknownStream
from boreas.client.publisher import Publisher, PublishRefused
from boreas.client.subscriber import SubscribeFailed, Subscriber, SubscriberTooSlow
from boreas.wire.auth import resolve_token
from boreas.wire.tuples import RowType, SchemaMismatch

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
from .input_rows import RowProblems, count_rows, is_json_lines, read_rows
from .progress import Progress, acknowledged

#: Refused rows printed one per line; the rest are counted.
SHOWN_PROBLEMS = 20


def cmd_publish(args: argparse.Namespace) -> int:
    head = the_head(args)
    token = resolve_token(args.token, required=False)
    if args.spark:
        return _publish_with_spark(args, head, token)
    check_readable(args.file)  # before contacting anyone: exit 2, nothing is sent
    show_progress = args.progress if args.progress is not None else sys.stderr.isatty()

    async def main() -> int:
        publisher = Publisher(head, args.stream, token, batch_size=args.batch_size,
                              producer=args.producer or default_producer(args.stream, args.file))
        try:
            await publisher.start()
        except UnknownStream as exc:
            raise CommandFailed(str(exc)) from None
        progress: Progress | None = None
        follower: asyncio.Task | None = None

        def begin(total: int | None) -> None:
            nonlocal progress, follower
            if show_progress:
                progress = Progress(args.stream, total, sys.stderr.isatty())
                follower = asyncio.create_task(progress.follow(publisher))

        try:
            outcome = await _publish_file(args, publisher, begin)
        except asyncio.CancelledError:  # Ctrl-C (asyncio.run cancels this task on SIGINT)
            if hasattr(publisher, "abort"):
                await publisher.abort()
            if progress is not None:
                progress.finish(publisher)
            print(f"interrupted: {args.stream} took {acknowledged(publisher):,} rows of {args.file} so far; "
                  "run the same command again to publish the rest (what was taken is skipped)", file=sys.stderr)
            return EXIT_INTERRUPTED
        except BaseException:
            if progress is not None and progress.tty:
                sys.stderr.write("\n")  # the error goes on a line of its own
            raise
        finally:
            if follower is not None:
                follower.cancel()
        if progress is not None:
            progress.finish(publisher)
        return _report_publish(args, publisher, *outcome)

    return asyncio.run(main())


async def _publish_file(args: argparse.Namespace, publisher: Any,
                        begin: Callable[[int | None], None]) -> tuple[RowProblems, list[int]]:
    """Read, type and send the file's rows; ``begin(total rows or None)`` once they are counted."""
    problems = RowProblems(args.file)
    rows = read_rows(args.file, publisher.fields, header=not getattr(args, "no_header", False),
                     ignore_unknown=getattr(args, "ignore_unknown", False), problems=problems)
    numbers: list[int] = []  # the file row of each row sent, for the node's refusals
    if is_json_lines(args.file):
        def sent() -> Iterator[list[Any]]:
            for number, values in rows:
                numbers.append(number)
                yield values
        begin(count_rows(args.file))
    else:
        # CSV values are text: type them by the schema here; the node checks them again.
        # Reading them all first also refuses a bad header before anything is sent.
        assert publisher.schema is not None
        row_type, typed = RowType(publisher.schema), []
        for number, values in rows:
            try:
                typed.append(row_type.from_text(values))
                numbers.append(number)
            except SchemaMismatch as exc:
                problems.add(number, str(exc))

        def sent() -> Iterator[list[Any]]:
            yield from typed
        begin(len(typed))
    try:
        await publisher.send(sent())
        await publisher.close()
    except PublishRefused as exc:
        raise CommandFailed(str(exc)) from None
    return problems, numbers


def _report_publish(args: argparse.Namespace, publisher: Any, problems: RowProblems, numbers: list[int]) -> int:
    for error in publisher.refused:
        row = numbers[error.row] if 0 <= error.row < len(numbers) else error.row + 1
        problems.add(row, f"field {error.field!r}: {error.reason}")
    refused_by_node = publisher.refused_count
    refused = len(problems) + refused_by_node - len(publisher.refused)
    for row, reason in sorted(problems.found)[:SHOWN_PROBLEMS]:
        print(f"{args.file}: row {row}: {reason}", file=sys.stderr)
    if refused > SHOWN_PROBLEMS:
        print(f"{args.file}: ... and {refused - SHOWN_PROBLEMS} more refused rows", file=sys.stderr)
    print(f"published {publisher.accepted} rows to {args.stream}" + (f"; {refused} refused" if refused else ""))
    if publisher.duplicates:
        n = publisher.duplicates
        print(f"{n} {'batch was' if n == 1 else 'batches were'} already taken from producer "
              f"{publisher.producer!r} (an earlier run of this publish of the same file) and skipped; give "
              f"another --producer to publish {'it' if n == 1 else 'them'} again", file=sys.stderr)
    return EXIT_FAILED if refused else EXIT_OK


def _publish_with_spark(args: argparse.Namespace, head: str, token: str | None) -> int:
    if importlib.util.find_spec("pyspark") is None:
        raise CommandFailed("--spark needs pyspark, which is not installed: pip install 'boreas[spark]' "
                            "(or publish the file with --file)")
    if "://" not in args.spark and not os.path.exists(args.spark):
        raise BadInput(f"{args.spark}: cannot read file: No such file or directory")
    from boreas.spark import RowsRefused, publish_file

    try:
        count = publish_file(args.spark, args.stream, head=head, token=token, batch_size=args.batch_size)
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
    head = the_head(args)
    token = resolve_token(args.token, required=False)

    async def main(stop: asyncio.Event) -> int:
        subscriber = Subscriber(head, args.stream, token, listen=args.listen, on_slow=args.on_slow)
        try:
            await subscriber.start()
        except (UnknownStream, SubscribeFailed) as exc:
            raise CommandFailed(str(exc)) from None
        print(f"subscribed to {args.stream} at {subscriber.endpoint}", file=sys.stderr, flush=True)
        assert subscriber.schema is not None
        names = [f.name for f in subscriber.schema.fields]
        seen = 0
        closed = False
        failure: str | None = None

        async def read() -> None:
            nonlocal seen, closed, failure
            try:
                async for rows in subscriber.batches():
                    for row in rows:
                        print(json.dumps(dict(zip(names, row))))
                        seen += 1
                        if args.count and seen >= args.count:
                            sys.stdout.flush()
                            return
                    sys.stdout.flush()
            except BrokenPipeError:  # the reader went away (| head): stop like --count
                closed = True
            except SubscriberTooSlow as exc:  # cut off: never go on silently past a gap
                failure = str(exc)
            finally:
                stop.set()

        reader = asyncio.create_task(read())
        try:
            await stop.wait()
        finally:
            reader.cancel()
            if not closed:
                try:
                    sys.stdout.flush()
                except BrokenPipeError:
                    closed = True
            await subscriber.close()
        if closed:
            raise StdoutClosed()
        if failure is not None:
            raise CommandFailed(f"subscription to {args.stream} ended after {seen} tuples: {failure}")
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
    info = os.stat(path)
    with open(path, "rb") as f:
        head = hashlib.blake2b(f.read(1 << 20), digest_size=6).hexdigest()
    return f"{info.st_size}-{info.st_mtime_ns}-{head}"


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("publish", help="publish rows into an input stream")
    p.add_argument("stream")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--file", help="data.csv (a header row names the columns, in any order) or "
                                       "data.jsonl (objects by field name, or arrays in field order)")
    source.add_argument("--spark", metavar="PATH", help="publish a parquet or CSV file with a Spark job")
    p.add_argument("--no-header", action="store_true",
                   help="the CSV file has no header row: columns are the stream's fields in order")
    p.add_argument("--ignore-unknown", action="store_true",
                   help="skip CSV columns and JSON keys that are not fields of the stream (default: refuse)")
    p.add_argument("--batch-size", type=int, default=1000)
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="show rows/s and the ETA on stderr (default: when stderr is a terminal)")
    p.add_argument("--producer", metavar="NAME",
                   help="this publisher's stable identity: run again after a crash with the same NAME and the "
                        "same file, and the node drops what it already took, so every row counts once "
                        "(default: derived from the stream, this host, the file's path and its identity: size, "
                        "modification time and a digest of its first megabyte, so an edited file is published "
                        "whole again); the same NAME with other rows is refused")
    add_head_option(p)
    add_token_option(p)
    p.set_defaults(func=cmd_publish)

    p = sub.add_parser("subscribe", help="print a stream's tuples as JSON lines as they arrive")
    p.add_argument("stream")
    p.add_argument("--listen", default="localhost:0", help="HOST:PORT to receive on (default: a free port)")
    p.add_argument("--count", type=int, default=0, help="exit after this many tuples")
    p.add_argument("--on-slow", choices=("disconnect", "drop", "block"), default=None,
                   help="when this subscriber falls a whole buffer behind, the node disconnects it (default; "
                        "it says why), drops batches, or blocks (and with it everything the node sends)")
    add_head_option(p)
    add_token_option(p)
    p.set_defaults(func=cmd_subscribe)
