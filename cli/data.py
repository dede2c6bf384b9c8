"""Commands that move tuples: ``publish`` and ``subscribe``.

``publish`` refuses an input file it cannot read before contacting anyone
(exit 2), shows its progress (rows/s, ETA) on stderr when stderr is a
terminal (or with ``--progress``), and on Ctrl-C says how far it got and
exits 130: the same command run again continues (the node skips the
batches it already took).  ``subscribe`` ends quietly when its reader goes
away (``boreas subscribe S | head -3``).
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import importlib.util
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from boreas.catalog.diagnostics import Diagnostic, ValidationFailed
from boreas.client.head_api import UnknownStream
from boreas.client.publisher import Publisher, PublishRefused
from boreas.client.subscriber import SubscribeFailed, Subscriber
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

#: Refused rows printed one per line; the rest are counted.
SHOWN_PROBLEMS = 20


@dataclass
class RowProblems:
    """Rows of an input file that cannot be published: (row, reason), numbered by line in the file."""

    path: str
    found: list[tuple[int, str]] = field(default_factory=list)

    def add(self, row: int, reason: str) -> None:
        self.found.append((row, reason))

    def __len__(self) -> int:
        return len(self.found)


def read_rows(path: str, fields: list[str], *, header: bool = True, ignore_unknown: bool = False,
              problems: RowProblems | None = None) -> Iterator[tuple[int, list[Any]]]:
    """``(row, values in field order)`` for each row of a CSV or JSON-lines file.

    Rows are numbered by their line in the file (a CSV header is line 1).

    * CSV: the first row must be a header naming the columns; they are mapped
      to the stream's fields by name, in any order.  A header naming an
      unknown column (unless ``ignore_unknown``: such columns are skipped),
      naming a column twice or missing a field is refused with
      ``ValidationFailed`` naming it, before any row is read.  With
      ``header=False`` there is no header and columns are mapped by position.
    * JSON lines (``.jsonl``, ``.json``, ``.ndjson``): one object per line
      mapping field names to values (an unknown key is a problem unless
      ``ignore_unknown``; a missing field always is), or one array of values
      in field order.

    A row that cannot be mapped (wrong number of values, a missing field, not
    JSON) is not yielded but added to ``problems`` with its reason.
    """
    problems = problems if problems is not None else RowProblems(path)
    if _is_json_lines(path):
        yield from _json_rows(path, fields, ignore_unknown, problems)
    else:
        yield from _csv_rows(path, fields, header, ignore_unknown, problems)


def _fields_text(fields: list[str]) -> str:
    return ", ".join(fields)


def _csv_rows(path: str, fields: list[str], header: bool, ignore_unknown: bool,
              problems: RowProblems) -> Iterator[tuple[int, list[Any]]]:
    # utf-8-sig: a byte-order mark (as spreadsheets write) is not part of the first column's name.
    with open(path, newline="", encoding="utf-8-sig") as fh:
        reader = csv.reader(fh)
        positions: list[int] | None = None
        width = len(fields)
        if header:
            first = next(reader, None)
            if first is None:
                raise ValidationFailed([Diagnostic(path, None, "", "file is empty: expected a header row "
                                                   f"naming the columns ({_fields_text(fields)})")])
            positions = _column_positions(path, [c.strip() for c in first], fields, ignore_unknown)
            width = len(first)
        line = reader.line_num
        for row in reader:
            number, line = line + 1, reader.line_num  # a quoted value may span lines
            if not row or (len(row) == 1 and not row[0].strip()):
                continue  # blank line
            if len(row) != width:
                what = "the header has" if header else f"the stream's {width} fields are"
                problems.add(number, f"row has {len(row)} values; {what} "
                                     + (f"{width} columns" if header else _fields_text(fields)))
                continue
            yield number, [row[i] for i in positions] if positions is not None else row


def _column_positions(path: str, names: list[str], fields: list[str], ignore_unknown: bool) -> list[int]:
    """Where each field is among the header's columns; refuses a header that does not fit."""
    known = set(fields)
    if not known.intersection(names):
        raise ValidationFailed([Diagnostic(
            path, 1, "", f"the first row is not a header: expected column names ({_fields_text(fields)}) "
                         "in any order; add a header row, or pass --no-header to map columns by position")])
    reasons = []
    seen: set[str] = set()
    for name in names:
        if name in seen and name in known:
            reasons.append(f"column {name!r} appears more than once")
        seen.add(name)
        if name not in known and not ignore_unknown:
            reasons.append(f"unknown column {name!r}: the stream's fields are {_fields_text(fields)} "
                           "(--ignore-unknown skips other columns)")
    reasons += [f"missing column {f!r}: the stream's fields are {_fields_text(fields)}"
                for f in fields if f not in seen]
    if reasons:
        raise ValidationFailed([Diagnostic(path, 1, "", r) for r in reasons])
    return [names.index(f) for f in fields]


