"""The ``m3`` box: an M3 runtime whose maps are maintained by the batches arriving on its in ports.

Each in-port batch becomes one atomic M3 batch (one ``apply_grouped`` call:
inserts, and deletes), after which the box emits the view rows the batch
changed on the view's out port as a changelog (docs/dataplane.md): key
columns, then the value(s), with a weight per row -- the row as it was with
-1 (when it was in the view), the row as it is with +1 (when it still is).
A row leaves the view when every value becomes 0.  An in batch with weights
(a changelog: another ``m3`` box's view, say) inserts its +1 rows and
deletes its -1 rows (a weight of n, n times); a ``sign-field`` does the same
for rows that carry their sign in a field, and multiplies a weight.  Rows are
converted at the border only where the types differ (DATE columns are
timestamps on the wire, ``datetime.date`` inside M3), with generated
list comprehensions, so a batch without dates is handed to M3 as it came.

The ``backend`` parameter (``auto``, the default, ``native`` or ``python``)
picks the M3 backend; :attr:`M3Operator.backend` says which one runs (auto
falls back to Python where there is no C compiler, and logs why once).

The maps are the box's state: :meth:`M3Operator.state` is
``Runtime.state()`` (plain data), so a moving ``m3`` box takes its maps with
it and continues exactly.  The query API (:mod:`boreas.node.query`) reads the
same runtime between batches.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

from boreas.catalog.boxtypes import BoxError
from boreas.catalog.model import Box, FieldType, Schema
from boreas.m3 import M3Error, Runtime
from boreas.m3.boxtype import BoxPlan, plan_box
from boreas.m3.runtime.viewchanges import tells_before

from boreas.wire.columns import Columns

from boreas.wire.columns import weighted

from . import m3changes, m3columns
from .arrow_nodes import Fallback
from .base import Emitted, Operator, OperatorError
from .m3memo import ViewMemo, marked_views, present, told_changelog
from .m3rows import StatelessRows

log = logging.getLogger(__name__)

#: Field types whose values a view evaluated again need not reproduce bit for bit (:attr:`M3Operator._told`).
FLOATS = (FieldType.SINGLE, FieldType.DOUBLE)

_EPOCH = dt.date(1970, 1, 1).toordinal()
_DAY_US = 86_400_000_000


#: timestamp -> date, shared by every m3 box of the process: a stream's DATE columns repeat few values (days),
#: and a lookup is several times cheaper than the arithmetic and ``fromordinal`` per row; emptied when full.
_DATES: dict[int, dt.date] = {}
_DATES_MAX = 1 << 16


def date_of(micros: int) -> dt.date:
    """A timestamp (microseconds since the epoch, UTC) as the date it falls on.

    >>> date_of(micros_of(dt.date(1995, 3, 15))), date_of(micros_of(dt.date(1995, 3, 15)) + 3_600_000_000)
    (datetime.date(1995, 3, 15), datetime.date(1995, 3, 15))
    """
    day = _DATES.get(micros)
    if day is None:
        if len(_DATES) >= _DATES_MAX:
            _DATES.clear()
        day = _DATES[micros] = dt.date.fromordinal(_EPOCH + micros // _DAY_US)
    return day


def micros_of(day: dt.date) -> int:
    """A date as the timestamp of its midnight UTC."""
    return (day.toordinal() - _EPOCH) * _DAY_US


class M3Operator(Operator):
    """One ``m3`` box: a :class:`~boreas.m3.Runtime` fed by the box's in ports."""

    def __init__(self, box: Box, inputs: list[Schema], outputs: list[Schema], runtime: bool = True):
        """``runtime`` False: the subclass builds ``self.runtime`` itself (a partition member's, with
        :func:`runtime_for`), so the program is not turned into code, or C, twice."""
        super().__init__(box, inputs, outputs)
        try:
            self.plan: BoxPlan = self.plan_of(box, self.inputs)
        except BoxError as exc:
            raise OperatorError(str(exc)) from None
        for port, (want, got) in enumerate(zip(self.plan.emitted, self.outputs)):
            if not want.same_shape(got):
                raise self.error(f"out port {port} would carry {want.describe()} but its schema is {got.describe()}")
            for w, g in zip(want.fields, got.fields):  # the emitter writes None there (docs/m3.md "NULLs")
                if w.nullable and not g.nullable:
                    raise self.error(f"out port {port}: field {g.name!r} may be NULL (a nullable key's NULL group, "
                                     "or a SUM, AVG, MIN or MAX of a group without a non-NULL value) but its schema "
                                     f"{got.name!r} declares it not nullable; declare it nullable=\"true\"")
        # A stateless view on columns (node/operators/m3rows.py): decided here, once; its bag program's runtime is
        # the box's runtime (the same map as the view's program would keep)
        self.rows = StatelessRows.of(self.plan) if runtime and self.stateless_columns else None
        if runtime:
            self.runtime = runtime_for(box, self.plan.program if self.rows is None else self.rows.bag_program,
                                       self.error)
        self.ignored = 0  # rows whose sign field was neither +1 nor -1
        self.failed_batches = 0
        self._split = [_splitter(p.columns, p.sign_index) for p in self.plan.ports]
        # per in port, the STRING columns no trigger reads: not interned (node/operators/m3columns.py)
        self._unread = [m3columns.unread_strings(self.plan.program, p) for p in self.plan.ports]
        self._emit = [_emitter(tuple(view.keys[i] for i in view.output_keys), schema, view.output_keys)
                      for view, schema in zip(self.plan.views, self.plan.outputs)]
        self._port_of_view = {view.name: port for port, view in enumerate(self.plan.views)}
        # Views whose changes are read from the native journals as columns (node/operators/m3changes.py): all of
        # the box's views must be plain for that, so one batch's changes are all read one way.
        decls = [self.plan.program.view(view.name) for view in self.plan.views]
        # (an ALWAYS view's one row stays at all zeros, which the journals' columns would read as a row that left)
        self._plain_views = [None if d.general or d.always else d for d in decls]
        self.columns_out = bool(decls) and all(not d.general and not d.always for d in decls)
        self._strings = m3changes.StringTable()  # the intern table as Arrow, for STRING keys of the changes
        # The views as last emitted, for the -old of a changelog where the journals are not read as columns
        self.marked = marked_views(decls)  # (views whose changes say GONE where a row left: with NULL values)
        self._memo = ViewMemo(lambda view: self.runtime.view(view), self.marked,
                              always=frozenset(d.name for d in decls if d.always))
        # (the views whose changes tell their rows' values before the batch: no second memo of their rows; not
        # where a value is a float: evaluated again after a restore, a float fold or a MAX over NaN may differ in
        # its last bits or its NaN from what the box sent, and a retraction must name the row sent)
        self._told = frozenset(d.name for d, schema in zip(decls, self.plan.outputs)
                               if tells_before(d) and not any(f.type in FLOATS for f in schema.fields))

    def plan_of(self, box: Box, inputs: list[Schema]) -> BoxPlan:
        """The box's plan (a partitioned SESSION member's adds its held rows' map: node/cumulus/sessions.py)."""
        return plan_box(box, inputs)

    # -- the data plane ------------------------------------------------------------

    takes_columns = True  # an Arrow batch goes to the runtime as columns (node/operators/m3columns.py)
    #: False: a batch only changes the maps, no view change is read or emitted (a windowed view emits a window's
    #: rows when it closes instead: :mod:`.m3windows`)
    emits_changes = True
    #: False: a stateless view keeps its program's row path (tests compare the two; docs/m3.md, "The `m3` box")
    stateless_columns = True

    def process(self, port: int, rows: list[tuple] | Columns, now: float) -> Emitted:
        relation = self.plan.ports[port].relation
        apply = self.runtime.apply_grouped
        count = len(rows)
        retracted: list[tuple] = []
        if self.rows is not None:
            groups, ignored, as_columns = self._rows_groups(port, rows)
            apply = self.runtime.apply_grouped_columns if as_columns else self.runtime.apply_grouped
        elif isinstance(rows, Columns):
            try:
                parts, ignored = m3columns.split(rows, self.plan.ports[port], self.runtime.string_ids,
                                                 self._unread[port])
                groups = [(relation, sign, columns) for sign, columns in parts]
                apply = self.runtime.apply_grouped_columns
            except ValueError:  # (nulls) the row path says what is wrong with them
                rows, retracted = m3columns.by_sign(rows)
        if self.rows is None and not isinstance(rows, Columns):
            groups, ignored = self._row_groups(port, relation, rows, retracted)
        if ignored:
            self.ignored += ignored
            log.warning("m3 box %r: %d rows on in port %d have a sign other than +1/-1; ignored",
                        self.box.name, ignored, port)
        if not groups:
            return []
        native = self.runtime.native_maps()
        columns_out = native is not None and self.columns_out
        if not columns_out and self.emits_changes:
            self._memo.load([view.name for view in self.plan.views if view.name not in self._told])
        try:
            apply(groups)
        except (M3Error, ArithmeticError, TypeError, ValueError) as exc:  # rolled back by the runtime
            self.failed_batches += 1
            log.error("m3 box %r: a batch of %d rows on in port %d was not applied: %s",
                      self.box.name, count, port, exc)
            return []
        if not self.emits_changes:
            return []
        if columns_out:  # the changes read in bulk, emitted as Arrow
            return [(port, changed) for port, view in enumerate(self._plain_views)
                    if view is not None and (changed := m3changes.view_changes(
                        native, view, self.plan.views[port].keys, self.plan.outputs[port], self._strings)) is not None]
        emitted: Emitted = []
        changes = self.runtime.changes()
        for view in self._memo.unsent():  # (an ALWAYS view's rows not sent yet: sent now, changed or not; every
            changes[view] = list(self.runtime.view(view).items())  # row of one ALWAYS AT fixed keys, not the changed)
        for view, changed in changes.items():
            out = self._port_of_view.get(view)
            if out is not None and changed:
                pairs, weights = told_changelog(changed, changes.before[view]) if view in self._told \
                    else self._memo.revise(view, changed)
                if pairs:
                    emitted.append((out, self._changelog(out, self._emit[out](pairs), weights)))
        return emitted

    def _changelog(self, out: int, rows: list[tuple], weights: list[int]):
        """A view's changed rows with their weights as the changelog emitted on out port ``out`` (a value its
        field cannot hold, a map's int past 64 bits, null: ``wire.columns.weighted``)."""
        return weighted(rows, weights, self.plan.outputs[out])

    def _rows_groups(self, port: int, rows: list[tuple] | Columns) -> tuple[list, int, bool]:
        """A stateless view's ``([(bag relation, sign, columns or rows)], ignored, as columns)``: each signed part
        of a batch through the view's kernels; a batch they cannot compute exactly (or of rows) counted by the
        row path (:meth:`.m3rows.StatelessRows.counted`)."""
        relation, rows_ = self.rows.bag.relation, self.rows
        as_columns = False
        if isinstance(rows, Columns):
            try:
                parts, ignored = m3columns.signed_parts(rows, self.plan.ports[port])
                groups = [(relation, sign, rows_.columns(batch, self.runtime.string_ids)) for sign, batch in parts]
                return groups, ignored, True
            except (Fallback, ValueError) as exc:
                log.debug("m3 box %r: a batch on the row path: %s", self.box.name, exc)
            try:
                parts, ignored = m3columns.split(rows, self.plan.ports[port], lambda strings: None)
                groups = [(self.plan.ports[port].relation, sign, columns) for sign, columns in parts]
                as_columns = True
            except ValueError:  # (nulls) the row path says what is wrong with them
                plain, retracted = m3columns.by_sign(rows)
                groups, ignored = self._row_groups(port, self.plan.ports[port].relation, plain, retracted)
        else:
            groups, ignored = self._row_groups(port, self.plan.ports[port].relation, rows)
        try:
            return rows_.counted(groups, as_columns), ignored, False
        except (M3Error, ArithmeticError, TypeError, ValueError, AttributeError) as exc:  # as the program's own
            # batch would fail (the scratch runtime is Python's: a NULL string meets str methods there)
            self.failed_batches += 1
            log.error("m3 box %r: a batch of %d rows on in port %d was not applied: %s",
                      self.box.name, len(rows), port, exc)
            return [], ignored, False

    def _row_groups(self, port: int, relation: str, rows: list, retracted: list = ()) -> tuple[list, int]:
        """``([(relation, sign, rows)], ignored)`` of rows that enter and rows that leave (a changelog's -1
        rows, :func:`.m3columns.by_sign`); a sign field's -1 on a row that leaves makes it enter (they multiply)."""
        inserts, deletes, ignored = self._split[port](rows)
        if retracted:
            more, fewer, also = self._split[port](list(retracted))
            inserts, deletes, ignored = inserts + fewer, deletes + more, ignored + also
        groups = [(relation, 1, inserts)] if inserts else []
        if deletes:
            groups.append((relation, -1, deletes))
        return groups, ignored

    # -- moving ----------------------------------------------------------------------

    def state_entries(self) -> int:
        """Entries of every map (a partition member: its own)."""
        return self.runtime.entries()

    @property
    def backend(self) -> str:
        """Which M3 backend maintains the maps here: "native" (compiled C) or "python"."""
        return self.runtime.backend

    @property
    def backend_reason(self) -> str | None:
        """Why this node runs the Python backend although ``backend`` was ``auto`` (None otherwise)."""
        return self.runtime.backend_reason

    def state(self) -> dict:
        runtime = self.runtime.state() if self.rows is None else self.rows.state(self.runtime.state())
        return {"runtime": runtime, "ignored": self.ignored, "failed": self.failed_batches,
                "emitted": self._memo.state()}

    def restore(self, state: dict, now: float | None = None) -> None:
        try:
            self.runtime.restore(state["runtime"] if self.rows is None else self.rows.bag_state(state["runtime"]))
        except (M3Error, KeyError, ValueError) as exc:
            raise self.error(f"cannot restore its maps: {exc}") from None
        self.ignored = int(state.get("ignored", 0))
        self.failed_batches = int(state.get("failed", 0))
        # which ALWAYS views' row a subscriber has; a state from before sqlO's fix has no "emitted": the box then
        # emitted a keyless row only while the view read one not all zero, so the row counts as emitted where the
        # view's own row reads so now (not where any map of the box holds entries) (docs/m3.md, "Rows")
        emitted = state["emitted"] if "emitted" in state else \
            [view for view in self._memo.always if any(present(v) for v in self.runtime.view(view).values())]
        self._memo.restore(emitted)

    # -- the query API ---------------------------------------------------------------

    def view_of_stream(self, stream: str) -> str | None:
        """The view an out stream carries (the query API names a box's views by its out streams)."""
        for port, name in enumerate(self.box.outputs):
            if name == stream:
                return self.plan.views[port].name
        return None


