"""Pass 1, the front end: SQL text → declared relations and resolved queries (sqlglot parses).

Accepted input: ``CREATE STREAM|TABLE name (col type [NOT NULL], ...)`` declarations, then ``SELECT`` queries
(optionally ``CREATE VIEW name[(names)] AS SELECT ...``) that aggregate with SUM, COUNT or AVG (of arithmetic,
CASE and constants), MIN, MAX, COUNT/SUM/AVG(DISTINCT column), with arithmetic over aggregates and HAVING
(:mod:`.viewexpr`; without GROUP BY one row always: :mod:`.keyless`), or select columns (``*``, ``alias.*``;
``DISTINCT``: a view of rows, :mod:`.outputs`), over inner equi-joins (comma joins, ``JOIN ... ON``, and ``JOIN ...
USING`` and ``NATURAL JOIN`` rewritten into them first, with ``DATE_PART``: :mod:`.sugar`; outer joins as parts:
:mod:`.outer`), with selections comparing a column with a constant or another column (``= <> < <= > >=``,
``BETWEEN``, ``IN (...)``, ``IN LIST (...)``, ``LIKE``/``NOT LIKE`` a constant pattern, AND, OR, NOT), ``GROUP
BY`` columns (by name, SELECT alias, position or ALL) and ``ORDER BY`` (ignored: a view is a set; the query's
``notes`` say so).
Constants may be expressions (:mod:`.constants`).  Subqueries in FROM and
WITH without aggregates are flattened first (:mod:`.derived`; two FROM items named alike up to case
are named apart before: :mod:`.clashes`); a UNION ALL
(in FROM, or a statement of views of rows) and a UNION statement become one
query per branch (:mod:`.union`, ``SqlQuery.union``; a UNION in FROM under MIN, MAX or
DISTINCT is read as its UNION ALL, :mod:`.setunion`), and so do INTERSECT
and EXCEPT statements (:mod:`.setops`, ``SqlQuery.setop``); subqueries in WHERE and HAVING:
:mod:`.subqueries` (``ANY``/``ALL`` rewritten into EXISTS first: :mod:`.quantified`); a query without FROM
over scalar subqueries: :mod:`.fromless`.

Everything else is rejected with a :class:`CompileError` naming the
construct, the view and its line:col — checking here, once, keeps later
passes total.  No part of the tree is skipped silently: every node type
and every field of it that the front end reads is listed in
:data:`.nodes.READS`, and a tree holding anything else is refused.

The result refers to columns as ``(alias, column)`` pairs; no variables yet.
Expressions are translated by :mod:`.resolve`, the SELECT list by :mod:`.outputs`.

>>> rels, queries = parse_sql('''CREATE STREAM R(a INT, b INT);
...     SELECT a, SUM(b * 2) AS total FROM R WHERE b < 10 GROUP BY a''')
>>> rels[0].name, [c.name for c in rels[0].columns]
('R', ['a', 'b'])
>>> q = queries[0]
>>> q.name, q.group_by, q.columns
('Q1', (('a', ('R', 'a')),), (('total', ('agg', 'SUM', ('*', ('R', 'b'), 2))),))
>>> q.predicate
('<', ('R', 'b'), 10)
>>> parse_sql("CREATE STREAM R(a INT); SELECT MEDIAN(a) FROM R")
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: unsupported aggregate MEDIAN (only SUM, COUNT, AVG, MIN and MAX) in view Q1 (at line 1, col 32)
>>> _, (q,) = parse_sql("CREATE STREAM R(a INT, b INT); SELECT a AS x, SUM(b) AS x FROM R GROUP BY x ORDER BY 2 DESC")
>>> q.group_by, q.columns, q.notes
((('x', ('R', 'a')),), (('x_1', ('agg', 'SUM', ('R', 'b'))),), ('Q1: ORDER BY ignored: a view is a set of rows (sort them when reading the view)',))
>>> _, (q,) = parse_sql("CREATE STREAM R(a INT, b INT); SELECT DISTINCT * FROM R")
>>> q.group_by, q.columns
((('a', ('R', 'a')), ('b', ('R', 'b'))), (('count', 1),))
"""

from __future__ import annotations

