"""Bulk-loading a partitioned ``m3`` box from tables with Spark, and checking a view against Spark SQL (docs/cumulus.md §7).

A partitioned box that starts over existing data (years of orders, say)
would otherwise replay every row through its triggers.  :func:`load_view`
computes each map's value once instead, from the relations' tables:

1. the driver reads the box's layout (``GET /boxes/{box}``) and program (the
   box's parameters and in-stream schemas in ``GET /catalog``, compiled as
   the nodes compile them), and checks the program against the maps a member
   runs (``GET /query/{box}/maps``);
2. each member is asked to take an empty part first, so a box that already
   holds data is refused (409) before Spark does anything;
3. every map's defining query becomes Spark SQL
   (:mod:`boreas.m3.cumulus.definitions`) over the tables, registered as
   temporary views named like the relations; the results of all maps form
   one RDD, sorted within partitions by key;
4. one Spark task per partition computes each entry's owner with the layout
   (:meth:`~boreas.m3.cumulus.Layout.owner`, the nodes' own hash) and POSTs
   chunks of at most ``chunk`` entries straight to the owning member
   (``POST /segments/{box}/load?job=J&part=K``, msgpack ``[[map, key,
   value], ...]``, DATE keys as day numbers since 1970-01-01).

Exactly once across Spark task retries: part numbers are fixed per (Spark
partition, chunk) and a partition's entries are sorted by key, so a retried
or speculative task sends the very same parts, and a member ignores a
``(job, part)`` it already took.  The load goes through each member's
dataflow, so it is logged and replayed like input.  Loads go into an empty
box, before its input streams are published to; publishing may start once
:func:`load_view` returned.

Usage::

    from boreas.spark import load_view, verify_view
    counts = load_view("q3", {"customer": "customer.parquet", "orders": orders_df,
                              "lineitem": lineitem_df}, head="http://localhost:14000", token=token)
    # {'Q1_revenue': 1204, 'm1': ..., ...}: entries loaded per map
    check = verify_view("q3", Q3_SQL, tables, head="http://localhost:14000")
    assert check.ok, check
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
import math
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import msgspec
from boreas.catalog import Catalog, read_document, stream_schemas
from boreas.catalog.boxtypes import BoxError
from boreas.catalog.replicate import apply_update
from boreas.client.query import QueryClient
from boreas.m3.ast import Program, RelAtom, walk
from boreas.m3.boxtype import box_types, plan_box
from boreas.m3.cumulus import Layout, LayoutError
from boreas.m3.cumulus.definitions import DefinitionError, definition_sql
from boreas.wire.addressing import endpoint_url
from boreas.wire.client import PeerClient, PeerRefused, PeerUnreachable

from .target import run_sync

if TYPE_CHECKING:
    from pyspark import RDD
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

#: entries per POST to a member
DEFAULT_CHUNK = 20_000
#: part numbers of one Spark partition: 1 + partition * PARTS_PER_TASK + n (part 0 is the empty first part)
PARTS_PER_TASK = 1_000_000
_EPOCH = dt.date(1970, 1, 1).toordinal()
MSGPACK = "application/msgpack"


class LoadError(RuntimeError):
    """The box cannot be loaded: unknown, not partitioned, not an m3 box, or a relation without a table."""


class LoadRefused(LoadError):
    """A member refused a part (``status`` 409: the box already holds data; 422: entries it does not own)."""

    def __init__(self, message: str, member: int, endpoint: str, status: int):
        super().__init__(message)
        self.member, self.endpoint, self.status = member, endpoint, status


# -- the plan (driver) ------------------------------------------------------------------


@dataclass(frozen=True)
class LoadPlan:
    """What a load of ``box`` computes and where it sends it, read from the Head."""

    box: str
    program: Program
    layout: Layout
    sql: dict[str, str]  # map -> Spark SQL answering k0, ..., value

    @property
    def relations(self) -> list[str]:
        """The relations the maps' definitions read (each needs a table), in declaration order."""
        used = {n.name for m in self.program.maps if m.definition is not None
                for n in walk(m.definition) if isinstance(n, RelAtom)}
        return [r.name for r in self.program.relations if r.name in used]


