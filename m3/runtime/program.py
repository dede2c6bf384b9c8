"""The M3 runtime: a checked program, its maps, and its generated trigger functions.

Events are ``(relation, sign, row)`` with ``sign`` +1 (insert) or -1
(delete) and ``row`` a tuple in the relation's column order (INT → int,
FLOAT → float, STRING → str, DATE → ``datetime.date``).  A *batch* is applied
atomically: every map is either updated for every event or — if anything
raises — left exactly as before; then ``version`` goes up by one and
:meth:`Runtime.changes` lists the view rows the batch changed (found from the
batch's journals: :mod:`.viewchanges`).  Reads (``view()``, the query API)
are :mod:`.reads`.

>>> rt = Runtime('''CREATE STREAM R(a INT, b INT);
...     SELECT a, SUM(b) AS total, COUNT(*) AS n FROM R GROUP BY a''')
>>> rt.apply_batch([("R", 1, (1, 10)), ("R", 1, (1, 5)), ("R", 1, (2, 7))])
1
>>> sorted(rt.view("Q1").items())
[((1,), (15, 2)), ((2,), (7, 1))]
>>> rt.apply_batch([("R", -1, (2, 7))]); rt.changes()
2
{'Q1': [((2,), (0, 0))]}
>>> rt.read_sum("Q1_total"), rt.version
(15, 2)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence

from ..ast import Program
from ..check import check_program
from ..errors import RuntimeStateError
from ..nullable import ViewNulls, declared, expand_columns, expand_row
from ..over import rereads
from ..printer import format_program
from ..syntax import parse_program
from .closed import Keep, closed_entries, closed_store, general_rows, remove_closed, rows_at_keys, view_maps, window_bound
from .closed_folds import fold_rows
from .codegen import build, program_source
from .initial import initial_values, relation_rows
from .maps import MapStore, index_specs
from .nanorder import canonical_rows
from .native import BEYOND_64_BITS, IntOverflow, choose, compaction, mirror
from .ports import ViewInfo, relation_ports, view_ports
from .reads import Reads
from .text import program_from_text
from .memos import Memos
from .totals import index_specs as total_index_specs
from .evaluate import Reader
from .events import check_batches, group_events
from .viewchanges import current_reader, plain_changes, view_changes
from .views import view_form, view_index_specs

log = logging.getLogger(__name__)

STATE_FORMAT = 1


class Runtime(Reads):
    """Maintains every map of an M3 program under batches of insert and delete events."""

    #: Whether a subclass keeps its own bookkeeping in step with the native backend's C maps (a subclass that
    #: builds on the Python backend's journals and store does not, and runs there).
    keeps_native = False

    def __init__(self, program: Program | str, *, float_epsilon: float = 1e-7, backend: str = "auto"):
        if isinstance(program, str):
            program = program_from_text(program)
        self.program = check_program(program)
        self.float_epsilon = float_epsilon
        self._lock = threading.RLock()
        specs = index_specs(program)
        for more in (view_index_specs(program), total_index_specs(program)):  # a view's folds', a TOTAL's slices
            for name, positions in more.items():
                specs.setdefault(name, []).extend(p for p in positions if p not in specs.get(name, []))
        self._store = MapStore(program, specs)
        self._stale = False  # native: the mirror (``store``) lags the C maps until something reads
        self._forms = {v.name: view_form(program, v) for v in program.views if v.general}
        self._rereads = {v.name for v in program.views if v.general and rereads(v)}
        self._memos = Memos(program, set(self._forms) - self._rereads, type(self) is not Runtime, self._forms,
                            frozenset(self._rereads))  # (.memos)
        self._kept = self._memos.kept(set().union(*map(self.view_reads, self._forms)))  # the mirror's, per batch
        self._journals: dict[str, list] = {name: [] for name in self.store.data}  # key, old value, key, ...
        float_maps = {m.name for m in program.maps if m.value_type == "FLOAT"}
        self.source, consts = program_source(program, self.store.specs, float_maps, float_epsilon)
        self._triggers = build(self.source, self.store.data, self.store.indexes, self._journals, consts, float_epsilon)
        self._version = 0
        self._changes: dict[str, list] = {}
        self._arity = {r.name: len(r.columns) for r in program.relations}
        # nullable columns: a row's None split into value and indicator before either backend sees it (docs/m3.md "NULLs")
        self._nullable = {r.name: nl for r in program.relations if (nl := declared(r.columns))}
        self._column_types = {r.name: tuple(c.type for c in r.columns) for r in program.relations}
        self._floats = {n: tuple(i for i, t in enumerate(types) if t == "FLOAT")  # (one NaN key: nanorder)
                        for n, types in self._column_types.items()}
        # views with nullable keys: their reads show None where a key's indicator says NULL (docs/m3.md "NULLs")
        self._nulls = {v.name: nulls for v in program.views
                       if (nulls := ViewNulls.of(v.keys, v.internal, [c.name for c in v.columns]))}
        self._strings: list[str] | None = None  # after leaving C: its intern table (STRING ids in int64 columns)
        member = None if type(self) is Runtime or self.keeps_native else type(self).__name__
        self.backend, self.backend_reason, self._native = choose(program, float_epsilon, backend, member)

    @property
    def store(self) -> MapStore:
        """The maps as Python dicts; with the native backend a mirror of the C maps, brought up to date here."""
        if self._stale:
            self._sync()
        return self._store

    # -- description ---------------------------------------------------
    @property
    def relations(self) -> dict[str, tuple[tuple[str, str], ...]]:
        """Each relation's columns as ``(name, type)`` — the box's in ports (:mod:`.ports`)."""
        return relation_ports(self.program)

    @property
    def views(self) -> dict[str, ViewInfo]:
        """Each view's output columns — the box's out port(s)."""
        return view_ports(self.program, self._forms)

    @property
    def version(self) -> int:
        """The number of completed batches."""
        return self._version

    def text(self) -> str:
        return format_program(self.program)

    # -- events ----------------------------------------------------------
    def apply_batch(self, events: Iterable[tuple[str, object, Sequence]]) -> int:
        """Apply ``(relation, sign, row)`` events atomically; return the new version."""
        return self.apply_grouped(group_events(events))

    def apply_grouped(self, batches: Iterable[tuple[str, int, Sequence[Sequence]]]) -> int:
        """Apply per-relation batches ``(relation, sign, rows)`` as one atomic batch."""
        batches = list(batches)
        check_batches(batches, self._triggers, self._arity)
        if self._nullable:
            batches = [(rel, sign, [expand_row(r, self._nullable[rel]) for r in rows] if rel in self._nullable else rows)
                       for rel, sign, rows in batches]
        native = self._native
        if native is not None:
            batches = compaction.before_batch(self, native, batches, columnar=False)
            try:
                prepared = [native.prepare(rel, sign, mirror.read_columns(rows, self._arity[rel], rel,
                                                                          native.read_positions(rel, sign)), len(rows))
                            for rel, sign, rows in batches if len(rows)]
            except IntOverflow as exc:
                return self._beyond_64_bits(exc, lambda: batches)
            return self._apply_native(native, prepared, lambda: batches)
        return self._apply_python(batches)

    def _apply_python(self, batches: list[tuple[str, int, Sequence[Sequence]]]) -> int:
        with self._lock:
            try:
                for rel, sign, rows in batches:
                    self._triggers[(rel, sign)](canonical_rows(rows, self._floats[rel]))
            except BaseException:
                self._rollback()
                raise
            self._finish()
            return self._version

    def native_maps(self):
        """The native backend's C maps while this runtime runs there (their raw journals and values, for a reader
        that decodes changes in bulk: node/operators/m3changes.py), else None.  Read between batches only."""
        return self._native

    def string_ids(self, strings: Sequence[str]) -> Sequence[int] | None:
        """The ids a STRING column carries for ``strings`` (a list; an Arrow array's found in C: native/crt_strings.py)
        on the native backend (interned now), or None on the Python backend (give it the strings)."""
        native = self._native
        return None if native is None else native.index.ids_of(strings)

    def apply_columns(self, relation: str, sign: int, columns: Sequence[Sequence]) -> int:
        """Apply one relation's events given column by column (one sequence or ``array`` per column); atomic.

        The native backend's fast path: an ``array('q')`` (INT, DATE as day
        numbers) or ``array('d')`` (FLOAT) column crosses into C as it is.
        """
        return self.apply_grouped_columns([(relation, sign, columns)])

    def apply_grouped_columns(self, batches: Iterable[tuple[str, int, Sequence[Sequence]]]) -> int:
        """:meth:`apply_columns` for several relations and signs as one atomic batch."""
        batches = list(batches)
        check_batches(batches, self._triggers, self._arity)
        if self._nullable:
            batches = [(rel, sign, expand_columns(cols, self._nullable[rel]) if rel in self._nullable else cols)
                       for rel, sign, cols in batches]
        native = self._native
        if native is None:
            return self._apply_python(self._rows_of_columns(batches))
        batches = compaction.before_batch(self, native, batches, columnar=True)
        try:
            prepared = [native.prepare(rel, sign, cols, len(cols[0])) for rel, sign, cols in batches if cols and len(cols[0])]
        except IntOverflow as exc:
            return self._beyond_64_bits(exc, lambda: self._rows_of_columns(batches))
        return self._apply_native(native, prepared, lambda: self._rows_of_columns(batches))

    def _rows_of_columns(self, batches: list) -> list[tuple[str, int, list]]:
        return mirror.rows_of_columns(batches, self._column_types, self._strings)

    def _apply_native(self, native, prepared: list, rows) -> int:
        """Run ``prepared`` in C; ``rows()``: the batch as the Python backend takes it, if it must run there."""
        with self._lock:
            if self._native is not native:  # another thread's batch moved this runtime to Python meanwhile
                return self._apply_python(rows())
            try:
                native.run(prepared)
            except IntOverflow as exc:
                return self._beyond_64_bits(exc, rows)
            self._version += 1
            self._changes = None  # computed from the C journal when asked for
            self._stale = True
            return self._version

    def _beyond_64_bits(self, exc: IntOverflow, rows) -> int:
        """An INT value of the batch outgrew int64 (nothing of it stayed in C): move to Python for good, run it there."""
        with self._lock:
            if self._native is not None:
                self._leave_native(f"{BEYOND_64_BITS} ({exc.where})")
            return self._apply_python(rows())

    def _leave_native(self, reason: str, from_c: bool = True) -> None:
        """Continue on the Python backend for good: the store becomes the truth (``from_c``: loaded whole from
        the C maps, as of the last completed batch; else it already is, as after restore or load)."""
        native = self._native
        if from_c:
            if self._changes is None:  # the last batch's changes stay readable
                self._changes = self._native_changes()
            mirror.sync(self._store, native, full=True)
        self._strings = native.ids.strings
        self._native = None
        self._stale = False
        self.backend, self.backend_reason = "python", reason
        log.warning("m3 runtime of view(s) %s: %s", ", ".join(v.name for v in self.program.views), reason)

    def _sync(self) -> None:
        """Bring the mirror up to date with the C maps (:func:`.native.mirror.sync`)."""
        with self._lock:
            mirror.sync(self._store, self._native)
            self._stale = False

    def _push_mirror(self) -> None:
        """After the mirror was loaded (restore, load): make the C maps equal to it (or, when a value does not
        fit 64 bits, continue on the Python backend: the mirror is the whole state)."""
        self._stale = False
        try:
            mirror.push(self._store, self._native)
        except OverflowError:
            self._leave_native(f"{BEYOND_64_BITS} (a loaded or restored map entry)", from_c=False)

    def _native_changes(self) -> dict[str, list]:
        """:meth:`changes` from the C side's journal of the last batch (the same rows as the Python backend's)."""
        names, moved = {m for v in self.program.views for m in v.maps}, {}  # (moved: the journals' values, from C)
        journals = mirror.last_changes(self._store, self._native, names, self._kept, self._memos.counts,
                                       self._version, moved)
        for name in self.drop_foreign(journals):  # (C's values describe the whole journal, not what is left)
            moved.pop(name, None)
        return self._view_changes(journals, self._version,
                                  lambda v: mirror.plain_changes(self._store, self._native, v, journals), moved)

    def drop_foreign(self, journals: dict[str, list]) -> set[str]:
        """Leave out of the last batch's journals, read from C, the keys its view changes must not count (a
        partition member's native runtime drops the keys it does not own: m3/cumulus/native_member.py); the
        names of the journals cut.  Here: none."""
        return set()

    def _rollback(self) -> None:
        for name, journal in self._journals.items():
            for i in range(len(journal) - 2, -1, -2):  # newest first: each key ends at its value before the batch
                self.store.set_stored(name, journal[i], journal[i + 1])
            journal.clear()

    def _finish(self) -> None:
        """After a batch's triggers ran: its view changes (:mod:`.viewchanges`), then the next version."""
        journals = self._journals
        self._changes = self._view_changes(journals, self._version + 1,
                                           lambda v: plain_changes(self._store, v, journals))
        for journal in journals.values():
            journal.clear()
        self._version += 1

    def _view_changes(self, journals: dict[str, list], version: int, plain, moved=None) -> dict[str, list]:
        """The view rows the batch that made ``version`` changed (:func:`.viewchanges.view_changes`)."""
        memos = self._memos
        return view_changes(self.program.views, self._forms, self._rereads, self._nulls, self._store, memos.totals,
                            journals, version, plain, memos.rows, memos.folds, memos.counts, memos.sums, moved)

    def _reader(self) -> Reader:
        """The maps now, with the TOTAL memo (exact at this version, or cleared to be rebuilt as rows are read)."""
        return current_reader(self.store, self._memos.totals.at(self._version))

    def changes(self) -> dict[str, list[tuple[tuple, object]]]:
        """The view rows the last batch changed: ``{view: [(key, value now)]}``; 0/all-zero (NULLs: GONE) = removed;
        after a batch, its ``before`` holds the values before it of the views ``viewchanges.tells_before`` names."""
        if self._changes is None:
            with self._lock:
                if self._changes is None:
                    self._changes = self._native_changes()
        return self._changes

    def entries(self) -> int:
        if self._native is not None:
            return self._native.entries()
        return self.store.entries()

    # -- closed event-time windows (node/operators/m3windows.py) -------------
    def entries_at_most(self, name: str, position: int, bound: float, keep: Keep | None = None) -> dict[tuple, object]:
        """The entries ``{key: value}`` of map ``name`` whose INT key column ``position`` is at most ``bound``: a
        closed window's (on the native backend read from C with one dump, not through the mirror); ``keep``'s."""
        with self._lock:
            return closed_entries(self._store, self._native, name, position, bound, keep)

    def rows_at(self, view: str, closed: Mapping[str, Mapping[tuple, object]]) -> list[tuple[tuple, object]]:
        """A plain view's rows at the entries ``closed`` holds of its maps (the closed windows'; its maps share
        their keys), as :meth:`view` gives them; a map ``closed`` lacks is read at those keys."""
        with self._lock:
            rows = rows_at_keys(self.program.view(view), self._store, self._native, closed)
            nulls = self._nulls.get(view)
            return nulls.rows(rows) if nulls else rows

    def view_reads(self, view: str) -> set[str]:
        """The maps a view's rows and values are read from."""
        form = self._forms.get(view)
        if form is None:
            return view_maps(self.program.view(view))
        return {r.map for r in form.refs} | {o.ref.name for o, _ in ((form.source, ()), *form.more) if o is not None}

    def closed_rows(self, view: str, closed: Mapping[str, Mapping[tuple, object]], windows: Mapping[str, int],
                    bounds: dict[str, tuple[int, float]] | None = None) -> list[tuple[tuple, object]] | None:
        """A view computed when read: its rows over the closed entries ``closed`` holds (``windows``: window key
        positions; ``bounds``: ``Closing.bounds``, a MIN/MAX then folded from C's dump: .closed_folds); None if not."""
        with self._lock:
            if (form := self._forms.get(view)) is None or not window_bound(form, windows):
                return None
            if (rows := fold_rows(form, self._native, bounds)) is None:
                rows = general_rows(form, closed_store(self.program, self._store.specs, closed, self.view_reads(view)))
            return list(self._shown(view, rows).items())

    def remove_at_most(self, bounds: Mapping[str, tuple[int, float]]) -> int:
        """Delete the entries :meth:`entries_at_most` gives for each ``map: (position, bound)``, recording no view
        change (the state of closed windows, which no row changes again); the number deleted.  On the native
        backend by their codes in C; the mirror drops those it holds (one it lags on reads 0 when it catches up)."""
        with self._lock:
            gone = remove_closed(self._store, self._native, bounds)
            if gone:
                self._memos.clear()
            return gone

    # -- initial values and state transfer ----------------------------------
    def load(self, tables: Mapping[str, Iterable[Sequence]], views: Sequence[str] | None = None) -> int:
        """Replace every map by its defining query evaluated over ``tables`` (existing data); one batch.

        ``views``: evaluate only the maps these views read, the others left empty (a runtime loaded to be read
        once through them, as a window join's stage is per window: m3/winstages.py; a trigger's helper maps,
        which no view reads, would cost as much as the view's again)."""
        rows = {name: canonical_rows(relation_rows(r, self._nullable.get(name)), self._floats.get(name, ()))
                for name, r in tables.items()}
        for name in rows:
            if name not in self._arity:
                raise RuntimeStateError(f"unknown relation {name!r}")
        with self._lock:
            wanted = None if views is None else set().union(*map(self.view_reads, views))
            values = initial_values(self.program, rows, wanted, self.float_epsilon)
            self._stale = False
            self._memos.clear()
            self._store.clear()
            for name, entries in values.items():
                self._store.add_many(name, [(self._store.pack(name, k), v) for k, v in entries.items()], replace=True)
            if self._native is not None:
                self._push_mirror()
            self._changes = {}
            self._version += 1
            return self._version

    def state(self) -> dict:
        """Everything needed to continue elsewhere: program text, version, map entries (msgpack-able)."""
        with self._lock:
            return {
                "format": STATE_FORMAT,
                "program": format_program(self.program),
                "version": self._version,
                "maps": self.store.encode(),
            }

    def restore(self, state: Mapping) -> None:
        """Load a :meth:`state` taken from a runtime of the same program."""
        if state.get("format") != STATE_FORMAT:
            raise RuntimeStateError(f"unknown state format {state.get('format')!r}")
        if state.get("program") != format_program(self.program):
            raise RuntimeStateError("state was taken from a different program")
        with self._lock:
            self._stale = False
            self._memos.clear()
            self._store.decode(state["maps"])
            if self._native is not None:
                self._push_mirror()
            self._version = int(state["version"])
            self._changes = {}

    @classmethod
    def from_state(cls, state: Mapping, **kwargs) -> Runtime:
        rt = cls(parse_program(state["program"]), **kwargs)
        rt.restore(state)
        return rt