import re
from dataclasses import replace

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError as SqlParseError
from sqlglot.errors import TokenError

from ..ast import RelationDecl
from ..errors import CompileError, Pos, pos_of_offset
from ..nullable import SUFFIX as NULL_SUFFIX
from .clashes import separate
from .clauses import check_clauses, conjuncts, refuse_clauses, tables_of
from .declarations import declares_relations, relation
from .deepscalar import deep_conjunct
from .deepscalar import plan as deep_plan
from .derived import flatten
from .constrow import constant_rows
from .countnone import count_distinct_of_nothing
from .neverequal import never_equal
from .outercond import outer_conditions_out
from .fromless import is_fromless
from .groupnames import name_groups
from .hoist import hoisted
from .selectsub import has_select_subqueries, plan as select_plan
from .stars import expand_stars
from .fromless import plan as fromless_plan
from .lifted import nestable, reads_grouped
from .libcalls import declared, is_declaration, spelled
from .valuein import exists_of_values
from .liftquery import plan
from .distinctgroup import distinct_groups
from .singleton import one_row_reads
from .groupsonly import groups_only
from .rollup import rollups
from .regroup import regroup
from .subregroup import regroup_subqueries
from .setops import branches as setop_branches
from .setops import is_setop
from .setparts import nested_branches, set_kind, unordered
from .setparts import plan as set_plan
from .setagg import aggregated_union, plan as union_plan
from .union import split, statement_branches
from .nodes import describe, sql_of, unknown_nodes, unread_args
from .outer import has_outer, plan as outer_plan, with_constants
from .outputs import (
    check_grouped,
    check_rows,
    group_columns,
    grouped,
    order_note,
    read_keys,
    select_items,
    view_names,
)
from .positions import Ctx as _Ctx, split_statements
from .predicates import conj
from .resolve import ColRef, Resolver, unparen
from .sqlquery import SqlQuery
from .casesplit import split_case
from .scalarin import EQUAL_ROWS_NOTE, has_equal_to_rows
from .sugar import desugar
from .sumjoin import joined as sum_joined
from .notexists import as_extremes
from .threevalued import rewrite as nulls_explicit
from .winrows import counted_groups
from .keyless import always as keyless, one_row_view
from .subqueries import contains_subquery, having_conjunct, nested_conjunct
from .viewexpr import having
from .windows import refuse_windows

# Arithmetic and predicates: see :mod:`.resolve` and :mod:`.predicates`.


def parse_sql(text: str, streams: tuple[RelationDecl, ...] = ()) -> tuple[list[RelationDecl], list[SqlQuery]]:
    """Parse and resolve a whole script (declarations first, then queries).

    ``streams`` are relations the script may use without declaring them (an
    ``m3`` box's in streams, by name); they count only when the script
    declares no relation itself, so ``CREATE STREAM`` still renames.

    >>> from boreas.m3.ast import Column
    >>> r = RelationDecl("R", "STREAM", (Column("a", "INT"),))
    >>> rels, _ = parse_sql("SELECT SUM(r.a) FROM R r", (r,))
    >>> [x.name for x in rels]
    ['R']
    """
    relations: dict[str, RelationDecl] = {}
    if streams and not declares_relations(text):
        relations = {r.name: r for r in streams}
    queries: list[SqlQuery] = []
    aliases: dict[str, str] = {}  # CREATE FUNCTION f ... AS EXTERNAL 'cos': F -> COS (:mod:`.libcalls`)
    for start, stmt in split_statements(text):
        ctx = _Ctx(text, start, stmt)
        is_stream = bool(re.match(r"\s*CREATE\s+STREAM\b", stmt, re.IGNORECASE))
        sql = re.sub(r"STREAM", "TABLE ", stmt, count=1, flags=re.IGNORECASE) if is_stream else stmt
        refuse_windows(text, stmt, start)
        try:
            tree = sqlglot.parse_one(sql)
        except (SqlParseError, TokenError) as e:
            errs = getattr(e, "errors", None) or [{}]
            line, col = errs[0].get("line"), errs[0].get("col")
            if col and errs[0].get("highlight"):
                col = max(1, col - len(errs[0]["highlight"]) + 1)
            base = pos_of_offset(text, start)
            pos = Pos(base.line + line - 1, (base.col + col - 1) if line == 1 else col) if line else base
            raise CompileError(f"SQL syntax error: {errs[0].get('description', e)}", pos) from None
        if is_declaration(tree):
            aliases.update([declared(tree, ctx)])
            continue
        item = _statement(spelled(tree, aliases), is_stream, relations, len(queries), ctx)
        if isinstance(item, RelationDecl):
            relations[item.name] = item
        else:
            queries.append(item)
    if not queries:
        raise CompileError("no SELECT query to compile")
    names = [q.name for q in queries]
    for n in names:
        if names.count(n) > 1:
            raise CompileError(f"two queries named {n}")
    return list(relations.values()), queries


