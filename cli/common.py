"""What every ``boreas`` command shares: exit codes, error printing, output, Head and token options.

This module is imported to build the argument parser (``boreas --help``), so
it imports nothing heavy at the top: the catalog, aiohttp and the rest are
imported inside the functions that need them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import asyncio

    from boreas.client.optimizer import Optimizer
    from boreas.wire.blocking_peers import Blocking
    from boreas.wire.one_shot import Peers

T = TypeVar("T")

#: Exit codes, the same for every command: 0 success; 1 an operation failed (a peer refused or is
#: unreachable, a node failed, rows were refused); 2 the input was invalid (a file that cannot be
#: read or does not validate; nothing was changed); 130 interrupted (Ctrl-C).
EXIT_OK, EXIT_FAILED, EXIT_INVALID = 0, 1, 2
EXIT_INTERRUPTED = 130

CATALOG_HELP = ("catalog store URL: sqlite:///RELATIVE.db, sqlite:////ABSOLUTE.db, memory:// or "
                "zk://HOST:PORT/CHROOT "
                "(default: $BOREAS_CATALOG, else ./boreas-catalog.db)")


class CommandFailed(Exception):
    """An operation failed; the message is printed and the exit code is 1 (or ``code``)."""

    def __init__(self, message: str, code: int = EXIT_FAILED):
        super().__init__(message)
        self.code = code


class BadInput(CommandFailed):
    """An input file cannot be used (missing, unreadable): the message is printed and the exit code is 2."""

    def __init__(self, message: str):
        super().__init__(message, EXIT_INVALID)


def catalog_url(args: argparse.Namespace) -> str:
    from boreas.catalog.store import default_store_url

    return args.catalog or os.environ.get("BOREAS_CATALOG") or default_store_url()


def print_problems(problems: Sequence[Any]) -> None:
    for problem in problems:
        print(problem, file=sys.stderr)
    n = len(problems)
    print(f"invalid: {n} problem{'s' if n != 1 else ''}; nothing was changed", file=sys.stderr)


def read_all(paths: Sequence[str]) -> list:
    """Read every file, gathering the problems of all of them before giving up."""
    from boreas.catalog.diagnostics import ValidationFailed
    from boreas.catalog.documents import read_file

    docs, problems = [], []
    for path in paths:
        try:
            docs.append(read_file(path))
        except ValidationFailed as exc:
            problems += exc.diagnostics
    if problems:
        raise ValidationFailed(problems)
    return docs


def check_readable(path: str) -> None:
    """Refuse an input file that cannot be read (``BadInput``: exit 2), before anything is sent."""
    try:
        with open(path, "rb") as fh:
            fh.read(1)
    except OSError as exc:
        raise BadInput(f"{path}: cannot read file: {exc.strerror or exc}") from None


def add_head_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--head", help="the Head's URL, e.g. http://localhost:14000, https://... with TLS; "
                                       "several Heads comma-separated (a,b,c: the leader is followed) "
                                       "(default: $BOREAS_HEAD)")
    add_tls_options(parser)


def add_token_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--token", help="the cluster's shared token (default: $BOREAS_TOKEN)")
    add_tls_options(parser)


def add_tls_options(parser: argparse.ArgumentParser) -> None:
    """``--tls-cert``, ``--tls-key``, ``--tls-ca``, ``--tls-client-auth``: every command that connects or serves.

    Added with the Head and token options (once, whichever comes first);
    :func:`use_tls` installs them for the process (``boreas.wire.tls``).
    """
    group = parser.add_argument_group("TLS (docs/security.md; default: $BOREAS_TLS_CERT, $BOREAS_TLS_KEY, "
                                      "$BOREAS_TLS_CA, $BOREAS_TLS_CLIENT_AUTH=1)")
    try:
        group.add_argument("--tls-ca", metavar="PEM",
                           help="turn TLS on: trust certificates signed by this CA (https:// and wss:// on every "
                                "link; certificates are verified)")
    except argparse.ArgumentError:  # already added by the other option
        return
    group.add_argument("--tls-cert", metavar="PEM",
                       help="this process's certificate: what it serves with, and shows to servers that ask")
    group.add_argument("--tls-key", metavar="PEM", help="the private key of --tls-cert")
    group.add_argument("--tls-client-auth", action="store_true", default=None,
                       help="as a server, require a client certificate signed by --tls-ca (mutual TLS)")


def use_tls(args: argparse.Namespace) -> None:
    """Install the command's TLS options (else ``$BOREAS_TLS_*``) for the process; unusable files exit 2."""
    if getattr(args, "tls", False):
        return  # cluster up --tls makes its certificates and installs them itself
    from boreas.wire import tls  # light: ssl itself is imported only when a context is made

    env = tls.TlsConfig.from_env()
    config = tls.TlsConfig(cert=getattr(args, "tls_cert", None) or env.cert, key=getattr(args, "tls_key", None)
                           or env.key, ca=getattr(args, "tls_ca", None) or env.ca,
                           client_auth=bool(getattr(args, "tls_client_auth", None) or env.client_auth))
    if config == tls.TlsConfig():
        return
    try:
        tls.configure(config)
    except tls.TlsError as exc:
        raise BadInput(str(exc)) from None


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of text (for scripts)")