def _json_rows(path: str, fields: list[str], ignore_unknown: bool,
               problems: RowProblems) -> Iterator[tuple[int, list[Any]]]:
    known = set(fields)
    with open(path, encoding="utf-8-sig") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except ValueError as exc:
                problems.add(number, f"not JSON: {exc}")
                continue
            if isinstance(value, dict):
                missing = [f for f in fields if f not in value]
                unknown = [] if ignore_unknown else [k for k in value if k not in known]
                if missing or unknown:
                    reasons = [f"missing field {f!r}" for f in missing]
                    reasons += [f"unknown field {k!r}" for k in unknown]
                    problems.add(number, "; ".join(reasons) + f" (the stream's fields are {_fields_text(fields)}"
                                         + (")" if ignore_unknown or not unknown
                                            else "; --ignore-unknown skips other keys)"))
                    continue
                yield number, [value[f] for f in fields]
            elif isinstance(value, list):
                if len(value) != len(fields):
                    problems.add(number, f"array has {len(value)} values; the stream's fields are "
                                         f"{_fields_text(fields)}")
                    continue
                yield number, value
            else:
                problems.add(number, f"expected an object (field: value) or an array, not {type(value).__name__}")


class Progress:
    """``publish``'s progress on stderr: rows the node has answered for, rows/s, and the ETA.

    On a terminal one line is redrawn in place every half second; otherwise
    (``--progress`` into a file or pipe) a line is added every five seconds.
    """

    def __init__(self, stream: str, total: int | None, tty: bool):
        self.stream = stream
        self.total = total
        self.tty = tty
        self.started = time.monotonic()

    def line(self, done: int, elapsed: float) -> str:
        """
        >>> Progress("Reading", 1000, tty=False).line(250, 5.0)
        'publishing to Reading: 250/1,000 rows (25%), 50 rows/s, ETA 15 s'
        >>> Progress("Reading", None, tty=False).line(250, 5.0)
        'publishing to Reading: 250 rows, 50 rows/s'
        """
        rate = done / max(elapsed, 1e-9)
        text = f"publishing to {self.stream}: {done:,}"
        text += f"/{self.total:,} rows ({100 * done // self.total}%)" if self.total else " rows"
        text += f", {rate:,.0f} rows/s"
        if self.total and done < self.total:
            text += f", ETA {_duration((self.total - done) / rate) if rate > 0 else '?'}"
        return text

    def show(self, done: int) -> None:
        text = self.line(done, time.monotonic() - self.started)
        sys.stderr.write(f"\r{text}\x1b[K" if self.tty else text + "\n")
        sys.stderr.flush()

    async def follow(self, publisher: Any) -> None:
        while True:
            await asyncio.sleep(0.5 if self.tty else 5.0)
            self.show(_acknowledged(publisher))

    def finish(self, publisher: Any) -> None:
        """The last count; on a terminal, end the redrawn line."""
        self.show(_acknowledged(publisher))
        if self.tty:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _acknowledged(publisher: Any) -> int:
    """Rows the entry node has answered for (taken or refused)."""
    return getattr(publisher, "acknowledged_rows", publisher.accepted)


def _duration(seconds: float) -> str:
    """
    >>> _duration(5.2), _duration(75), _duration(3720)
    ('5 s', '1 min 15 s', '1 h 2 min')
    """
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def _count_rows(path: str) -> int:
    """Non-blank lines of a JSON-lines file (for the progress display's ETA)."""
    with open(path, "rb") as fh:
        return sum(1 for line in fh if line.strip())


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
            print(f"interrupted: {args.stream} took {_acknowledged(publisher):,} rows of {args.file} so far; "
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
    if _is_json_lines(args.file):
        def sent() -> Iterator[list[Any]]:
            for number, values in rows:
                numbers.append(number)
                yield values
        begin(_count_rows(args.file))
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
        print(f"{publisher.duplicates} batches were already taken from producer {publisher.producer!r} "
              f"(an earlier run of this publish) and were skipped; give another --producer to publish "
              f"them again", file=sys.stderr)
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


def _is_json_lines(path: str) -> bool:
    return path.endswith((".jsonl", ".json", ".ndjson"))


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

        async def read() -> None:
            nonlocal seen, closed
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
        return EXIT_OK

    return run_until_stopped(main)


def default_producer(stream: str, path: str) -> str:
    """``stream@host:/abs/file``: the same command re-run on the same host continues, not repeats.

    >>> default_producer("Reading", "/data/r.csv").startswith("Reading@")
    True
    """
    return f"{stream}@{socket.gethostname()}:{Path(path).resolve()}"


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
                        "(default: derived from the stream, this host and the file's path)")
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
