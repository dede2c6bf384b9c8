"""Who does what for an event of a partitioned box: writers, servers, and the pushes between them (§3.3, §3.5).

For every statement of a trigger and every event, the **writers** are the
members that apply it (the owner of its POINT target, every member
holding segments for a LOOP target, or every member of the layout for a
replicated target).  For every reference that is not
LOCAL, the **servers** are the members holding the entries it reads (the
owner of its bound partition argument, or every member holding segments
when the argument is a loop variable).  Each server *pushes* the entries
matching the event to each writer of the statement (FETCH + PUSH); every
member works this out alone from the same rows, plan and layout, so a
writer knows which servers will push to it for a version, and a server
knows which writers wait for it, without any message saying so.

A writer then *installs* the pushed entries in its own store, runs the
unchanged generated trigger, and drops every entry it does not own
(:class:`~boreas.m3.cumulus.member.MemberRuntime`): the pushed entries are
exactly what the statements it owns read from other members, at the
version's start.

A relation whose triggers write a map that some trigger of the same relation
reads from another member is **sequential**: its coordinator stamps every
event as its own version, so a server's answer for an event reflects the
events before it (a self-join's second occurrence of the relation).

>>> from boreas.m3.compiler.pipeline import compile_sql
>>> from .layout import even_layout
>>> from .plan import classify
>>> p = compile_sql("CREATE STREAM R(a INT, b INT); CREATE STREAM S(b INT, c INT); "
...                 "SELECT R.a, SUM(S.c) AS total FROM R, S WHERE R.b = S.b GROUP BY R.a")
>>> lay = even_layout("j", ["n0", "n1"], 2, maps=[("Q1_total", 0), ("m1", 0), ("m2", 0)])
>>> roles = Roles(classify(p, dict(lay.maps), "j"), lay)
>>> sorted(roles.sequential)
[]
>>> [(m, sorted(k)) for m, k in sorted(roles.keys_read.items())]
[('m1', [0]), ('m2', [0])]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import itemgetter

from ..ast import Const, Var
from .hashing import placer, slot
from .layout import Layout
from .member import Members
from .plan import LOCAL, LOOP, Plan, StatementPlan, TriggerPlan

#: A relation column index -> how to read it from a row (see :mod:`.member`).
Getter = Callable[[int], Callable[[tuple], object]]
#: A pushed entry: map name, key tuple, value.
Entry = tuple[str, tuple, object]


@dataclass(frozen=True)
class _Ref:
    """One remote reference: its map, its key pattern for an event, and the place ``s`` of its servers."""

    map: str
    pattern_of: Callable[[tuple], tuple]  # row -> key pattern (None: any value)
    s: int  # the place of its servers among the trigger's distinct places


@dataclass(frozen=True)
class _Stmt:
    refs: tuple[_Ref, ...]
    w: int  # the place of its writers among the trigger's distinct places


@dataclass
class Share:
    """A member's part in one version's rows of one trigger (:meth:`Roles.share`)."""

    mine: list[tuple]  # the rows it applies
    need: set[int]  # the members that push to it
    serve: dict[int, list[tuple[str, tuple]]]  # writer -> (map, key pattern) it pushes to that writer


def _pattern_of(pattern: tuple[tuple[str, object], ...]) -> Callable[[tuple], tuple]:
    """``row -> key pattern`` for a reference whose positions are ("event", i), ("const", v) or ("any", None)."""
    if all(k == "event" for k, _ in pattern):
        if len(pattern) == 1:
            i = pattern[0][1]
            return lambda row: (row[i],)
        get = itemgetter(*(i for _, i in pattern))
        return get
    return lambda row: tuple(row[v] if k == "event" else v if k == "const" else None for k, v in pattern)


class Roles:
    """The writers, servers and pushes of every trigger of one plan under one layout."""

    def __init__(self, plan: Plan, layout: Layout, getter: Getter = itemgetter, relation: str | None = None):
        """``getter`` reads event columns from rows (of ``relation`` only, when given: a stream's rows)."""
        self.layout = layout
        self.everyone = tuple(sorted({s.member for s in layout.segments}))  # the members holding segments
        self.all = tuple(range(len(layout.members)))  # every member: the holders of replicated maps
        self._getter = getter
        self._places: dict[tuple[str, int], list] = {}  # trigger -> every writer/server argument, for involved()
        self._place_keys: dict[tuple[str, int], list] = {}  # trigger -> its distinct places ...
        self._wheres: dict[tuple[str, int], list] = {}  # ... and ``rows -> [members]`` of each
        self._duties: dict[tuple, dict] = {}  # (trigger, member) -> placement -> what it asks of the member
        self._cells = [(m,) for m in layout.owners]  # slot -> (its owner,): a place's members
        self._triggers: dict[tuple[str, int], tuple[_Stmt, ...]] = {
            (t.relation, t.sign): tuple(self._statement(t, s) for s in t.statements) for t in plan.triggers
            if relation is None or t.relation == relation}
        #: per trigger, its statements that read from other members (the only ones with pushes)
        self._serving = {trigger: tuple(s for s in stmts if s.refs) for trigger, stmts in self._triggers.items()}
        self._plain = {trigger: tuple(s for s in stmts if not s.refs) for trigger, stmts in self._triggers.items()}
        #: one member holds every segment and the home maps: nothing is ever pushed
        self.alone = (len(self.everyone) == 1 and layout.home == self.everyone[0]
                      and (len(self.all) == 1 or not layout.replicated))
        self.sequential = frozenset(_sequential_relations(plan))
        self.keys_read: dict[str, set[int]] = {}
        for t in plan.triggers:
            for s in t.statements:
                for r in s.refs:
                    if r.cls != LOCAL and r.column is not None:
                        self.keys_read.setdefault(r.ref.name, set()).add(r.column)

    # -- building ----------------------------------------------------------------
    def _where(self, kind: str, arg) -> Callable[[Sequence[tuple]], list[tuple[int, ...]]]:
        """``rows -> [members]``: per row, the members owning a partition argument (every one holding segments for a
        loop variable, every member for a replicated map)."""
        lay, owners = self.layout, self.layout.owners
        if arg.kind == "all":
            members = self.all
            return lambda rows: [members] * len(rows)
        if kind == LOOP or arg.kind == "loop":
            everyone = self.everyone
            return lambda rows: [everyone] * len(rows)
        if arg.kind == "event":  # (one tuple per member, not one per row)
            return placer(self._getter(arg.index), self._cells)
        fixed = (lay.home,) if arg.kind == "home" else (owners[slot(arg.value)],)
        return lambda rows: [fixed] * len(rows)

    def _place(self, trigger: tuple[str, int], kind: str, arg) -> int:
        """The index of a partition argument among ``trigger``'s distinct places (added when new)."""
        key = ("loop",) if kind == LOOP or arg.kind == "loop" else (arg.kind, arg.index, arg.value)
        keys = self._place_keys.setdefault(trigger, [])
        if key not in keys:
            keys.append(key)
            self._wheres.setdefault(trigger, []).append(self._where(kind, arg))
        return keys.index(key)

    def _statement(self, t: TriggerPlan, s: StatementPlan) -> _Stmt:
        refs = []
        trigger = (t.relation, t.sign)
        places = self._places.setdefault(trigger, [])
        places.append("loop" if s.kind == LOOP else s.arg)
        for r in s.refs:
            if r.cls == LOCAL:
                continue
            places.append(r.arg)
            pattern = tuple(("const", a.value) if isinstance(a, Const)
                            else ("event", t.vars.index(a.name)) if isinstance(a, Var) and a.name in t.vars
                            else ("any", None) for a in r.ref.args)
            refs.append(_Ref(r.ref.name, _pattern_of(pattern), self._place(trigger, "", r.arg)))
        return _Stmt(tuple(refs), self._place(trigger, s.kind, s.arg))

    # -- asking ----------------------------------------------------------------------
    def involved(self, relation: str, sign: int) -> Callable[[Sequence[tuple]], list[Members]]:
        """``rows -> [members]``: per row, the members that must see the event (its writers and servers).

        One member, or a tuple (the form :func:`~boreas.m3.cumulus.member.group`
        takes: most events of most triggers go to one member, and building no
        set for them is most of a coordinator's time).  A batch at a time: a
        coordinator places every row it takes, and a comprehension per batch
        costs a fraction of a few Python calls per row.
        """
        places = self._places.get((relation, sign))
        lay, owners = self.layout, self.layout.owners
        if places is None:  # no trigger: the home member refuses it where it is applied
            home = lay.home
            return lambda rows: [home] * len(rows)
        if self.alone:  # one member holds everything
            one = self.everyone[0]
            return lambda rows: [one] * len(rows)
        spread = set(self.everyone) if any(p == "loop" or p.kind == "loop" for p in places) else set()
        if any(p != "loop" and p.kind == "all" for p in places):
            spread.update(self.all)
        if spread:  # (every owner of a value holds segments: the loop's or the replicated map's members cover it)
            members = tuple(sorted(spread))
            return lambda rows: [members] * len(rows)
        fixed = tuple(sorted({lay.home if p.kind == "home" else owners[slot(p.value)]
                              for p in places if p.kind != "event"}))
        reads = [self._getter(i) for i in sorted({p.index for p in places if p.kind == "event"})]  # one hash each
        if not reads:
            only = fixed[0] if len(fixed) == 1 else fixed
            return lambda rows: [only] * len(rows)
        if len(reads) == 1 and not fixed:
            return placer(reads[0], owners)
        if len(reads) == 2 and not fixed:  # (Q3's orders: placed by their key and their customer's)
            first, second = placer(reads[0], owners), placer(reads[1], owners)
            return lambda rows: [a if a == b else (a, b) for a, b in zip(first(rows), second(rows))]
        each = [placer(read, owners) for read in reads]
        return lambda rows: [tuple({*fixed, *at}) for at in zip(*(place(rows) for place in each))]

    def placement(self, relation: str, sign: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """:meth:`involved` as data, for a batch of columns: ``(members, columns)``, every row goes to each of
        ``members`` and to the owner of its value at each relation column in ``columns`` (whose slots a
        coordinator hashes a column at a time: node/cumulus/slot_columns.py).

        >>> from boreas.m3.compiler.pipeline import compile_sql
        >>> from .layout import even_layout
        >>> from .plan import classify
        >>> p = compile_sql("CREATE STREAM R(a INT, b INT); SELECT a, SUM(b) AS t FROM R GROUP BY a")
        >>> lay = even_layout("g", ["n0", "n1"], 2, maps=[("Q1_t", 0)])
        >>> Roles(classify(p, dict(lay.maps), "g"), lay).placement("R", 1)
        ((), (0,))
        """
        places = self._places.get((relation, sign))
        lay, owners = self.layout, self.layout.owners
        if places is None:
            return (lay.home,), ()
        if self.alone:
            return (self.everyone[0],), ()
        spread = set(self.everyone) if any(p == "loop" or p.kind == "loop" for p in places) else set()
        if any(p != "loop" and p.kind == "all" for p in places):
            spread.update(self.all)
        if spread:
            return tuple(sorted(spread)), ()
        fixed = tuple(sorted({lay.home if p.kind == "home" else owners[slot(p.value)]
                              for p in places if p.kind != "event"}))
        return fixed, tuple(sorted({p.index for p in places if p.kind == "event"}))

    def placed_alike(self, relation: str) -> bool:
        """Whether ``relation``'s insert and delete events go to the same members (so one pass places both)."""
        def key(places):
            return None if places is None else frozenset(
                "loop" if p == "loop" else (p.kind, p.index, p.value) for p in places)
        return key(self._places.get((relation, 1))) == key(self._places.get((relation, -1)))

    def serves(self, relation: str, sign: int) -> bool:
        """Whether events of this trigger may make a member push entries to another (then :meth:`share` reads
        their rows); when not, :meth:`share` and :meth:`writes` take a member's rows as they are, in any form
        (a native member's columns, node/cumulus/part.py)."""
        return not self.alone and bool(self._serving.get((relation, sign)))

    def writes(self, member: int, relation: str, sign: int, rows: list[tuple]) -> list[tuple]:
        """The rows ``member`` applies (it writes at least one of their statements).

        A member is sent the rows it writes or serves (:meth:`involved`); when
        no statement of the trigger reads from another member, that is the
        rows it writes, and nothing is checked per row.
        """
        trigger = (relation, sign)
        stmts = self._triggers.get(trigger, ())
        if not stmts:
            return []
        if self.alone or not self._serving.get(trigger):
            return rows
        wheres = self._wheres[trigger]
        at = [wheres[w](rows) for w in sorted({st.w for st in stmts})]
        return [row for row, *placed in zip(rows, *at) if any(member in p for p in placed)]

    def share(self, member: int, relation: str, sign: int, rows: list[tuple]) -> Share:
        """Everything ``member`` does for these rows of one version, in one pass.

        The rows it applies (it writes one of their statements), the members
        that push to it (it writes a statement they serve), and what it
        pushes: ``{writer: [(map, pattern)]}`` (``None`` in a pattern: any
        value; a writer waiting for this member gets ``[]``).  Each distinct
        partition argument of the trigger is placed once per row (a batch at a
        time), however many statements and references share it; what a row
        asks of the member depends only on where its arguments are placed, so
        that is worked out once per distinct placement (:meth:`_duty`), and a
        row costs its placement, one lookup and its patterns.
        """
        trigger = (relation, sign)
        stmts = self._triggers.get(trigger, ())
        serving = () if self.alone else self._serving.get(trigger, ())
        if not serving:
            return Share(rows if stmts else [], set(), {})
        columns = [where(rows) for where in self._wheres[trigger]]
        ats = list(zip(*columns))  # per row, its members at each distinct place
        duties = self._duties.setdefault((trigger, member), {})
        need: set[int] = set()
        applying: set[tuple] = set()
        pushing: dict[tuple, list] = {}  # placement -> the rows placed so that this member pushes for them
        distinct = dict.fromkeys(ats)  # (in the rows' order: the pushes are the same in every replay)
        for at in distinct:
            duty = duties.get(at)
            if duty is None:
                duty = duties[at] = self._duty(trigger, member, at)
            applies, needs, pushes = duty
            if applies:
                applying.add(at)
            need |= needs
            if pushes:
                pushing[at] = []
        mine = rows if len(applying) == len(distinct) else [row for row, at in zip(rows, ats) if at in applying]
        out: dict[int, list] = {}
        if pushing:
            for row, at in zip(rows, ats):
                placed_so = pushing.get(at)
                if placed_so is not None:
                    placed_so.append(row)
            for at, some in pushing.items():
                for r, others in duties[at][2]:
                    wanted = [(r.map, pattern) for pattern in map(r.pattern_of, some)]
                    for w in others:
                        bucket = out.get(w)
                        if bucket is None:
                            out[w] = list(wanted)
                        else:
                            bucket.extend(wanted)
        need.discard(member)
        return Share(mine, need, out)

    def _duty(self, trigger: tuple[str, int], member: int, at: tuple) -> tuple[bool, frozenset, tuple]:
        """What a row placed at ``at`` (members per distinct place) asks of ``member``: whether it applies the
        row, the members that push to it for the row, and ``(ref, writers)`` it pushes the row's entries to."""
        serving, plain = self._serving[trigger], self._plain[trigger]
        writes = False
        need: set[int] = set()
        pushes = []
        for st in serving:
            writers = at[st.w]
            if member in writers:
                writes = True
                for r in st.refs:
                    need.update(at[r.s])
            others = None
            for r in st.refs:
                if member in at[r.s]:
                    if others is None:
                        others = tuple(w for w in writers if w != member)
                    if others:
                        pushes.append((r, others))
                    else:
                        break
        applies = writes or any(member in at[st.w] for st in plain)
        return applies, frozenset(need), tuple(pushes)


def _sequential_relations(plan: Plan) -> set[str]:
    """Relations whose triggers write a map that a trigger of the same relation reads from another member."""
    found = set()
    by_relation: dict[str, list[TriggerPlan]] = {}
    for t in plan.triggers:
        by_relation.setdefault(t.relation, []).append(t)
    for relation, triggers in by_relation.items():
        written = {s.statement.target.name for t in triggers for s in t.statements}
        remote = {r.ref.name for t in triggers for s in t.statements for r in s.refs if r.cls != LOCAL}
        if written & remote or any(t.sequential for t in triggers):
            found.add(relation)
    return found

