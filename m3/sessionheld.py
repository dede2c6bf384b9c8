"""A ``SESSION`` box's held rows as a map, so a partitioned box moves and snapshots them as any entry
(docs/cumulus.md §3.13, "SESSION views").

On one node the rows of a key's open sessions wait in the box's own buffer (node/operators/m3sessions.py) and
reach the maps when their session closes.  In a partitioned box a buffer outside the maps would not move with
its segment on a relayout (only map entries are copied, §6.2).  So a partitioned ``SESSION`` box's program
gets, per session stream ``R``, one more relation ``R__held`` (``R``'s columns without the two window
columns) and a map ``HELD_R`` keyed by all of them, counting each held row; the in port feeds ``R__held``.
A member folds a closed session's rows into ``R`` (with their final window bounds) and takes them out of
``HELD_R`` in one apply (node/cumulus/sessions.py): what is held is map entries, placed by the partition
column like the view's, copied on a move, in every snapshot.

The partition must keep a session key's rows on one member and fold them there:
:func:`refuse_split_sessions` checks that every statement a row of ``R`` or ``R__held`` runs writes the entry
of its row's owner, at one column of the session's ``PARTITION BY``.

>>> from .compiler.pipeline import compile_sql
>>> from .compiler.sessionfn import Session
>>> p = compile_sql("CREATE STREAM Bid(a INT, p INT, t INT, window_start INT, window_end INT); "
...                 "SELECT a, window_start, window_end, COUNT(*) AS n FROM Bid GROUP BY a, window_start, window_end")
>>> program, names = held_program(p, [Session("Bid", "t", 10, ("a",))])
>>> names, [m.name for m in program.maps][-1], [r.name for r in program.relations]
({'bid': 'Bid__held'}, 'HELD_BID', ['Bid', 'Bid__held'])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from boreas.catalog.boxtypes import BoxError

from .ast import Program
from .compiler.sessionfn import Session
from .compiler.windowfn import WINDOW_COLUMNS
from .cumulus import LayoutError, PlacementError, PlanError, plan_partition
from .cumulus.layout import EVERYWHERE
from .cumulus.plan import LOCAL, POINT, classify
from .runtime.text import program_from_text

HELD = "__held"


def held_map(relation: str) -> str:
    """The map that holds ``relation``'s rows of open sessions."""
    return f"HELD_{relation.upper()}"


def held_program(program: Program, sessions: Sequence[Session]) -> tuple[Program, dict[str, str]]:
    """``program`` with each session stream's held relation and map (module docstring); and per session
    relation (lower case) its held relation's name."""
    extra, names = [], {}
    for session in sessions:
        decl = program.relation(next(r.name for r in program.relations
                                     if r.name.lower() == session.relation.lower()))
        columns = [c for c in decl.columns if c.name.lower() not in WINDOW_COLUMNS]
        held = names[decl.name.lower()] = decl.name + HELD
        typed = ", ".join(f"{c.name} {c.type}" for c in columns)
        keys = ", ".join(f"{c.name.upper()}: {c.type}" for c in columns)
        args = ", ".join(c.name.upper() for c in columns)
        extra.append(f"CREATE STREAM {held}({typed});\n"
                     f"DECLARE MAP {held_map(decl.name)}[{keys}] : INT := {held}({args});\n"
                     f"ON +{held}({args}) DO {{ {held_map(decl.name)}[{args}] += 1; }}\n"
                     f"ON -{held}({args}) DO {{ {held_map(decl.name)}[{args}] += -1; }}\n")
    added = program_from_text("\n".join(extra))
    return Program(program.relations + added.relations, program.maps + added.maps, program.views,
                   program.triggers + added.triggers), names


def held_plan(plan, sessions: Sequence[Session]):
    """A :class:`~.boxtype.BoxPlan` whose session ports feed their held relations (the windows and watermarks
    renamed with them, so the port is still read through its session)."""
    program, names = held_program(plan.program, sessions)
    ports = tuple(replace(pp, relation=names[pp.relation.lower()], columns=pp.columns[:-len(WINDOW_COLUMNS)])
                  if pp.relation.lower() in names else pp for pp in plan.ports)
    windows = tuple(replace(w, relation=names[w.relation.lower()]) if isinstance(w, Session) else w
                    for w in plan.windows)
    marks = tuple(replace(m, relation=names[m.relation.lower()]) if m.relation.lower() in names else m
                  for m in plan.watermarks)
    return replace(plan, program=program, ports=ports, windows=windows, watermarks=marks)


