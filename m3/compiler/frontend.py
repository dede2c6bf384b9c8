"""Pass 1, the front end: SQL text → declared relations and resolved queries (sqlglot parses).

Accepted input: ``CREATE STREAM|TABLE name (col type, ...)`` declarations,
then ``SELECT`` queries (optionally ``CREATE VIEW name AS SELECT ...``) that
aggregate with SUM, COUNT or AVG over inner equi-joins (comma joins or
``JOIN ... ON``), with selections comparing a column with a constant (``= <>
< <= > >=``, ``BETWEEN``, ``IN (constants)``, AND, OR) and ``GROUP BY``
columns.  Everything else is rejected with a :class:`CompileError` naming
the construct and its line:col — checking here, once, keeps later passes
total.

The result refers to columns as ``(alias, column)`` pairs; no variables yet.

>>> rels, queries = parse_sql('''CREATE STREAM R(a INT, b INT);
...     SELECT a, SUM(b * 2) AS total FROM R WHERE b < 10 GROUP BY a''')
>>> rels[0].name, [c.name for c in rels[0].columns]
('R', ['a', 'b'])
>>> q = queries[0]
>>> q.name, q.group_by, q.aggregates
('Q1', (('a', ('R', 'a')),), (('total', 'SUM', ('*', ('R', 'b'), 2)),))
>>> q.predicate
('<', ('R', 'b'), 10)
>>> parse_sql("CREATE STREAM R(a INT); SELECT MAX(a) FROM R")
Traceback (most recent call last):
...
boreas.m3.errors.CompileError: unsupported aggregate MAX (only SUM, COUNT and AVG) (at line 1, col 32)
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError as SqlParseError
from sqlglot.errors import TokenError
from sqlglot.tokens import Tokenizer, TokenType

from ..ast import Column, RelationDecl
from ..errors import CompileError, Pos, pos_of_offset

ColRef = tuple[str, str]  # (alias, column)
# Arithmetic: ColRef | constant | (op, left, right) with op in + - * /, or ("neg", x)
# Predicates: (op, left, right) with op in = <> < <= > >= over ColRef/constant, or ("and"|"or", p, q)


@dataclass(frozen=True)
class SqlQuery:
    """One SELECT, names resolved: what the normaliser needs and nothing else."""

    name: str
    tables: tuple[tuple[str, str], ...]  # (alias, relation)
    joins: tuple[tuple[ColRef, ColRef], ...]  # equi-join (and same-table equality) pairs
    predicate: object  # selection tree or None
    group_by: tuple[tuple[str, ColRef], ...]  # (output name, column)
    aggregates: tuple[tuple[str, str, object], ...]  # (output name, SUM|COUNT|AVG, arithmetic)


_TYPES = {
    "INT": "INT", "INTEGER": "INT", "BIGINT": "INT", "SMALLINT": "INT", "TINYINT": "INT", "UBIGINT": "INT", "UINT": "INT",
    "FLOAT": "FLOAT", "DOUBLE": "FLOAT", "DECIMAL": "FLOAT", "REAL": "FLOAT", "NUMERIC": "FLOAT", "BIGDECIMAL": "FLOAT",
    "VARCHAR": "STRING", "TEXT": "STRING", "CHAR": "STRING", "NCHAR": "STRING", "NVARCHAR": "STRING", "STRING": "STRING",
    "DATE": "DATE",
}
_CMP = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}
_JOIN_WORDS = {"LEFT", "RIGHT", "FULL", "INNER", "OUTER", "CROSS", "NATURAL", "SEMI", "ANTI", "JOIN"}
_LEADING = {  # keywords that come before a construct's first positioned token
    exp.Select: {"SELECT", "("}, exp.Subquery: {"SELECT", "("}, exp.Join: _JOIN_WORDS, exp.Not: {"NOT"},
    exp.Cast: {"DATE", "CAST", "("}, exp.Union: {"SELECT"},
}
_ARITH = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/"}


class _Ctx:
    """Position bookkeeping for one statement of the script."""

    def __init__(self, text: str, start: int, stmt: str):
        self.text, self.start, self.stmt = text, start, stmt

    def pos(self, node: exp.Expression | None) -> Pos | None:
        """Where a node starts: its first token with a position, stepped back over its leading keywords."""
        offsets = [n.meta["start"] for n in (node.walk() if node is not None else ()) if "start" in n.meta]
        if not offsets:
            return pos_of_offset(self.text, self.start)
        offset = min(offsets)
        lead = _LEADING.get(type(node))
        if lead:
            tokens = [t for t in self.tokens() if t.start < offset]
            i = len(tokens)
            while i > 0 and tokens[i - 1].text.upper() in lead:
                i -= 1
                if tokens[i].text == "(":
                    break
            if i < len(tokens):
                offset = tokens[i].start
        return pos_of_offset(self.text, self.start + offset)

    def tokens(self):
        if not hasattr(self, "_tokens"):
            self._tokens = Tokenizer().tokenize(self.stmt)
        return self._tokens

    def keyword_pos(self, pattern: str) -> Pos:
        m = re.search(pattern, self.stmt, re.IGNORECASE)
        return pos_of_offset(self.text, self.start + (m.start() if m else 0))

    def error(self, message: str, node: exp.Expression | None = None, keyword: str | None = None):
        return CompileError(message, self.keyword_pos(keyword) if keyword else self.pos(node))


def split_statements(text: str) -> list[tuple[int, str]]:
    """The script's statements as ``(offset, text)``, split at top-level semicolons.

    >>> split_statements("SELECT 'a;b' FROM R; SELECT 2")
    [(0, "SELECT 'a;b' FROM R"), (21, 'SELECT 2')]
    """
    try:
        tokens = Tokenizer().tokenize(text)
    except TokenError as e:
        raise CompileError(f"cannot tokenize SQL: {e}") from None
    out, begin = [], 0
    for t in tokens + [None]:
        if t is None or t.token_type == TokenType.SEMICOLON:
            end = len(text) if t is None else t.start
            chunk = text[begin:end]
            if chunk.strip():
                lead = len(chunk) - len(chunk.lstrip())
                out.append((begin + lead, chunk.strip()))
            begin = end + 1
    return out


_DECLARATION = re.compile(r"\s*CREATE\s+(STREAM|TABLE)\b", re.IGNORECASE)


def declares_relations(text: str) -> bool:
    """Whether a script declares its own relations (``CREATE STREAM|TABLE``).

    >>> declares_relations("CREATE STREAM R(a INT); SELECT SUM(a) FROM R"), declares_relations("SELECT 1")
    (True, False)
    """
    return any(_DECLARATION.match(stmt) for _, stmt in split_statements(text))


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
    for start, stmt in split_statements(text):
        ctx = _Ctx(text, start, stmt)
        is_stream = bool(re.match(r"\s*CREATE\s+STREAM\b", stmt, re.IGNORECASE))
        sql = re.sub(r"STREAM", "TABLE ", stmt, count=1, flags=re.IGNORECASE) if is_stream else stmt
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
        if isinstance(tree, exp.Create) and str(tree.args.get("kind", "")).upper() == "TABLE":
            rel = _relation(tree, "STREAM" if is_stream else "TABLE", ctx)
            if rel.name.lower() in (r.lower() for r in relations):
                raise ctx.error(f"relation {rel.name} declared twice", tree)
            relations[rel.name] = rel
        elif isinstance(tree, exp.Create) and str(tree.args.get("kind", "")).upper() == "VIEW":
            body = tree.expression
            if not isinstance(body, exp.Select):
                raise ctx.error(f"view body must be a SELECT, not {type(body).__name__.upper()}", body)
            queries.append(_query(tree.this.name, body, relations, ctx))
        elif isinstance(tree, exp.Select):
            queries.append(_query(f"Q{len(queries) + 1}", tree, relations, ctx))
        else:
            raise ctx.error(f"unsupported statement {type(tree).__name__.upper()} (expected CREATE STREAM/TABLE, CREATE VIEW or SELECT)")
    if not queries:
        raise CompileError("no SELECT query to compile")
    names = [q.name for q in queries]
    for n in names:
        if names.count(n) > 1:
            raise CompileError(f"two queries named {n}")
    return list(relations.values()), queries


def _relation(tree: exp.Create, kind: str, ctx: _Ctx) -> RelationDecl:
    schema = tree.this
    if not isinstance(schema, exp.Schema) or tree.expression is not None:
        raise ctx.error("CREATE STREAM/TABLE needs a column list (CREATE ... AS SELECT is not supported)", tree)
    cols = []
    for cd in schema.expressions:
        if not isinstance(cd, exp.ColumnDef) or cd.args.get("kind") is None:
            raise ctx.error("expected a column definition: name type", cd)
        tname = cd.args["kind"].this.name if hasattr(cd.args["kind"].this, "name") else str(cd.args["kind"].this)
        mtype = _TYPES.get(tname.upper())
        if mtype is None:
            raise ctx.error(f"unsupported column type {tname} of column {cd.name}", cd)
        if any(c.name == cd.name for c in cols):
            raise ctx.error(f"duplicate column {cd.name}", cd)
        cols.append(Column(cd.name, mtype, pos=ctx.pos(cd)))
    return RelationDecl(schema.this.name, kind, tuple(cols), pos=ctx.pos(tree))


def _query(name: str, sel: exp.Select, relations: dict[str, RelationDecl], ctx: _Ctx) -> SqlQuery:
    for key, keyword in (("distinct", r"\bDISTINCT\b"), ("order", r"\bORDER\s+BY\b"), ("limit", r"\bLIMIT\b"),
                         ("offset", r"\bOFFSET\b"), ("having", r"\bHAVING\b"), ("with", r"\bWITH\b"),
                         ("qualify", r"\bQUALIFY\b"), ("windows", r"\bWINDOW\b")):
        if sel.args.get(key):
            raise ctx.error(f"unsupported {keyword.strip(chr(92) + 'b').replace(chr(92) + 's+', ' ')} clause", keyword=keyword)
    for node in sel.walk():
        if node is not sel and isinstance(node, (exp.Select, exp.Subquery, exp.SetOperation)):
            raise ctx.error("unsupported subquery (nested SELECT)", node)
        if isinstance(node, exp.Window):
            raise ctx.error("unsupported window function", node)
    from_ = sel.args.get("from") or sel.args.get("from_")
    if from_ is None:
        raise ctx.error("a query needs a FROM clause", sel)
    tables: list[tuple[str, str]] = []
    ons: list[exp.Expression] = []
    for item in [from_.this] + [j.this for j in sel.args.get("joins") or []]:
        if not isinstance(item, exp.Table):
            raise ctx.error(f"unsupported FROM item {type(item).__name__.upper()} (only relation names)", item)
        rel = next((r for r in relations if r.lower() == item.name.lower()), None)
        if rel is None:
            known = ", ".join(relations) or "none declared"
            raise ctx.error(f"unknown relation {item.name} (relations: {known})", item)
        alias = item.alias or rel
        if any(a.lower() == alias.lower() for a, _ in tables):
            raise ctx.error(f"alias {alias} used twice in FROM", item)
        tables.append((alias, rel))
    for j in sel.args.get("joins") or []:
        side, kind = str(j.args.get("side") or "").upper(), str(j.args.get("kind") or "").upper()
        if side or kind not in ("", "INNER", "CROSS"):
            raise ctx.error(f"unsupported {(side + ' ' + kind).strip()} JOIN (only inner equi-joins)", j)
        if j.args.get("using"):
            raise ctx.error("unsupported JOIN ... USING (write ON a.x = b.y)", j)
        if j.args.get("on") is not None:
            ons.append(j.args["on"])
    res = _Resolver(tables, relations, ctx)
    joins: list[tuple[ColRef, ColRef]] = []
    preds = []
    conjuncts = _conjuncts(sel.args["where"].this) if sel.args.get("where") else []
    for on in ons:
        conjuncts += _conjuncts(on)
    for c in conjuncts:
        if isinstance(c, exp.EQ) and isinstance(c.this, exp.Column) and isinstance(c.expression, exp.Column):
            joins.append((res.column(c.this), res.column(c.expression)))
        else:
            preds.append(res.predicate(c))
    predicate = None
    for p in preds:
        predicate = p if predicate is None else ("and", predicate, p)
    group_cols = []
    for g in sel.args.get("group").expressions if sel.args.get("group") else []:
        if not isinstance(g, exp.Column):
            raise ctx.error(f"unsupported GROUP BY expression {g.sql()} (group by columns only)", g)
        group_cols.append(res.column(g))
    outputs: dict[ColRef, str] = {}
    aggregates = []
    for item in sel.expressions:
        alias = item.alias if isinstance(item, exp.Alias) else None
        node = item.this if isinstance(item, exp.Alias) else item
        if isinstance(node, exp.Column):
            ref = res.column(node)
            if ref not in group_cols:
                raise ctx.error(f"column {node.sql()} is selected but not in GROUP BY", node)
            outputs[ref] = alias or ref[1]
        elif isinstance(node, exp.AggFunc):
            aggregates.append((alias or f"{type(node).__name__.lower()}_{len(aggregates) + 1}",) + res.aggregate(node))
        elif isinstance(node, exp.Star):
            raise ctx.error("unsupported SELECT * (an aggregate query selects group columns and aggregates)", node)
        else:
            bad = next((n for n in node.walk() if isinstance(n, exp.AggFunc)), None)
            what = "arithmetic over aggregates" if bad is not None else f"non-aggregate expression {node.sql()}"
            raise ctx.error(f"unsupported {what} in SELECT", node)
    if not aggregates:
        raise ctx.error("a query must compute at least one aggregate (SUM, COUNT or AVG)", sel)
    names = [a[0] for a in aggregates] + list(outputs.values())
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise ctx.error(f"output column {dup} appears twice", sel)
    group_by = tuple((outputs.get(ref, ref[1]), ref) for ref in group_cols)
    return SqlQuery(name, tuple(tables), tuple(joins), predicate, group_by, tuple(aggregates))


def _conjuncts(e: exp.Expression) -> list[exp.Expression]:
    while isinstance(e, exp.Paren):
        e = e.this
    if isinstance(e, exp.And):
        return _conjuncts(e.this) + _conjuncts(e.expression)
    return [e]


class _Resolver:
    """Resolves column names against the FROM clause and translates expressions."""

    def __init__(self, tables, relations, ctx: _Ctx):
        self.tables, self.relations, self.ctx = tables, relations, ctx

    def column(self, col: exp.Column) -> ColRef:
        if not isinstance(col, exp.Column) or isinstance(col.this, exp.Star):
            raise self.ctx.error(f"expected a column, found {col.sql()}", col)
        name, qual = col.name.lower(), col.table.lower()
        hits = [(a, c.name) for a, r in self.tables if (not qual or a.lower() == qual)
                for c in self.relations[r].columns if c.name.lower() == name]
        if not hits:
            raise self.ctx.error(f"unknown column {col.sql()}", col)
        if len(hits) > 1:
            raise self.ctx.error(f"ambiguous column {col.sql()} (qualify it with a table alias)", col)
        return hits[0]

    def col_type(self, ref: ColRef) -> str:
        rel = dict(self.tables)[ref[0]]
        return next(c.type for c in self.relations[rel].columns if c.name == ref[1])

    def constant(self, e: exp.Expression, ctype: str | None = None):
        if isinstance(e, exp.Paren):
            return self.constant(e.this, ctype)
        if isinstance(e, exp.Neg):
            v = self.constant(e.this)
            if not isinstance(v, (int, float)):
                raise self.ctx.error(f"cannot negate {e.this.sql()}", e)
            return -v
        if isinstance(e, exp.Literal):
            if e.is_string:
                return self._date(e.this, e) if ctype == "DATE" else e.this
            text = e.this
            return float(text) if any(ch in text for ch in ".eE") else int(text)
        if isinstance(e, (exp.Cast, exp.TsOrDsToDate, exp.Date)) and isinstance(e.this, exp.Literal):
            to = e.args.get("to")
            if to is None or to.this == exp.DataType.Type.DATE:
                return self._date(e.this.this, e)
        if isinstance(e, exp.Null):
            raise self.ctx.error("unsupported NULL", e)
        raise self.ctx.error(f"unsupported expression {e.sql()} (expected a constant)", e)

    def _date(self, text: str, node):
        try:
            return datetime.date.fromisoformat(text)
        except ValueError:
            raise self.ctx.error(f"invalid DATE literal {text!r}", node) from None

    def predicate(self, e: exp.Expression):
        while isinstance(e, exp.Paren):
            e = e.this
        if isinstance(e, exp.And):
            return ("and", self.predicate(e.this), self.predicate(e.expression))
        if isinstance(e, exp.Or):
            return ("or", self.predicate(e.this), self.predicate(e.expression))
        if isinstance(e, exp.Between) and isinstance(e.this, exp.Column):
            ref = self.column(e.this)
            t = self.col_type(ref)
            return ("and", (">=", ref, self.constant(e.args["low"], t)), ("<=", ref, self.constant(e.args["high"], t)))
        if isinstance(e, exp.In) and isinstance(e.this, exp.Column) and not e.args.get("query"):
            ref = self.column(e.this)
            t = self.col_type(ref)
            out = None
            for item in e.expressions:
                p = ("=", ref, self.constant(item, t))
                out = p if out is None else ("or", out, p)
            return out
        op = _CMP.get(type(e))
        if op is None:
            raise self.ctx.error(f"unsupported condition {type(e).__name__.upper()} ({e.sql()})", e)
        left, right = e.this, e.expression
        if isinstance(left, exp.Column) and isinstance(right, exp.Column):
            if op == "=":
                raise self.ctx.error(f"equality of columns {e.sql()} inside OR is not supported (equi-joins must be conjuncts)", e)
            raise self.ctx.error(f"unsupported non-equi join condition {e.sql()} (only column = column joins)", e)
        if isinstance(left, exp.Column):
            ref = self.column(left)
            return (op, ref, self.constant(right, self.col_type(ref)))
        if isinstance(right, exp.Column):
            ref = self.column(right)
            return (op, self.constant(left, self.col_type(ref)), ref)
        raise self.ctx.error(f"unsupported condition {e.sql()} (compare a column with a constant)", e)

    def aggregate(self, node: exp.AggFunc) -> tuple[str, object]:
        kind = type(node).__name__.upper()
        if kind not in ("SUM", "COUNT", "AVG"):
            raise self.ctx.error(f"unsupported aggregate {kind} (only SUM, COUNT and AVG)", node)
        arg = node.this
        if isinstance(arg, exp.Distinct):
            raise self.ctx.error(f"unsupported {kind}(DISTINCT ...)", node)
        if kind == "COUNT":
            if arg is not None and not isinstance(arg, exp.Star):
                self.arith(arg)  # resolve names; no NULLs, so COUNT(x) = COUNT(*)
            return ("COUNT", 1)
        return (kind, self.arith(arg))

    def arith(self, e: exp.Expression):
        if isinstance(e, exp.Paren):
            return self.arith(e.this)
        if isinstance(e, exp.Column):
            ref = self.column(e)
            if self.col_type(ref) not in ("INT", "FLOAT"):
                raise self.ctx.error(f"cannot aggregate non-numeric column {e.sql()}", e)
            return ref
        if isinstance(e, exp.Neg):
            return ("neg", self.arith(e.this))
        op = _ARITH.get(type(e))
        if op == "/":
            try:
                divisor = self.constant(e.expression)
            except CompileError:
                divisor = None
            if not isinstance(divisor, (int, float)) or divisor == 0:
                raise self.ctx.error(f"unsupported division by {e.expression.sql()} (only by a non-zero constant)", e)
            return ("*", self.arith(e.this), 1 / divisor)
        if op is not None:
            return (op, self.arith(e.this), self.arith(e.expression))
        if isinstance(e, exp.Literal) and not e.is_string:
            return self.constant(e)
        raise self.ctx.error(f"unsupported expression {type(e).__name__.upper()} ({e.sql()}) in an aggregate", e)
