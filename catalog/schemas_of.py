"""Every stream's schema, told from the catalog alone: inputs' declared schemas through each box's type rules.

Validation (:mod:`.validate`) infers schemas to check a topology and
reports what it cannot tell; everything else that needs a stream's schema
(the Head slicing the catalog for nodes, a node wiring its boxes, a filter
being connected, a Spark driver planning a bulk load) needs only the
answer.  So the inference is its own pure function of the catalog:
:func:`schemas_of` gives the answer without running the validator's other
checks, and :func:`infer` is the same walk telling a ``fail(origin,
reason)`` about each box it cannot type.

>>> from boreas.catalog import Catalog, plan_submission, read_document
>>> app = '''<borealis><input stream="R" schema="S"/><schema name="S"><field name="a" type="int"/></schema>
...   <box name="f" type="filter"><in stream="R"/><out stream="F"/><parameter name="expression.0" value="a &gt; 1"/>
...   </box></borealis>'''
>>> catalog = plan_submission(Catalog(), [read_document(app, "app.xml")]).catalog
>>> sorted((s, schema.describe()) for s, schema in schemas_of(catalog).items())
[('F', '(a int)'), ('R', '(a int)')]
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from . import arrays, table_params
from .boxtypes import BoxError, BoxTypeRegistry, builtin_registry
from .diagnostics import Origin
from .model import Box, Catalog, Schema

#: Box types whose operators carry array fields (docs/operators.md, "Array fields"); the catalog checks
#: each one's expressions and keys: an array is never compared, computed on, grouped by or aggregated.
ARRAY_CARRIERS = frozenset({"filter", "map", "union", "join", "aggregate", "delay", "random_drop",
                            "window_drop", "revisionfilter", "revisionmap", "revisionaggregate"})

Fail = Callable[[Origin, str], None]


def schemas_of(catalog: Catalog, registry: BoxTypeRegistry | None = None) -> dict[str, Schema]:
    """The schema of every stream whose schema can be told; an output stream under its declared schema's name
    when that has the same layout (the names users see)."""
    known = infer(catalog, registry or builtin_registry())
    for out in catalog.outputs.values():
        declared = catalog.schemas.get(out.schema) if out.schema else None
        declared = arrays.resolved(declared, catalog.types) if declared is not None else None
        inferred = known.get(out.stream)
        if declared is not None and inferred is not None and inferred.name != declared.name \
                and declared.stands_for(inferred):
            known[out.stream] = declared
    return known


def infer(catalog: Catalog, registry: BoxTypeRegistry, fail: Fail | None = None) -> dict[str, Schema]:
    """Propagate schemas from the inputs through the boxes in dataflow order; ``fail`` hears why a box cannot
    be typed (a box whose inputs are already broken is skipped, so one mistake gives one message)."""
    def report(origin: Origin, reason: str) -> None:
        if fail is not None:
            fail(origin, reason)

    known: dict[str, Schema] = {}
    broken: set[str] = set()  # streams whose schema cannot be told; stay quiet downstream
    producers = catalog.producers()
    for inp in catalog.inputs.values():
        schema = input_schema(catalog, inp.schema)
        if schema is not None:
            known[inp.stream] = schema
        else:
            broken.add(inp.stream)
    consumers = {stream: {c.box for c in found} for stream, found in catalog.consumers().items()}
    waiting = {name: {p.stream for p in box.inputs} for name, box in catalog.boxes.items()}
    ready: deque[str] = deque()

    def arrived(stream: str) -> None:
        for name in sorted(consumers.get(stream, ())):
            if stream in waiting[name]:
                waiting[name].discard(stream)
                if not waiting[name]:
                    ready.append(name)

    for stream in sorted(set(known) | broken):
        arrived(stream)
    done: set[str] = set()
    while ready:
        name = ready.popleft()
        done.add(name)
        box = catalog.boxes[name]
        typed = type_box(catalog, registry, box, [None if s in broken else known[s] for s in
                                                  (p.stream for p in box.inputs)])
        for reason in typed.problems:
            report(box.origin, reason)
        for port, stream in enumerate(box.outputs):
            if typed.outs is not None:
                known.setdefault(stream, typed.outs[port])  # (a stream's first producer gives its schema)
            else:
                broken.add(stream)
            arrived(stream)
    if fail is not None:
        for name, box in catalog.boxes.items():
            if name not in done and all(p.stream in producers for p in box.inputs):
                fail(box.origin, cycle_reason(name))
    return known


def cycle_reason(box: str) -> str:
    return f"box {box!r} is on a cycle: its in streams depend on its own output"


def input_schema(catalog: Catalog, name: str) -> Schema | None:
    """An input stream's schema (``name``: the one it declares), or None when it cannot be told.

    A stream with more than one producer (reported by validation) gets the
    schema of the first told: an input's before a box's, which a node
    taking a box that produces one of its input streams needs
    (node/wiring.py's refusals).
    """
    schema = catalog.schemas.get(name)
    # A field of an unknown type (type="float") is reported at the field (validate.REFERENCE_CHECKS);
    # its stream is not then called an array downstream.
    if schema is None or any(arrays.unknown_alias(f, catalog.types) for f in schema.fields):
        return None
    return arrays.resolved(schema, catalog.types)  # (the data plane reads no <type> alias)


@dataclass(frozen=True, slots=True)
class BoxTyping:
    """What inference learned of one box: its out streams' schemas (None: not told) and its problems.

    A pure function of the box, its in streams' schemas (None for a broken one) and the catalog's
    aliases, so an index keeps one per box and reuses it while none of those changed."""

    box: Box
    inputs: tuple[Schema | None, ...]
    outs: tuple[Schema, ...] | None
    problems: tuple[str, ...]


def type_box(catalog: Catalog, registry: BoxTypeRegistry, box: Box, inputs: list[Schema | None]) -> BoxTyping:
    """Check one box's shape and infer its out schemas from its in streams' (None: that stream is broken,
    and the box is checked for its shape only: one mistake gives one message)."""
    box = table_params.bind(box, catalog)  # a table box reads its table's declaration (catalog/table_params.py)
    problems = registry.check_shape(box)
    outs: list[Schema] | None = None
    if not problems and None not in inputs:
        schemas: list[Schema] = inputs  # type: ignore[assignment]
        try:
            reads_array = _reads_array(catalog, box, schemas)
            if reads_array:
                raise BoxError(reads_array)
            outs = registry.infer(box, schemas)
        except BoxError as exc:
            problems = [*problems, str(exc)]
    return BoxTyping(box, tuple(inputs), None if outs is None else tuple(outs), tuple(problems))


def array_field(catalog: Catalog, schema: Schema) -> str | None:
    """``field 'f' is an array (byte(0...9))`` for the schema's first array field, or None."""
    f = arrays.first_array_field(schema)
    if f is None:
        return None
    return f"field {f.name!r} is an array ({arrays.describe(f, catalog.types)})"


def _reads_array(catalog: Catalog, box: Box, inputs: list[Schema]) -> str | None:
    """Why the box cannot run because an in stream carries an array field it cannot (None: it can)."""
    for port, schema in enumerate(inputs):
        found = array_field(catalog, schema)
        if not found:
            continue
        where = (f"{box.type} box {box.name!r} in port {port} reads stream {box.inputs[port].stream!r} "
                 f"(schema {schema.name!r})")
        problem = arrays.flow_problem(schema, catalog.types)
        if problem:
            return f"{where}, whose {problem}"
        if box.type not in ARRAY_CARRIERS:
            return (f"{where}, whose {found}: {box.type} boxes do not carry array fields (the boxes that do: "
                    f"{', '.join(sorted(ARRAY_CARRIERS))}; docs/operators.md, \"Array fields\")")
    return None
