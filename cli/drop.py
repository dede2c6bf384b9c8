"""``boreas drop``: take queries, boxes, streams or a whole application out of the running catalog.

What goes is said as application XML ``<delete>`` elements and submitted
like any change, as one atomic submission: either everything named goes, or
nothing does and every reason is printed.  A name is looked up in the
Head's catalog (a query, a box, or a stream); a file is an application
document, and everything it declares goes: its queries (with their boxes and
tables), the boxes outside a query, then its streams (deletes apply in
order, so the streams are free by then).  Schemas stay: they are immutable
and harmless, and the same application submitted again reuses them.

The edit loop itself is edit, ``boreas submit --replace app.xml`` (unchanged
boxes keep their state, and what the file leaves out of the application goes:
docs/xml.md); dropping is for starting over, and for what another file declared.

>>> print(deletes_for_names(["cleanup", "Reading"], queries={"cleanup"}, boxes=set(), streams={"Reading"}))
['<delete query="cleanup"/>', '<delete stream="Reading"/>']
"""

from __future__ import annotations

import argparse
import asyncio
import html
from pathlib import Path

from boreas.catalog.document_model import Application
from boreas.catalog.model import Box, Input, Output, Query
from boreas.catalog.words import unknown
from boreas.wire.auth import resolve_token

from .common import BadInput, add_head_option, add_token_option, the_head


def _delete(attr: str, name: str) -> str:
    return f'<delete {attr}="{html.escape(name, quote=True)}"/>'


def deletes_for_names(names: list[str], queries: set[str], boxes: set[str], streams: set[str]) -> list[str]:
    """One ``<delete>`` per name: a query, else a box, else a stream; BadInput naming one that is none."""
    out = []
    for name in names:
        if name in queries:
            out.append(_delete("query", name))
        elif name in boxes:
            out.append(_delete("box", name))
        elif name in streams:
            out.append(_delete("stream", name))
        else:
            raise BadInput(unknown("query, box or stream", name, queries | boxes | streams, "in the catalog"))
    return out


def deletes_for_application(app: Application, queries: set[str], boxes: set[str], streams: set[str]) -> list[str]:
    """Everything an application document declares that the catalog holds: queries, lone boxes, then streams."""
    declared = app.declarations
    in_queries = {b for q in declared if isinstance(q, Query) for b in q.boxes}
    out = [_delete("query", q.name) for q in declared if isinstance(q, Query) and q.name in queries]
    out += [_delete("box", b.name) for b in declared if isinstance(b, Box) and b.name not in in_queries
            and b.name in boxes]
    out += [_delete("stream", s.stream) for s in declared if isinstance(s, (Input, Output)) and s.stream in streams]
    return out


def cmd_drop(args: argparse.Namespace) -> int:
    from boreas.catalog.documents import read_file  # (xmlschema: only when the command runs)

    from .clients import fetch_catalog, submit_and_report

    head = the_head(args)
    token = resolve_token(args.token, required=False)

    async def main() -> int:
        catalog = await fetch_catalog(head)
        queries, boxes = set(catalog.queries), set(catalog.boxes)
        streams = {*catalog.inputs, *catalog.outputs, *(s for b in catalog.boxes.values() for s in b.outputs)}
        deletes: list[str] = []
        for target in args.targets:
            if Path(target).is_file():
                document = read_file(target)  # its sql-file parameters read as boreas submit reads them
                if not isinstance(document, Application):
                    raise BadInput(f"{target}: not application XML (<borealis>): only an application can be dropped")
                deletes += deletes_for_application(document, queries, boxes, streams)
            else:
                deletes += deletes_for_names([target], queries, boxes, streams)
        deletes = list(dict.fromkeys(deletes))
        if not deletes:
            print("nothing to drop: none of it is in the catalog")
            return 0
        text = "<borealis>\n  " + "\n  ".join(deletes) + "\n</borealis>\n"
        return await submit_and_report(head, token, [("drop.xml", text.encode())], args.timeout)

    return asyncio.run(main())


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("drop", help="take queries, boxes, streams or a whole application (its file) out of the "
                                    "catalog, as one submission")  # (cli/main.py COMMANDS says the same)
    p.add_argument("targets", nargs="+", metavar="NAME_OR_FILE",
                   help="a query, box or stream name, or an application XML file (everything it declares goes)")
    p.add_argument("--timeout", type=float, default=30.0,
                   help="seconds to wait for every node to acknowledge (default 30)")
    add_head_option(p)
    add_token_option(p)
    p.set_defaults(func=cmd_drop)
