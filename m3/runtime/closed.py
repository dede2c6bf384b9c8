"""The rows of closed event-time windows (node/operators/m3windows.py), composed from their maps' values.

Why apart from :class:`.program.Runtime`: a closed window's rows are read at
keys the caller names, from whichever backend holds the maps; composing the
view's columns (a quotient column's division) from those values needs the
view alone, not the runtime's state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..ast import ViewDecl


def view_maps(view: ViewDecl) -> set[str]:
    """The maps a plain view's columns read (numerators and denominators)."""
    return {c.numerator for c in view.columns} | {c.denominator for c in view.columns if c.denominator}


def plain_rows(view: ViewDecl, keys: Sequence[tuple], values: Mapping[str, Sequence]) -> list[tuple[tuple, object]]:
    """A plain view's rows at ``keys``, ``values[map][i]`` being each map's value at ``keys[i]`` (as the
    view reads them: one value, or a tuple of several; a quotient over 0 reads 0)."""
    out = []
    for i, key in enumerate(keys):
        vals = []
        for c in view.columns:
            num = values[c.numerator][i]
            den = None if c.denominator is None else values[c.denominator][i]
            vals.append(num if den is None else (num / den if den else 0))
        out.append((key, vals[0] if len(vals) == 1 else tuple(vals)))
    return out
