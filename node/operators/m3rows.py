"""A stateless ``m3`` view on columns: its WHERE and SELECT evaluated by Arrow kernels, its rows counted in C.

A view without aggregates, joins or windows over one stream (``SELECT
auction, price FROM bid WHERE MOD(auction, 123) = 0``; Nexmark q0-q2,
q21, q22) is a *bag of rows*: M3 keys its one map by the selected values
and counts each row (``Q1_count[AUCTION, PRICE] += 1``).  The count is what
the box must keep: its changelog carries it (a row seen twice leaves as
``(row, 1)`` and enters as ``(row, 2)``), the query API reads the view, a
snapshot and a move take the map.  What need not be per row is the rest:
the M3 program computes each selected function (``CASE``,
``REGEXP_EXTRACT``, ``SPLIT_INDEX``, ``LOWER``) once per event in Python
before its C triggers run.

So the box, at plan time, recognises such a view (:meth:`StatelessRows.of`)
and runs it as two steps: the view's WHERE and SELECT on the batch's
columns (:mod:`.m3rows_exprs`, ``pyarrow.compute``), then a second M3
program over those columns, ``SELECT k1, ..., kn FROM rows`` (the *bag
program*), whose one map is the original's -- the same name, keys and key
types, checked when the box is built -- so its C triggers count the rows
exactly as the original's would and the changelog is read from its journals
as before (:mod:`.m3changes`).  The bag program's runtime is the box's
runtime: the query API reads its view (the same rows and counts), and
:meth:`StatelessRows.state` writes its maps under the original program's
text, so a snapshot is the one the row path would take and restores either
way.

A batch the kernels cannot compute exactly (:class:`~.arrow_nodes.Fallback`:
nulls, an overflow, a non-ASCII string under ``LOWER``), or that came as
rows, takes the row path: the original program on an empty Python runtime
(:meth:`StatelessRows.counted`) counts the batch's rows, and those counts go
into the bag program as rows, so the map ends exactly where the original
program would have put it.  A view this module does not translate keeps the
original program for every batch (decided at plan time; docs/m3.md, "The
`m3` box").
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pyarrow as pa
import sqlglot
from sqlglot import expressions as exp

from boreas.m3 import M3Error, Runtime
from boreas.m3.box_ports import PortPlan
from boreas.m3.boxtype import BoxPlan
from boreas.m3.printer import format_program

from . import m3columns
from .arrow_nodes import Fallback, Unsupported
from .m3rows_exprs import Run, translate

log = logging.getLogger(__name__)

_KINDS = {"INT": "INT", "FLOAT": "FLOAT", "STRING": "STRING"}
_UNSAFE = (exp.AggFunc, exp.Window, exp.Subquery, exp.Select, exp.Star, exp.Join)


def _query(sql: str) -> exp.Select:
    """The box's one query (after its ``CREATE STREAM``): a plain SELECT over one table, else Unsupported."""
    statements = [s for s in sql.split(";") if s.strip()]
    if not statements or any(not s.strip().upper().startswith("CREATE STREAM") for s in statements[:-1]):
        raise Unsupported("not one query after its streams")
    try:
        tree = sqlglot.parse_one(statements[-1])
    except sqlglot.errors.ParseError as exc:
        raise Unsupported(str(exc)) from None
    if not isinstance(tree, exp.Select) or not isinstance(tree.args.get("from_") or tree.args.get("from"), exp.From):
        raise Unsupported("not a SELECT ... FROM")
    if any(tree.args.get(k) for k in ("joins", "group", "having", "order", "limit", "distinct", "with", "qualify",
                                      "windows", "offset")):
        raise Unsupported("a join, grouping, ordering or DISTINCT")
    source = (tree.args.get("from_") or tree.args.get("from")).this
    if not isinstance(source, exp.Table) or source.args.get("joins"):
        raise Unsupported("not one table")
    for item in tree.expressions:
        if any(isinstance(n, _UNSAFE) for n in item.walk()):
            raise Unsupported("an aggregate, window, subquery or *")
    where = tree.args.get("where")
    if where is not None and any(isinstance(n, _UNSAFE) for n in where.this.walk()):
        raise Unsupported("a subquery in WHERE")
    return tree