BACKENDS = ("auto", "native", "python")


def runtime_for(box: Box, program, error, build: Callable[..., Runtime] = Runtime) -> Runtime:
    """The box's runtime (``build(program, backend=...)``) on the backend its ``backend`` parameter asks for
    (default auto); a fallback is logged, and ``native`` where it cannot run is the box's error.

    The choice is per node: a box moved to a node without a C compiler runs
    the Python backend there (the state format is the same) and says so.
    """
    wanted = (box.param("backend") or "auto").strip().lower()
    if wanted not in BACKENDS:
        raise error(f"parameter 'backend'={wanted!r} must be one of {', '.join(BACKENDS)}")
    try:
        runtime = build(program, backend=wanted)
    except M3Error as exc:
        raise error(str(exc)) from None
    if runtime.backend_reason:  # a partition member always runs Python: said, not warned (build is its own)
        log.log(logging.WARNING if build is Runtime else logging.INFO, "m3 box %r runs the Python backend: %s",
                box.name, runtime.backend_reason)
    else:
        log.info("m3 box %r runs the %s backend", box.name, runtime.backend)
    return runtime


def _splitter(columns: tuple[tuple[str, str], ...], sign_index: int | None):
    """``rows -> (inserts, deletes, ignored)``, rows converted to the relation's column order and types."""
    arity = len(columns) + (sign_index is not None)
    picks = [i for i in range(arity) if i != sign_index]
    # a DATE column: the memo's lookup inline (a date is never false), a call only for a new timestamp
    parts = [f"(_known(r[{i}]) or _date(r[{i}]))" if kind == "DATE" else f"r[{i}]" for i, (_, kind) in zip(picks, columns)]
    row = "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
    as_is = sign_index is None and all(kind != "DATE" for _, kind in columns)
    if as_is:
        return lambda rows: (rows, [], 0)
    if sign_index is None:
        source = f"def split(rows):\n    return [{row} for r in rows], [], 0\n"
    else:
        s = sign_index
        source = (f"def split(rows):\n"
                  f"    ins = [{row} for r in rows if r[{s}] == 1]\n"
                  f"    dels = [{row} for r in rows if r[{s}] == -1]\n"
                  f"    return ins, dels, len(rows) - len(ins) - len(dels)\n")
    # (a nullable DATE field's None stays None, the runtime's NULL: the memo never holds None, so it is looked up)
    scope: dict = {"_date": lambda micros: None if micros is None else date_of(micros), "_known": _DATES.get}
    exec(compile(source, "<m3 box in port>", "exec"), scope)  # noqa: S102 - indexes only, no user text
    return scope["split"]


