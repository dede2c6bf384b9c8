"""Cumulus planning: how a partitioned ``m3`` box's maps are spread over members (docs/cumulus.md §3.1-3.3).

Pure functions and frozen dataclasses, standard library only (the ``m3``
package's rule); one concept per module, and the planning pipeline is listed
once, as data, in :data:`PIPELINE`:

=============  =====================================  ===========================================
step           module                                 does
=============  =====================================  ===========================================
``hash``       :mod:`.hashing`, :mod:`.layout`        slots (stable hash) → equal segments → members
``place``      :mod:`.placement`                      each map's partition column, with reasons
``classify``   :mod:`.plan`                           each statement's class; all LOCAL?
=============  =====================================  ===========================================

>>> from boreas.m3 import compile_sql
>>> p = compile_sql("CREATE STREAM R(a INT, b INT); SELECT a, SUM(b) AS total, COUNT(*) AS n FROM R GROUP BY a")
>>> pp = plan_partition(p, "g", ["localhost:15001", "localhost:15002"], segments=4)
>>> pp.layout.maps, pp.local
((('Q1_total', 0), ('Q1_n', 0)), True)
>>> [name for name, _ in PIPELINE]
['hash', 'place', 'classify']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from ..ast import Program
from .hashing import SLOTS, home_slot, slot, slots_of
from .layout import EVERYWHERE, Layout, LayoutError, Segment, even_layout
from .locality import all_local
from .placement import (
    KeyClass,
    MapPlacement,
    Placement,
    PlacementError,
    key_classes,
    place,
)
from .plan import (
    BCAST_GATHER,
    BCAST_PUSH,
    GATHER,
    LOCAL,
    LOOP,
    POINT,
    POINT_PUSH,
    REPART,
    Plan,
    PlanError,
    RefPlan,
    StatementPlan,
    TriggerPlan,
    classify,
    refuse_computed_views,
    writer,
)
from .computed import keyed_pins, refuse_misplaced, refuse_unkeyed, windowed_leaves


@dataclass(frozen=True)
class PartitionPlan:
    """What the planner knows about one partitioned box; each step fills in its part."""

    program: Program
    box: str
    members: tuple[str, ...]
    segments: int | None = None  # segments= as submitted (default: one per member)
    key: str | None = None
    pins: tuple[tuple[str, str], ...] = ()  # <map name key> pins
    replicate: tuple[str, ...] = ()  # maps every member holds whole (replicate="m2")
    computed: tuple[str, ...] = ()  # views computed when read the box runs partitioned (window join leaves)
    layout: Layout | None = None
    placement: Placement | None = None
    plan: Plan | None = None
    local: bool | None = None  # every statement LOCAL: members never read each other's entries
    reason: str = ""


def _hash(pp: PartitionPlan) -> PartitionPlan:
    """Slots → segments → members: ``segments`` equal slot ranges dealt round-robin (§2.1)."""
    return replace(pp, layout=even_layout(pp.box, pp.members, pp.segments))


def _place(pp: PartitionPlan) -> PartitionPlan:
    """Each map's partition column (§3.2), recorded in the layout; a view computed when read is refused, unless
    ``computed`` names it and its maps are partitioned on one of its keys (:mod:`.computed`)."""
    refuse_computed_views(pp.program, pp.box, pp.computed)
    placement = place(pp.program, pp.key, dict(pp.pins), pp.box, pp.replicate)
    if pp.computed:
        pins = keyed_pins(pp.program, pp.computed, placement.columns, dict(pp.pins))
        if pins:
            placement = place(pp.program, pp.key, {**pins, **dict(pp.pins)}, pp.box, pp.replicate)
        refuse_unkeyed(pp.program, placement.columns, pp.computed, pp.box)
    layout = pp.layout.with_maps((m.map, m.column) for m in placement.maps).check_program(pp.program)
    return replace(pp, placement=placement, layout=layout)


def _classify(pp: PartitionPlan) -> PartitionPlan:
    """Every statement's class under the placement (§3.3), and whether members read each other's entries."""
    plan = classify(pp.program, dict(pp.layout.maps), pp.box)
    ok, reason = all_local(plan)
    return replace(pp, plan=plan, local=ok, reason=reason)


PIPELINE: tuple[tuple[str, Callable[[PartitionPlan], PartitionPlan]], ...] = (
    ("hash", _hash),
    ("place", _place),
    ("classify", _classify),
)


def plan_partition(program: Program, box: str, members: Sequence[str], segments: int | None = None,
                   key: str | None = None, pins: Mapping[str, str] | None = None, replicate: Sequence[str] = (),
                   computed: Sequence[str] = (),
                   steps: Sequence[tuple[str, Callable[[PartitionPlan], PartitionPlan]]] = PIPELINE) -> PartitionPlan:
    """Run ``steps`` (default :data:`PIPELINE`) over a box's program and partition settings."""
    pp = PartitionPlan(program, box, tuple(members), segments, key, tuple((pins or {}).items()), tuple(replicate),
                       tuple(computed))
    for _, step in steps:
        pp = step(pp)
    return pp


__all__ = [
    "BCAST_GATHER", "BCAST_PUSH", "EVERYWHERE", "GATHER", "LOCAL", "LOOP", "PIPELINE", "POINT", "POINT_PUSH", "REPART", "SLOTS",
    "KeyClass", "Layout", "LayoutError", "MapPlacement", "PartitionPlan", "Placement", "PlacementError", "Plan",
    "PlanError", "RefPlan", "Segment", "StatementPlan", "TriggerPlan",
    "all_local", "classify", "even_layout", "home_slot", "key_classes", "place", "plan_partition", "refuse_misplaced",
    "slot", "slots_of", "windowed_leaves", "writer",
]
