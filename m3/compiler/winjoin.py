"""Window joins and interval joins: a query over windowed derived tables, split into stages evaluated per window.

Why stages: a derived table with GROUP BY or aggregates is not flattened
into the calculus (:mod:`.derived`: an aggregate of aggregates), but over
event-time windows it need not be.  Once a window has closed, the rows its
grouped derived tables hold for it are final; whatever the query does *with*
them (joins them on the window, takes the MAX of a count, joins the
stream's rows back within the window) is a query over a small, finished
table, evaluated once, when the window closes.  So :func:`split` cuts the
query into

* **leaves**: each innermost derived table (and each windowed stream read
  raw beside them, as ``SELECT <the columns the stages read> FROM s``: a
  view of rows, its count each row's multiplicity), compiled as ordinary windowed views of
  the box: maintained incrementally, their state per window dropped when the
  window closes (node/operators/m3windows.py);
* **uppers**: each query that reads derived tables, with them read as
  relations by name; evaluated bottom-up per closed window over that
  window's rows of what it reads, its rows emitted then (m3/winstages.py).

Evaluating per window is only right when every join equates the windows
(a **window join**: ``a.window_start = b.window_start``, or the ends, through
any alias) or bounds one side's event time within the other's window (an
**interval join**: ``x.t BETWEEN y.window_end - INTERVAL 'size' AND
y.window_end``, the window's own size; read as the window ``[end - size,
end)``: a row at exactly ``end`` is the next window's, as Flink's TUMBLE puts
it), and every aggregate above the leaves groups by the window.  Any other
join or aggregate over windowed derived tables is refused, by name.

>>> s = split('''CREATE STREAM P(id INT, t INT); CREATE STREAM A(seller INT, t INT);
... SELECT P.id, P.s FROM (SELECT id, window_start AS s, window_end AS e FROM TABLE(TUMBLE(TABLE P,
... DESCRIPTOR(t), 10)) GROUP BY id, window_start, window_end) P JOIN (SELECT seller, window_start AS s,
... window_end AS e FROM TABLE(TUMBLE(TABLE A, DESCRIPTOR(t), 10)) GROUP BY seller, window_start,
... window_end) X ON P.id = X.seller AND P.s = X.s''')
>>> [(leaf.relation, leaf.columns, leaf.distinct) for leaf in s.leaves]
[('wj_p', ('id', 's', 'e'), True), ('wj_x', ('seller', 's', 'e'), True)]
>>> s.uppers[-1].select
'SELECT P.id, P.s FROM wj_p AS P JOIN wj_x AS X ON P.id = X.seller AND P.s = X.s'
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp

from boreas.catalog.watermarks import interval_ms

from ..errors import CompileError
from .windowfn import WINDOW_COLUMNS, Window, rewrite
from .winrows import counted_groups

_STRING = re.compile(r"'(?:[^']|'')*'")
_CREATE = re.compile(r"^\s*CREATE\s+STREAM\s+([A-Za-z_][A-Za-z0-9_]*)\s*\((.*)\)\s*$", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class Stage:
    """One stage: the relation the stage above reads it as, its SELECT, its columns in order.

    ``distinct``: each of its view's rows counts once (it has GROUP BY or aggregates); else its count is the
    row's multiplicity.  ``reads``: the stages it reads (none: a leaf, a view of the box)."""

    relation: str
    select: str
    columns: tuple[str, ...]
    distinct: bool
    reads: tuple[str, ...] = ()


@dataclass(frozen=True)
class Staged:
    """A query split into stages: the leaves' script (the streams, one SELECT per leaf) and the uppers,
    bottom-up, the query itself last."""

    leaves_text: str
    leaves: tuple[Stage, ...]
    uppers: tuple[Stage, ...]
    window: Window


@dataclass
class _Split:
    streams: dict[str, tuple[str, ...]]  # windowed relation (lower) -> its columns, window columns last
    window: Window
    leaves: list[Stage] = field(default_factory=list)
    uppers: list[Stage] = field(default_factory=list)
    names: set[str] = field(default_factory=set)

    def name(self, alias: str) -> str:
        base = f"wj_{alias.lower()}"
        name, n = base, 1
        while name in self.names:
            n += 1
            name = f"{base}_{n}"
        self.names.add(name)
        return name


