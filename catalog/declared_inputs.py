"""An ``<input>`` naming a stream a box writes: a declaration of that stream's schema, not a second producer.

Borealis reads ``<input stream schema>`` as "this stream exists, with this
schema" (its ``Diagram`` adds the stream; ``Catalog::add_input`` does not
list it among the inputs), and a box ``<out>`` naming that stream later
becomes its source.  So the box is the stream's one producer and the
``<input>`` only names its schema.  Boreas has an element for exactly that:
an ``<output>`` declares the schema of a stream a box produces, validation
checks it against the box's inferred out schema (file and line of the
declaration on a mismatch), and slicing treats the stream as the box's.  The
merge therefore stores such an ``<input>`` as the ``<output>`` it amounts to,
and nothing downstream needs a third stream role; publishing to the stream is
refused, since its producer is the box (:func:`publish_reason`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .diagnostics import Origin
from .model import Catalog, Output


def as_declarations(catalog: Catalog, streams: Iterable[str], fresh_outputs: set[str],
                    fail: Callable[[Origin, str], None],
                    produced: Callable[[Iterable[str]], set[str]] | None = None) -> set[str]:
    """Turn each ``<input>`` among ``streams`` that a box produces into its ``<output>`` declaration.

    ``fresh_outputs`` are the output streams this submission declared: an
    input's schema must agree with such an ``<output>`` (refused at the input
    otherwise); an output stored before is replaced by the input's
    declaration, as a redeclaration would.  Returns the streams turned.
    ``produced(streams)``: which of them a box produces (default: a walk over
    every box, done only when one of ``streams`` is an ``<input>``).
    """
    candidates = sorted(s for s in set(streams) if s in catalog.inputs)
    if not candidates:
        return set()
    boxed = (produced or (lambda names: set(names) & {s for b in catalog.boxes.values() for s in b.outputs}))(
        candidates)
    turned = set()
    for stream in candidates:
        inp = catalog.inputs[stream]
        if stream not in boxed:
            continue
        existing = catalog.outputs.get(stream)
        if existing is not None and stream in fresh_outputs:
            mine, theirs = catalog.schemas.get(inp.schema), catalog.schemas.get(existing.schema or "")
            if mine is not None and theirs is not None and not mine.same_shape(theirs):
                fail(inp.origin, f"input stream {stream!r} declares schema {inp.schema!r} {mine.describe()} "
                                 f"for a stream box-produced and declared as <output> with schema "
                                 f"{existing.schema!r} {theirs.describe()} at {existing.origin}")
                continue
        else:
            catalog.outputs[stream] = Output(stream, inp.schema, None, inp.origin, inp.app)
        del catalog.inputs[stream]
        turned.add(stream)
    return turned


def publish_reason(catalog: Catalog, stream: str) -> str:
    """Why nothing publishes to ``stream`` when it is no ``<input>`` stream: a box produces it, or nothing."""
    writers = [box.name for box in catalog.boxes.values() if stream in box.outputs]
    if writers:
        return (f"publish to stream {stream!r}, which box {writers[0]!r} produces: an <input> naming a stream a "
                f"box writes only declares its schema (as in Borealis), so publishers cannot feed it")
    return f"publish to stream {stream!r}, which is not an <input> stream"
