"""A partition member's runtime on the native backend: the C maps are the truth, kept to what the member owns.

:class:`~.member.MemberRuntime` builds on the Python backend's journals: it
drops what a batch wrote outside the member's slots and records the batch's
changes for stable reads (:class:`~.stable.EpochDeltas`) from them, a key at
a time.  :class:`NativeMemberRuntime` runs the same generated triggers in C
(``m3/runtime/native``) and does that bookkeeping a map at a time over the
C journal's *changes* (``rt_changes``: each key the batch changed once, with
its value before and after, as int64 codes), with numpy:

* **ownership**: the slot of each changed key's partition column is hashed
  as a column (:mod:`.slot_arrays`; a STRING once per distinct value); keys
  whose slot another member owns are set to 0 in C (only after a *mixed*
  trigger's batch, or one with pushed entries installed: otherwise every key
  written is owned);
* **stable reads**: the owned keys' changes are kept as the codes and a
  value array per map and batch (:meth:`EpochDeltas.coded
  <.stable.EpochDeltas.coded>`), turned into keys only when a stable read or a
  snapshot asks;
* **pushed entries** (what other members serve for the version) are set in
  C before the triggers run and taken out after, as the Python runtime does
  in its store.

A version's rows come as rows, or, for a trigger that serves no other
member, as the relation's columns (:class:`ColumnRows`, made from the Work's
Arrow batch without a row: ``node/operators/m3columns.py``), handed to C as
they are.  Everything else (``read``, ``owns``, ``segment_entries``,
``state``) reads the Python mirror of the C maps, brought up to date when
read; moving segments in and out (``take_out``, ``put_in``, ``install``)
changes the mirror and writes the same entries through to C.  A batch with
an INT beyond 64 bits moves the runtime to the Python backend for good, as
for any runtime, where :class:`~.member.MemberRuntime` carries on.

>>> from boreas.m3.compiler.pipeline import compile_sql
>>> from array import array
>>> from .layout import even_layout
>>> from .hashing import slot
>>> p = compile_sql("CREATE STREAM R(a INT, b INT); SELECT a, SUM(b) AS total FROM R GROUP BY a")
>>> lay = even_layout("g", ["n1", "n2"], 4, maps=[("Q1_total", 0)])
>>> rt = NativeMemberRuntime(p, lay, lay.owner_of_slot(slot(7)))
>>> rt.backend
'native'
>>> rt.apply_grouped([("R", 1, ColumnRows([array("q", [7, 7]), array("q", [10, 5])]))]) and rt.view("Q1")
{(7,): 15}
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np

from ..errors import RuntimeStateError
from ..runtime.native import BEYOND_64_BITS, IntOverflow, mirror
from ..runtime.native.install import Coded, EntryColumns, Pushed, import_columns
from .hashing import slot
from .layout import EVERYWHERE, Layout
from .member import MemberRuntime
from .plan import Plan
from .slot_arrays import float_slots, int_slots


def _plain(pushed: dict | Pushed) -> dict:
    """Pushed entries as the Python backend takes them (``{(map, key tuple): value}``)."""
    return pushed.as_dict() if isinstance(pushed, Pushed) else pushed


def _stored(native, store, name: str, keys: np.ndarray) -> list:
    """Key codes of map ``name`` (one row per key) as ``store``'s stored keys."""
    tuples = native.decode_keys(name, array("q", keys.tobytes()), len(keys))
    return [store.pack(name, k) for k in tuples]


@dataclass(frozen=True)
class ColumnRows:
    """One relation's rows of a version as columns (``array('q')``/``array('d')`` or lists, as
    ``Runtime.apply_grouped_columns`` takes them): where rows stand in ``(relation, sign, rows)``."""

    columns: list

    def __len__(self) -> int:
        return len(self.columns[0]) if self.columns else 0