def _statements(text: str) -> list[str]:
    bare = _STRING.sub(lambda m: " " * len(m.group(0)), text)
    out, last = [], 0
    for i, ch in enumerate(bare):
        if ch == ";":
            out.append(text[last:i])
            last = i + 1
    out.append(text[last:])
    return [s for s in out if s.strip()]


def _sources(sel: exp.Select) -> list[exp.Expression]:
    from_ = sel.args.get("from") or sel.args.get("from_")
    first = [from_.this] if from_ is not None else []
    return first + [j.this for j in sel.args.get("joins") or ()]


def _grouped(sel: exp.Expression) -> bool:
    return isinstance(sel, exp.Select) and (sel.args.get("group") is not None or any(
        e.find(exp.AggFunc) is not None for e in sel.expressions))


def _conjuncts(node: exp.Expression | None) -> list[exp.Expression]:
    if node is None:
        return []
    if isinstance(node, exp.And):
        return _conjuncts(node.left) + _conjuncts(node.right)
    if isinstance(node, exp.Paren):
        return _conjuncts(node.this) if isinstance(node.this, exp.And) else [node]
    return [node]


def _and(parts: list[exp.Expression]) -> exp.Expression | None:
    return exp.and_(*parts) if parts else None


def split(text: str, streams: dict[str, tuple[str, ...]] | None = None) -> Staged | None:
    """The stages of ``text`` (a box's script) when its query reads grouped derived tables over event-time
    windows; None when it does not (it compiles as usual).  ``streams``: a relation's columns (lower name ->
    names) where the script declares none."""
    rewritten, windows, _ = rewrite(text)
    fixed = [w for w in windows if isinstance(w, Window)]
    if not fixed:
        return None
    stmts = _statements(rewritten)
    selects = [s for s in stmts if s.lstrip().upper().startswith("SELECT")]
    if len(selects) != 1:
        return None
    try:
        sel = sqlglot.parse_one(selects[0])
    except sqlglot.errors.ParseError:
        return None  # the ordinary compile says where
    if not isinstance(sel, exp.Select) or not any(
            isinstance(s, exp.Subquery) and _grouped(s.this) for s in _sources(sel)):
        return None
    if len(fixed) != len(windows) or len({(w.size, w.slide) for w in fixed}) > 1:
        raise CompileError("a window join joins windows of one size and slide (TUMBLE or HOP, the same "
                           "intervals for every stream it reads)")
    declared = dict(streams or {})
    for s in stmts:
        m = _CREATE.match(s)
        if m:
            declared[m.group(1).lower()] = tuple(c.split()[0] for c in m.group(2).split(",") if c.strip())
    windowed = {w.relation.lower() for w in windows}
    work = _Split({k: v for k, v in declared.items() if k in windowed}, fixed[0])
    _stage(sel, "", work)
    decls = ";\n".join(s.strip() for s in stmts if s is not selects[0])
    body = ";\n".join(leaf.select for leaf in work.leaves)
    return Staged(f"{decls};\n{body}" if decls else body, tuple(work.leaves), tuple(work.uppers), fixed[0])


def _names(sel: exp.Select, what: str) -> tuple[str, ...]:
    names = tuple(e.alias_or_name for e in sel.expressions)
    if any(not n or n == "*" for n in names) or len({n.lower() for n in names}) != len(names):
        raise CompileError(f"{what}: name every column once (SELECT ... AS name; no *)")
    return names


def _window_marks(sel: exp.Select, marks: dict[str, dict[str, str]]) -> dict[str, str]:
    """Which of ``sel``'s output columns carry the window's start, end or event time (by ``marks``: each
    source alias's columns)."""
    out = {}
    for e in sel.expressions:
        inner = e.this if isinstance(e, exp.Alias) else e
        if isinstance(inner, exp.Column):
            table = inner.table.lower()
            pools = [marks[table]] if table in marks else list(marks.values())
            kind = next((p[inner.name.lower()] for p in pools if inner.name.lower() in p), None)
            if kind is not None:
                out[e.alias_or_name.lower()] = kind
    return out