def translate_statement(tree: exp.Expression, relations: dict[str, RelationDecl], sql: str = "",
                        is_stream: bool = False, number: int = 1) -> RelationDecl | SqlQuery:
    """One parsed statement → a relation or a query (``sql``: its text, for positions).

    What :func:`parse_sql` does per statement, open to trees built by hand
    (``tests/m3/test_sql_nodes.py`` puts every sqlglot node type into every
    position the front end accepts).
    """
    return _statement(tree, is_stream, dict(relations), number - 1, _Ctx(sql, 0, sql))


def _statement(tree: exp.Expression, is_stream: bool, relations: dict[str, RelationDecl], done: int,
               ctx: _Ctx) -> RelationDecl | SqlQuery:
    kind = str(tree.args.get("kind") or "").upper() if type(tree) is exp.Create else ""
    if kind == "VIEW":
        if type(tree.expression) is exp.Select:  # nullable columns made explicit before sugar folds IS NULL
            tree.set("expression", nulls_explicit(tree.expression, relations, ctx))
        tree = desugar(tree, relations, ctx)  # USING, NATURAL, DATE_PART: before the fields read are checked
    if kind in ("TABLE", "VIEW"):
        _refuse_unread(tree, ctx)
    if kind == "TABLE":
        rel = relation(tree, "STREAM" if is_stream else "TABLE", ctx)
        if rel.name.lower() in (r.lower() for r in relations):
            raise ctx.error(f"relation {rel.name} declared twice", tree)
        _refuse_unknown(tree, ctx)
        return rel
    if kind == "VIEW":
        body, target = tree.expression, tree.this
        if type(body) is not exp.Select and not isinstance(body, exp.SetOperation):
            raise ctx.error(f"view body must be a SELECT, not {type(body).__name__.upper()}", body)
        rename = []
        if type(target) is exp.Schema:
            rename = [c.name for c in target.expressions]
            if any(type(c) is not exp.Identifier for c in target.expressions):
                raise ctx.error(f"unsupported view column list {sql_of(target)} (names only)", target)
            target = target.this
        if type(target) is not exp.Table or target.args.get("db") or target.args.get("catalog"):
            raise ctx.error(f"unsupported view name {sql_of(target)}", target)
        query = _named_query(target.name, body, relations, ctx, rename)
        _refuse_unknown(tree, ctx)
        return query
    if type(tree) is exp.Select or isinstance(tree, exp.SetOperation):
        return _named_query(f"Q{done + 1}", tree, relations, ctx, [])
    what = f"CREATE {kind}" if kind else type(tree).__name__.upper()
    if kind == "FUNCTION":  # DBToaster's declaration of a host-language function: Boreas calls none
        raise ctx.error(f"unsupported CREATE FUNCTION {sql_of(tree.this)}: Boreas calls no external function (SQL's "
                        "own are built in: EXTRACT, SUBSTRING, MOD, GREATEST, LEAST; drop the declaration and "
                        "use them)", tree)
    raise ctx.error(f"unsupported statement {what} (expected CREATE STREAM/TABLE, CREATE VIEW or SELECT)")


def _refuse_unread(tree: exp.Expression, ctx: _Ctx, skip: tuple = ()) -> None:
    """Refuse a field of a node the front end translates but does not read (:mod:`.nodes`); ``skip``: subtrees
    translated elsewhere (nested subqueries, :mod:`.subqueries`, which checks them itself)."""
    for node, arg in unread_args(tree, skip):
        raise ctx.error(f"unsupported {describe(node, arg)} ({sql_of(node)})", node)


