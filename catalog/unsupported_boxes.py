"""Borealis box types Boreas does not run, each with the reason a user reads instead of "unknown box type".

A file written for Borealis may name a box type Borealis had but Boreas
does not; "unknown" would suggest a typo.  The refusal names the type and
says why (validation reports it at the box, with file and line):

* ``merge`` and ``concatenate`` are among the array boxes Borealis's own
  catalog validator accepts (``CatalogValidate.cc`` lists them with the
  face detectors and the renderers), but their code is not in the public
  Borealis sources, so what they compute cannot be reproduced; they read
  array fields besides, which Boreas's data plane does not carry;
* the application-specific boxes of Borealis's demonstrations (video face
  detection, astronomy frames, ship tracks, rendering) are not operators;
* ``scontrol`` is the base of Borealis's fault-tolerance boxes, never a box
  of a diagram.

>>> print(why_unsupported("face_detect_chunk"))
an application-specific box of Borealis's array demonstrations (video, astronomy frames, ship tracks, rendering), not an operator: Boreas does not run it
>>> why_unsupported("fliter") is None
True
"""

from __future__ import annotations

_ARRAY_BOXES_WITHOUT_SOURCE = (
    "one of the array boxes Borealis's catalog validator accepts (src/modules/catalog/CatalogValidate.cc), whose "
    "code is not in the public Borealis sources, so what it computes cannot be reproduced; it also reads array "
    "fields, which Boreas's data plane does not carry (docs/borealis_compat.md, \"Array field types\")")

_APPLICATION = ("an application-specific box of Borealis's array demonstrations (video, astronomy frames, ship "
                "tracks, rendering), not an operator: Boreas does not run it")

_REASONS = {
    "merge": _ARRAY_BOXES_WITHOUT_SOURCE,
    "concatenate": _ARRAY_BOXES_WITHOUT_SOURCE,
    "scontrol": "the base class of Borealis's fault-tolerance boxes (sunion, soutput), not a box of its own",
}

_APPLICATION_PREFIXES = ("face_detect", "delta_detect", "join_fits", "regrid", "render", "delta_ais",
                         "edge_detect", "map_frame", "contrast", "chunk_assembler", "scatter", "gather")


def why_unsupported(box_type: str) -> str | None:
    """Why Boreas does not run this Borealis box type; None when Borealis had no such type either."""
    if box_type in _REASONS:
        return _REASONS[box_type]
    if box_type.startswith(_APPLICATION_PREFIXES):
        return _APPLICATION
    return None