def _stage(sel: exp.Select, alias: str, work: _Split) -> tuple[str, dict[str, str]]:
    """Cut ``sel`` (the query, or the derived table ``alias``) into stages; its relation and window marks."""
    what = f"derived table {alias}" if alias else "the query"
    sources = _sources(sel)
    if not any(isinstance(s, exp.Subquery) for s in sources):
        return _leaf(sel, alias, what, sources, work)
    marks: dict[str, dict[str, str]] = {}
    reads = []
    for src in sources:
        name = src.alias_or_name
        if isinstance(src, exp.Subquery):
            if not isinstance(src.this, exp.Select):
                raise CompileError(f"{what} reads a derived table {name} that is not a plain SELECT")
            relation, kinds = _stage(src.this, name, work)
        elif isinstance(src, exp.Table) and src.name.lower() in work.streams:
            relation, kinds = _raw_leaf(src.name, work, _read_columns(sel, name))
        else:
            raise CompileError(f"{what} joins windowed derived tables with {src.sql()}, which is read without the "
                               "window: its rows would be kept forever (read it through the same TUMBLE or HOP)")
        src.replace(exp.Table(this=exp.to_identifier(relation), alias=exp.TableAlias(this=exp.to_identifier(name))))
        marks[name.lower()] = kinds
        reads.append(relation)
    _check_joins(sel, marks, work.window, what)
    if _grouped(sel) and not any(
            _window_marks(exp.Select(expressions=[g]), marks) for g in (sel.args.get("group") or exp.Group()).expressions):
        raise CompileError(f"{what} aggregates windowed derived tables without GROUP BY their window_start or "
                           "window_end: the aggregate would span windows")
    relation = work.name(alias) if alias else "wj_query"
    names = _names(sel, what)
    # (evaluated over one window's rows: a group of that window keeps its row whatever its values, .winrows)
    stage = Stage(relation, counted_groups(sel, every_group=True).sql(), names, _grouped(sel), tuple(reads))
    work.uppers.append(stage)
    return relation, _window_marks(sel, marks)


def _leaf(sel: exp.Select, alias: str, what: str, sources: list, work: _Split) -> tuple[str, dict[str, str]]:
    if not alias:
        raise CompileError("the query reads no derived table")
    tables = [s for s in sources if isinstance(s, exp.Table)]
    if not any(t.name.lower() in work.streams for t in tables):
        raise CompileError(f"{what} is joined on windows but reads no TUMBLE or HOP window")
    kinds = {"window_start": "start", "window_end": "end"}
    marks = _window_marks(sel, {t.alias_or_name.lower(): kinds for t in tables})
    groups = (sel.args.get("group") or exp.Group()).expressions
    if not any(isinstance(g, exp.Column) and g.name.lower() in WINDOW_COLUMNS for g in groups):
        raise CompileError(f"{what} reads a window but does not GROUP BY window_start or window_end: its rows "
                           "would never close")
    relation = work.name(alias)
    work.leaves.append(Stage(relation, sel.sql(), _names(sel, what), True))
    return relation, marks


def _read_columns(sel: exp.Select, alias: str) -> set[str] | None:
    """The columns (lower names) ``sel`` reads of source ``alias``, named ``alias.column``; None when it may read
    more than those (a ``*``, a column named without its source, or a NATURAL or USING join, whose columns
    are named by neither side).

    >>> sel = sqlglot.parse_one("SELECT B.a, W.m FROM b AS B JOIN (SELECT MAX(x) AS m FROM w) AS W ON B.p = W.m "
    ...                         "WHERE B.t > 1")
    >>> sorted(_read_columns(sel, "B")), _read_columns(sqlglot.parse_one("SELECT a FROM b AS B"), "B")
    (['a', 'p', 't'], None)
    """
    if any(str(j.args.get("method") or "").upper() == "NATURAL" or j.args.get("using")
           for j in sel.args.get("joins") or []):
        return None
    read = set()
    for node in sel.find_all(exp.Column, exp.Star):
        if _inner(node, sel):  # (a derived table's own columns)
            continue
        if isinstance(node, exp.Star) or not node.table or node.is_star:
            return None
        if isinstance(node, exp.Column) and node.table.lower() == alias.lower():
            read.add(node.name.lower())
    return read


