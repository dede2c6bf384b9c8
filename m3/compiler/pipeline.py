"""The SQL → M3 compiler: the passes, in order, in one place: :data:`PASSES` is the list that runs.

Each pass is one function ``Compilation -> Compilation`` (a frozen record each pass fills in a part of), as
:data:`..cumulus.PIPELINE` does for planning and sqlglot's optimizer does for its rules:

1. :func:`frontend.parse_sql` — SQL text → relations and resolved queries (derived tables and CTEs
   flattened: :mod:`.derived`; UNION ALL branches: :mod:`.union`, a set UNION in FROM read as one :mod:`.setunion`; expressions:
   :mod:`.resolve`, folding :mod:`.constants`, selections :mod:`.predicates`; the
   SELECT list :mod:`.outputs`; expressions over aggregates and HAVING :mod:`.viewexpr`;
   the sqlglot nodes and fields it reads :mod:`.nodes`; error positions :mod:`.positions`; a query over a
   grouped derived table's values: :mod:`.lifted`, :mod:`.liftquery`, its parts compiled as queries)
2. :func:`normalize.normalize` — each query → sum-of-products calculus, one map per aggregate
   (which maps, and the view's columns and condition over them: :mod:`.columns`)
3. for every map, for every relation it reads and both event signs (recursively, for the maps this creates):

   a. :func:`delta.delta` — the change of its definition for one event; :func:`lifts.bind_lifts` — a
      computed key the event determines (``EXTRACT(YEAR FROM d)``) becomes the function of its column
   b. :func:`simplify.simplify` — fold, decide, merge
   c. :func:`materialize.materialize` — statements, and the maps they read

   until deltas no longer read the database (a delta has fewer relation
   atoms than its map, so this terminates)
4. :func:`views.view_decl` — each query's view over its maps (computed when read; over a grouped derived
   table's values: :func:`liftview.lifted_view` combines its parts' views);
   :func:`triggers.assemble` — the program, statements ordered per trigger
5. :func:`..check.check_program` — the result is restricted M3 (a safety net)

>>> p = compile_sql('''CREATE STREAM R(a INT, b INT); CREATE STREAM S(b INT, c INT);
...     SELECT r.a, SUM(s.c) AS total FROM R r, S s WHERE r.b = s.b GROUP BY r.a''')
>>> print(format_program(p))  # doctest: +NORMALIZE_WHITESPACE
CREATE STREAM R(a INT, b INT);
<BLANKLINE>
CREATE STREAM S(b INT, c INT);
<BLANKLINE>
DECLARE MAP Q1_total[A: INT] : INT
  := R(A, B) * S(B, C) * C;
<BLANKLINE>
DECLARE MAP m1[B: INT] : INT
  := S(B, C) * C;
<BLANKLINE>
DECLARE MAP m2[B: INT, A: INT] : INT
  := R(A, B);
<BLANKLINE>
DECLARE VIEW Q1[a](total := Q1_total);
<BLANKLINE>
ON +R(A, B) DO {
  Q1_total[A] += m1[B];
  m2[B, A] += 1;
}
<BLANKLINE>
ON -R(A, B) DO {
  Q1_total[A] += -1 * m1[B];
  m2[B, A] += -1;
}
<BLANKLINE>
ON +S(B, C) DO {
  Q1_total[A] += C * m2[B, A];
  m1[B] += C;
}
<BLANKLINE>
ON -S(B, C) DO {
  Q1_total[A] += -1 * C * m2[B, A];
  m1[B] += -1 * C;
}
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ..ast import Program, RelationDecl, Statement, ViewDecl
from ..check import check_program
from ..errors import CompileError
from ..printer import format_program
from .delta import delta, event_vars
from .frontend import SqlQuery, parse_sql
from .liftview import lifted_view, part_columns, safely
from .lifts import bind_lifts
from .lookup import check_tables, maintained
from .lookup import rewrite as lookup_rewrite
from .materialize import MapDef, make_mapdef, materialize
from .normalize import normalize
from .simplify import simplify
from .triggers import assemble
from .views import cost_class, view_decl
from .windowfn import Watermark, Window, check_window, rewrite, windowed_relations

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Compilation:
    """What the passes know about one script; each pass returns a copy with its part filled in.

    ``maps`` is keyed by each map's canonical definition (:func:`.materialize.canonical`), so that two
    queries or two deltas needing the same map share it; ``pending`` holds the maps whose triggers are not
    yet derived (the worklist of :func:`maintain`).
    """

    text: str
    streams: tuple[RelationDecl, ...] = ()
    relations: tuple[RelationDecl, ...] = ()
    queries: tuple[SqlQuery, ...] = ()
    maps: dict[str, MapDef] = field(default_factory=dict)
    pending: tuple[MapDef, ...] = ()
    views: tuple[ViewDecl, ...] = ()
    statements: dict[tuple[str, int], tuple[tuple[int, Statement], ...]] = field(default_factory=dict)
    program: Program | None = None
    windows: tuple[Window, ...] = ()  # the window table functions read (:mod:`.windowfn`)
    watermarks: tuple[Watermark, ...] = ()  # the WATERMARK FOR items of its CREATE STREAMs
    lookups: tuple[str, ...] = ()  # the tables joined FOR SYSTEM_TIME AS OF (:mod:`.lookup`)

    @property
    def notes(self) -> tuple[str, ...]:
        """What the SQL says that the program does not do (ORDER BY), one note per query that has one."""
        return tuple(note for q in self.queries for note in q.notes)


def parse(c: Compilation) -> Compilation:
    """SQL text → declared relations and resolved queries (:func:`.frontend.parse_sql`).

    >>> c = parse(Compilation("CREATE STREAM R(a INT, b INT); SELECT a, SUM(b) AS s FROM R GROUP BY a"))
    >>> [r.name for r in c.relations], [q.name for q in c.queries]
    (['R'], ['Q1'])
    """
    text, lookups = lookup_rewrite(c.text)
    text, windows, marks = rewrite(text)
    relations, queries = parse_sql(text, windowed_relations(c.streams, windows))
    for window in windows:
        rel = next((r for r in relations if r.name.lower() == window.relation.lower()), None)
        if rel is None:
            raise CompileError(f"a window reads {window.relation}, which is not a declared relation or in stream")
        try:
            check_window(window, tuple((col.name, col.type) for col in rel.columns))
        except ValueError as exc:
            raise CompileError(str(exc)) from None
    return replace(c, relations=tuple(relations), queries=tuple(queries), windows=windows, watermarks=marks,
                   lookups=check_tables(lookups, tuple(relations)))


def _query_map(maps: dict[str, MapDef], pending: list[MapDef], name: str, agg) -> tuple[str, tuple]:
    """The map of a query's aggregate (an equal one if there is one, else a new one added to ``maps`` and
    ``pending``), and the variables reading it in its key order."""
    md = make_mapdef(name, agg)
    if md.canonical in maps:
        old = maps[md.canonical]
        args = [None] * len(md.keys)
        for i, p in enumerate(md.canon_order):
            args[old.canon_order[i]] = md.keys[p]
        return old.name, tuple(args)
    taken, n = {m.name.lower() for m in maps.values()}, 1
    while md.name.lower() in taken:  # e.g. AVG x's x_count beside a COUNT named x_count
        n += 1
        md = make_mapdef(f"{name}_{n}", agg)
    maps[md.canonical] = md
    pending.append(md)
    return md.name, md.keys


def views(c: Compilation) -> Compilation:
    """Each query → calculus (:func:`.normalize.normalize`), one map per aggregate, and its view over them
    (:func:`.views.view_decl`; over a grouped derived table's values, its parts' views combined:
    :func:`.liftview.lifted_view`).

    >>> c = views(parse(Compilation("CREATE STREAM R(a INT, b INT); SELECT a, SUM(b) AS s FROM R GROUP BY a")))
    >>> [m.name for m in c.pending], [v.name for v in c.views]
    (['Q1_s'], ['Q1'])
    """
    maps, pending = dict(c.maps), list(c.pending)

    def query_view(q):
        nq = normalize(list(c.relations), q)
        return nq, view_decl(nq, [_query_map(maps, pending, f"{nq.name}_{a.name}", a.agg) for a in nq.aggregates])

    def part(p):  # a part is a query's view over maps, or a plan's over parts of its own (lifted.nestable)
        if p.lifted is None:
            return part_columns(*query_view(p))
        v = lifted_view(p.name, p.lifted, [part(x) for x in p.lifted.parts])
        return tuple(v.key_vars), [col.expr for col in v.columns]

    out = []
    for q in c.queries:
        if q.lifted is not None:  # over a grouped derived table read by value: its parts' views combined
            out.append(safely((q.name,), lambda q=q: lifted_view(q.name, q.lifted, [part(p) for p in q.lifted.parts])))
        else:  # GROUP BY columns not selected: keys no output row holds
            out.append(replace(query_view(q)[1], internal=q.internal, always=q.always))
    return replace(c, maps=maps, pending=tuple(pending), views=c.views + tuple(out))


def maintain(c: Compilation) -> Compilation:
    """For every pending map, every relation it reads and both event signs: the change of its definition
    (:func:`.delta.delta`; a computed key the event determines bound, :func:`.lifts.bind_lifts`), simplified
    (:func:`.simplify.simplify`) and materialized (:func:`.materialize.materialize`) into statements and the
    maps they read, which are pending in turn, until deltas no longer read the database (a delta has fewer
    relation atoms than its map, so this terminates).

    >>> c = maintain(views(parse(Compilation("CREATE STREAM R(a INT, b INT); SELECT SUM(b) AS s FROM R"))))
    >>> c.pending, sorted(c.statements)
    ((), [('R', -1), ('R', 1)])
    """
    maps, worklist = dict(c.maps), list(c.pending)
    statements = {k: list(v) for k, v in c.statements.items()}
    events = {r.name: event_vars(r) for r in c.relations}
    next_id = 1  # the maps deltas need are named m1, m2, ... in the order they are made
    while worklist:
        md = worklist.pop(0)
        used = md.definition.relations()
        for rel in (r.name for r in c.relations if r.name in used and maintained(r.name, used, c.lookups)):
            for sign in (1, -1):
                terms = simplify(bind_lifts(delta(md.definition, rel, sign, events[rel]), events[rel]))
                stmts, new = materialize(md, terms, events[rel], maps, next_id)
                next_id += len(new)
                for nm in new:
                    maps[nm.canonical] = nm
                    worklist.append(nm)
                statements.setdefault((rel, sign), []).extend((md.definition.degree(), s) for s in stmts)
    return replace(c, maps=maps, pending=(), statements={k: tuple(v) for k, v in statements.items()})


def program(c: Compilation) -> Compilation:
    """The program: the maps, the views and one insert and one delete trigger per relation, statements ordered
    per trigger (:func:`.triggers.assemble`).

    >>> c = program(maintain(views(parse(Compilation("CREATE STREAM R(a INT); SELECT COUNT(*) AS n FROM R")))))
    >>> [m.name for m in c.program.maps], [t.relation for t in c.program.triggers]
    (['Q1_n'], ['R', 'R'])
    """
    assembled = assemble(list(c.relations), list(c.maps.values()), list(c.views),
                         {k: list(v) for k, v in c.statements.items()})
    log.debug("compiled %d queries into %d maps", len(c.queries), len(assembled.maps))
    return replace(c, program=assembled)


def check(c: Compilation) -> Compilation:
    """The result is restricted M3 (:func:`..check.check_program`, a safety net); what it refuses in a view
    over a grouped derived table read by value is refused naming that view (:func:`.liftview.safely`).

    >>> c = check(program(maintain(views(parse(Compilation("CREATE STREAM R(a INT); SELECT SUM(a) AS s FROM R"))))))
    >>> c.program.views[0].name
    'Q1'
    """
    lifted = tuple(q.name for q in c.queries if q.lifted is not None)
    return replace(c, program=safely(lifted, lambda: check_program(c.program)))


Pass = Callable[[Compilation], Compilation]
PASSES: tuple[tuple[str, Pass], ...] = (
    ("parse", parse),
    ("views", views),
    ("maintain", maintain),
    ("program", program),
    ("check", check),
)


def run(c: Compilation, passes: tuple[tuple[str, Pass], ...] = PASSES) -> Compilation:
    """Run ``passes`` (default :data:`PASSES`) in order.

    >>> [name for name, _ in PASSES]
    ['parse', 'views', 'maintain', 'program', 'check']
    >>> run(Compilation("CREATE STREAM R(a INT); SELECT a FROM R"), PASSES[:1]).program is None
    True
    """
    for name, step in passes:
        log.debug("pass %s", name)
        c = step(c)
    return c


def compile_sql(text: str, streams: tuple[RelationDecl, ...] = ()) -> Program:
    """Compile CREATE STREAM/TABLE declarations and SELECT queries into a checked M3 program.

    ``streams``: relations the SQL may read without declaring them, used
    when it declares none (an ``m3`` box's in streams; see :func:`.frontend.parse_sql`).
    What was accepted without effect (ORDER BY) is logged at INFO; see
    :func:`compile_with_notes`.
    """
    program, notes = compile_with_notes(text, streams)
    for note in notes:
        log.info("%s", note)
    return program


def compile_with_notes(text: str, streams: tuple[RelationDecl, ...] = ()) -> tuple[Program, tuple[str, ...]]:
    """:func:`compile_sql`, and the notes on what the SQL says that the program does not do (ORDER BY).

    >>> _, notes = compile_with_notes("CREATE STREAM R(a INT); SELECT a, COUNT(*) AS n FROM R GROUP BY a ORDER BY n")
    >>> notes
    ('Q1: ORDER BY ignored: a view is a set of rows (sort them when reading the view)',)
    """
    done = run(Compilation(text, tuple(streams)))
    return done.program, done.notes


def compile_to_text(text: str) -> str:
    """The M3 program text for SQL text (what ``boreas compile QUERY.sql`` prints), notes and each view's cost
    class (:func:`.views.cost_class`) first as comments.

    >>> print(compile_to_text("CREATE STREAM R(a INT, b INT); SELECT a, MAX(b) AS m FROM R GROUP BY a").splitlines()[0])
    -- view Q1: domain-bound: MAX over Q1_m: each changed row reads the distinct values of its group (cost grows with their number, not with the database)
    """
    program, notes = compile_with_notes(text)
    costs = [f"view {v.name}: {': '.join(cost_class(v, program))}" for v in program.views]
    return "".join(f"-- note: {note}\n" for note in notes) + "".join(f"-- {c}\n" for c in costs) + \
        format_program(program)
