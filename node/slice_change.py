"""Which boxes an update changed in a node's slice, from the keys it wrote: what the node rebuilds and reroutes.

:meth:`LocalCatalog.preview <boreas.node.local_catalog.LocalCatalog.preview>`
records the keys an update wrote per Catalog dict
(:func:`~boreas.catalog.replicate.apply_update`'s ``touched``).  When the
catalog they were written over is the one the node's operators follow,
every box not among them is the very object the operators were built from,
so the node checks, builds and routes only those (issue 37: a node of a
100,000-box catalog holds 5,000 boxes, and a one-box update walked them all
several times).  :func:`changed_boxes` names them, in the order a walk over
every box would meet them (new boxes last, in the catalog's order: the
order of a stream's consumers depends on it, node/routes.py: the last keys
of a plain dict, or the one new box; several new ones in a mapping of
another order are found by a walk over the boxes), or answers
None when the update wrote what a box's build depends on besides its own
declaration (a table box is built with its table and schema, a partitioned
box with its partition, every box with its streams' schemas: a schema
written with another value (one written again as it was, as a box moving
in declares its streams' schemas, is no change), or an ``<input>`` or ``<output>`` kept but given another schema):
then the node walks every box, as before, and builds again each whose
streams' schemas changed (:meth:`BoxStates.follow
<boreas.node.box_state.BoxStates.follow>`).  An input or output declaration
added or removed is not such a write: a slice declares a stream another
node writes with the schema its producer's box gives it, the one the
boxes reading it were built with.

>>> from boreas.catalog.model import Box, Catalog, InPort
>>> def box(name):
...     return Box(name, "filter", (InPort("S"),), (name + "_out",), (("expression.0", "x > 1"),))
>>> before, after = Catalog(), Catalog()
>>> before.boxes = {"a": box("a"), "b": box("b")}
>>> after.boxes = {"a": box("a"), "c": box("c"), "d": box("d")}
>>> changed_boxes(after, {"boxes": {"d", "b", "c"}}, held=before.boxes, broken=())
['b', 'c', 'd']
>>> changed_boxes(after, {"boxes": {"a"}, "tables": {"t"}}, held=before.boxes, broken=()) is None
True
>>> from boreas.catalog.model import Input
>>> before.inputs, after.inputs = {"S": Input("S", "T")}, {"S": Input("S", "U")}
>>> changed_boxes(after, {"inputs": {"S"}}, held=before.boxes, broken=(), before=before) is None
True
>>> from boreas.catalog.model import Schema
>>> before.schemas, after.schemas = {"T": Schema("T", ())}, {"T": Schema("T", ())}
>>> changed_boxes(after, {"schemas": {"T"}}, held=before.boxes, broken=(), before=before)
[]
>>> after.schemas["V"] = Schema("V", ())  # (a new schema: no box built before reads it)
>>> changed_boxes(after, {"schemas": {"V"}}, held=before.boxes, broken=(), before=before)
[]
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from itertools import islice

from boreas.catalog.model import Box, Catalog

#: Catalog dicts whose change reaches boxes whose own declaration did not change (a table box is bound to
#: its table's declaration and schema; a partitioned box's member is built by its partition).
WHOLE = frozenset({"tables", "schemas", "types", "partitions"})
#: Of those, the dicts of declarations a box reads by name only when it is built: one declared anew (a box moving
#: in declares its out streams' schemas, which a map's or an aggregate's are named after it) reaches no box built
#: before, since a box naming a schema or type that was missing is broken, and broken boxes are tried again.
NAMED = frozenset({"schemas", "types"})


def changed_boxes(after: Catalog, touched: Mapping[str, Collection[str]], held: Mapping[str, Box],
                  broken: Collection[str], before: Catalog | None = None) -> list[str] | None:
    """The boxes to check, build and route again for ``after``, whose update wrote ``touched`` over the
    catalog the node's boxes (``held``, by name) were built from (``before``; None: any ``<input>`` or
    ``<output>`` written walks every box); ``broken`` ones (built and failed) are tried again.  None: walk
    every box."""
    if any(_rewritten(before, after, kind, touched.get(kind, ())) for kind in WHOLE) or _reschemed(
            before, after, touched):
        return None
    names = set(touched.get("boxes", ())) | set(broken)
    present = after.boxes
    new = {n for n in names if n not in held and n in present}
    if type(present) is dict:  # (a plain dict lists the keys last written last)
        tail = list(islice(reversed(present), len(new)))[::-1]
    else:  # (a layered one keeps a key written again in its old place: one new box needs no order)
        tail = list(new) if len(new) < 2 else []
    if set(tail) != new:  # (not the last ones written, or several in a layered mapping: found by a walk)
        tail = [n for n in present if n in new]
    return sorted(names - new) + tail  # (changed or gone, each keeping its place; then the new ones)



def _rewritten(before: Catalog | None, after: Catalog, kind: str, keys: Collection[str]) -> bool:
    """Whether the keys an update wrote in Catalog dict ``kind`` changed anything there.  A key written again
    with an equal element (a box moving in declares its streams' schemas, which the target mostly holds
    already) is no change: the operators built with the one held are those :meth:`BoxStates._held
    <boreas.node.box_state.BoxStates._held>` keeps, by the same equality.  With ``before`` unknown, any
    key written is a change."""
    if not keys:
        return False
    if before is None:
        return True
    old, new = getattr(before, kind), getattr(after, kind)
    if kind in NAMED:  # a new name is no change to boxes built before it existed (one naming it was broken)
        return any(k in old and (k not in new or old[k] != new[k]) for k in keys)
    return any(k not in old or k not in new or old[k] != new[k] for k in keys)


def _reschemed(before: Catalog | None, after: Catalog, touched: Mapping[str, Collection[str]]) -> bool:
    """Whether an ``<input>`` or ``<output>`` declared both before and after was given another schema."""
    for kind in ("inputs", "outputs"):
        streams = touched.get(kind, ())
        if streams and before is None:
            return True
        old, new = (getattr(before, kind), getattr(after, kind)) if streams else ({}, {})
        if any(s in old and s in new and old[s].schema != new[s].schema for s in streams):
            return True
    return False
