"""Why a declared schema cannot name a stream whose producer may write NULL where it declares a field not null.

A declared ``<output>`` (or ``<input>`` of a box's stream) schema must be
nullable wherever the producer's inferred one is (:meth:`.model.Schema.stands_for`):
a field declared without ``nullable="true"`` refuses the NULLs the producer
writes there, so the submission is refused.  The bare two layouts say that
only to a reader who compares them field by field; this note names the
fields, the box that writes NULL there and why it does, so the fix (declare
them nullable) is in the message.  An ``m3`` box writes NULL in a nullable
key's NULL group and in a SUM, AVG, MIN or MAX that reads no value (a group
whose values are all NULL, or left so by deletes: docs/m3.md, "NULLs"), of
numbers and strings alike (issue 33: a MIN/MAX of a nullable VARCHAR was
written as '' and its field declared not null).

>>> from .model import Box, Field, FieldType
>>> box = Box("q", "m3", (), ("V",))
>>> inferred = Schema("i", (Field("b", FieldType.INT), Field("hi", FieldType.STRING, 4, nullable=True)))
>>> declared = Schema("d", (Field("b", FieldType.INT), Field("hi", FieldType.STRING, 4)))
>>> print(null_fields_note(Catalog(boxes={"q": box}), "V", declared, inferred))
 (field 'hi' is NULL where m3 box 'q' writes NULL: its view's key of a nullable column's NULL group, or a SUM, AVG, MIN or MAX over a group without a non-NULL value, as in SQL (docs/m3.md, "NULLs"); declare it nullable="true")
>>> null_fields_note(Catalog(boxes={"q": box}), "V", inferred, inferred)
''
"""

from __future__ import annotations

from .model import Catalog, Schema

#: Why a box of a type writes NULL (the types whose reason is worth more than "may write NULL").
WHY = {"m3": ("its view's key of a nullable column's NULL group, or a SUM, AVG, MIN or MAX over a group without a "
              "non-NULL value, as in SQL (docs/m3.md, \"NULLs\")")}


def null_fields_note(catalog: Catalog, stream: str, declared: Schema, inferred: Schema) -> str:
    """`` (field 'x' is NULL where box 'b' writes NULL: why; declare it nullable="true")`` for the fields
    ``declared`` does not make nullable where ``inferred`` (the producer's) does; "" when there are none or the
    layouts differ in shape (that is the problem then)."""
    if not declared.same_shape(inferred):
        return ""
    names = [d.name for d, i in zip(declared.fields, inferred.fields) if i.nullable and not d.nullable]
    if not names:
        return ""
    box = next((catalog.boxes.get(p.box) for p in catalog.producers().get(stream, []) if p.box), None)
    writer = f"{box.type} box {box.name!r}" if box is not None else "its producer"
    why = WHY.get(box.type) if box is not None else None
    fields = ", ".join(repr(n) for n in names)
    return (f" (field{'s' if len(names) > 1 else ''} {fields} {'are' if len(names) > 1 else 'is'} NULL where "
            f"{writer} writes NULL{': ' + why if why else ''}; declare {'them' if len(names) > 1 else 'it'} "
            f"nullable=\"true\")")
