"""What a replacing submission removes because the new file leaves it out.

Each query, box, table, input and output a submission declares records the
application that declared it (``app``: ``boreas submit --app NAME``, else the
file's base name; docs/xml.md "The edit loop").  When the new version of an
application is submitted with ``--replace``, what the catalog says that
application declared and the new version no longer declares goes, in the
same commit: a query with its boxes and tables, a box with the streams only
it produced, an ``<input>`` or ``<output>``.  Elements of other applications,
and elements stored before applications were recorded (``app`` empty), are
never touched.

A stream that goes while something that stays still reads it (a box, a table,
a subscriber) is refused, naming the readers: nothing is half-removed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .diagnostics import Diagnostic, Origin
from .model import Catalog

#: Catalog dicts whose elements record their application, in the order they are pruned
#: (a query before its boxes, boxes before the streams they read).
PRUNED = ("queries", "boxes", "tables", "inputs", "outputs")


def prune_left_out(catalog: Catalog, declared: Mapping[str, set[str]], sources: Mapping[str, str],
                   remove_box: Callable[[str], None]) -> list[Diagnostic]:
    """Remove, in place, what ``catalog`` records for the applications ``sources`` names (application ->
    its file) that ``declared`` (Catalog dict -> keys this submission declares) leaves out; the refusals."""
    gone: dict[str, str] = {}  # stream -> application whose left-out element produced it
    for attr in PRUNED:
        items = getattr(catalog, attr)
        for key, obj in list(items.items()):
            if obj.app not in sources or key in declared.get(attr, ()):
                continue
            if attr == "boxes":
                gone.update(dict.fromkeys(obj.outputs, obj.app))
                remove_box(key)
            else:
                del items[key]
                if attr == "inputs":
                    gone[obj.stream] = obj.app
    produced = {*catalog.inputs, *(s for b in catalog.boxes.values() for s in b.outputs)}
    problems = []
    for stream in sorted(gone.keys() - produced):
        readers = sorted(f"box {b.name}" for b in catalog.boxes.values() if any(p.stream == stream for p in b.inputs))
        readers += sorted(f"table {t.name}" for t in catalog.tables.values() if t.stream == stream)
        readers += sorted(f"subscriber {s.name or s.endpoint}" for s in catalog.subscriptions.values()
                          if s.stream == stream)
        if readers:
            app = gone[stream]
            problems.append(Diagnostic.at(Origin(sources[app], None, "/borealis"), (
                f"stream {stream!r} would be removed (application {app!r} no longer declares it or the box "
                f"producing it) while {', '.join(readers)} still {'reads' if len(readers) == 1 else 'read'} it: "
                f"keep it in the file, or drop or change {'that reader' if len(readers) == 1 else 'them'} first")))
    return problems
