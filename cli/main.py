"""The ``boreas`` command line.

Exit codes are part of the interface: 0 success, 1 an operation failed
(store unreachable, conflict after retries), 2 the input was invalid (every
problem is printed, one per line, as ``file:line: path: reason``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence

# Registers the m3 box type with the catalog (which cannot import boreas.m3),
# so the Head (``boreas head``), ``boreas validate`` and ``deploy`` know it.
import boreas.m3.boxtype  # noqa: F401  (imported for its registration)
from boreas.catalog import (
    Catalog,
    StoreError,
    ValidationFailed,
    apply_submission,
    catalog_from_snapshot,
    open_store,
    plan_submission,
)
from boreas.catalog.export import export_application, export_deployment, summary
from boreas.catalog.store import ConflictError, MissingCatalog
from boreas.wire.client import PeerError

from . import clients, data, m3, optimize, servers
from .common import (
    CATALOG_HELP,
    EXIT_FAILED,
    EXIT_INVALID,
    EXIT_OK,
    CommandFailed,
    add_head_option,
    catalog_url,
    print_problems,
    read_all,
    the_head,
)


def cmd_validate(args: argparse.Namespace) -> int:
    docs = read_all(args.files)
    if args.catalog or os.environ.get("BOREAS_CATALOG"):
        try:
            with open_store(catalog_url(args), create=False) as store:
                base = catalog_from_snapshot(store.snapshot())
        except MissingCatalog:
            base = Catalog()  # nothing committed there yet: validate against an empty catalog
    else:
        base = Catalog()
    plan = plan_submission(base, docs)
    if not plan.ok:
        print_problems(plan.problems)
        return EXIT_INVALID
    added = len(plan.catalog.boxes) - len(base.boxes)
    print(f"valid: {len(args.files)} file{'s' if len(args.files) != 1 else ''}, "
          f"{added:+d} boxes against catalog version {base.version}")
    return EXIT_OK


def cmd_catalog_apply(args: argparse.Namespace) -> int:
    docs = read_all(args.files)
    with open_store(catalog_url(args)) as store:
        result = apply_submission(store, docs)
    print(f"committed catalog version {result.commit.version} "
          f"({len(result.commit.changes)} element changes) to {catalog_url(args)}")
    return EXIT_OK


def cmd_catalog_show(args: argparse.Namespace) -> int:
    if args.head:
        catalog = asyncio.run(clients.fetch_catalog(the_head(args)))
        print(summary(catalog))
        return EXIT_OK
    with open_store(catalog_url(args), create=False) as store:
        catalog = catalog_from_snapshot(store.snapshot())
    print(summary(catalog))
    return EXIT_OK


def cmd_catalog_export(args: argparse.Namespace) -> int:
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="boreas", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    sub = parser.add_subparsers(dest="command", required=True)

    catalog_help = CATALOG_HELP

    p = sub.add_parser("validate", help="check application/deployment XML without committing")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--catalog", help=catalog_help + "; without it, validate against an empty catalog")
    p.set_defaults(func=cmd_validate)

    cat = sub.add_parser("catalog", help="the global catalog").add_subparsers(dest="action", required=True)
    p = cat.add_parser("apply", help="validate and commit XML files as one submission")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--catalog", help=catalog_help)
    p.set_defaults(func=cmd_catalog_apply)
    p = cat.add_parser("show", help="a human summary of the catalog (from the store, or the Head's)")
    p.add_argument("--catalog", help=catalog_help)
    add_head_option(p)
    p.set_defaults(func=cmd_catalog_show)
    p = cat.add_parser("export", help="the catalog as application and deployment XML")
    p.add_argument("--catalog", help=catalog_help)
    p.add_argument("--output-dir", "-o", help="write application.xml and deployment.xml here")
    p.add_argument("--only", action="append", choices=("application", "deployment"),
                   help="print only this document (repeatable)")
    p.set_defaults(func=cmd_catalog_export)

    servers.add_parsers(sub)
    clients.add_parsers(sub)
    data.add_parsers(sub)
    optimize.add_parsers(sub)
    m3.add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    serving = args.command in ("head", "node", "cluster")
    logging.basicConfig(level=logging.INFO if args.verbose or serving else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s" if serving
                        else "%(levelname)s %(name)s: %(message)s")
    if serving and not args.verbose:
        logging.getLogger("kazoo").setLevel(logging.WARNING)
    try:
        return args.func(args)
    except ValidationFailed as exc:
        print_problems(exc.diagnostics)
        return EXIT_INVALID
    except ConflictError as exc:
        print(f"error: {exc} (gave up after retrying)", file=sys.stderr)
        return EXIT_FAILED
    except (StoreError, PeerError, CommandFailed) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
