"""The driver's side of :func:`~boreas.spark.load_view` before Spark runs: what to load, and whether the box may be.

The driver reads the box's layout (``GET /boxes/{box}``) and program (the
box's parameters and in-stream schemas in ``GET /catalog``, compiled as the
nodes compile them), writes every map's defining query as Spark SQL
(:mod:`boreas.m3.cumulus.definitions`), and checks the program against the
maps a member runs (``GET /query/{box}/maps``).  Each member is then asked
to take an empty part first, so a box that already holds data is refused
(409) before Spark does anything.
"""

from __future__ import annotations

from dataclasses import dataclass

from boreas.catalog import Catalog, read_document, stream_schemas
from boreas.catalog.boxtypes import BoxError
from boreas.catalog.model import Box, Schema
from boreas.catalog.replicate import apply_update
from boreas.m3.ast import Program, RelAtom, walk
from boreas.m3.boxtype import box_types, plan_box
from boreas.m3.compiler.sessionfn import Session
from boreas.m3.cumulus import Layout, LayoutError
from boreas.m3.cumulus.definitions import DefinitionError, definition_sql
from boreas.wire.addressing import endpoint_url
from boreas.wire.client import PeerClient, PeerRefused, PeerUnreachable

from .load_tasks import LoadError, LoadRefused, post_part
from .target import run_sync


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


def load_program(decl: Box, inputs: list[Schema]) -> Program:
    """The program a load of box ``decl`` fills; a box reading a stream through ``SESSION`` is refused: its members
    run held maps beside the view's (m3/sessionheld.py), the rows of open sessions, which no map's definition over
    the loaded tables gives (a load would fill the view's maps as if every session were closed)."""
    planned = plan_box(decl, inputs)
    if any(isinstance(w, Session) for w in planned.windows):
        raise LoadError(f"box {decl.name!r} reads its stream through SESSION: load_view cannot load a SESSION view "
                        "(its members hold the rows of open sessions in maps of their own); stream its rows instead")
    return planned.program


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
        program = load_program(decl, [schemas[p.stream] for p in decl.inputs])
        layout.check_program(program)
        sql = {m.name: definition_sql(program, m, dialect="spark") for m in program.maps}
    except (BoxError, KeyError, LayoutError, DefinitionError) as exc:
        raise LoadError(f"box {box!r}: {exc}") from None
    return LoadPlan(box, program, layout, sql)


async def check_members(peers: PeerClient, plan: LoadPlan, job: str) -> None:
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
        await post_part(peers, plan.box, member, endpoint, job, 0, b"\x90", timeout=30.0)  # msgpack []


def plan_load(box: str, head: str, token: str | None = None) -> LoadPlan:
    """The box's program, layout and each map's Spark SQL, as the Head describes the box now."""

    async def ask() -> LoadPlan:
        async with PeerClient(token) as peers:
            return await _plan(peers, head.rstrip("/"), box)

    return run_sync(ask)