#: ``--log-format`` of the server commands: ``text`` (one line per record, for people) or ``json``.
LOG_FORMATS = ("text", "json")


def add_log_format_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--log-format", choices=LOG_FORMATS, default="text",
                        help="how log records are written to stderr: text (default) or json, one JSON "
                             "object per line (time, level, logger, message, and the exception's traceback) "
                             "for log collectors")


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line: what log collectors (journald, Loki, ELK) parse.

    Keys: ``time`` (UTC, ISO 8601 with milliseconds), ``level``, ``logger``,
    ``message`` (arguments applied), ``process``, ``exception`` (the
    traceback, when there is one), and whatever a call passed with
    ``extra={...}`` that is not already a record attribute.

    >>> record = logging.LogRecord("boreas.x", logging.INFO, __file__, 1, "took %d rows", (3,), None)
    >>> json.loads(JsonFormatter().format(record))["message"]
    'took 3 rows'
    """

    _STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
                    + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "process": record.process,
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        for key, value in vars(record).items():
            if key not in self._STANDARD and key not in entry:
                entry[key] = value
        return json.dumps(entry, default=str)


def use_log_format(args: argparse.Namespace) -> None:
    """Apply ``--log-format``: with ``json`` every handler of the root logger writes :class:`JsonFormatter`."""
    if getattr(args, "log_format", "text") != "json":
        return
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig()
    for handler in root.handlers:
        handler.setFormatter(JsonFormatter())


def the_head(args: argparse.Namespace) -> str:
    from boreas.wire.addressing import head_url

    try:
        return head_url(args.head)
    except ValueError as exc:
        raise CommandFailed(str(exc)) from None


def run_optimizer(args: argparse.Namespace, action: Callable[[Optimizer], Awaitable[T]]) -> T:
    """Run ``action`` with an :class:`~boreas.client.optimizer.Optimizer` on the command's Head, token and
    ``--timeout``; its failure is the command's (exit 1, with the reason)."""

    async def with_optimizer(peers: Peers, head: str) -> T:
        from boreas.client.optimizer import Optimizer

        async with Optimizer(head, peers.token, args.timeout, peers=peers) as optimizer:
            return await action(optimizer)

    return run_peers(args, with_optimizer)


def run_peers(args: argparse.Namespace, action: Callable[[Peers, str], Awaitable[T]]) -> T:
    """Run ``action(peers, head)`` with the standard library's HTTP (a command makes a few calls, aiohttp
    costs 0.3 s) on the command's Head and token; an ``OptimizerFailed`` is the command's failure (422:
    what was asked is invalid, exit 2, nothing changed; else exit 1, with the reason)."""
    import asyncio

    from boreas.client.errors import OptimizerFailed
    from boreas.wire.auth import resolve_token
    from boreas.wire.one_shot import OneShotPeers

    head, token = the_head(args), resolve_token(args.token, required=False)

    async def run() -> T:
        async with OneShotPeers(token) as peers:
            return await action(peers, head)

    try:
        return asyncio.run(run())
    except OptimizerFailed as exc:
        raise CommandFailed(str(exc), EXIT_INVALID if exc.status == 422 else EXIT_FAILED) from None