def _inner(node: exp.Expression, sel: exp.Select) -> bool:
    """Whether ``node`` is inside a subquery of ``sel``."""
    up = node.parent
    while up is not None and up is not sel:
        if isinstance(up, (exp.Subquery, exp.Select)):
            return True
        up = up.parent
    return False


def _raw_leaf(stream: str, work: _Split, read: set[str] | None = None) -> tuple[str, dict[str, str]]:
    """A windowed stream read beside derived tables: its rows per window (a view of rows: each its count), of
    the columns the stage above reads (``read``; None: every column), its window and event time: a column no
    stage reads (Nexmark q7's bid ``channel`` and ``url``) would be kept in the leaf's map key, interned and
    copied per window for nothing, and the rows it alone tells apart are one row of their summed count, which
    the stage above reads as it would read them apart (a view of rows counts each row's multiplicity)."""
    time = work.window.time.lower()
    columns = tuple(c for c in work.streams[stream.lower()]
                    if read is None or c.lower() in read or c.lower() in WINDOW_COLUMNS or c.lower() == time)
    listed = ", ".join(columns)
    relation = work.name(stream)
    work.leaves.append(Stage(relation, f"SELECT {listed} FROM {stream}", columns, False))
    marks = {"window_start": "start", "window_end": "end", work.window.time.lower(): "time"}
    return relation, marks


def _kind(node: exp.Expression, marks: dict[str, dict[str, str]]) -> tuple[str, str] | None:
    """(source alias, start/end/time) of a column carrying a window bound or the event time."""
    if not isinstance(node, exp.Column):
        return None
    table = node.table.lower()
    for name, kinds in marks.items():
        if (not table or table == name) and node.name.lower() in kinds:
            return name, kinds[node.name.lower()]
    return None


def _interval(node: exp.Expression, size: int, marks: dict, end_of: str | None = None) -> str | None:
    """The alias whose window end ``node`` is, when it is ``end`` or ``end - INTERVAL size``."""
    if isinstance(node, exp.Sub):
        if end_of is not None:
            return None
        right = node.expression
        try:
            amount = interval_ms(right.sql(), "interval") if isinstance(right, exp.Interval) else int(right.sql())
        except ValueError:
            return None
        return _interval(node.this, size, marks, "lower") if amount == size else None
    kind = _kind(node, marks)
    return kind[0] if kind is not None and kind[1] == "end" else None


def _check_joins(sel: exp.Select, marks: dict[str, dict[str, str]], window: Window, what: str) -> None:
    """Every source is tied to another by its window (equal bounds, or an interval join); interval conjuncts
    are dropped: evaluated per window, they hold for every row of it."""
    tied: list[set[str]] = [{name} for name in marks]

    def tie(a: str, b: str) -> None:
        sa = next(s for s in tied if a in s)
        sb = next(s for s in tied if b in s)
        if sa is not sb:
            tied.remove(sb)
            sa |= sb

    places = [(j, "on") for j in sel.args.get("joins") or ()] + [(sel, "where")]
    for node, key in places:
        kept = []
        found = node.args.get(key)
        for c in _conjuncts(found.this if isinstance(found, exp.Where) else found):
            if isinstance(c, exp.EQ):
                a, b = _kind(c.this, marks), _kind(c.expression, marks)
                if a and b and a[1] == b[1] and a[1] in ("start", "end"):
                    tie(a[0], b[0])
            elif isinstance(c, exp.Between):
                t = _kind(c.this, marks)
                low, high = _interval(c.args["low"], window.size, marks), _interval(c.args["high"], window.size, marks)
                if t and t[1] == "time" and low and low == high:
                    tie(t[0], low)
                    continue
            kept.append(c)
        if key == "on" and not kept:
            kept = [exp.EQ(this=exp.Literal.number(1), expression=exp.Literal.number(1))]
        joined = _and(kept)
        node.set(key, exp.Where(this=joined) if key == "where" and joined is not None else joined)
    if len(tied) > 1:
        groups = " / ".join(", ".join(sorted(s)) for s in tied)
        raise CompileError(f"{what} joins windowed derived tables ({groups}) without equal windows: a window join "
                           "equates their window_start or window_end; an interval join bounds one side's event "
                           f"time: t BETWEEN w.window_end - INTERVAL '{window.size}' MILLISECOND AND "
                           "w.window_end (the window's size)")
