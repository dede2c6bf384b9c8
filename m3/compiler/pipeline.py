"""The SQL → M3 compiler: the passes, in order, in one place.

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

from ..ast import Program, RelationDecl, Statement
from ..check import check_program
from ..printer import format_program
from .delta import delta, event_vars
from .frontend import parse_sql
from .liftview import lifted_view, part_columns, safely
from .lifts import bind_lifts
from .materialize import MapDef, make_mapdef, materialize
from .normalize import normalize
from .simplify import simplify
from .triggers import assemble
from .views import cost_class, view_decl

log = logging.getLogger(__name__)


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
    relations, queries = parse_sql(text, streams)
    maps: dict[str, MapDef] = {}
    worklist: list[MapDef] = []
    views = []

    def query_map(name: str, agg) -> tuple[str, tuple]:
        """The map of a query's aggregate (an equal one if there is one), and the variables reading it in its key order."""
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
        worklist.append(md)
        return md.name, md.keys

    def query_view(q):
        nq = normalize(relations, q)
        return nq, view_decl(nq, [query_map(f"{nq.name}_{a.name}", a.agg) for a in nq.aggregates])

    for q in queries:
        if q.lifted is not None:  # over a grouped derived table read by value: its parts' views combined
            views.append(safely((q.name,), lambda q=q: lifted_view(q.name, q.lifted, [part_columns(*query_view(p))
                                                                               for p in q.lifted.parts])))
        else:
            views.append(query_view(q)[1])

    events = {r.name: event_vars(r) for r in relations}
    statements: dict[tuple[str, int], list[tuple[int, Statement]]] = {}
    next_id = 1
    while worklist:
        md = worklist.pop(0)
        used = md.definition.relations()
        for rel in (r.name for r in relations if r.name in used):
            for sign in (1, -1):
                terms = simplify(bind_lifts(delta(md.definition, rel, sign, events[rel]), events[rel]))
                stmts, new = materialize(md, terms, events[rel], maps, next_id)
                next_id += len(new)
                for nm in new:
                    maps[nm.canonical] = nm
                    worklist.append(nm)
                statements.setdefault((rel, sign), []).extend((md.definition.degree(), s) for s in stmts)
    program = assemble(relations, list(maps.values()), views, statements)
    log.debug("compiled %d queries into %d maps", len(queries), len(program.maps))
    lifted = tuple(q.name for q in queries if q.lifted is not None)  # what the checker refuses there: refused
    return safely(lifted, lambda: check_program(program)), tuple(note for q in queries for note in q.notes)


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
