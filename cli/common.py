"""What every ``boreas`` command shares: exit codes, error printing, Head and token options."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence

from boreas.catalog.diagnostics import Diagnostic, ValidationFailed
from boreas.catalog.documents import read_file
from boreas.catalog.store import default_store_url
from boreas.wire.addressing import head_url

EXIT_OK, EXIT_FAILED, EXIT_INVALID = 0, 1, 2

CATALOG_HELP = ("catalog store URL: sqlite:///RELATIVE.db, sqlite:////ABSOLUTE.db, memory:// or "
                "zk://HOST:PORT/CHROOT "
                "(default: $BOREAS_CATALOG, else ./boreas-catalog.db)")


class CommandFailed(Exception):
    """An operation failed; the message is printed and the exit code is 1."""


def catalog_url(args: argparse.Namespace) -> str:
    return args.catalog or os.environ.get("BOREAS_CATALOG") or default_store_url()


def print_problems(problems: Sequence[Diagnostic]) -> None:
    for problem in problems:
        print(problem, file=sys.stderr)
    n = len(problems)
    print(f"invalid: {n} problem{'s' if n != 1 else ''}; nothing was changed", file=sys.stderr)


def read_all(paths: Sequence[str]) -> list:
    """Read every file, gathering the problems of all of them before giving up."""
    docs, problems = [], []
    for path in paths:
        try:
            docs.append(read_file(path))
        except ValidationFailed as exc:
            problems += exc.diagnostics
    if problems:
        raise ValidationFailed(problems)
    return docs


def add_head_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--head", help="the Head's URL, e.g. http://localhost:14000 (default: $BOREAS_HEAD)")


def add_token_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--token", help="the cluster's shared token (default: $BOREAS_TOKEN)")


def the_head(args: argparse.Namespace) -> str:
    try:
        return head_url(args.head)
    except ValueError as exc:
        raise CommandFailed(str(exc)) from None


def run_until_stopped(main: Callable[[asyncio.Event], Awaitable[int]]) -> int:
    """Run ``main(stop)`` on a fresh loop; SIGINT and SIGTERM set ``stop`` for a clean shutdown."""

    async def runner() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        return await main(stop)

    return asyncio.run(runner())


def serve_until_stopped(start: Callable[[], Awaitable[object]], close: Callable[[], Awaitable[None]]) -> int:
    """Start a component, serve until SIGINT/SIGTERM, close it cleanly."""

    async def main(stop: asyncio.Event) -> int:
        try:
            await start()
            await stop.wait()
        finally:
            await close()
        return EXIT_OK

    return run_until_stopped(main)
