"""Which streams are changelogs, and which boxes cannot read one: told from the catalog at submission.

A *changelog* stream carries rows with weights (docs/dataplane.md, "Changelog
streams"): +1 a row enters, -1 it leaves, so a revision is -old/+new.  No
stream is declared one; it follows from the boxes:

* an ``m3`` box's out streams are changelogs (a view's rows are revised),
  partitioned or not (each member emits the rows it owns as -old/+new);
* a ``filter``, ``map`` or ``union`` of a changelog is a changelog (they pass
  each row's weight on; a union must not mix a changelog with a plain
  stream, whose rows carry no weights to pass);
* an ``aggregate`` over a changelog is a changelog (it retracts: each changed
  group's result leaves as -old and comes back as +new), when its windows
  are by VALUES and its functions can be retracted (``firstval``/``lastval``
  depend on arrival order, which a retraction does not have);
* a revision box (``revisionfilter``, ``revisionmap``,
  ``revisionaggregate``: catalog/revision_params.py) reads a changelog or a
  plain stream (its rows all +1) and always writes a changelog: it emits
  revisions of what it emitted before;
* the fault-tolerance boxes (``sunion``, ``soutput``, ``sjoin``:
  catalog/fault_params.py) read a changelog or a plain stream and always
  write a changelog: a tentative row is retracted once it is corrected;
* a partitioned ``m3`` box takes a changelog as an unpartitioned one does
  (its coordinators route the weighted batches to the members as columns);
* every other box type (``join``, ``delay``, ``random_drop``,
  ``window_drop``, a type registered elsewhere) cannot apply weights: one fed
  a changelog is refused, naming the box, the stream and where it comes from.

>>> from boreas.catalog import Catalog, plan_submission, read_document
>>> app = '''<borealis><input stream="R" schema="S"/><schema name="S"><field name="a" type="int"/></schema>
...   <box name="v" type="m3"><in stream="R"/><out stream="V"/>
...     <parameter name="sql" value="SELECT a, COUNT(*) AS n FROM R GROUP BY a"/></box>
...   <box name="d" type="delay"><in stream="V"/><out stream="D"/><parameter name="delay-ms" value="1"/></box>
... </borealis>'''
>>> catalog = plan_submission(Catalog(), [read_document(app, "app.xml")]).catalog
>>> sorted(changelog_streams(catalog))
['V']
>>> print(refusals(catalog)[0][1])
delay box 'd' cannot read stream 'V': it is a changelog (rows with weights: m3 box 'v' revises its view's rows as -old/+new), and a delay box cannot apply weights (docs/operators.md, "Changelog streams")
"""

from __future__ import annotations

from collections.abc import Callable

from .diagnostics import Origin
from .model import Box, Catalog
from .fault_params import FAULT_TYPES
from .revision_params import REVISION_TYPES

#: The column a changelog batch's weights travel in, after its schema's fields (wire/columns.py), and the field
#: ``boreas subscribe`` writes them in: no schema may name a field so.
WEIGHT = "_weight"

#: Box types whose out streams are changelogs whatever they read.
SOURCES = frozenset({"m3", *REVISION_TYPES, *FAULT_TYPES})
#: Box types that pass each row's weight on: a changelog in, a changelog out.
PASSING = frozenset({"filter", "map", "union"})
#: Box types that apply weights: they read a changelog (and ``aggregate`` writes one).
APPLYING = frozenset({"aggregate", "m3", *REVISION_TYPES, *FAULT_TYPES})
#: Aggregate functions that cannot be retracted (they depend on the order rows arrived in).
ORDERED_FUNCTIONS = ("firstval", "lastval")


def changelog_streams(catalog: Catalog) -> dict[str, str]:
    """Every changelog stream, with where its weights come from (``"m3 box 'v'"``), to say so in refusals."""
    found: dict[str, str] = {}
    if not any(box.type in SOURCES for box in catalog.boxes.values()):
        return found  # (no box makes a changelog: one walk, not two; a node checks every update so: issue 37)
    changed = True
    while changed:  # to a fixpoint: the boxes need not be in dataflow order
        changed = False
        for box in catalog.boxes.values():
            if box.type in SOURCES:
                what = "view's rows" if box.type == "m3" else "out rows"
                why = f"{box.type} box {box.name!r} revises its {what} as -old/+new"
            elif box.type in PASSING or box.type == "aggregate":
                fed = [found[p.stream] for p in box.inputs if p.stream in found]
                if not fed:
                    continue
                why = fed[0]
            else:
                continue
            for stream in box.outputs:
                if stream not in found:
                    found[stream] = why
                    changed = True
    return found


def refusals(catalog: Catalog) -> list[tuple[Box, str]]:
    """Each box that cannot read the changelog it is fed, with the reason a user reads."""
    changelogs = changelog_streams(catalog)
    out: list[tuple[Box, str]] = []
    if not changelogs:
        return out
    for box in catalog.boxes.values():
        fed = [p.stream for p in box.inputs if p.stream in changelogs]
        if not fed:
            continue
        stream = fed[0]
        what = f"{box.type} box {box.name!r}"
        source = f"it is a changelog (rows with weights: {changelogs[stream]})"
        why = _why_not(box, [p.stream for p in box.inputs], changelogs)
        if why:
            out.append((box, f"{what} cannot read stream {stream!r}: {source}, and {why} "
                             f"(docs/operators.md, \"Changelog streams\")"))
    return out


def _why_not(box: Box, streams: list[str], changelogs: dict[str, str]) -> str | None:
    """Why ``box`` cannot take the changelog among ``streams``; None when it can (a partitioned ``m3`` box too:
    its coordinators route the weighted columns to the members, node/cumulus/columnar.py)."""
    if box.type in PASSING:
        plain = [s for s in streams if s not in changelogs]
        if plain:
            return (f"it also reads plain stream {plain[0]!r}, whose rows carry no weights "
                    "(a union's out stream is one or the other)")
        return None
    if box.type == "aggregate":
        if (box.param("window-size-by") or "").strip().upper() == "TUPLES":
            return "windows by TUPLES count rows as they arrive, which a retraction cannot undo (use VALUES)"
        for name, value in box.params:
            if name.startswith("aggregate-function.") and value.strip().lower().startswith(ORDERED_FUNCTIONS):
                return (f"{name}={value!r} depends on the order rows arrived in, which a retraction cannot undo "
                        f"(count, count_distinct, sum, avg, min and max retract)")
        return None
    if box.type in APPLYING:
        return None
    return f"a {box.type} box cannot apply weights"


def check(catalog: Catalog, fail: Callable[[Origin, str], None]) -> None:
    """Validation's hook: each refusal, at its box; a schema field named :data:`WEIGHT`, at the field."""
    for schema in catalog.schemas.values():
        for f in schema.fields:
            if f.name == WEIGHT:
                fail(f.origin if f.origin.line is not None else schema.origin,
                     f"schema {schema.name!r}: field name {WEIGHT!r} is reserved for a changelog's weights "
                     "(docs/dataplane.md, \"Changelog streams\")")
    for box, reason in refusals(catalog):
        fail(box.origin, reason)
