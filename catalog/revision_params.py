"""Borealis's revision boxes (``revisionfilter``, ``revisionmap``, ``revisionaggregate``): their own parameters.

Borealis offered revision processing for corrected and late data: a tuple's
header says whether it is an insertion, a deletion or a replacement (of one
field, whose new value travels in the ``revised_value`` field), and the
revision boxes emit revisions of what they emitted before.  Boreas carries
the same thing as a changelog (docs/operators.md, "Revision boxes"): a
deletion is the row at weight -1, a replacement the old row at -1 and the
new row at +1.  So each revision box is its plain counterpart reading and
writing a changelog, and what is left here is what the revision boxes add
to their counterpart's parameters:

* ``processing-mode`` (``UPSTREAM`` or ``DOWNSTREAM``) and ``anchor`` (the
  connection points a box asks for history): how a Borealis box found the
  tuples a revision touches.  A Boreas box keeps what it needs in its own
  state (which moves and recovers with it), so both modes give the same
  rows; the mode is checked, the anchors are kept for round trips;
* ``inverse.N`` of a ``revisionmap``: expressions over the out fields that
  give the in fields back (UPSTREAM mode asked a connection point with
  them).  Checked against the out schema, otherwise not needed;
* the out schemas of ``revisionmap`` and ``revisionaggregate`` end with a
  string field ``revised_value``, as Borealis's do (the suite's declared
  output schemas have it).  Boreas fills it with null: the new value of a
  replacement is the +1 row itself;
* ``revisionaggregate``'s functions are named ``agg_N`` unless
  ``aggregate-function-output-name.N`` says otherwise (Borealis's default).

>>> from boreas.catalog.model import Box, InPort
>>> box = Box("a", "revisionaggregate", (InPort("S"),), ("T",), (("aggregate-function.0", "sum(x)"),
...       ("window-size-by", "VALUES"), ("window-size", "5"), ("processing-mode", "sideways")))
>>> check_revision_params(box)
Traceback (most recent call last):
  ...
boreas.catalog.revision_params.RevisionParamError: revisionaggregate box 'a': parameter 'processing-mode'='sideways' must be UPSTREAM or DOWNSTREAM
>>> [v for n, v in with_borealis_names(box).params if n.startswith("aggregate-function-output-name")]
['agg_0']
"""

from __future__ import annotations

import dataclasses
import re

from .model import Box, Field, FieldType

#: The string field Borealis appends to a revisionmap's and a revisionaggregate's out tuples.
REVISED_VALUE = "revised_value"

#: Box types that read and write a changelog whatever they are fed (catalog/changelog.py).
REVISION_TYPES = ("revisionfilter", "revisionmap", "revisionaggregate")

#: Each revision box type's plain counterpart, whose semantics it applies to a changelog.
PLAIN_TYPE = {"revisionfilter": "filter", "revisionmap": "map", "revisionaggregate": "aggregate"}

_MODES = ("UPSTREAM", "DOWNSTREAM")
_OWN_PARAMS = re.compile(r"^(processing-mode|anchor|inverse\.\d+)$")
_ORDERED = re.compile(r"^\s*(firstval|lastval)\s*\(", re.IGNORECASE)


class RevisionParamError(ValueError):
    """A revision box's own parameter is wrong; the message is one line naming box and parameter."""


def check_revision_params(box: Box) -> None:
    """The parameters a revision box adds to its counterpart's, and those that cannot mean anything here."""
    what = f"{box.type} box {box.name!r}"
    mode = box.param("processing-mode")
    if mode is not None and mode.strip().upper() not in _MODES:
        raise RevisionParamError(f"{what}: parameter 'processing-mode'={mode!r} must be UPSTREAM or DOWNSTREAM")
    if box.type != "revisionaggregate":
        return
    by = (box.param("window-size-by") or "").strip().upper()
    if by == "TUPLES":
        raise RevisionParamError(f"{what}: parameter 'window-size-by'='TUPLES': windows by TUPLES count rows as "
                                 f"they arrive, which a revision cannot undo (use VALUES)")
    for name in ("slack", "timeout"):
        if box.param(name) is not None:
            raise RevisionParamError(f"{what}: parameter {name!r} has no meaning here: a revision aggregate's "
                                     f"windows never close (a revision may come at any time), so nothing "
                                     f"waits and nothing is late")
    for name, value in box.params:
        if name.startswith("aggregate-function.") and _ORDERED.match(value):
            raise RevisionParamError(f"{what}: parameter {name!r}={value!r} depends on the order rows arrived "
                                     f"in, which a revision cannot undo (count, count_distinct, sum, avg, min "
                                     f"and max can)")


def plain_box(box: Box) -> Box:
    """The counterpart box a revision box applies to a changelog: its type, without the revision parameters."""
    kept = tuple((n, v) for n, v in with_borealis_names(box).params if not _OWN_PARAMS.match(n))
    return dataclasses.replace(box, type=PLAIN_TYPE[box.type], params=kept)


def with_borealis_names(box: Box) -> Box:
    """A revisionaggregate with ``aggregate-function-output-name.N`` = ``agg_N`` wherever it names none."""
    if box.type != "revisionaggregate":
        return box
    named = {n for n, _ in box.params}
    extra = []
    for name, _ in box.params:
        m = re.match(r"^aggregate-function\.(\d+)$", name)
        if m and f"aggregate-function-output-name.{m.group(1)}" not in named:
            extra.append((f"aggregate-function-output-name.{m.group(1)}", f"agg_{m.group(1)}"))
    return dataclasses.replace(box, params=box.params + tuple(extra)) if extra else box


def revised_value() -> Field:
    """The ``revised_value`` field (a string of any size) a revisionmap and a revisionaggregate append."""
    return Field(REVISED_VALUE, FieldType.STRING)