def _emitter(keys: tuple[tuple[str, str], ...], schema: Schema, positions: tuple[int, ...]):
    """``[(key, value)] -> out rows``: the output ``keys`` (at ``positions`` of the view's key: an internal key
    is no out field), dates as timestamps, values cast to the out fields' types."""
    width = len(keys)
    casts = ["float" if f.type == FieldType.DOUBLE else "_text" if f.type == FieldType.STRING else "int"
             for f in schema.fields[width:]]  # a STRING value (MIN/MAX of strings): '' once its row left
    key_parts = [f"_micros(k[{i}])" if kind == "DATE" else f"k[{i}]" for i, (_, kind) in zip(positions, keys)]
    key_parts = [f"(None if k[{i}] is None else {part})" if f.nullable and part != f"k[{i}]" else part
                 for i, part, f in zip(positions, key_parts, schema.fields)]  # a NULL key (docs/m3.md "NULLs")
    values = ["v"] if len(casts) == 1 else [f"v[{i}]" for i in range(len(casts))]
    converted = [f"({v} if isinstance({v}, str) else '')" if cast == "_text" else f"{cast}({v})"
                 for v, cast in zip(values, casts)]  # (a STRING's test inline: no call per row's value)
    value_parts = [f"(None if {v} is None else {c})" if f.nullable else c
                   for v, c, f in zip(values, converted, schema.fields[width:])]  # NULL: no value read
    source = f"def emit(changed):\n    return [({', '.join(key_parts + value_parts)},) for k, v in changed]\n"
    scope: dict = {"_micros": micros_of}
    exec(compile(source, "<m3 box out port>", "exec"), scope)  # noqa: S102 - indexes only, no user text
    return scope["emit"]