async def _plan(peers: PeerClient, head: str, box: str) -> LoadPlan:
    try:
        where = await peers.call("GET", f"{head}/boxes/{box}")
    except PeerRefused as exc:
        raise LoadError(exc.payload.get("error") or str(exc)) from None
    if where.get("type") != "m3":
        raise LoadError(f"box {box!r} is a {where.get('type')} box; only m3 boxes have maps to load")
    if not where.get("partition"):
        node = where.get("node")
        raise LoadError(f"box {box!r} is not partitioned ({f'it runs on node {node}' if node else 'not deployed'}); "
                        f"load_view loads a partitioned m3 box (<partition box={box!r}> in the deployment)")
    layout = Layout.from_dict(where["partition"])
    doc = read_document(await peers.text(f"{head}/catalog"), f"{head}/catalog")
    catalog = apply_update(Catalog(), doc.items, doc.version or 0)
    registry = box_types()
    decl = catalog.boxes.get(box)
    if decl is None:
        raise LoadError(f"box {box!r} is not in the Head's catalog (version {doc.version})")
    schemas = stream_schemas(catalog, registry)
    try:
        program = plan_box(decl, [schemas[p.stream] for p in decl.inputs]).program
        layout.check_program(program)
        sql = {m.name: definition_sql(program, m, dialect="spark") for m in program.maps}
    except (BoxError, KeyError, LayoutError, DefinitionError) as exc:
        raise LoadError(f"box {box!r}: {exc}") from None
    return LoadPlan(box, program, layout, sql)


async def _check_members(peers: PeerClient, plan: LoadPlan, job: str) -> None:
    """Every member runs the same maps as the plan, and takes an (empty) part: the box is empty."""
    want = {m.name: [[k.name, k.type] for k in m.keys] for m in plan.program.maps}
    for member, endpoint in enumerate(plan.layout.members):
        try:
            described = await peers.call("GET", endpoint_url(endpoint, f"/query/{plan.box}/maps"))
        except PeerRefused as exc:
            raise LoadRefused(f"member {member} ({endpoint}) of box {plan.box!r}: "
                              f"{exc.payload.get('error') or exc}", member, endpoint, exc.status) from None
        except PeerUnreachable as exc:
            raise LoadRefused(f"member {member} ({endpoint}) of box {plan.box!r} is unreachable: {exc.reason}",
                              member, endpoint, 503) from None
        theirs = {name: info["keys"] for name, info in described.get("maps", {}).items()}
        if theirs != want:
            raise LoadError(f"member {member} ({endpoint}) of box {plan.box!r} runs other maps than the Head's "
                            f"catalog describes (did the box change?): {sorted(theirs)} vs {sorted(want)}")
    for member, endpoint in enumerate(plan.layout.members):
        await _post(peers, plan.box, member, endpoint, job, 0, b"\x90", timeout=30.0)  # msgpack []


async def _post(peers: PeerClient, box: str, member: int, endpoint: str, job: str, part: int, body: bytes,
                timeout: float) -> None:
    """One part to one member, retried while it cannot be reached (a part is taken once); LoadRefused if refused."""
    url = endpoint_url(endpoint, f"/segments/{box}/load?{urlencode({'job': job, 'part': part})}")
    deadline, pause = time.monotonic() + timeout, 0.1
    while True:
        try:
            await peers.call("POST", url, data=body, content_type=MSGPACK)
            return
        except PeerRefused as exc:
            if exc.status < 500 or time.monotonic() > deadline:
                message = exc.payload.get("error") or str(exc)
                raise LoadRefused(f"member {member} ({endpoint}) of box {box!r} refused part {part} of load "
                                  f"{job!r}: {message}", member, endpoint, exc.status) from None
        except PeerUnreachable as exc:
            if time.monotonic() > deadline:
                raise LoadRefused(f"member {member} ({endpoint}) of box {box!r} is unreachable: {exc.reason}",
                                  member, endpoint, 503) from None
        await asyncio.sleep(pause)
        pause = min(pause * 2, 2.0)


def plan_load(box: str, head: str, token: str | None = None) -> LoadPlan:
    """The box's program, layout and each map's Spark SQL, as the Head describes the box now."""

    async def ask() -> LoadPlan:
        async with PeerClient(token) as peers:
            return await _plan(peers, head.rstrip("/"), box)

    return run_sync(ask)


