"""A source's pre-copy on the native backend: the leaving entries listed, read and sent from C as codes.

:class:`~.precopy.SourceCopy` lists a map's keys from the member's Python
store, tests each key's slot and reads its value there: on the native
backend that store is a mirror of the C maps, brought up to date (a Python
key per entry) before the copy can list it.  :class:`NativeSourceCopy`
follows the same protocol (docs/cumulus.md §6.2: listed keys examined in
steps of a budget, dirty keys, a final chunk, the leaving entries taken out
at the flip) over the C maps' int64 codes:

* **start** lists each map's leaving entries in one pass in C
  (``rt_export``: the slot test runs there), in the order of their key
  values (so a member restored from a snapshot lists and sends the same
  chunks: :func:`ordered`);
* a **step** takes the next listed keys, reads their current values with
  one ``rt_get_many`` (a key gone since the listing is left out) and hands
  them on as column buffers (:class:`~boreas.m3.runtime.native.export.Exported`),
  which ``entry_columns.encode_exported`` makes a Chunk's Arrow columns
  of: no Python object per entry;
* **dirty keys** come as codes from the runtime's batches
  (``NativeMemberRuntime`` calls :meth:`Noting.codes`), or as keys from an
  install; the leaving ones are kept as codes, and a step's keys stop being
  dirty (the target now has their current value);
* **final** and **take_out** as the Python copy's; its **state** holds keys
  (the Python copy's codecs), so a snapshot restores here, or, on a member
  that left the native backend, into a Python copy listing again
  (:func:`restore_copy`).
"""

from __future__ import annotations

from array import array

import numpy as np

from boreas.m3.cumulus import EVERYWHERE, Layout
from boreas.m3.cumulus.member import MemberRuntime

from .precopy import Codecs, SourceCopy


def native_of(runtime: MemberRuntime):
    """The runtime's C maps when its copy can run on them (a native member), else None."""
    return runtime.native_maps() if runtime.keeps_native else None


def source_copy(runtime: MemberRuntime, new: Layout, moves: list, me: int) -> SourceCopy:
    """The copy of member ``me``'s leaving slots: on the C maps when the runtime runs native, else in Python."""
    if native_of(runtime) is not None:
        return NativeSourceCopy(runtime, new, moves, me)
    return SourceCopy(runtime, new, moves, me)


def restore_copy(state: dict, runtime: MemberRuntime, new: Layout, moves: list, me: int,
                 codecs: Codecs) -> SourceCopy:
    """A copy from its :meth:`~SourceCopy.state`, of whichever kind saved it (a native copy's state on a runtime
    now on the Python backend lists its maps again: exact, since staging a key twice is harmless)."""
    if not state.get("native"):
        copy = SourceCopy(runtime, new, moves, me)
    elif native_of(runtime) is not None:
        copy = NativeSourceCopy(runtime, new, moves, me)
    else:
        copy = SourceCopy(runtime, new, moves, me)
        copy.restore({**state, "todo": {}}, runtime, codecs)
        if copy.started:  # (the maps it had not finished listed again; a map done stays done)
            copy.start(runtime)
            pending = {name for name, todo in state["todo"].items() if len(codecs.keys[name].decode(todo))}
            copy.todo = {name: todo for name, todo in copy.todo.items() if name in pending}
        return copy
    copy.restore(state, runtime, codecs)
    return copy


def ordered(native, name: str, table: np.ndarray) -> np.ndarray:
    """The rows of ``table`` (codes, one key per row) in the order of their key values, the same after a restore
    (whose intern ids differ: STRING columns ordered by the strings); a FLOAT column by its bits."""
    if not len(table) or not table.shape[1]:
        return table
    columns = []
    for i, kind in enumerate(native.key_types[name]):
        col = table[:, i]
        if kind == "STRING":
            distinct, back = np.unique(col, return_inverse=True)
            strings = native.ids.strings
            rank = np.argsort(np.argsort(np.array([strings[j] for j in distinct.tolist()], dtype=object)))
            col = rank[back]
        columns.append(col)
    return table[np.lexsort(columns[::-1])]


def _rows(table: np.ndarray) -> np.ndarray:
    """Each row of ``table`` as one opaque value (for set operations over keys)."""
    table = np.ascontiguousarray(table)
    return table.view(np.dtype((np.void, table.dtype.itemsize * table.shape[1]))).ravel()


class Noting:
    """The runtime's write hook while a native copy runs: keys written as codes (:meth:`codes`, from a batch) or as
    stored keys (a call, from an install)."""

    def __init__(self, copy: NativeSourceCopy, runtime: MemberRuntime):
        self.copy, self.runtime = copy, runtime

    def __call__(self, name: str, keys) -> None:
        python = self.copy._left(self.runtime)  # (a batch that left C mid-copy: its writes are the Python copy's)
        if python is not None:
            python.note(name, keys)
        else:
            self.copy.note(name, keys)

    def codes(self, name: str, table: np.ndarray) -> None:
        self.copy.note_codes(name, table)


