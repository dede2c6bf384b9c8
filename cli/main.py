"""The ``boreas`` command line.

Exit codes are part of the interface, the same for every command: 0 success,
1 an operation failed (store or peer unreachable or refusing, conflict after
retries, a node failed, rows refused), 2 the input was invalid (an input
file that cannot be read or does not validate; every problem is printed, one
per line, as ``file:line: path: reason``; nothing was changed), 130
interrupted (Ctrl-C).  Errors are one line on stderr, never a traceback.
Output cut short by its reader (``boreas catalog show | head``) ends the
command quietly with 0.

Building the parser imports only this module and :mod:`.common`: each
command's module (and with it the catalog, aiohttp, the M3 compiler, ...) is
imported only when that command runs, so ``boreas --help`` answers at once.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Sequence
from importlib import import_module
from types import ModuleType

from .common import (
    CATALOG_HELP,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_INVALID,
    EXIT_OK,
    CommandFailed,
    StdoutClosed,
    add_head_option,
    add_json_option,
    catalog_url,
    print_json,
    print_problems,
    quiet_stdout,
    read_all,
    the_head,
    use_tls,
)

#: Every command: the module of ``boreas.cli`` that defines its parser and runs it, and its help
#: line, in the order ``boreas --help`` lists them.  ``boreas --help`` is built from this table
#: alone; the module's own ``add_parsers`` must say the same (a test checks).
COMMANDS: dict[str, tuple[str, str]] = {
    "validate": ("main", "check application/deployment XML without committing"),
    "catalog": ("main", "the global catalog"),
    "head": ("servers", "run the persistent Head"),
    "node": ("servers", "run a node"),
    "region": ("servers", "run a regional component: a regional catalog fed by its nodes"),
    "deploy": ("servers", "static mode: deploy a topology to its nodes and exit"),
    "cluster": ("servers", "a development cluster on this machine"),
    "submit": ("clients", "submit application (and deployment) XML to the Head"),
    "nodes": ("clients", "the nodes the Head knows, and whether they are up and in sync"),
    "snapshot": ("clients", "take a consistent snapshot of every durable node now"),
    "watch": ("clients", "a global component: print the catalog, then every change"),
    "drop": ("drop", "take queries, boxes, streams or a whole application (its file) out of the catalog, as one "
                     "submission"),
    "publish": ("data", "publish rows into an input stream"),
    "subscribe": ("data", "print a stream's tuples as JSON lines as they arrive"),
    "move": ("optimize", "optimizer: move a running box to another node, with its state"),
    "connect": ("optimize", "optimizer: insert a filter box before an in port of a running box"),
    "disconnect": ("optimize", "optimizer: remove a box inserted by connect"),
    "compile": ("m3", "print the M3 program a SQL file compiles to"),
    "query": ("m3", "read an m3 box's maps where it runs (a table; --json: JSON lines)"),
    "segments": ("m3", "a partitioned m3 box's segments: slots, member, entries per map"),
    "split": ("relayout", "split a segment of a partitioned m3 box in two (on the same node)"),
    "rebalance": ("relayout", "even out a partitioned m3 box's entries over its nodes"),
    "cancel": ("relayout", "cancel a partitioned m3 box's last move, split or rebalance while its segments still copy"),
    "retire": ("relayout", "take the last member (added later, holding no segment) out of a partitioned m3 box"),
}

DESCRIPTION = ("Boreas: a catalog-driven control plane and data plane for distributed stream processing "
               "with incrementally maintained SQL views.")
EPILOG = """\
`boreas COMMAND --help` describes a command.  $BOREAS_HEAD and $BOREAS_TOKEN
give the Head's URL and the cluster's token (`boreas cluster up` prints both).

