"""The front end's output: one SELECT with its names resolved (:class:`SqlQuery`), what the normaliser reads.

Why a module of its own: the type is read by every pass after the front end (the normaliser, the nesting and
set-operation planners) and built by the front end's statement translation (:mod:`.frontend`, which re-exports
it); keeping it apart keeps that translation one concept.
"""

from __future__ import annotations

from dataclasses import dataclass

from .resolve import ColRef


@dataclass(frozen=True)
class SqlQuery:
    """One SELECT, names resolved: what the normaliser needs and nothing else."""

    name: str
    tables: tuple[tuple[str, str], ...]  # (alias, relation)
    joins: tuple[tuple[ColRef, ColRef], ...]  # equi-join (and same-table equality) pairs
    predicate: object  # selection tree (:mod:`.predicates`) or None
    group_by: tuple[tuple[str, ColRef], ...]  # the view's key columns: (output name, column)
    columns: tuple[tuple[str, object], ...]  # value columns: (output name, view expression, :mod:`.viewexpr`)
    having: object = None  # HAVING predicate over view expressions, or None
    notes: tuple[str, ...] = ()  # what was accepted but has no effect on the view (ORDER BY)
    nested: tuple = ()  # WHERE conjuncts holding subqueries (:func:`.subqueries.nested_conjunct`)
    union: tuple = ()  # the other UNION ALL branches (SqlQuery each), whose maps add to this one's (:mod:`.union`)
    setop: str = ""  # "INTERSECT" or "EXCEPT": `union` holds the other branches, whose maps stay apart (:mod:`.setops`)
    lifted: object = None  # a query over a grouped derived table read by value: its Plan, parts compiled (:mod:`.lifted`)
    internal: tuple[str, ...] = ()  # the group_by names no output row holds (GROUP BY columns not selected)
    always: bool = False  # an aggregate without GROUP BY: its one row also over no rows (:mod:`.keyless`)