def session_key(key: str | None, sessions: Sequence[Session]) -> tuple[str | None, dict[str, str]]:
    """A partition's ``key`` as placement reads it once the held relations are there (a bare column named by a
    session stream and its held relation alike: the stream's), and the held maps' pins (``key``'s column, else
    the first ``PARTITION BY`` column).

    >>> session_key("bidder", [Session("Bid", "t", 10, ("bidder",))])
    ('Bid.bidder', {'HELD_BID': 'bidder'})
    >>> session_key(None, [Session("Bid", "t", 10, ("bidder",))])
    (None, {'HELD_BID': 'bidder'})
    """
    pins = {}
    bare = None if key is None else key.rsplit(".", 1)[-1]
    for session in sessions:
        if key is not None and "." not in key:
            key = f"{session.relation}.{bare}"
        column = bare or (session.partition[0] if session.partition else None)
        if column is not None:
            pins[held_map(session.relation)] = column
    return key, pins


def refuse_unkeyed_sessions(box: str, program: Program, sessions: Sequence[Session], partition,
                            pins: Mapping[str, str]) -> None:
    """The reason :func:`refuse_split_sessions` gives for the placement without the partition's ``key``, if it
    gives one: for a ``key`` that partitions none of the view's maps, whose placement failed saying the key keys
    no map (the held maps are keyed by it, but are a relation of their own: the view's maps say why)."""
    try:
        pp = plan_partition(program, box, partition.nodes, segments=partition.count, pins=dict(pins),
                            replicate=partition.replicate)
    except (PlacementError, LayoutError, PlanError):
        return
    assert pp.layout is not None
    refuse_split_sessions(box, program, sessions, dict(pp.layout.maps))


def refuse_split_sessions(box: str, program: Program, sessions: Sequence[Session],
                          placed: Mapping[str, int | str | None]) -> None:
    """A :class:`BoxError` saying why, unless every statement a session stream's row runs (held, and folded
    in when its session closes) writes one entry, owned by the owner of one ``PARTITION BY`` column of the
    row, the same column for every statement, and reads only entries there: then a session's rows all reach
    its key's member, and its fold runs there alone."""
    plan = classify(program, dict(placed), box)
    for session in sessions:
        relation = next(r for r in program.relations if r.name.lower() == session.relation.lower())
        names = [c.name.lower() for c in relation.columns]
        by = {names.index(c.lower()) for c in session.partition}
        if not by:
            raise BoxError(f"m3 box {box!r} reads {relation.name} through SESSION without PARTITION BY: the whole "
                           "stream is one session key, whose rows one member must hold; run it on one node")
        held = relation.name + HELD
        at: set[int] = set()
        for name in (relation.name, held):
            for sign in (1, -1):
                trigger = program.trigger(name, sign)
                if trigger is None:
                    continue
                for s in plan.trigger(name, sign).statements:
                    target = program.map(s.statement.target.name)
                    if s.cls != LOCAL or s.kind != POINT or s.arg.kind != "event" or s.arg.index not in by \
                            or placed.get(target.name) == EVERYWHERE:
                        col = None if s.column is None or isinstance(s.column, str) else target.keys[s.column].name
                        raise BoxError(
                            f"m3 box {box!r} partitions map {target.name} by {col or s.arg}, which is not a column "
                            f"of its SESSION's PARTITION BY ({', '.join(session.partition)}) read where the row "
                            f"is ({s.cls}): a member would hold part of a session; partition by a PARTITION BY "
                            "column (key=), and group the view by it")
                    at.add(s.arg.index)
        if len(at) > 1:
            raise BoxError(f"m3 box {box!r} places its SESSION's maps by different PARTITION BY columns "
                           f"({', '.join(names[i] for i in sorted(at))}): a session's rows must reach one member; "
                           "partition every map by one of them (key=)")