exit codes: 0 success, 1 an operation failed, 2 invalid input (nothing was
changed), 130 interrupted."""

#: Commands that run a component: they log what they do (INFO, with times) without -v.
SERVING = ("head", "node", "region", "cluster")

#: Commands that make a few requests and exit: they run without the cyclic garbage collector.  Importing
#: what they need creates tens of thousands of objects (classes, functions, dataclasses' generated methods),
#: which set off full collections that find nothing to free: about 10 ms of a `boreas move`'s CPU (issue
#: 37).  Reference counting still frees what they drop, and the process ends a moment later.
SHORT = ("submit", "nodes", "snapshot", "drop", "move", "connect", "disconnect", "split", "rebalance", "cancel",
         "retire")


def cmd_validate(args: argparse.Namespace) -> int:
    from boreas.catalog import (
        Catalog,
        catalog_from_snapshot,
        open_store,
        plan_submission,
    )
    from boreas.catalog.store import MissingCatalog

    docs = read_all(args.files)
    if args.catalog or os.environ.get("BOREAS_CATALOG"):
        try:
            with open_store(catalog_url(args), create=False) as store:
                base = catalog_from_snapshot(store.snapshot())
        except MissingCatalog:
            base = Catalog()  # nothing committed there yet: validate against an empty catalog
    else:
        base = Catalog()
    from boreas.m3.boxtype import box_types

    plan = plan_submission(base, docs, box_types())
    if not plan.ok:
        print_problems(plan.problems)
        return EXIT_INVALID
    added = len(plan.catalog.boxes) - len(base.boxes)
    print(f"valid: {len(args.files)} file{'s' if len(args.files) != 1 else ''}, "
          f"{added:+d} box{'es' if abs(added) != 1 else ''} against catalog version {base.version}")
    return EXIT_OK


def cmd_catalog_apply(args: argparse.Namespace) -> int:
    from boreas.catalog import apply_submission, open_store

    docs = read_all(args.files)
    with open_store(catalog_url(args)) as store:
        from boreas.m3.boxtype import box_types

        result = apply_submission(store, docs, registry=box_types())
    print(f"committed catalog version {result.commit.version} "
          f"({len(result.commit.changes)} element changes) to {catalog_url(args)}")
    return EXIT_OK


def cmd_catalog_show(args: argparse.Namespace) -> int:
    import asyncio

    from boreas.catalog import catalog_from_snapshot, open_store

    from .catalog_text import catalog_as_json, describe_catalog
    from .clients import fetch_catalog, fetch_live_nodes

    live = None
    if args.head or (os.environ.get("BOREAS_HEAD") and not args.catalog):
        head = the_head(args)
        catalog = asyncio.run(fetch_catalog(head))
        live = asyncio.run(fetch_live_nodes(head))
    else:
        with open_store(catalog_url(args), create=False) as store:
            catalog = catalog_from_snapshot(store.snapshot())
    if args.json:
        print_json(catalog_as_json(catalog, live))
    else:
        print(describe_catalog(catalog, live))
    return EXIT_OK


def cmd_catalog_export(args: argparse.Namespace) -> int:
    from boreas.catalog import catalog_from_snapshot, open_store
    from boreas.catalog.export import export_application, export_deployment

    with open_store(catalog_url(args), create=False) as store:
        catalog = catalog_from_snapshot(store.snapshot())
    outputs = {"application": export_application(catalog), "deployment": export_deployment(catalog)}
    if args.output_dir:
        os.makedirs(args.output_dir, exist_ok=True)
        for name, text in outputs.items():
            path = os.path.join(args.output_dir, f"{name}.xml")
            with open(path, "w", encoding="utf-8") as fh:
                fh.write('<?xml version="1.0"?>\n' + text)
            print(f"wrote {path}")
    else:
        for name in args.only or ("application", "deployment"):
            sys.stdout.write(f'<?xml version="1.0"?>\n<!-- {name} -->\n{outputs[name]}')
    return EXIT_OK


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """This module's commands: ``validate`` and ``catalog apply|show|export``."""
    catalog_help = CATALOG_HELP

    p = sub.add_parser("validate", help=COMMANDS["validate"][1])
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--catalog", help=catalog_help + "; without it, validate against an empty catalog")
    p.set_defaults(func=cmd_validate)

    cat = sub.add_parser("catalog", help=COMMANDS["catalog"][1]).add_subparsers(dest="action", required=True)
    p = cat.add_parser("apply", help="validate and commit XML files as one submission")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--catalog", help=catalog_help)
    p.set_defaults(func=cmd_catalog_apply)
    p = cat.add_parser("show", help="a human summary of the catalog (from the store, or the Head's)",
                       description="A human summary of the catalog: the Head's with --head or $BOREAS_HEAD "
                                   "(unless --catalog is given), else the store's.")
    p.add_argument("--catalog", help=catalog_help + "; read the store even when $BOREAS_HEAD is set")
    add_head_option(p)
    add_json_option(p)
    p.set_defaults(func=cmd_catalog_show)
    p = cat.add_parser("export", help="the catalog as application and deployment XML")
    p.add_argument("--catalog", help=catalog_help)
    p.add_argument("--output-dir", "-o", help="write application.xml and deployment.xml here")
    p.add_argument("--only", action="append", choices=("application", "deployment"),
                   help="print only this document (repeatable)")
    p.set_defaults(func=cmd_catalog_export)