def _refuse_unknown(tree: exp.Expression, ctx: _Ctx, skip: tuple = ()) -> None:
    """The safety net after translating: a node of a type the front end does not translate is refused, not dropped."""
    for node in unknown_nodes(tree, skip):
        raise ctx.error(f"unsupported {type(node).__name__.upper()} ({sql_of(node)})", node)


def _named_query(name: str, sel: exp.Select, relations: dict[str, RelationDecl], ctx: _Ctx,
                 rename: list[str]) -> SqlQuery:
    """:func:`_query`, with the view's name added to any error (a script may hold many views)."""
    try:
        sel = count_distinct_of_nothing(sel)  # DBToaster's COUNT(DISTINCT): LEAST(COUNT(*), 1) (:mod:`.countnone`)
        sel = outer_conditions_out(sel)  # EXISTS (... WHERE outer.a = 3): the condition outside (:mod:`.outercond`)
        sel = exists_of_values(sel, relations)  # (SELECT agg ...) IN (SELECT c ...) as EXISTS (:mod:`.valuein`)
        sel = split_case(sel, relations)  # a CASE of two columns as a UNION ALL of two views (:mod:`.casesplit`)
        explicit = nulls_explicit(counted_groups(sel), relations, ctx)  # a window's groups counted (.winrows); 3VL
        # a correlation with a nullable outer column leaves ``r.b__null = 0`` in its subquery, to move out
        sel = outer_conditions_out(explicit) if explicit is not sel and _has_indicator(explicit) else explicit
        one_row = keyless(sel)  # an aggregate without GROUP BY: its one row always, NULLs counted (:mod:`.keyless`)
        equal_rows = has_equal_to_rows(sel)  # read as IN (:mod:`.scalarin`): noted, SQL differs on several rows
        sel = separate(desugar(sel, relations, ctx), relations, ctx)  # before any pass compares names in lower case
        q = one_row_view(_query(name, sel, relations, ctx, rename), one_row)
        return replace(q, notes=(*q.notes, EQUAL_ROWS_NOTE.format(name=name))) if equal_rows else q
    except CompileError as e:
        raise CompileError(f"{e.message} in view {name}", e.pos) from None


def _has_indicator(tree: exp.Expression) -> bool:
    """Whether the rewrite of :mod:`.threevalued` left an indicator column (``b__null``) in ``tree``."""
    return any(type(n) is exp.Column and n.name.lower().endswith(NULL_SUFFIX) for n in tree.walk())


def _no_lifted(queries: list[SqlQuery], kind: str, branches: list, ctx: _Ctx) -> list[SqlQuery]:
    """The branches of a set operation, refused when one reads a grouped derived table by value: such a query
    is a view over parts (:mod:`.lifted`), not maps a branch's can be added to or counted with, and the
    pipeline compiles it alone (the other branches would be dropped)."""
    for q, b in zip(queries, branches):
        if q.lifted is not None:
            raise ctx.error(f"unsupported {kind} with a branch over a grouped derived table read by value "
                            f"({sql_of(b)}): compile the branches as views of their own", b)
    return queries


def _over_parts(name: str, p, sel: exp.Select, relations: dict[str, RelationDecl], ctx: _Ctx) -> SqlQuery:
    """A query that is a view over parts (:class:`.lifted.Plan`), each part compiled as a query of its own."""
    parts = tuple(with_constants(_query(f"{name}_p{i}", s, relations, ctx, []), s.meta.get("constants", {}))
                  for i, s in enumerate(p.parts))  # an outer join's padded keys (:mod:`.outerkeys`)
    for s, q in zip(p.parts, parts):
        if q.lifted is not None and not nestable(q.lifted):  # a part is maps or a plan over maps (one level)
            raise ctx.error(f"unsupported grouped derived table over another grouped derived table's values "
                            f"({sql_of(s)}): one level of aggregates of aggregates", sel)
    return SqlQuery(name, (), (), None, (), (), notes=p.notes, lifted=replace(p, parts=parts))