class NativeMemberRuntime(MemberRuntime):
    """A :class:`MemberRuntime` whose maps are the native backend's C maps (the Python backend's where C cannot
    run the program, or after a value outgrew 64 bits)."""

    keeps_native = True
    exported = 0  # entries served from C as column buffers (:meth:`exported_at`), since this runtime was made

    def set_layout(self, layout: Layout, plan: Plan | None = None) -> None:
        super().set_layout(layout, plan)
        self._owners = np.asarray(layout.owners, dtype=np.int64)

    # -- batches -------------------------------------------------------------------------
    def apply_grouped(self, batches: Iterable[tuple[str, int, Sequence]]) -> int:
        if self.native_maps() is None:
            return super().apply_grouped(self._as_rows(list(batches)))
        return self.apply_with(batches, {})

    def apply_with(self, batches: Iterable[tuple[str, int, Sequence]], pushed: dict | Pushed) -> int:
        """:meth:`MemberRuntime.apply_with`; ``pushed`` may also be a :class:`~..runtime.native.install.Pushed`
        whose column buffers are installed in C by ``rt_import`` (node/cumulus/applying.py makes it)."""
        batches = list(batches)
        native = self.native_maps()
        if native is None:
            return super().apply_with(self._as_rows(batches), _plain(pushed))
        for rel, sign, _ in batches:
            if (rel, sign) not in self._triggers:
                raise RuntimeStateError(f"no trigger for {'+' if sign > 0 else '-'}{rel}"
                                        if rel in self._arity else f"unknown relation {rel!r}")
        guard = bool(pushed) or any((rel, sign) in self.foreign for rel, sign, _ in batches)
        try:
            prepared = [native.prepare(rel, sign, *self._columns(rel, rows)) for rel, sign, rows in batches if len(rows)]
        except IntOverflow as exc:
            return self._overflowed(exc, batches, pushed)
        with self._lock:
            installed: list = []
            try:
                self._install(native, pushed, installed)
                native.run(prepared)
            except IntOverflow as exc:
                self._uninstall(native, installed)
                return self._overflowed(exc, batches, pushed)
            except BaseException:
                self._uninstall(native, installed)
                raise
            self._version += 1
            self._changes = None  # computed from the C journal when asked for
            self._stale = True
            self._settle(native, guard)
            self._uninstall(native, installed)
            return self._version

    def _overflowed(self, exc: IntOverflow, batches: list, pushed: dict) -> int:
        """An INT of the batch outgrew int64 (nothing of it stayed in C): on the Python backend for good."""
        with self._lock:
            if self.native_maps() is not None:
                self._leave_native(f"{BEYOND_64_BITS} ({exc.where})")
        return super().apply_with(self._as_rows(batches), _plain(pushed))

    def _columns(self, relation: str, rows) -> tuple[list, int]:
        if isinstance(rows, ColumnRows):
            return rows.columns, len(rows)
        return mirror.columns(rows, self._arity[relation], relation), len(rows)

    def _as_rows(self, batches: list) -> list:
        """The batches as the Python backend takes them (columns made rows)."""
        out = []
        for rel, sign, rows in batches:
            if isinstance(rows, ColumnRows):
                rows = self._rows_of_columns([(rel, sign, rows.columns)])[0][2]
            out.append((rel, sign, rows))
        return out

    def _install(self, native, pushed: dict | Pushed, installed: list) -> None:
        """Set the pushed entries in C (never over an entry of our own); the keys set, by map (key tuples, or
        codes: :class:`Coded`), added to ``installed`` as each map's are set, so a later map's failure (an
        overflow, a bad column) takes out what was set before it."""
        if isinstance(pushed, Pushed):
            for c in pushed.columns:
                installed.append(self._install_columns(native, c))
            pushed = pushed.entries
        by_map: dict[str, list] = {}
        for (name, key), value in pushed.items():
            by_map.setdefault(name, []).append((key, value))
        for name, entries in by_map.items():
            foreign = self.foreign_keys(name, [self._store.pack(name, k) for k, _ in entries])
            if self._store.arity[name] == 1:
                entries = [(k, v) for k, v in entries if k[0] in foreign]
            else:
                entries = [(k, v) for k, v in entries if k in foreign]
            if entries:
                native.load(name, entries)
                installed.append((name, [k for k, _ in entries]))

    def _install_columns(self, native, entries: EntryColumns) -> Coded:
        """Set pushed entries given as column buffers in C, leaving out those this member owns (their partition
        column's slot tested in C, as :meth:`foreign_keys` tests a key): one ``rt_import``."""
        name, col = entries.name, self.columns[entries.name]
        skip = None
        if col is None or col == EVERYWHERE:  # every entry ours (a replicated map, or we are its home) or none
            if col == EVERYWHERE or self.layout.home == self.member:  # (as foreign_keys: none installed)
                return Coded(name, np.zeros((0, len(entries.columns)), dtype=np.int64), np.zeros(0, dtype=np.int64))
        else:
            skip = self._owners == self.member
        return import_columns(native, name, entries.columns, entries.values, ints_as_float=entries.ints_as_float,
                              install=True, skip=skip, col=col)

    @staticmethod
    def _uninstall(native, installed: list) -> None:
        for item in installed:
            if isinstance(item, Coded):
                if len(item):
                    native.set_codes(item.name, array("q", np.ascontiguousarray(item.table).tobytes()),
                                     array("q", bytes(8 * len(item))))
            else:
                name, keys = item
                native.load(name, [(k, 0) for k in keys])

    def _settle(self, native, guard: bool) -> None:
        """After a batch: drop what it wrote outside this member's slots (``guard``), record its changes."""
        for name in self._store.data:
            if not native.written(name):
                continue
            changed = native.changed([name])
            n = changed.n
            if not n:
                continue
            arity, stride = changed.arity, changed.stride
            codes = np.frombuffer(changed.keys, dtype=np.int64)
            keys = (codes[:n].reshape(n, 1) if arity == 1 else
                    np.stack([codes[i * stride:i * stride + n] for i in range(arity)], axis=1)) if arity else \
                np.zeros((n, 0), dtype=np.int64)
            float_map = name in native.float_maps
            kind = np.float64 if float_map else np.int64
            old = np.frombuffer(changed.olds, dtype=kind)[:n]
            new = np.frombuffer(changed.news, dtype=kind)[:n]
            if guard:
                own = self._owned(native, name, keys)
                if not own.all():
                    theirs = np.ascontiguousarray(keys[~own])
                    native.set_codes(name, array("q", theirs.tobytes()), array("q", bytes(8 * len(theirs))))
                    keys, old, new = keys[own], old[own], new[own]
                    if not len(keys):
                        continue
            keys = np.ascontiguousarray(keys)
            decode = partial(_stored, native, self._store)  # (the C side's intern table, even after leaving C)
            if self.on_write is not None:  # (a native pre-copy takes the codes: node/cumulus/native_copy.py)
                coded = getattr(self.on_write, "codes", None)
                if coded is not None:
                    coded(name, keys)
                else:
                    self.on_write(name, dict(zip(decode(name, keys), old.tolist())))
            self.deltas.coded(self.epoch, name, keys, new - old, decode)

    def _owned(self, native, name: str, keys: np.ndarray) -> np.ndarray:
        """Per key (codes), whether this member owns it."""
        col = self.columns[name]
        n = len(keys)
        if col is None:
            return np.full(n, self.layout.home == self.member)
        if col == EVERYWHERE:
            return np.ones(n, dtype=bool)
        codes = keys[:, col]
        kind = native.key_types[name][col]
        if kind == "FLOAT":
            slots = float_slots(codes.view(np.float64))
        elif kind == "STRING":
            distinct, back = np.unique(codes, return_inverse=True)
            strings = native.ids.strings
            slots = np.array([slot(strings[i]) for i in distinct.tolist()], dtype=np.int64)[back]
        else:  # INT, and DATE as its day's ordinal (the code), as hashing.slot hashes a date
            slots = int_slots(codes)
        return self._owners[slots] == self.member

    def read(self, map_name: str, pattern: tuple) -> list[tuple[tuple, object]]:
        """:meth:`MemberRuntime.read`; a fully bound pattern (what a member serves per row) is read from C, so
        serving does not bring the whole mirror up to date first."""
        native = self.native_maps()
        if native is None or len(pattern) != self._store.arity[map_name] or None in pattern:
            return super().read(map_name, pattern)
        key = tuple(pattern)
        with self._lock:
            value = native.get_many(map_name, [key])[0]
        return [(key, value)] if value else []

    def exported_at(self, map_name: str, keys: list[tuple]):
        """The entries of ``map_name`` at ``keys`` (key tuples; absent ones left out) as column buffers read from C
        in one call (:func:`..runtime.native.export.at_keys`): what a Push carries, made without a Python object
        per entry (node/cumulus/entry_columns.py wraps them as Arrow).  None off the native backend."""
        native = self.native_maps()
        if native is None:
            return None
        from ..runtime.native.export import at_keys  # (imports cffi: only on the native backend)
        with self._lock:
            got = at_keys(native, map_name, keys)
        self.exported += len(got)
        return got

    # -- view changes (the Python backend's form, read from the C journal) ---------------------
    def drop_foreign(self, journals: dict[str, list]) -> set[str]:
        """Leave out of the last batch's journals the keys this member does not own (it dropped them)."""
        cut = set()
        for name, journal in journals.items():
            if journal:
                foreign = self.foreign_keys(name, journal[::2])
                if foreign:
                    journal[:] = [x for k, old in zip(journal[::2], journal[1::2]) if k not in foreign for x in (k, old)]
                    cut.add(name)
        return cut

    # -- moving segments: the mirror changes, the same entries are written through to C ---------------
    def take_out(self, map_name: str, keys: Iterable, epoch: int) -> int:
        keys = list(keys)
        gone = super().take_out(map_name, keys, epoch)
        self._through(map_name, keys)
        return gone

    def take_out_codes(self, map_name: str, table: np.ndarray, epoch: int) -> int:
        """:meth:`take_out` of keys given as codes (one row per key; absent and repeated keys are fine): removed in
        C by their codes, recorded as coded changes of ``epoch`` (decoded only if a stable read or a snapshot asks)
        and the map reloaded whole by the mirror when next read: no Python object per entry (a native pre-copy's
        leaving entries, node/cumulus/native_copy.py).  Off the native backend: :meth:`take_out`."""
        native = self.native_maps()
        if native is None:
            raise RuntimeStateError("entries taken out by their codes off the native backend")
        if not table.shape[1]:  # a map without key columns: its one entry
            return self.take_out(map_name, [()] if len(table) else [], epoch)
        from ..runtime.native.export import values_at

        with self._lock:
            _, first = np.unique(np.ascontiguousarray(table).view(np.dtype((np.void, 8 * table.shape[1]))).ravel(),
                                 return_index=True)
            table = np.ascontiguousarray(table[np.sort(first)])
            values = values_at(native, map_name, table)
            present = values != 0
            table, values = np.ascontiguousarray(table[present]), values[present]
            if not len(table):
                return 0
            native.set_codes(map_name, array("q", table.tobytes()), array("q", bytes(8 * len(table))))
            native.reload_pending(map_name)
            self._stale = True
            self.deltas.coded(epoch, map_name, table, -values, partial(_stored, native, self._store))
        return len(table)

    def put_in_codes(self, map_name: str, coded: Coded, epoch: int) -> None:
        """:meth:`put_in` of entries given as codes (each key once, values non-zero: a staging's, node/cumulus/
        staging.py): set in C by their codes (the member holds none of these keys), recorded as coded changes of
        ``epoch`` and the map reloaded whole by the mirror when next read: no Python object per entry.  Only on
        the C maps the codes are of (a staging of codes made before the member left C decodes them and calls
        :meth:`put_in`)."""
        native = self.native_maps()
        if not len(coded):
            return
        if native is None:
            raise RuntimeStateError("entries put in by their codes off the native backend")
        with self._lock:
            table = np.ascontiguousarray(coded.table)
            native.set_codes(map_name, array("q", table.tobytes()), array("q", coded.bits.tobytes()))
            native.reload_pending(map_name)
            self._stale = True
            self.deltas.coded(epoch, map_name, table, coded.values(native), partial(_stored, native, self._store))

    def put_in(self, map_name: str, entries: dict, epoch: int) -> None:
        super().put_in(map_name, entries, epoch)
        self._through(map_name, list(entries))

    def install(self, entries: Iterable[tuple[str, tuple, object]], epoch: int) -> int:
        entries = list(entries)
        done = super().install(entries, epoch)
        pack = self.store.pack
        by_map: dict[str, list] = {}
        for name, key, _ in entries:
            by_map.setdefault(name, []).append(pack(name, key))
        for name, keys in by_map.items():
            self._through(name, keys)
        return done

    def _through(self, name: str, stored_keys: list) -> None:
        """Make the C map ``name`` hold the mirror's values at ``stored_keys``."""
        native = self.native_maps()
        if native is None or not stored_keys:
            return
        store = self.store
        with self._lock:
            native.load(name, [(store.unpack(name, k), store.get_stored(name, k, 0)) for k in dict.fromkeys(stored_keys)])
