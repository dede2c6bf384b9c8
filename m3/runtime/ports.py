"""A runtime's program described as a box's ports: each relation's columns in, each view's columns out.

Why apart: the description depends on the checked program (and the forms of
its general views) only, never on map state; the m3 box type reads it to make
its stream schemas (m3/boxtype.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..ast import Program
from ..nullable import is_indicator, shown_columns


@dataclass(frozen=True)
class ViewInfo:
    """A view's columns: key columns (name, type), then value columns (names).

    ``internal`` names the key columns that are no output row's (a GROUP BY
    column the SELECT does not name): readable by name, left out of rows.
    """

    name: str
    keys: tuple[tuple[str, str], ...]
    values: tuple[str, ...]
    internal: tuple[str, ...] = ()

    @property
    def output_keys(self) -> tuple[int, ...]:
        """Positions of the key columns an output row holds."""
        return tuple(i for i, (name, _) in enumerate(self.keys) if name not in self.internal)


def relation_ports(program: Program) -> dict[str, tuple[tuple[str, str], ...]]:
    """Each relation's columns as ``(name, type)``: the box's in ports (a nullable column's indicator is no
    column of its own there: a row carries None, :mod:`boreas.m3.nullable`)."""
    return {r.name: tuple((c.name, c.type) for i, c in enumerate(r.columns)
                          if not is_indicator([x.name for x in r.columns], i)) for r in program.relations}



def view_ports(program: Program, forms: Mapping) -> dict[str, ViewInfo]:
    """Each view's output columns: the box's out port(s); ``forms``: the general views' (:func:`.views.view_form`)."""
    out = {}
    for v in program.views:
        form = forms.get(v.name)
        if form is None:
            first = program.map(v.columns[0].numerator or "")
            keys = tuple((name, k.type) for name, k in zip(v.keys, first.keys))
        else:
            keys = tuple((name, form.types[i]) for name, i in zip(v.keys, form.out))
        out[v.name] = ViewInfo(v.name, keys, tuple(v.columns[i].name for i in shown_columns([c.name for c in v.columns])),
                               v.internal)
    return out