def _query(name: str, sel: exp.Select, relations: dict[str, RelationDecl], ctx: _Ctx, rename: list[str]) -> SqlQuery:
    sel, order = unordered(sel, name, ctx)  # a set operation's ORDER BY: noted (:mod:`.setparts`)
    if order is not None:
        q = _query(name, sel, relations, ctx, rename)
        return replace(q, notes=(*q.notes, order))
    if aggregated_union(sel) and not nested_branches(sel):  # a set operation of aggregated queries (:mod:`.setagg`)
        return _over_parts(name, union_plan(sel, ctx, relations), sel, relations, ctx)
    if nested_branches(sel):  # a branch with a subquery: each branch a part, the view over their counts
        kind, sides = setop_branches(sel, ctx) if is_setop(sel) else (set_kind(sel), statement_branches(sel, ctx))
        return _over_parts(name, set_plan(kind, sides, ctx), sel, relations, ctx)
    if is_setop(sel):  # INTERSECT, EXCEPT: a query per branch, each with its own row counts (:mod:`.setops`)
        kind, sides = setop_branches(sel, ctx)
        queries = _no_lifted([_query(name, b, relations, ctx, rename) for b in sides], kind, sides, ctx)
        return replace(queries[0], union=tuple(queries[1:]), setop=kind)
    branches = statement_branches(sel, ctx) if isinstance(sel, exp.SetOperation) else split(sel, ctx)
    if len(branches) > 1:  # UNION ALL: a query per branch, their maps added (:mod:`.union`)
        queries = _no_lifted([_query(name, b, relations, ctx, rename) for b in branches], "UNION", branches, ctx)
        return replace(queries[0], union=tuple(queries[1:]))
    # rewrites before resolution: a derived table of aggregates only (:mod:`.onerow`, :mod:`.singleton`), DISTINCT as
    # GROUP BY, :mod:`.rollup`, :mod:`.sumjoin`, :mod:`.notexists`, :mod:`.constrow` (each module says which shape)
    columns = {n: [c.name for c in r.columns] for n, r in relations.items()}
    # a WHERE an INT column's equality with 50.27 decides false: 1 = 0 (:mod:`.neverequal`)
    first = constant_rows(branches[0], columns)
    first = never_equal(sum_joined(first) or first, relations)
    # only the group columns of a grouped derived table over another: the DISTINCT of them (:mod:`.groupsonly`)
    branches = [rollups(distinct_groups(one_row_reads(groups_only(as_extremes(first)), columns)))]
    if is_fromless(branches[0]):  # scalar subqueries combined: parts of their own (:mod:`.fromless`)
        return _over_parts(name, fromless_plan(branches[0], ctx), branches[0], relations, ctx)
    if has_select_subqueries(branches[0], relations):  # (SELECT ...) in the SELECT list: parts (:mod:`.selectsub`)
        return _over_parts(name, select_plan(branches[0], relations, ctx), branches[0], relations, ctx)
    if deep_conjunct(branches[0], relations) is not None:  # vs. a scalar nested deeper: a part (:mod:`.deepscalar`)
        return _over_parts(name, deep_plan(branches[0], relations, ctx), branches[0], relations, ctx)
    if has_outer(branches[0]):  # LEFT, RIGHT, FULL: the inner join and the padded parts (:mod:`.outer`)
        _refuse_unread(branches[0], ctx)  # its parts are built anew: what they do not carry over is checked here
        p = outer_plan(branches[0], relations, ctx, rename)
        return _query(name, p, relations, ctx, rename) if isinstance(p, exp.Select) else \
            _over_parts(name, p, branches[0], relations, ctx)
    name_groups(branches[0], relations)  # GROUP BY k, GROUP BY alias: as the derived table selects it
    expand_stars(branches[0], relations)  # * over a grouped derived table: its named columns
    try:  # a subquery's aggregate of a grouped derived table's rows first (:mod:`.subregroup`)
        sel = flatten(regroup(regroup_subqueries(branches[0], ctx), ctx), relations, ctx)
    except CompileError:
        inlined = reads_grouped(branches[0], ctx)
        if inlined is None:
            raise  # an aggregate of a grouped derived table's values instead: parts of their own (:mod:`.lifted`)
        return _over_parts(name, plan(name, inlined, relations, ctx), inlined, relations, ctx)
    sel = hoisted(sel)  # a subquery's condition on its correlation columns only: the outer row's (:mod:`.hoist`)
    refuse_clauses(sel, ctx)
    where = sel.args.get("where")
    nested_nodes = tuple(c for c in (conjuncts(where.this) if isinstance(where, exp.Where) else [])
                         if contains_subquery(c))
    having_node = sel.args.get("having")
    having_nested = tuple(c for c in (conjuncts(having_node.this) if isinstance(having_node, exp.Having) else [])
                          if contains_subquery(c))
    nested_nodes += having_nested
    inside = {id(x) for n in nested_nodes for x in n.walk()}
    for node in sel.walk():
        if id(node) in inside:
            continue
        if node is not sel and isinstance(node, (exp.Select, exp.Subquery, exp.SetOperation, exp.Exists)):
            where_is = "in WHERE only as a conjunct: EXISTS, IN (SELECT ...) or a comparison"
            raise ctx.error(f"unsupported subquery (nested SELECT) here: a subquery may stand {where_is}", node)
        if isinstance(node, exp.Window):
            raise ctx.error("unsupported window function", node)
    _refuse_unread(sel, ctx, nested_nodes)
    check_clauses(sel, ctx)
    tables = tables_of(sel, relations, ctx)
    res = Resolver(tables, relations, ctx)
    joins: list[tuple[ColRef, ColRef]] = []
    preds = []
    counter = [0]
    nested = tuple(nested_conjunct(c, res, relations, ctx, lambda s: tables_of(s, relations, ctx), counter)
                   for c in nested_nodes if not any(c is h for h in having_nested))
    conds = [c for c in (conjuncts(where.this) if where is not None else []) if id(c) not in inside]
    for j in sel.args.get("joins") or []:
        if j.args.get("on") is not None:
            conds += conjuncts(j.args["on"])
    for c in conds:
        if type(c) is exp.EQ and type(unparen(c.this)) is exp.Column and type(unparen(c.expression)) is exp.Column:
            joins.append((res.column(unparen(c.this)), res.column(unparen(c.expression))))
        else:
            preds.append(res.predicate(c))
    items = select_items(sel, res, ctx)
    aliases = {i.name.lower(): i.value if i.ref is None else ("col", i.ref) for i in reversed(items)}
    having_pred = having(res, having_node.this, aliases) if having_node is not None and not having_nested else None
    if having_nested:  # a HAVING conjunct comparing with uncorrelated scalar subqueries (TPC-H Q11)
        having_pred = conj([having(res, c, aliases) for c in conjuncts(having_node.this)
                            if not any(c is h for h in having_nested)] +
                           [having_conjunct(c, res, relations, ctx, lambda s: tables_of(s, relations, ctx), counter,
                                            aliases) for c in having_nested])
    distinct = sel.args.get("distinct")
    if distinct is not None and (distinct.args.get("on") is not None or distinct.expressions):
        raise ctx.error(f"unsupported DISTINCT ON ({sql_of(distinct)})", keyword=r"\bDISTINCT\b")
    if grouped(sel, items, having_pred):
        groups = group_columns(sel, items, res, ctx)
        items, having_pred = read_keys(items, groups, having_pred)
        check_grouped(items, groups, having_pred, ctx, having_node)
        if distinct is not None and any(all(i.ref != g for i in items) for g in groups):
            raise ctx.error("unsupported SELECT DISTINCT over groups whose GROUP BY columns are not all selected "
                            "(select them, or drop DISTINCT)", keyword=r"\bDISTINCT\b")
        count = 1 if all(i.ref is not None for i in items) else None  # one row per group
    else:
        items = check_rows(items, res, ctx)
        groups = []
        count = 1 if distinct is not None else ("agg", "COUNT", 1)
    keys, values, internal = view_names(items, groups, rename, name, count, ctx)
    note = order_note(name, sel, items, [n for n, _ in keys] + [n for n, _ in values], res, ctx)
    _refuse_unknown(sel, ctx, nested_nodes)
    return SqlQuery(name, tuple(tables), tuple(joins), conj(preds) if preds else None, tuple(keys),
                    tuple(values), having_pred, (note,) if note else (), nested, internal=internal)