class NativeSourceCopy(SourceCopy):
    """A :class:`SourceCopy` over the C maps' codes (see the module's docstring)."""

    def __init__(self, runtime: MemberRuntime, new: Layout, moves: list, me: int):
        super().__init__(runtime, new, moves, me)
        self._args = (new, moves, me)
        self._python: SourceCopy | None = None  # the copy carried on in Python once the runtime left C
        self._native = native_of(runtime)
        self._columns = dict(runtime.columns)
        self._to = np.asarray(self._leaving, dtype=np.int32)
        self.todo: dict[str, np.ndarray] = {}  # map -> codes listed and not examined yet (taken from the end)
        self.sent: dict[str, list] = {name: [] for name in self._target_of}  # codes sent, per step
        self.dirty: dict[str, list] = {name: [] for name in self._target_of}  # codes written since, per batch

    @property
    def done(self) -> bool:
        if self._python is not None:
            return self._python.done
        return self.started and not any(len(t) for t in self.todo.values())

    def _left(self, runtime: MemberRuntime) -> SourceCopy | None:
        """The Python copy carrying on from this one's state once the runtime left the native backend (an INT
        beyond 64 bits), else None: the C maps read here are no longer the member's."""
        if self._python is None and native_of(runtime) is not self._native:
            codecs = Codecs(runtime.store)
            self._python = restore_copy(self.state(codecs), runtime, *self._args, codecs)
        return self._python

    def start(self, runtime: MemberRuntime) -> None:
        from boreas.m3.runtime.native.export import by_slots

        native = self._native
        for name, target_of in self._target_of.items():
            col = self._columns[name]
            if target_of == EVERYWHERE or target_of is None:
                exported, _ = by_slots(native, name, None, None)
            else:
                exported, _ = by_slots(native, name, col, self._to)
            table = np.stack(exported.keys, axis=1) if exported.keys else np.zeros((len(exported), 0), np.int64)
            self.todo[name] = ordered(native, name, table)
        self.started = True
        runtime.on_write = Noting(self, runtime)

    def _targets(self, name: str, table: np.ndarray) -> np.ndarray | None:
        """Each key's target (-1: stays), or None: every key goes to every target of the map (home, replicas)."""
        from boreas.m3.runtime.native.export import slots_of

        target_of = self._target_of[name]
        if target_of == EVERYWHERE or target_of is None:
            return None
        return self._to[slots_of(self._native, name, self._columns[name], table[:, self._columns[name]])]

    def _receivers(self, name: str) -> list[int]:
        return self.replicas if self._target_of[name] == EVERYWHERE else [self._home]

    def note_codes(self, name: str, table: np.ndarray) -> None:
        """A batch wrote the keys ``table`` holds (codes) in map ``name``: the leaving ones are dirty."""
        if name not in self.dirty or not len(table):
            return
        to = self._targets(name, table)
        self.dirty[name].append(np.array(table if to is None else table[to >= 0], dtype=np.int64))

    def note(self, name: str, keys) -> None:
        """Keys written in the store's form (an install): as :meth:`note_codes`, encoded."""
        if name not in self.dirty:
            return
        native = self._native
        tuples = [(k,) for k in keys] if native.arity[name] == 1 else [tuple(k) for k in keys]
        if tuples:
            flat = np.frombuffer(native.codec.encode_keys(name, tuples), dtype=np.int64)
            self.note_codes(name, flat[:len(tuples) * native.arity[name]].reshape(len(tuples), native.arity[name]))

    def _dirty(self, name: str) -> np.ndarray:
        """Map ``name``'s dirty keys, each once (in the order of their values)."""
        parts = self.dirty[name]
        arity = self._native.arity[name]
        if not parts:
            return np.zeros((0, arity), np.int64)
        table = np.concatenate(parts) if len(parts) > 1 else parts[0]
        if arity:
            _, first = np.unique(_rows(table), return_index=True)
            table = table[np.sort(first)]
        else:
            table = table[:1]
        self.dirty[name] = [table]
        return table

    def step(self, runtime: MemberRuntime, budget: int) -> dict[int, list]:
        """Examine up to ``budget`` listed keys: ``{target: [Exported, ...]}`` of those still present."""
        from boreas.m3.runtime.native.export import Exported, values_at

        if (python := self._left(runtime)) is not None:
            return python.step(runtime, budget)
        out: dict[int, list] = {}
        native = self._native
        for name, todo in self.todo.items():
            if budget <= 0:
                break
            if not len(todo):
                continue
            take = min(budget, len(todo))
            rows, self.todo[name] = todo[len(todo) - take:], todo[:len(todo) - take]
            budget -= take
            values = values_at(native, name, rows)
            present = values != 0
            rows, values = rows[present], values[present]
            if not len(rows):
                continue
            if self.dirty[name]:  # sent now: no longer dirty
                dirty = self._dirty(name)
                if len(dirty) and dirty.shape[1]:
                    self.dirty[name] = [dirty[~np.isin(_rows(dirty), _rows(rows))]]
                elif dirty.shape[1] == 0:
                    self.dirty[name] = []
            if self._target_of[name] != EVERYWHERE:
                self.sent[name].append(rows)
            exported = Exported(name, native.key_types[name], tuple(rows[:, i] for i in range(rows.shape[1])),
                                values, native.ids.strings)
            to = self._targets(name, rows)
            if to is None:
                for t in self._receivers(name):
                    out.setdefault(t, []).append(exported)
                continue
            for t in sorted(set(to.tolist())):
                out.setdefault(t, []).append(exported.where(to == t))
        return out

    def final(self, runtime: MemberRuntime) -> dict[int, list]:
        """``{target: [Exported]}``: the current value (0: gone) of every dirty key, for every target."""
        from boreas.m3.runtime.native.export import Exported, values_at

        if (python := self._left(runtime)) is not None:
            return python.final(runtime)
        out: dict[int, list] = {t: [] for t in self.targets}
        native = self._native
        for name in self.dirty:
            dirty = ordered(native, name, self._dirty(name))
            if not len(dirty):
                continue
            exported = Exported(name, native.key_types[name], tuple(dirty[:, i] for i in range(dirty.shape[1])),
                                values_at(native, name, dirty), native.ids.strings)
            to = self._targets(name, dirty)
            if to is None:
                for t in self._receivers(name):
                    out[t].append(exported)
                continue
            for t in sorted(set(to.tolist())):
                out[t].append(exported.where(to == t))
        return out

    def counts(self) -> tuple[int, int]:
        if self._python is not None:
            return self._python.counts()
        return (sum(len(p) for parts in self.sent.values() for p in parts),
                sum(len(p) for parts in self.dirty.values() for p in parts))

    def take_out(self, runtime: MemberRuntime, epoch: int) -> None:
        """Remove every leaving entry (sent or dirty) from the runtime, as changes of ``epoch``."""
        if (python := self._left(runtime)) is not None:
            return python.take_out(runtime, epoch)
        runtime.on_write = None
        for name, parts in self.sent.items():
            if self._target_of[name] == EVERYWHERE:
                continue
            leaving = [p for p in [*parts, self._dirty(name)] if len(p)]
            if leaving:
                runtime.take_out_codes(name, np.concatenate(leaving), epoch)
        self.sent = {name: [] for name in self.sent}
        self.dirty = {name: [] for name in self.dirty}

    def _keys(self, name: str, parts: list) -> list:
        """Codes as stored keys (the form a snapshot and the Python store hold)."""
        parts = [p for p in parts if len(p)]
        if not parts:
            return []
        table = np.ascontiguousarray(np.concatenate(parts))
        native = self._native
        tuples = native.decode_keys(name, array("q", table.tobytes()), len(table))
        return [k[0] for k in tuples] if native.arity[name] == 1 else tuples

    def _codes(self, name: str, stored: list) -> np.ndarray:
        native, arity = self._native, self._native.arity[name]
        if not stored:
            return np.zeros((0, arity), np.int64)
        tuples = [(k,) for k in stored] if arity == 1 else [tuple(k) for k in stored]
        flat = np.frombuffer(native.codec.encode_keys(name, tuples), dtype=np.int64)
        return flat[:len(tuples) * arity].reshape(len(tuples), arity).copy()

    def state(self, codecs: Codecs) -> dict:
        if self._python is not None:
            return self._python.state(codecs)
        keys = codecs.keys
        return {"started": self.started, "native": True,
                "todo": {name: keys[name].encode(self._keys(name, [t])) for name, t in self.todo.items()},
                "sent": {name: keys[name].encode(self._keys(name, parts)) for name, parts in self.sent.items()},
                "dirty": {name: keys[name].encode(self._keys(name, parts)) for name, parts in self.dirty.items()}}

    def restore(self, state: dict, runtime: MemberRuntime, codecs: Codecs) -> None:
        self.started = bool(state["started"])
        keys = codecs.keys
        self.todo = {name: self._codes(name, keys[name].decode(t)) for name, t in state["todo"].items()}
        self.sent = {name: [self._codes(name, keys[name].decode(t))] for name, t in state["sent"].items()}
        self.dirty = {name: [self._codes(name, keys[name].decode(t))] for name, t in state["dirty"].items()}
        if self.started:
            runtime.on_write = Noting(self, runtime)
