"""Classify every trigger statement of a program under a placement (docs/cumulus.md §3.3), and decide what stage 1 runs.

Given each map's partition column, a statement ``T[...] += f * R1[...] * ...``
is classified by its target's *partition argument* (the argument at the
target's partition column; ``home`` for a map kept whole):

* **POINT** (an event variable or a constant): one writer, the owner of that value
  (every member for a *replicated* map: each holds all of it);
* **LOOP** (a loop variable ``z``): every member writes the entries it owns.

and each map reference by its own partition argument relative to the target's:

========================  ===============================================================
LOCAL                     the target's argument itself (equal by an ``=`` guard counts):
                          the writer reads its own store
POINT_PUSH                POINT target, another bound argument: its owner pushes the entry
GATHER                    POINT target, loop-variable argument: every member pushes its part
REPART                    LOOP target, holds ``z`` but partitioned elsewhere
BCAST_PUSH                LOOP target, no ``z``, bound argument: its owner pushes to every writer
BCAST_GATHER              LOOP target, no ``z``, loop-variable argument
========================  ===============================================================

A reference to a replicated map (:data:`~.layout.EVERYWHERE`) is LOCAL
whatever its arguments: every member holds the whole map.  A statement that
writes a replicated map must be LOCAL too (:func:`classify` refuses a plan
otherwise): every member applies it alone.

A statement takes the class of its costliest reference (LOCAL without any).
Statements with a remote reference run in *phase 2* of a version, after the
pushes; a trigger is *sequential* when that reorders a read after a write of
the same trigger (§3.3, "Intra-version dependencies").

Whether a plan needs members to read each other's entries at all, and why
not, is :mod:`.locality`'s.

>>> from ..compiler.pipeline import compile_sql
>>> p = compile_sql("CREATE STREAM R(a INT, b INT); SELECT a, SUM(b) AS total FROM R GROUP BY a")
>>> plan = classify(p, {"Q1_total": 0}, box="g")
>>> [(s.kind, str(s.arg), s.cls) for s in plan.trigger("R", 1).statements]
[('POINT', 'A', 'LOCAL')]
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from ..ast import Call, Cmp, Const, MapRef, Program, Statement, Trigger, Var, walk
from ..printer import format_const, format_expr
from .hashing import slot
from .layout import EVERYWHERE, Layout

POINT, LOOP = "POINT", "LOOP"
LOCAL, POINT_PUSH, GATHER, REPART, BCAST_PUSH, BCAST_GATHER = (
    "LOCAL", "POINT_PUSH", "GATHER", "REPART", "BCAST_PUSH", "BCAST_GATHER")
COST = {LOCAL: 0, POINT_PUSH: 1, BCAST_PUSH: 2, GATHER: 3, REPART: 3, BCAST_GATHER: 4}
"""Per-statement cost of each class (§3.2): what placement minimises."""
LOOP_COST = 2
"""Added for a LOOP target: the event goes to every member, each loops over its own entries."""
SEQUENTIAL_COST = 100
"""Cost of a sequential trigger: every event becomes its own version, one round trip each."""


class PlanError(ValueError):
    """A placement that does not fit the program (a map without a column, a column out of range)."""


@dataclass(frozen=True, slots=True)
class Arg:
    """A partition argument: ``kind`` is ``event`` (``index`` = its row position), ``loop``, ``const``, ``home``,
    or ``all`` (a replicated map's: every member holds the entry)."""

    kind: str
    name: str = ""
    value: object = None
    index: int = -1

    def __str__(self) -> str:
        if self.kind == "const":
            return format_const(self.value)
        return "home" if self.kind == "home" else "every member" if self.kind == "all" else self.name

    @property
    def bound(self) -> bool:
        """Known from the event alone (so its owner is known before any loop)."""
        return self.kind != "loop"


@dataclass(frozen=True, slots=True)
class RefPlan:
    """One map reference on a statement's right-hand side."""

    ref: MapRef
    column: int | str | None
    arg: Arg
    cls: str
    id: int | None = None  # remote references with equal map and arguments in one trigger share an id


@dataclass(frozen=True, slots=True)
class StatementPlan:
    """One statement: its writer(s), its references, its class and phase."""

    index: int  # 1-based, as listed in the trigger (``boreas compile``)
    statement: Statement
    column: int | str | None
    arg: Arg
    kind: str  # POINT or LOOP
    refs: tuple[RefPlan, ...]
    cls: str

    @property
    def phase(self) -> int:
        """1: runs as the event arrives; 2: waits for pushes (it has a remote reference)."""
        return 1 if self.cls == LOCAL else 2

    @property
    def cost(self) -> int:
        """Its class's cost, plus :data:`LOOP_COST` for a LOOP target (§3.2)."""
        return COST[self.cls] + (LOOP_COST if self.kind == LOOP else 0)

    @property
    def text(self) -> str:
        return f"{format_expr(self.statement.target)} += {format_expr(self.statement.expr)}"


@dataclass(frozen=True, slots=True)
class TriggerPlan:
    """One trigger's statements, and whether its coordinator must stamp each event as its own version."""

    relation: str
    sign: int
    vars: tuple[str, ...]
    statements: tuple[StatementPlan, ...]
    sequential: bool

    @property
    def name(self) -> str:
        return f"ON {'+' if self.sign > 0 else '-'}{self.relation}"

    @property
    def cost(self) -> int:
        return sum(s.cost for s in self.statements) + (SEQUENTIAL_COST if self.sequential else 0)


@dataclass(frozen=True, slots=True)
class Plan:
    """Every trigger of a program classified under one placement (``columns``: map → partition column)."""

    box: str
    columns: tuple[tuple[str, int | str | None], ...]
    keys: tuple[tuple[str, tuple[str, ...]], ...]  # map → key column names, for messages
    triggers: tuple[TriggerPlan, ...]

    def trigger(self, relation: str, sign: int) -> TriggerPlan:
        for t in self.triggers:
            if t.relation == relation and t.sign == sign:
                return t
        raise KeyError(f"no trigger for {'+' if sign > 0 else '-'}{relation}")

    def statements(self) -> Iterator[tuple[TriggerPlan, StatementPlan]]:
        for t in self.triggers:
            for s in t.statements:
                yield t, s

    @property
    def cost(self) -> int:
        return sum(t.cost for t in self.triggers)

    def column_name(self, map_name: str) -> str:
        """``O_CUSTKEY (key 0)``, ``home`` for a map kept whole, ``every member`` for a replicated one."""
        col = dict(self.columns)[map_name]
        if col == EVERYWHERE:
            return "every member"
        return "home" if col is None else f"{dict(self.keys)[map_name][col]} (key {col})"


def refuse_computed_views(program: Program, box: str = "", allowed: Collection[str] = ()) -> None:
    """Refuse a program with a view computed when read (PlanError), but the views ``allowed`` (windowed leaves of
    a window join, whose placement :mod:`.computed` checks), and statements the dispatch tables cannot route.

    >>> from ..compiler.pipeline import compile_sql
    >>> refuse_computed_views(compile_sql("CREATE STREAM R(a INT, b INT); SELECT a, MAX(b) AS m FROM R GROUP BY a"), "g")
    Traceback (most recent call last):
    ...
    boreas.m3.cumulus.plan.PlanError: box 'g': view Q1 is computed from its maps when it is read (arithmetic over aggregates, HAVING, MIN/MAX, DISTINCT, a view without aggregates, or shared maps read in another key order); a partitioned m3 box runs views whose columns are maps and AVGs only: deploy this box unpartitioned
    """
    for v in program.views:
        if v.general and v.name not in allowed:
            raise PlanError(f"box {box!r}: view {v.name} is computed from its maps when it is read (arithmetic over "
                            "aggregates, HAVING, MIN/MAX, DISTINCT, a view without aggregates, or shared maps read "
                            "in another key order); a partitioned m3 box runs views whose columns are maps and AVGs "
                            "only: deploy this box unpartitioned")
    refuse_unroutable(program, box)


def refuse_unroutable(program: Program, box: str = "") -> None:
    """Refuse (PlanError) a statement comparing a loop variable, or computing a key from the event's row."""
    for t in program.triggers:
        for i, st in enumerate(t.statements, 1):
            loop = [n for n in walk(st.expr) if isinstance(n, Cmp) and any(
                isinstance(x, Var) and x.name not in t.vars for x in (n.left, n.right))]
            if loop:
                raise PlanError(f"box {box!r}: statement {i} of ON {'+' if t.sign > 0 else '-'}{t.relation} "
                                f"compares a loop variable ({format_expr(loop[0])}: a comparison between columns); "
                                "a partitioned m3 box runs restricted M3 only: deploy this box unpartitioned")
            call = next((n for n in [*walk(st.target), *walk(st.expr)] if isinstance(n, Call)), None) or next(
                (a for n in [st.target, *walk(st.expr)] if isinstance(n, MapRef) for a in n.args
                 if not isinstance(a, (Var, Const))), None)  # arithmetic as a key: GROUP BY a * 2
            if call is not None:
                raise PlanError(f"box {box!r}: statement {i} of ON {'+' if t.sign > 0 else '-'}{t.relation} "
                                f"computes a key from the event's row ({format_expr(call)}: GROUP BY EXTRACT, "
                                "SUBSTRING or MOD of a column, or arithmetic over columns); the dispatch tables route by columns, not computed "
                                "values: deploy this box unpartitioned")


def classify(program: Program, columns: Mapping[str, int | str | None], box: str = "") -> Plan:
    """Classify every statement of ``program`` with each map partitioned on ``columns[map]`` (its views computed
    when read are refused when the partition is planned: ``PIPELINE``'s place step, :func:`refuse_computed_views`)."""
    refuse_unroutable(program, box)
    cols = dict(columns)
    for m in program.maps:
        if m.name not in cols:
            raise PlanError(f"no partition column chosen for map {m.name!r}")
        c = cols[m.name]
        if c is not None and c != EVERYWHERE and not 0 <= c < len(m.keys):
            raise PlanError(f"map {m.name!r} has {len(m.keys)} key columns; partition column {c} does not exist")
    triggers = tuple(classify_trigger(t, cols) for t in program.triggers)
    plan = Plan(box, tuple((m.name, cols[m.name]) for m in program.maps),
                tuple((m.name, tuple(k.name for k in m.keys)) for m in program.maps), triggers)
    refuse_replicated(program, plan)
    return plan


def refuse_replicated(program: Program, plan: Plan) -> None:
    """Refuse (PlanError) a replicated map that a view reads, or that a statement writes from another member's map.

    A view's map is merged over the members by summing their answers: a
    replicated one would count every entry once per member.  A statement
    writing a replicated map runs on every member alone, so it may read only
    replicated maps (a dimension table's count, as Q3's ``m2``).

    >>> from ..compiler.pipeline import compile_sql
    >>> p = compile_sql("CREATE STREAM R(a INT, b INT); CREATE STREAM S(b INT, c INT); "
    ...                 "SELECT R.a, SUM(S.c) AS total FROM R, S WHERE R.b = S.b GROUP BY R.a")
    >>> [(m.name, [k.name for k in m.keys]) for m in p.maps]
    [('Q1_total', ['A']), ('m1', ['B']), ('m2', ['B', 'A'])]
    >>> classify(p, {"Q1_total": 0, "m1": "*", "m2": 1}, "j").trigger("R", 1).statements[0].cls
    'LOCAL'
    >>> classify(p, {"Q1_total": "*", "m1": 0, "m2": 0}, "j")
    Traceback (most recent call last):
    ...
    boreas.m3.cumulus.plan.PlanError: box 'j': map Q1_total is replicated, but view Q1 reads it (members' answers are summed, so every entry would count once per member): replicate maps no view reads
    """
    replicated = {m for m, c in plan.columns if c == EVERYWHERE}
    if not replicated:
        return
    refuse_replicated_views(program, replicated, plan.box)
    for t, s in plan.statements():
        if s.statement.target.name in replicated and s.cls != LOCAL:
            ref = next(r for r in s.refs if r.cls != LOCAL)
            raise PlanError(f"box {plan.box!r}: map {s.statement.target.name} is replicated, but statement {s.index} "
                            f"of {t.name} ({s.text}) writes it from map {ref.ref.name}, partitioned on "
                            f"{plan.column_name(ref.ref.name)}: every member writes a replicated map alone, so it may "
                            "read only replicated maps; replicate that map too, or do not replicate this one")


def refuse_replicated_views(program: Program, replicated: Collection[str], box: str) -> None:
    """Refuse (PlanError) replicating a map a view reads: members' answers are summed (:func:`refuse_replicated`)."""
    for name in replicated:
        view = next((v for v in program.views if name in v.maps), None)
        if view is not None:
            raise PlanError(f"box {box!r}: map {name} is replicated, but view {view.name} reads it (members' answers "
                            "are summed, so every entry would count once per member): replicate maps no view reads")


def _arg(ref: MapRef, column: int | str | None, trigger: Trigger) -> Arg:
    if column == EVERYWHERE:
        return Arg("all")
    if column is None:
        return Arg("home")
    a = ref.args[column]
    if isinstance(a, Const):
        return Arg("const", value=a.value)
    if a.name in trigger.vars:
        return Arg("event", a.name, index=trigger.vars.index(a.name))
    return Arg("loop", a.name)


def _term(arg: Arg) -> tuple:
    """A value's identity for equality guards: ``3`` and ``3.0`` are one value (and one slot)."""
    return ("c", arg.value) if arg.kind == "const" else (arg.kind,) if arg.kind in ("home", "all") else ("v", arg.name)


def _equalities(stmt: Statement) -> dict[tuple, tuple]:
    """Union-find parents of the values an ``=`` guard of the statement makes equal when it runs."""
    parent: dict[tuple, tuple] = {}

    def find(x: tuple) -> tuple:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for node in walk(stmt.expr):
        if isinstance(node, Cmp) and node.op == "=" and all(isinstance(s, (Var, Const)) for s in (node.left, node.right)):
            a, b = (("c", s.value) if isinstance(s, Const) else ("v", s.name) for s in (node.left, node.right))
            parent[find(a)] = find(b)
    return {k: find(k) for k in parent}


def _ref_class(target: Arg, kind: str, ref: MapRef, arg: Arg, same: dict) -> str:
    if arg.kind == "all":  # a replicated map: every member holds all of it
        return LOCAL
    if kind == POINT:
        if same.get(_term(arg), _term(arg)) == same.get(_term(target), _term(target)):
            return LOCAL
        return POINT_PUSH if arg.bound else GATHER
    z = target.name
    if arg.kind == "loop" and arg.name == z:
        return LOCAL
    if any(isinstance(a, Var) and a.name == z for a in ref.args):
        return REPART
    return BCAST_PUSH if arg.bound else BCAST_GATHER


def classify_statement(t: Trigger, index: int, cols: Mapping[str, int | str | None]) -> StatementPlan:
    """Statement ``index`` (1-based) of ``t``; its references get no ref id yet (:func:`classify_trigger` numbers them)."""
    stmt = t.statements[index - 1]
    column = cols[stmt.target.name]
    arg = _arg(stmt.target, column, t)
    kind = LOOP if arg.kind == "loop" else POINT
    same = _equalities(stmt)
    refs = []
    for node in walk(stmt.expr):
        if isinstance(node, MapRef):
            rcol = cols[node.name]
            rarg = _arg(node, rcol, t)
            refs.append(RefPlan(node, rcol, rarg, _ref_class(arg, kind, node, rarg, same)))
    cls = max((r.cls for r in refs), key=COST.__getitem__, default=LOCAL)
    return StatementPlan(index, stmt, column, arg, kind, tuple(refs), cls)


def classify_trigger(t: Trigger, cols: Mapping[str, int | str | None]) -> TriggerPlan:
    """One trigger's plan; remote references with equal map and arguments share a ref id (fetched once)."""
    plans: list[StatementPlan] = []
    ref_ids: dict[tuple, int] = {}
    for i in range(1, len(t.statements) + 1):
        sp = classify_statement(t, i, cols)
        refs = tuple(r if r.cls == LOCAL else replace(r, id=ref_ids.setdefault((r.ref.name, r.ref.args), len(ref_ids)))
                     for r in sp.refs)
        plans.append(replace(sp, refs=refs))
    return TriggerPlan(t.relation, t.sign, t.vars, tuple(plans), sequential(plans))


def sequential(plans: Sequence[StatementPlan]) -> bool:
    """A map the trigger both writes and reads, written in phase 2 or read locally in phase 2 (§3.3)."""
    written = {s.statement.target.name for s in plans}
    read = {r.ref.name for s in plans for r in s.refs}
    for m in written & read:
        if any(s.phase == 2 and s.statement.target.name == m for s in plans):
            return True
        if any(s.phase == 2 and r.cls == LOCAL and r.ref.name == m for s in plans for r in s.refs):
            return True
    return False


def writer(stmt: StatementPlan, row: Sequence, layout: Layout) -> int | None:
    """The member that runs ``stmt`` for the event ``row``; None for a LOOP statement (every member, on its own entries)
    or a replicated target (every member, on all of it).

    >>> from ..compiler.pipeline import compile_sql
    >>> from .layout import even_layout
    >>> p = compile_sql("CREATE STREAM R(a INT, b INT); SELECT a, SUM(b) AS total FROM R GROUP BY a")
    >>> lay = even_layout("g", ["n1", "n2"], 4, maps=[("Q1_total", 0)])
    >>> s = classify(p, dict(lay.maps)).trigger("R", 1).statements[0]
    >>> writer(s, (7, 10), lay) == lay.owner("Q1_total", (7,))
    True
    """
    a = stmt.arg
    if a.kind == "event":
        return layout.owner_of_slot(slot(row[a.index]))
    if a.kind == "const":
        return layout.owner_of_slot(slot(a.value))
    if a.kind == "home":
        return layout.home
    return None  # a loop variable, or a replicated map