# -- the tasks (executors) -----------------------------------------------------------------


@dataclass(frozen=True)
class LoadTarget:
    """What every task needs, as plain values that pickle cheaply."""

    box: str
    layout: dict[str, Any]  # Layout.to_dict()
    maps: tuple[tuple[str, tuple[str, ...], str], ...]  # (name, key column types, value type), by map index
    job: str
    token: str | None
    chunk: int
    timeout: float


@dataclass
class TaskReport:
    """What one task sent; returned to the driver by ``collect``."""

    partition: int
    entries: dict[str, int] = field(default_factory=dict)
    parts: int = 0
    null_keys: int = 0  # entries with a NULL key column (NULLs in the tables): not sent
    refused: tuple[int, str, int, str] | None = None  # (member, endpoint, status, message)


def _key(value: Any, kind: str) -> Any:
    """A key value as the runtime holds it (DATE: ``datetime.date``), or None."""
    if value is None:
        return None
    if kind == "DATE":
        if isinstance(value, dt.datetime):
            return value.date()
        return value if isinstance(value, dt.date) else dt.date.fromisoformat(str(value)[:10])
    if kind == "INT":
        return int(value)
    if kind == "FLOAT":
        return float(value)
    return str(value)


def _wire_key(key: tuple, kinds: tuple[str, ...]) -> list:
    return [v.toordinal() - _EPOCH if kind == "DATE" else v for v, kind in zip(key, kinds)]


def _value(value: Any, kind: str) -> int | float:
    if kind == "INT" and (isinstance(value, int) or (isinstance(value, (Decimal, float)) and float(value).is_integer())):
        return int(value)
    return float(value)


async def _send(target: LoadTarget, index: int, rows: Iterator[tuple[int, tuple]]) -> TaskReport:
    layout = Layout.from_dict(target.layout)
    report = TaskReport(index, {name: 0 for name, _, _ in target.maps})
    buffers: dict[int, list] = {}
    counts: dict[int, dict[str, int]] = {}
    encode = msgspec.msgpack.Encoder()
    async with PeerClient(target.token, timeout=max(target.timeout, 10.0)) as peers:

        async def flush(member: int) -> None:
            entries = buffers.pop(member, [])
            if not entries:
                return
            if report.parts + 1 >= PARTS_PER_TASK:
                raise ValueError(f"Spark partition {index} needs more than {PARTS_PER_TASK} parts; "
                                 f"use more partitions or a larger chunk")
            report.parts += 1
            part = 1 + index * PARTS_PER_TASK + report.parts
            await _post(peers, target.box, member, layout.members[member], target.job, part,
                        encode.encode(entries), target.timeout)
            for name, n in counts.pop(member, {}).items():
                report.entries[name] += n

        try:
            for map_index, row in rows:
                name, kinds, value_type = target.maps[map_index]
                key = tuple(_key(v, kind) for v, kind in zip(row[:-1], kinds))
                value = row[-1]
                if value is None:
                    continue
                if any(v is None for v in key):
                    report.null_keys += 1
                    continue
                member = layout.owner(name, key)
                buffers.setdefault(member, []).append([name, _wire_key(key, kinds), _value(value, value_type)])
                per_map = counts.setdefault(member, {})
                per_map[name] = per_map.get(name, 0) + 1
                if len(buffers[member]) >= target.chunk:
                    await flush(member)
            for member in sorted(buffers):
                await flush(member)
        except LoadRefused as exc:
            report.refused = (exc.member, exc.endpoint, exc.status, str(exc))
    return report


def _task(target: LoadTarget, index: int, rows: Iterator[tuple[int, tuple]]) -> Iterator[TaskReport]:
    """Runs in the executor: one report per partition."""
    yield run_sync(lambda: _send(target, index, rows))


def _tag(map_index: int, row: Any) -> tuple[int, tuple]:
    return map_index, tuple(row)


# -- load_view -------------------------------------------------------------------------------


