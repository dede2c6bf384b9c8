"""M3 commands: ``boreas compile QUERY.sql``, ``boreas query BOX [MAP] [KEY|_ ...]``, ``boreas segments BOX``.

``compile`` prints the M3 program a SQL file compiles to (what an ``m3`` box
with that ``sql`` runs); a problem is printed as ``file:line:col: reason``
and exits 2 (the input is invalid), as does a file that cannot be read.
``query`` reads an ``m3`` box's maps where the box runs (the Head says
which node) and prints a table whose header names the key columns and the
value columns, one line per row; ``--json`` prints JSON lines instead, one
``{"key": [...], "value": ...}`` per row (the form scripts read, kept
stable); ``--stable`` (READ_STABLE) of a partitioned box first says which
stable epoch it read (with ``--json``: a first line ``{"epoch": S, "age":
seconds, "positions": [...]}``: the stable epoch read, how long ago it
ended, and the last batch of each producer it includes).  The first word after the box is the map when the box
has a map, view or out stream of that name; otherwise the box's first out
stream's view is read and every word is a key (``_`` is a wildcard).  A
first word that is neither (a misspelt map name) is refused, naming the
box's maps.  A partitioned box is read the same way: the client asks the
members that hold the keys and merges their answers
(:mod:`boreas.client.query`).
``segments`` reads a partitioned box's layout from the Head and every
member's ``GET /segments/{box}``, and prints one line per segment (its slots,
its member, each map's entries on it) and a total line; ``--json`` prints the
members' answers as they came.
"""

from __future__ import annotations

from boreas.catalog.words import counted
import argparse
import asyncio
import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

from boreas.client.query import QueryClient, QueryFailed, split_words
from boreas.m3 import CheckError, M3Error, compile_to_text
from boreas.m3.cumulus import Layout
from boreas.wire.auth import resolve_token
from boreas.wire.client import PeerError

from .common import (
    EXIT_INVALID,
    EXIT_OK,
    CommandFailed,
    add_head_option,
    add_json_option,
    add_token_option,
    print_json,
    the_head,
)


def cmd_compile(args: argparse.Namespace) -> int:
    path = Path(args.file)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        print(f"{path}: cannot read file: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_INVALID
    try:
        program = compile_to_text(text)
    except M3Error as exc:
        errors = exc.errors if isinstance(exc, CheckError) else [(exc.message, exc.pos)]
        for message, pos in errors:
            print(f"{path}:{pos.line}:{pos.col}: {message}" if pos else f"{path}: {message}", file=sys.stderr)
        return EXIT_INVALID
    sys.stdout.write(program if program.endswith("\n") else program + "\n")
    return EXIT_OK


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.date):
        return value.isoformat()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


async def read_box(head: str, token: str | None, box: str, words: list[str], agg: str,
                   stable: bool) -> tuple[Any, dict[str, Any]]:
    """One read as ``boreas query`` words it: the result, and the box's maps as its node describes them."""
    async with QueryClient(head, token) as client:
        try:
            described = await client.maps(box)
            map_name, keys = split_words(box, described, words) if words else (None, [])
            result = await client.query(box, map_name, [None if k == "_" else k for k in keys], agg, stable)
        except QueryFailed as exc:
            raise CommandFailed(str(exc)) from None
        except PeerError as exc:
            raise CommandFailed(str(exc)) from None
    return result, described


def json_lines(result: Any) -> list[dict[str, Any]]:
    """``--json``: the rows ``{"key": [...], "value": ...}``, after a first ``{"epoch": S, "age": seconds,
    "positions": [[stream, producer, seq], ...]}`` for a stable read of a partitioned box (the stable epoch
    read, how long ago it ended, the last batch of each producer in it)."""
    rows = [{"key": list(key), "value": list(value) if isinstance(value, tuple) else value}
            for key, value in result.rows]
    if getattr(result, "epoch", None) is not None:  # a stable read of a partitioned box
        rows.insert(0, {"epoch": result.epoch, "age": None if result.age is None else round(result.age, 3),
                        "positions": [list(position) for position in result.positions]})
    return rows


def value_columns(result: Any, described: dict[str, Any]) -> list[str]:
    """The names of a read's value columns: its view's, else the map's name (``value`` when unknown)."""
    view = described.get("streams", {}).get(result.map, result.map)
    values = described.get("views", {}).get(view, {}).get("values")
    if not values:
        values = [result.map or "value"]
    return [f"{result.agg}({v})" if result.agg != "slice" else v for v in values]


def _cell(value: Any) -> str:
    if value is None:
        return "_"
    if isinstance(value, float):
        return str(round(value, 6))  # what a person compares; --json has every digit
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