class _Version(argparse.Action):
    """``--version``: the installed distribution's version, looked up only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        import boreas

        print(f"boreas {boreas.__version__}")
        parser.exit()


def _module(name: str) -> ModuleType:
    return sys.modules[__name__] if name == "main" else import_module(f"{__package__}.{name}")


def build_parser(only: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The ``boreas`` parser.

    Without ``only``, every command's full parser (every command module is
    imported).  With ``only`` (the command being run, or none for ``boreas
    --help``), just the modules defining those commands are imported; when
    ``only`` names no known command, every other command is a stub with its
    help line from :data:`COMMANDS`, enough for ``boreas --help`` and for
    argparse to name the choices when the command is unknown.  A known
    command gets no stubs: 25 parsers nobody reads cost a ``boreas move``
    about 10 ms (issue 37).
    """
    parser = argparse.ArgumentParser(
        prog="boreas", description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    parser.add_argument("--version", action=_Version, help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    modules = list(dict.fromkeys(module for module, _ in COMMANDS.values()))
    wanted = set(modules) if only is None else {COMMANDS[c][0] for c in only if c in COMMANDS}
    for module in modules:
        if module in wanted:
            _module(module).add_parsers(sub)
            continue
        if wanted:  # (a known command: the others are not asked for)
            continue
        for name, (defined_in, text) in COMMANDS.items():
            if defined_in == module:
                sub.add_parser(name, help=text, add_help=False)
    return parser


def _command_of(argv: Sequence[str]) -> str | None:
    """The command word: the first argument that is not an option (the top level's take no values)."""
    return next((a for a in argv if not a.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    own_process = argv is None  # (not a caller's process, such as a test's: its collector is left alone)
    argv = [str(a) for a in (sys.argv[1:] if argv is None else argv)]
    command = _command_of(argv)
    if command in SHORT and own_process:
        import gc

        gc.disable()
    args = build_parser(only=[command] if command else []).parse_args(argv)
    import logging

    serving = args.command in SERVING
    logging.basicConfig(level=logging.INFO if args.verbose or serving else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s" if serving
                        else "%(levelname)s %(name)s: %(message)s")
    if serving and not args.verbose:
        logging.getLogger("kazoo").setLevel(logging.WARNING)
    try:
        use_tls(args)
        return args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (BrokenPipeError, StdoutClosed):
        quiet_stdout()
        return EXIT_OK
    except CommandFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.code
    except Exception as exc:
        code = _report(exc)
        if code is None:
            raise
        return code


def _report(exc: Exception) -> int | None:
    """Print a known error as one line; its exit code (None: not one we know, let it show)."""
    from boreas.catalog import StoreError, ValidationFailed
    from boreas.catalog.store import ConflictError
    from boreas.wire.client import PeerError, PeerRefused
    from boreas.wire.link_connection import LinkRefused
    from boreas.wire.server import ListenFailed
    from boreas.wire.tls import TlsError

    if isinstance(exc, TlsError):
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    if isinstance(exc, ValidationFailed):
        print_problems(exc.diagnostics)
        return EXIT_INVALID
    if isinstance(exc, ConflictError):
        print(f"error: {exc} (gave up after retrying)", file=sys.stderr)
        return EXIT_FAILED
    if isinstance(exc, LinkRefused) or isinstance(exc, PeerRefused) and exc.status in (401, 403):
        print(f"error: {exc}; {TOKEN_HINT}", file=sys.stderr)
        return EXIT_FAILED
    if isinstance(exc, (StoreError, PeerError, ListenFailed)):
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if isinstance(exc, (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)) \
            and exc.filename:
        print(f"error: {exc.filename}: cannot read file: {exc.strerror}", file=sys.stderr)
        return EXIT_INVALID
    return None


#: Said after a refused token: what to do about it.
TOKEN_HINT = "pass this cluster's token with --token or $BOREAS_TOKEN"


if __name__ == "__main__":
    sys.exit(main())