def load_view(box: str, tables: Mapping[str, DataFrame | str | Path], head: str, token: str | None = None,
              spark: SparkSession | None = None, job: str | None = None, *, chunk: int = DEFAULT_CHUNK,
              partitions: int | None = None, timeout: float = 60.0) -> dict[str, int]:
    """Load the initial values of every map of partitioned ``m3`` box ``box`` from ``tables``; entries per map.

    ``tables`` maps each relation the box reads (names as in its SQL, case
    ignored) to a DataFrame or the path of a parquet or CSV file (or folder);
    extra tables are ignored.  The box must be empty: loads come before
    publishing.  ``job`` names the load (default: random); running the same
    job again after a failure sends nothing twice.  Each Spark task sends
    its entries in parts of at most ``chunk`` entries per member;
    ``partitions`` coalesces the maps' results into that many tasks (fewer
    connections to the members, fewer parts).  Raises :class:`LoadError`
    when the box is unknown, not partitioned or a relation has no table, and
    :class:`LoadRefused` when a member refuses (409: it already holds data).
    """
    from .session import local_session
    from .verify import _read

    if chunk < 1 or (partitions is not None and partitions < 1):
        raise ValueError("chunk and partitions must be at least 1")
    head = head.rstrip("/")
    job = job or uuid.uuid4().hex[:16]
    plan = plan_load(box, head, token)
    given = {name.lower(): name for name in tables}
    missing = [r for r in plan.relations if r.lower() not in given]
    if missing:
        raise LoadError(f"box {box!r} reads relation(s) {', '.join(missing)} but no table was given for them "
                        f"(tables: {', '.join(tables) or 'none'})")

    async def check() -> None:
        async with PeerClient(token) as peers:
            await _check_members(peers, plan, job)

    run_sync(check)
    spark = spark or local_session()
    for relation in plan.relations:
        table = tables[given[relation.lower()]]
        frame = _read(spark, Path(table)) if isinstance(table, (str, Path)) else table
        frame.createOrReplaceTempView(relation)
    maps = list(plan.program.maps)  # every one has a definition (plan_load wrote each as SQL)
    target = LoadTarget(box, plan.layout.to_dict(),
                        tuple((m.name, tuple(k.type for k in m.keys), m.value_type) for m in maps),
                        job, token, chunk, timeout)
    rdds: list[RDD] = []
    for i, m in enumerate(maps):
        df = spark.sql(plan.sql[m.name])
        if m.keys:  # a fixed order within each partition: a retried task cuts the same chunks
            df = df.sortWithinPartitions(*[f"k{j}" for j in range(len(m.keys))])
        rdds.append(df.rdd.map(functools.partial(_tag, i)))
    started = time.monotonic()
    entries = spark.sparkContext.union(rdds)
    if partitions is not None:
        entries = entries.coalesce(partitions)  # whole partitions, in order: still the same parts on a retry
    reports: list[TaskReport] = entries.mapPartitionsWithIndex(functools.partial(_task, target)).collect()
    counts = {m.name: 0 for m in maps}
    for report in reports:
        for name, n in report.entries.items():
            counts[name] += n
    refused = [r.refused for r in reports if r.refused]
    if refused:
        member, endpoint, status, message = refused[0]
        raise LoadRefused(f"{message} ({len(refused)} Spark task(s) refused; {sum(counts.values())} entries "
                          f"were loaded by the others)", member, endpoint, status)
    nulls = sum(r.null_keys for r in reports)
    if nulls:
        log.warning("load %s of box %s: %d entries with NULL key columns were not loaded", job, box, nulls)
    log.info("loaded %d entries into box %s (job %s, %d parts) in %.1f s", sum(counts.values()), box, job,
             sum(r.parts for r in reports), time.monotonic() - started)
    return counts


# -- verify_view -----------------------------------------------------------------------------


@dataclass
class ViewCheck:
    """A view read from Boreas compared with what it should hold; ``ok`` when they agree."""

    box: str
    map: str
    rows: int
    expected: int
    missing: list[tuple[tuple, Any]] = field(default_factory=list)  # expected, not in the view
    extra: list[tuple[tuple, Any]] = field(default_factory=list)  # in the view, not expected
    different: list[tuple[tuple, Any, Any]] = field(default_factory=list)  # (key, view's value, expected)
    epoch: int | None = None  # the stable epoch read (stable reads of a partitioned box)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.extra or self.different)

    def __str__(self) -> str:
        head = f"box {self.box!r} view {self.map!r}: {self.rows} rows read, {self.expected} expected"
        if self.ok:
            return head + ", all equal"
        return (f"{head}; {len(self.missing)} missing (e.g. {self.missing[:3]}), {len(self.extra)} extra "
                f"(e.g. {self.extra[:3]}), {len(self.different)} different (e.g. {self.different[:3]})")


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dt.datetime):
        return value.date()
    return value


