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

from . import arrays
from .boxtypes import BoxError, BoxTypeRegistry, builtin_registry
from .diagnostics import Origin
from .model import Box, Catalog, Schema

#: Why array fields stop at the data plane's edge, said once for every refusal.
SCALARS_ONLY = "Boreas's data plane carries scalar fields only (see docs/borealis_compat.md)"

Fail = Callable[[Origin, str], None]


def schemas_of(catalog: Catalog, registry: BoxTypeRegistry | None = None) -> dict[str, Schema]:
    """The schema of every stream whose schema can be told; an output stream under its declared schema's name
    when that has the same layout (the names users see)."""
    known = infer(catalog, registry or builtin_registry())
    for out in catalog.outputs.values():
        declared = catalog.schemas.get(out.schema) if out.schema else None
        inferred = known.get(out.stream)
        if declared is not None and inferred is not None and inferred.name != declared.name \
                and declared.same_shape(inferred):
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
    for inp in catalog.inputs.values():
        schema = catalog.schemas.get(inp.schema)
        # A field of an unknown type (type="float") is reported at the field (validate._check_references);
        # its stream is not then called an array downstream.
        if schema is not None and not any(arrays.unknown_alias(f, catalog.types) for f in schema.fields):
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
        shape = registry.check_shape(box)
        for reason in shape:
            report(box.origin, reason)
        in_streams = [p.stream for p in box.inputs]
        outs: list[Schema] | None = None
        if not shape and not any(s in broken for s in in_streams):
            reads_array = _reads_array(catalog, box, [known[s] for s in in_streams])
            try:
                if reads_array:
                    raise BoxError(reads_array)
                outs = registry.infer(box, [known[s] for s in in_streams])
            except BoxError as exc:
                report(box.origin, str(exc))
        for port, stream in enumerate(box.outputs):
            if outs is not None:
                known.setdefault(stream, outs[port])
            else:
                broken.add(stream)
            arrived(stream)
    if fail is not None:
        produced = catalog.producers()
        for name, box in catalog.boxes.items():
            if name not in done and all(p.stream in produced for p in box.inputs):
                fail(box.origin, f"box {name!r} is on a cycle: its in streams depend on its own output")
    return known


def array_field(catalog: Catalog, schema: Schema) -> str | None:
    """``field 'f' is an array (byte(0...9))`` for the schema's first array field, or None."""
    f = arrays.first_array_field(schema)
    if f is None:
        return None
    return f"field {f.name!r} is an array ({arrays.describe(f, catalog.types)})"


def _reads_array(catalog: Catalog, box: Box, inputs: list[Schema]) -> str | None:
    """Why the box cannot run because an in stream carries an array field (None: it can)."""
    for port, schema in enumerate(inputs):
        found = array_field(catalog, schema)
        if found:
            return (f"{box.type} box {box.name!r} in port {port} reads stream {box.inputs[port].stream!r} "
                    f"(schema {schema.name!r}), whose {found}: {SCALARS_ONLY}")
    return None