def table_lines(result: Any, described: dict[str, Any]) -> list[str]:
    """``boreas query``'s human form: a header naming the key and value columns, then one line per row
    (``_`` for a wildcard key of an aggregate), numbers right-aligned; a stable read of a partitioned box
    first says which epoch it read."""
    names = [name for name, _ in result.keys]
    header = names + value_columns(result, described)
    table = [[_cell(v) for v in key] + [_cell(v) for v in (value if isinstance(value, tuple) else (value,))]
             for key, value in result.rows]
    numeric = [all(_is_number(row[i]) for row in table) if table else False for i in range(len(header))]
    widths = [max([len(header[i]), *(len(row[i]) for row in table if i < len(row))]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.rjust(w) if num else c.ljust(w)
                         for c, w, num in zip(cells, widths, numeric)).rstrip()

    lines = []
    if getattr(result, "epoch", None) is not None:
        age = "" if result.age is None else f", ended {result.age:.3f} s ago"
        lines.append(f"stable epoch {result.epoch}{age}")
    lines += [line(header), *(line(row) for row in table)]
    if not table:
        lines.append("(no rows)")
    return lines


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return text == "_"
    return True


def cmd_query(args: argparse.Namespace) -> int:
    token = resolve_token(args.token, required=False)
    result, described = asyncio.run(read_box(the_head(args), token, args.box, args.words, args.agg, args.stable))
    if args.json:
        for row in json_lines(result):
            print(json.dumps(row, default=_json_default))
    else:
        for text in table_lines(result, described):
            print(text)
    return EXIT_OK


async def fetch_segments(head: str, token: str | None, box: str) -> tuple[Layout, list[dict[str, Any]]]:
    """The box's layout (the Head's) and every member's ``GET /segments/{box}`` answer, in member order."""
    async with QueryClient(head, token) as client:
        try:
            return await client.segments(box)
        except QueryFailed as exc:
            raise CommandFailed(str(exc)) from None
        except PeerError as exc:
            raise CommandFailed(str(exc)) from None


def describe_segments(layout: Layout, answers: list[dict[str, Any]]) -> list[str]:
    """``boreas segments``' lines: one per segment (slots, member, each map's entries), then the total.

    The layout printed is the newest of the Head's and the members' (members
    learn a relayout first); a segment no member reported is shown as such.
    """
    for answer in answers:
        theirs = answer.get("layout")
        if isinstance(theirs, dict) and int(theirs.get("layout", 0)) > layout.version:
            layout = Layout.from_dict(theirs)
    counts: dict[int, dict[str, int]] = {}
    for answer in answers:
        for sid, maps in answer.get("segments", {}).items():
            counts.setdefault(int(sid), {}).update(maps)
    replicated = counts.pop(-1, {})  # (each member holds all of a replicated map: one member's count)
    table = []
    for seg in layout.segments:
        maps = counts.get(seg.id)
        entries = ("  ".join(f"{name} {n:,}" for name, n in maps.items()) if maps is not None
                   else "(not reported by its member)")
        table.append((seg.name(layout.box), f"slots {seg.lo}-{seg.hi - 1}", layout.members[seg.member], entries))
    widths = [max((len(row[i]) for row in table), default=0) for i in range(3)]
    lines = ["  ".join([*(cell.ljust(w) for cell, w in zip(row[:3], widths)), row[3]]).rstrip() for row in table]
    total = sum(n for maps in counts.values() for n in maps.values())
    n_members, n_segments = len(layout.members), len(layout.segments)
    if layout.replicated:
        cells = "  ".join(f"{name} {replicated.get(name, 0):,}" for name in sorted(layout.replicated))
        on = f"each of the {n_members} members" if n_members != 1 else "the one member"
        lines.append(f"replicated on {on}: {cells}")
    lines.append(f"layout {layout.version}, {n_members} member{'s' if n_members != 1 else ''}, "
                 f"{n_segments} segment{'s' if n_segments != 1 else ''}, {counted(total, 'entry', sep=',')}")
    return lines


def cmd_segments(args: argparse.Namespace) -> int:
    token = resolve_token(args.token, required=False)
    layout, answers = asyncio.run(fetch_segments(the_head(args), token, args.box))
    if args.json:
        print_json(answers)
    else:
        for line in describe_segments(layout, answers):
            print(line)
    return EXIT_OK


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compile", help="print the M3 program a SQL file compiles to")
    p.add_argument("file", metavar="QUERY.sql")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("query", help="read an m3 box's maps where it runs (a table; --json: JSON lines)")
    p.add_argument("box")
    p.add_argument("words", nargs="*", metavar="[MAP] [KEY|_ ...]",
                   help="a map, view or out stream of the box (default: its first out stream's view), "
                        "then keys in key-column order; _ is a wildcard")
    p.add_argument("--agg", choices=("slice", "sum", "min", "max"), default="slice",
                   help="READ_SLICE (default: every matching row) or one aggregate over them")
    p.add_argument("--stable", action="store_true",
                   help="READ_STABLE: the box's last consistent version (of a partitioned box: a first line "
                        '{"epoch": S, "age": seconds, "positions": [...]}, then the rows)')
    p.add_argument("--json", action="store_true",
                   help='print JSON lines, one {"key": [...], "value": ...} per row (for scripts), instead of '
                        "a table whose header names the key and value columns")
    add_head_option(p)
    add_token_option(p)
    p.set_defaults(func=cmd_query)

    p = sub.add_parser("segments", help="a partitioned m3 box's segments: slots, member, entries per map")
    p.add_argument("box")
    add_head_option(p)
    add_token_option(p)
    add_json_option(p)
    p.set_defaults(func=cmd_segments)
