"""Commands that move tuples: ``publish`` and ``subscribe``."""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import sys
from collections.abc import Iterator
from typing import Any

from boreas.client.head_api import UnknownStream
from boreas.client.publisher import Publisher, PublishRefused
from boreas.client.subscriber import Subscriber
from boreas.wire.auth import resolve_token
from boreas.wire.tuples import RowType, SchemaMismatch

from .common import EXIT_FAILED, EXIT_OK, CommandFailed, add_head_option, add_token_option, run_until_stopped, the_head


def read_rows(path: str, fields: list[str]) -> Iterator[Any]:
    """Rows of a CSV file (a header row naming the fields is skipped) or JSON lines (objects or arrays)."""
    if _is_json_lines(path):
        with open(path, encoding="utf-8") as fh:
            for number, line in enumerate(fh, start=1):
                if line.strip():
                    try:
                        yield json.loads(line)
                    except ValueError as exc:
                        raise CommandFailed(f"{path}:{number}: not JSON: {exc}") from None
        return
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        for number, row in enumerate(reader, start=1):
            if number == 1 and [c.strip() for c in row] == fields:
                continue
            yield row


def cmd_publish(args: argparse.Namespace) -> int:
    head = the_head(args)
    token = resolve_token(args.token, required=False)
    if args.spark:
        return _publish_with_spark(args, head, token)

    async def main() -> int:
        publisher = Publisher(head, args.stream, token, batch_size=args.batch_size)
        try:
            await publisher.start()
        except UnknownStream as exc:
            raise CommandFailed(str(exc)) from None
        rows: Iterator[Any] = read_rows(args.file, publisher.fields)
        bad_lines = 0
        if not _is_json_lines(args.file):
            # CSV values are text: type them by the schema here; the node checks them again.
            assert publisher.schema is not None
            row_type, typed = RowType(publisher.schema), []
            for number, row in enumerate(rows, start=1):
                try:
                    typed.append(row_type.from_text(row))
                except SchemaMismatch as exc:
                    bad_lines += 1
                    print(f"{args.file}: row {number}: {exc}", file=sys.stderr)
            rows = iter(typed)
        try:
            await publisher.send(rows)
            await publisher.close()
        except PublishRefused as exc:
            raise CommandFailed(str(exc)) from None
        for error in publisher.refused[:20]:
            print(f"{args.file}: row {error.row + 1}: field {error.field!r}: {error.reason}", file=sys.stderr)
        refused = len(publisher.refused) + bad_lines
        print(f"published {publisher.accepted} rows to {args.stream}" + (f"; {refused} refused" if refused else ""))
        return EXIT_FAILED if refused else EXIT_OK

    return asyncio.run(main())


def _publish_with_spark(args: argparse.Namespace, head: str, token: str | None) -> int:
    from boreas.spark import RowsRefused, publish_file

    try:
        count = publish_file(args.spark, args.stream, head=head, token=token, batch_size=args.batch_size)
    except (UnknownStream, PublishRefused) as exc:
        raise CommandFailed(str(exc)) from None
    except RowsRefused as exc:
        for refused in exc.result.refused[:20]:
            print(f"{args.spark}: {refused}", file=sys.stderr)
        print(f"published {exc.result.published} rows from {args.spark} to {args.stream} with Spark; "
              f"{exc.result.refused_count} refused")
        return EXIT_FAILED
    print(f"published {count} rows from {args.spark} to {args.stream} with Spark")
    return EXIT_OK


def _is_json_lines(path: str) -> bool:
    return path.endswith((".jsonl", ".json", ".ndjson"))


def cmd_subscribe(args: argparse.Namespace) -> int:
    head = the_head(args)
    token = resolve_token(args.token, required=False)

    async def main(stop: asyncio.Event) -> int:
        subscriber = Subscriber(head, args.stream, token, listen=args.listen)
        try:
            await subscriber.start()
        except UnknownStream as exc:
            raise CommandFailed(str(exc)) from None
        print(f"subscribed to {args.stream} at {subscriber.endpoint}", file=sys.stderr, flush=True)
        assert subscriber.schema is not None
        names = [f.name for f in subscriber.schema.fields]
        seen = 0

        async def read() -> None:
            nonlocal seen
            async for rows in subscriber.batches():
                for row in rows:
                    print(json.dumps(dict(zip(names, row))))
                    seen += 1
                    if args.count and seen >= args.count:
                        stop.set()
                        return
                sys.stdout.flush()

        reader = asyncio.create_task(read())
        try:
            await stop.wait()
        finally:
            reader.cancel()
            sys.stdout.flush()
            await subscriber.close()
        return EXIT_OK

    return run_until_stopped(main)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("publish", help="publish rows into an input stream")
    p.add_argument("stream")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--file", help="data.csv (header row optional) or data.jsonl (objects or arrays)")
    source.add_argument("--spark", metavar="PATH", help="publish a parquet or CSV file with a Spark job")
    p.add_argument("--batch-size", type=int, default=1000)
    add_head_option(p)
    add_token_option(p)
    p.set_defaults(func=cmd_publish)

    p = sub.add_parser("subscribe", help="print a stream's tuples as JSON lines as they arrive")
    p.add_argument("stream")
    p.add_argument("--listen", default="localhost:0", help="HOST:PORT to receive on (default: a free port)")
    p.add_argument("--count", type=int, default=0, help="exit after this many tuples")
    add_head_option(p)
    add_token_option(p)
    p.set_defaults(func=cmd_subscribe)