def _expected_rows(rows: list[Mapping[str, Any]] | list[tuple], width: int) -> dict[tuple, Any]:
    out: dict[tuple, Any] = {}
    for row in rows:
        values = [_plain(v) for v in (row.values() if isinstance(row, Mapping) else row)]
        key, rest = tuple(values[:width]), values[width:]
        value = rest[0] if len(rest) == 1 else tuple(rest)
        if all(v is None or v == 0 for v in rest):
            continue  # the view keeps no group whose values are all zero
        out[key] = value
    return out


def _same(a: Any, b: Any, rel_tol: float) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y, rel_tol) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=rel_tol, abs_tol=rel_tol)
    return a == b


def compare_view(box: str, map_name: str, got: Mapping[tuple, Any], expected: Mapping[tuple, Any],
                 rel_tol: float = 1e-9, epoch: int | None = None) -> ViewCheck:
    """Compare a view's rows with the expected rows (floats within ``rel_tol``).

    >>> compare_view("v", "V", {(1,): 2.0, (2,): 5}, {(1,): 2.0000000001, (3,): 1}).ok
    False
    >>> c = compare_view("v", "V", {(1,): 2.0, (2,): 5}, {(1,): 2.0000000001, (3,): 1})
    >>> c.missing, c.extra, c.different
    ([((3,), 1)], [((2,), 5)], [])
    """
    check = ViewCheck(box, map_name, len(got), len(expected), epoch=epoch)
    for key, want in expected.items():
        if key not in got:
            check.missing.append((key, want))
        elif not _same(got[key], want, rel_tol):
            check.different.append((key, got[key], want))
    check.extra = [(key, value) for key, value in got.items() if key not in expected]
    return check


def verify_view(box: str, expected: str | Mapping[tuple, Any], tables: Mapping[str, DataFrame | str | Path] | None = None,
                head: str = "", token: str | None = None, spark: SparkSession | None = None, *,
                map: str | None = None, stable: bool = True, wait: float = 0.0, rel_tol: float = 1e-9) -> ViewCheck:
    """Read a view of ``box`` (partitioned or not) and compare it with ``expected``.

    ``expected`` is SQL run by Spark over ``tables`` (:func:`boreas.spark.verify`:
    an ``m3`` box's ``sql`` parameter works as it is; the first columns are
    the view's key columns, in order, then its value columns), or the
    expected rows ``{key tuple: value}``.  The read goes through
    :class:`~boreas.client.query.QueryClient`, which merges a partitioned
    box's members; ``stable`` makes it READ_STABLE (one consistent cut).
    ``wait`` seconds: read again until the view agrees or the time is up
    (a view still taking input).  Returns a :class:`ViewCheck` (``ok``).
    """
    if not head:
        raise ValueError("verify_view needs the Head's URL: head=")
    if isinstance(expected, str):
        from .verify import verify

        rows: Any = verify(expected, dict(tables or {}), spark)
    else:
        rows = None

    async def read() -> ViewCheck:
        async with QueryClient(head, token) as client:
            deadline = time.monotonic() + wait
            while True:
                result = await client.query(box, map, stable=stable)
                kinds = [kind for _, kind in result.keys]
                want = (_expected_rows(rows, len(kinds)) if rows is not None
                        else {tuple(k): v for k, v in expected.items()})  # type: ignore[union-attr]
                want = {tuple(_key(v, kind) if kind == "DATE" else v for v, kind in zip(k, kinds)): v
                        for k, v in want.items()}
                check = compare_view(box, result.map, result.as_dict(), want, rel_tol, result.epoch)
                if check.ok or time.monotonic() >= deadline:
                    return check
                await asyncio.sleep(0.3)

    return run_sync(read)