def run_blocking(args: argparse.Namespace, action: Callable[[Blocking, str], T]) -> T:
    """Run ``action(peers, head)`` with blocking calls (wire/blocking_peers.py: no event loop, no
    ``http.client``; a command whose requests follow one another) on the command's Head and token; an
    ``OptimizerFailed`` is the command's failure, as in :func:`run_peers`."""
    from boreas.client.errors import OptimizerFailed
    from boreas.wire.auth import resolve_token
    from boreas.wire.blocking_peers import blocking_peers

    head, token = the_head(args), resolve_token(args.token, required=False)
    try:
        with blocking_peers(head, token) as peers:
            return action(peers, head)
    except OptimizerFailed as exc:
        raise CommandFailed(str(exc), EXIT_INVALID if exc.status == 422 else EXIT_FAILED) from None


def print_json(value: Any) -> None:
    """One JSON document on stdout (``--json``), indented, keys in a stable order."""
    print(json.dumps(value, indent=2, sort_keys=True, default=str))


class StdoutClosed(Exception):
    """Whoever read stdout stopped reading (``boreas ... | head``): the command ends quietly."""


def quiet_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so that flushing it at exit does not fail again."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def run_until_stopped(main: Callable[[asyncio.Event], Awaitable[int]]) -> int:
    """Run ``main(stop)`` on a fresh loop; SIGINT and SIGTERM set ``stop`` for a clean shutdown."""
    import asyncio
    import signal

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


def token_of(args: argparse.Namespace) -> str:
    # imported here, not above: `boreas --help` stays light
    from boreas.wire.auth import MissingToken, resolve_token

    try:
        token = resolve_token(args.token)
    except MissingToken as exc:
        raise CommandFailed(str(exc)) from None
    assert token
    return token


def endpoint_of(text: str, default_port: int) -> str:
    from boreas.catalog.endpoints import (
        normalize_endpoint,  # here: `boreas --help` stays light
    )

    try:
        return normalize_endpoint(text, default_port=default_port)
    except ValueError as exc:
        raise CommandFailed(str(exc)) from None


def endpoints_of(text: str | None, default_port: int = 15000) -> list[str]:
    """``HOST:PORT,HOST:PORT ...`` (commas or spaces) as normalised endpoints."""
    return [endpoint_of(item, default_port) for item in (text or "").replace(",", " ").split()]


async def until_lost(url: str, retry_for: float, what: str, interval: float = 1.0) -> str:
    """Return why once ``url`` (a component's ``/healthz``) has answered nothing for ``retry_for`` seconds.

    A client that only receives (``boreas watch``, ``region``) hears nothing from a Head that is gone;
    this asks it every ``interval`` s, says on stderr when it stops and starts answering again, and
    gives up after ``retry_for`` s (longer than a Head failover), so the client exits instead of
    waiting silently for ever.
    """
    import asyncio

    from boreas.wire.client import PeerClient, PeerError

    loop = asyncio.get_running_loop()
    lost_since: float | None = None
    async with PeerClient(None, timeout=min(interval * 2, 5.0)) as peers:
        while True:
            try:
                await peers.call("GET", url)
                if lost_since is not None:
                    print(f"{what} answers again", file=sys.stderr, flush=True)
                lost_since = None
            except PeerError as exc:
                if lost_since is None:
                    lost_since = loop.time()
                    print(f"lost {what} ({exc}); retrying for up to {retry_for:g}s", file=sys.stderr, flush=True)
                elif loop.time() - lost_since > retry_for:
                    return f"{what} has not answered for {retry_for:g}s"
            await asyncio.sleep(interval)


async def until_stopped_or_lost(stop: "asyncio.Event", url: str, retry_for: float, what: str) -> int:
    """Wait for Ctrl-C/SIGTERM (``stop``: EXIT_OK) or for ``url`` to stay silent ``retry_for`` s (EXIT_FAILED,
    said on stderr): the life of a client that only listens."""
    import asyncio

    lost = asyncio.get_running_loop().create_task(until_lost(url, retry_for, what))
    stopped = asyncio.get_running_loop().create_task(stop.wait())
    try:
        done, _ = await asyncio.wait({lost, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (lost, stopped):
            task.cancel()
        await asyncio.gather(lost, stopped, return_exceptions=True)
    if lost in done and not lost.cancelled() and lost.exception() is None:
        print(f"error: {lost.result()}; stopping", file=sys.stderr, flush=True)
        return EXIT_FAILED
    return EXIT_OK


def add_retry_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--retry-for", type=float, default=30.0, metavar="SECONDS",
                        help="when the Head stops answering, keep trying this long, then exit 1 (default 30)")
