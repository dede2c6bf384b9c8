"""Pass 6, triggers: assemble the M3 program — declarations, views, and ordered triggers.

Within a trigger, a statement must read the maps it uses *before* the same
event updates them (a delta is computed against the old state).  Every map a
statement reads is a strict sub-join of its target, so ordering statements by
the degree of their target (its number of relation atoms), highest first, is
enough; ties never read each other.

>>> from ..ast import Column, RelationDecl, Statement, MapRef, Const, Var
>>> r = RelationDecl("R", "STREAM", (Column("a", "INT"),))
>>> s_low, s_high = Statement(MapRef("m1", ()), Const(1)), Statement(MapRef("q", ()), Var("A"))
>>> p = assemble([r], [], [], {("R", 1): [(1, s_low), (2, s_high)]})
>>> [s.target.name for s in p.trigger("R", 1).statements], p.trigger("R", -1).statements
(['q', 'm1'], ())
"""

from __future__ import annotations

from ..ast import (
    Column,
    MapDecl,
    Program,
    RelationDecl,
    Statement,
    Trigger,
    ViewDecl,
)
from ..calculus import agg_to_ast
from .delta import event_vars
from .materialize import MapDef


def map_decl(md: MapDef) -> MapDecl:
    """The declaration of a map, its definition written in the calculus syntax."""
    return MapDecl(md.name, tuple(Column(k.name, k.type) for k in md.keys), md.value_type, agg_to_ast(md.definition))


def assemble(relations: list[RelationDecl], maps: list[MapDef], views: list[ViewDecl],
             statements: dict[tuple[str, int], list[tuple[int, Statement]]]) -> Program:
    """The program: one insert and one delete trigger per relation, statements ordered by target degree."""
    triggers = []
    for rel in relations:
        names = tuple(v.name for v in event_vars(rel))
        for sign in (1, -1):
            ordered = sorted(statements.get((rel.name, sign), []), key=lambda ds: -ds[0])
            triggers.append(Trigger(rel.name, sign, names, tuple(s for _, s in ordered)))
    return Program(tuple(relations), tuple(map_decl(m) for m in maps), tuple(views), tuple(triggers))