@dataclass
class StatelessRows:
    """How one stateless view runs on columns: its kernels, the bag program's runtime, the row path's."""

    plan: BoxPlan
    where: Run | None
    select: list[Run]
    bag: PortPlan  # the bag program's one relation, as m3columns hands it to M3
    bag_program: object
    _scratch: Runtime | None = None
    _empty: dict | None = None

    @classmethod
    def of(cls, plan: BoxPlan) -> StatelessRows | None:
        """The columnar form of the box's view, or None (logged: why) when it is not one or not translated."""
        try:
            return cls._build(plan)
        except (Unsupported, M3Error) as exc:
            log.debug("m3 view kept on the row path: %s", exc)
        except Exception:  # noqa: BLE001 - a shape not foreseen here: the program's row path, which always runs
            log.exception("m3 view kept on the row path: recognising it as stateless failed")
        return None

    @classmethod
    def _build(cls, plan: BoxPlan) -> StatelessRows:
        if plan.windows or plan.topn is not None or plan.stages is not None or len(plan.ports) != 1 \
                or len(plan.views) != 1 or len(plan.program.maps) != 1:
            raise Unsupported("not one view of one stream with one map")
        port, info = plan.ports[0], plan.views[0]
        decl = plan.program.view(info.name)
        if decl.general or info.internal or info.values != ("count",):
            raise Unsupported("not a view of rows")
        if any(kind not in _KINDS for _, kind in info.keys):
            raise Unsupported("a key of a type not evaluated on columns")
        relation = next(r for r in plan.program.relations if r.name == port.relation)
        if len(relation.columns) != len(port.columns):
            raise Unsupported("a nullable column (its indicator)")
        tree = _query(plan.text)
        batch_index = [i for i in range(len(port.columns) + (port.sign_index is not None)) if i != port.sign_index]
        columns = {name.lower(): (kind, at) for (name, kind), at in zip(port.columns, batch_index)}
        if len(tree.expressions) != len(info.keys):
            raise Unsupported("the SELECT list is not the view's keys")
        select = []
        for item, (name, kind) in zip(tree.expressions, info.keys):
            if item.alias_or_name.lower() != name.lower():
                raise Unsupported(f"SELECT item {item.sql()} is not key {name}")
            got, run = translate(item, columns)
            if got != kind:
                raise Unsupported(f"{item.sql()} is {got} where the view's key {name} is {kind}")
            select.append(run)
        where = None
        if tree.args.get("where") is not None:
            kind, where = translate(tree.args["where"].this, columns)
            if kind != "BOOL":
                raise Unsupported("WHERE is not a condition")
        bag_program = _bag_program(plan, info)
        bag = PortPlan(bag_program.relations[0].name, tuple((n, k) for n, k in info.keys), None)
        return cls(plan, where, select, bag, bag_program)

    # -- a batch ---------------------------------------------------------------------

    def columns(self, batch: pa.RecordBatch, string_ids) -> list:
        """The bag relation's columns of ``batch``'s rows that meet WHERE (none, maybe: the batch is still one,
        the runtime's version counts it as the row path's does); :class:`Fallback` when the kernels cannot
        compute it exactly."""
        if self.where is not None:
            mask = self.where(batch)
            if isinstance(mask, pa.Scalar):
                mask = pa.repeat(mask, batch.num_rows)
            if mask.null_count:
                raise Fallback("a NULL condition")
            if mask.true_count != len(mask):
                batch = batch.filter(mask)
        out = []
        for run in self.select:
            values = run(batch)
            out.append(pa.repeat(values, batch.num_rows) if isinstance(values, pa.Scalar) else values)
        names = [n for n, _ in self.bag.columns]
        return m3columns.relation_columns(pa.RecordBatch.from_arrays(out, names=names), self.bag, string_ids)

    def counted(self, groups: list, as_columns: bool = False) -> list:
        """The row path: ``groups`` (``(relation, sign, rows or columns)``, as the original program takes them)
        (columns where ``as_columns``) run by the original program on an empty Python runtime, its view's counts as the bag relation's
        ``(relation, sign, rows)`` groups (a row as often as its count; an empty one where the batch's rows
        count for nothing, as the program would still have applied the batch)."""
        if self._scratch is None:
            self._scratch = Runtime(self.plan.program, backend="python")
            self._empty = self._scratch.state()
        scratch = self._scratch
        try:
            if as_columns:
                scratch.apply_grouped_columns(groups)
            else:
                scratch.apply_grouped(groups)
            view = scratch.view(self.plan.views[0].name)
        finally:
            scratch.restore(self._empty)
        ins = [key for key, n in view.items() if n > 0 for _ in range(n)]
        dels = [key for key, n in view.items() if n < 0 for _ in range(-n)]
        rel = self.bag.relation
        if not groups:
            return []
        return [(rel, sign, rows) for sign, rows in ((1, ins), (-1, dels)) if rows] or [(rel, 1, [])]

    # -- snapshots ---------------------------------------------------------------------

    def state(self, bag_state: dict) -> dict:
        """The bag runtime's state as the original program's (the same map under the original's text)."""
        return {**bag_state, "program": format_program(self.plan.program)}

    def bag_state(self, state: dict) -> dict:
        """A snapshot of the original program's (or the bag program's) as the bag runtime restores it."""
        if state.get("program") == format_program(self.plan.program):
            return {**state, "program": format_program(self.bag_program)}
        return state


def _bag_program(plan: BoxPlan, info):
    """``SELECT k1, ..., kn FROM rows`` over a stream of the view's keys, compiled; Unsupported unless its map
    and view are the original's (name, keys, key types), so both count the same rows the same way."""
    from boreas.m3.compiler.pipeline import compile_sql

    names = [n for n, _ in info.keys]
    relation = "m3_rows" if "m3_rows" not in {r.name.lower() for r in plan.program.relations} else "m3_rows_bag"
    sql = (f"CREATE STREAM {relation}({', '.join(f'{n} {k}' for n, k in info.keys)});\n"
           f"SELECT {', '.join(names)} FROM {relation}")
    try:
        program = Runtime(compile_sql(sql)).program
    except M3Error as exc:
        raise Unsupported(f"the bag program: {exc}") from None
    (want,), (got,) = plan.program.maps, program.maps
    same_map = (want.name, want.value_type, [k.type for k in want.keys]) == \
        (got.name, got.value_type, [k.type for k in got.keys])
    mine, theirs = program.view(info.name) if program.views else None, plan.program.view(info.name)
    if not same_map or mine is None or (mine.keys, mine.columns) != (theirs.keys, theirs.columns):
        raise Unsupported("the bag program's map is not the view's")
    return program
