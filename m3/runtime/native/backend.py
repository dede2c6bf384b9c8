"""The loaded native module of one runtime: batches in as columns, entries out for the Python mirror.

Why columns: crossing into C costs about a microsecond per call, so a batch
crosses once per (relation, sign): each column the trigger reads becomes one
``array`` of int64 or double (dates as day numbers, strings as ids of the
runtime's intern table, made in one pass per column), handed to C without a
copy.  What comes back is only what a reader asks for: the keys written since
the mirror's last sync (:meth:`NativeMaps.pending`), the last batch's journal
(:meth:`NativeMaps.changed_entries`, for the view changes), or a map's entries.
"""

from __future__ import annotations

import datetime
import threading
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from cffi import FFI

from ...ast import Program
from ...errors import RuntimeStateError
from ...functions import FUNCTIONS, result_type
from .build import Built, build
from .cgen import Module, generate
from .codes import Codec, Compactor, Dates, DayNumbers, Interner, packed
from .computed import distinct_arguments, spread
from .crt_api import CDEF
from .crt_slices import SLICES_CDEF
from .crt_strings import STRINGS_CDEF, StringIndex
from .overflow import IntOverflow

RT_OVERFLOW = -3  # rt_trigger's result when an INT sum or product outgrew 64 bits (crt)
ffi = FFI()
ffi.cdef(CDEF + SLICES_CDEF + STRINGS_CDEF)
# The C types the batch calls name, parsed now: cffi parses a type string the first time it is used (some
# milliseconds with pycparser), which would otherwise fall on a node's first batch.
for _type in ("void *[]", "int[]", "int64_t *", "int64_t[]"):
    ffi.typeof(_type)
_LIBS: dict[str, object] = {}
_LIBS_LOCK = threading.Lock()


def _i64(a: array):
    """An int64 ``array`` as a C pointer, without a copy."""
    return ffi.from_buffer("int64_t[]", a)


@dataclass(frozen=True)
class Changed:
    """What :meth:`NativeMaps.changed` read: ``n`` changed keys, column-major in int64 ``array`` objects of stride
    ``stride``: key column i at ``keys[i*stride:i*stride+n]`` (codes: INT as is, DATE a day number, STRING an
    intern id, FLOAT its bits), map j's value bits before the batch at ``olds[j*stride:...]`` and now at
    ``news[j*stride:...]``.  Buffers, not lists: a reader wraps each column without a copy
    (``pyarrow.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(keys)], offset=i * stride)``)."""

    n: int
    stride: int
    arity: int
    keys: array
    olds: array
    news: array


@dataclass(frozen=True)
class Changelog:
    """What :meth:`NativeMaps.changelog` read: ``n`` rows, the first ``leaving`` of them the old rows of changed
    keys (weight -1), then the new ones (+1); column-major int64 buffers (``bytes`` holding exactly those rows)
    of stride ``stride`` slots (``n``): key column i from slot ``i*stride``, ``n`` of them (codes as in
    :class:`Changed`), map j's value bits from slot ``j*stride``, and ``n`` weights from slot 0, each wrapped
    by a reader without a copy."""

    n: int
    leaving: int
    stride: int
    keys: bytes
    vals: bytes
    weights: bytes


class NativeMaps:
    """One runtime's C maps (the truth in native mode) behind the fixed API of :mod:`.crt`."""

    def __init__(self, program: Program, module: Module, lib, built: Built, epsilon: float):
        self.program, self.module, self.lib, self.built = program, module, lib, built
        self.rt = ffi.gc(lib.rt_new(epsilon), lib.rt_free)
        if self.rt == ffi.NULL:
            raise MemoryError("rt_new")
        self.ids, self.days, self.dates = Interner(), DayNumbers(), Dates()
        self.index = StringIndex(ffi, lib, self.rt, self.ids)  # a column's ids found in C (.crt_strings)
        for s in module.strings:  # the generated code knows string constants by these ids
            self.ids[s]
        self._sent = 0  # strings of the intern table the C side has (only when it orders strings)
        self.compactor = Compactor()  # when the intern table is next compacted (.compaction)
        self.send_strings()
        self.map_no = {name: i for i, name in enumerate(module.maps)}
        self.trigger_no = {key: i for i, key in enumerate(module.triggers)}
        self.arity = {m.name: len(m.keys) for m in program.maps}
        self.key_types = {m.name: tuple(k.type for k in m.keys) for m in program.maps}
        self.float_maps = {m.name for m in program.maps if m.value_type == "FLOAT"}
        self.column_types = {r.name: tuple(c.type for c in r.columns) for r in program.relations}
        self.column_names = {r.name: tuple(c.name for c in r.columns) for r in program.relations}
        self.codec = Codec(self.arity, self.key_types, self.float_maps, self.ids, self.days, self.dates)
        self.stamp = 0  # bumped by every change of the C maps (:meth:`touched`): a read's codes are valid while equal
        self._closed: dict[str, tuple[int, float, int, np.ndarray]] = {}  # name: the last _at_most's codes

    # -- batches in ----------------------------------------------------------
    def column(self, values, m3_type: str) -> array | memoryview:
        """One column as the C side reads it (:meth:`.codes.Codec.column`)."""
        return self.codec.column(values, m3_type)

    def send_strings(self, again: bool = False) -> None:
        """Give the C side the strings interned since the last call (``again``: all), if it orders strings."""
        if not self.module.string_order:
            return
        self._sent = 0 if again else self._sent
        strings = self.ids.strings
        for i in range(self._sent, len(strings)):
            b = strings[i].encode("utf-8", "surrogatepass")
            if self.lib.rt_intern(self.rt, i, b, len(b)):
                raise MemoryError("rt_intern")
        self._sent = len(strings)

    def prepare(self, relation: str, sign: int, columns: Sequence, n: int) -> tuple:
        """``(trigger number, rows, C pointer array, keep-alive)`` for :meth:`run`: columns converted, nothing run."""
        used = self.module.used[(relation, sign)]
        types = self.column_types[relation]
        if len(columns) != len(types):
            raise ValueError(f"relation {relation} has {len(types)} columns, not {len(columns)}")
        ptrs = ffi.new("void *[]", max(1, len(types) + len(self.module.computed.get((relation, sign), ()))))
        keep = []
        for i in used:
            try:
                col = self.column(columns[i], types[i])
            except OverflowError:  # an INT value the Python backend takes and int64 cannot hold
                if types[i] != "INT":
                    raise
                raise IntOverflow(f"column {self.column_names[relation][i]} of {relation}") from None
            if len(col) != n:
                raise ValueError(f"column {i} of {relation} has {len(col)} values, not {n}")
            keep.append(col)
            ptrs[i] = ffi.from_buffer(col)  # void *: any buffer
        for j, (i, call) in enumerate(self.module.computed.get((relation, sign), ())):  # strings: interned ids
            consts, fn, kind = tuple(a.value for a in call.args[1:]), FUNCTIONS[call.fn][3], result_type(call.fn)
            distinct = distinct_arguments(columns[i], types[i], self.ids.strings)
            if distinct is not None:  # once per distinct argument (module computed)
                args, inverse = distinct
                col = spread([fn(v, *consts) for v in args], inverse, kind, self.ids.__getitem__)
                keep.append(col)
                ptrs[len(types) + j] = ffi.from_buffer(col)
                continue
            values = columns[i]
            if packed(values, "q") and types[i] == "STRING":
                values = [self.ids.strings[x] for x in values]
            elif packed(values, "q") and types[i] == "DATE":  # day numbers (CAST_STRING of a DATE reads the date)
                values = [datetime.date.fromordinal(x) for x in values]
            col = array("d", [fn(v, *consts) for v in values]) if kind == "FLOAT" else \
                array("q", [self.ids[fn(v, *consts)] for v in values] if kind == "STRING"
                      else [fn(v, *consts).toordinal() for v in values] if kind == "DATE"
                      else [fn(v, *consts) for v in values])
            keep.append(col)
            ptrs[len(types) + j] = ffi.from_buffer(col)
        if len(self.ids.strings) > self._sent:
            self.send_strings()
        return self.trigger_no[(relation, sign)], n, ptrs, keep

    def read_positions(self, relation: str, sign: int) -> frozenset[int]:
        """The columns of ``relation`` a ``sign`` batch's trigger reads (its used columns and the arguments of its
        computed ones): :meth:`prepare` touches no other, so rows need be turned into those columns only."""
        computed = self.module.computed.get((relation, sign), ())
        return frozenset(self.module.used[(relation, sign)]) | {i for i, _ in computed}

    def run(self, prepared: Iterable[tuple]) -> None:
        """Run prepared batches as one atomic batch: all, or (on any error) none.

        An INT value beyond 64 bits raises :class:`IntOverflow` (rolled back like any failure).
        """
        lib, rt = self.lib, self.rt
        self.touched()
        try:
            for tno, n, ptrs, _keep in prepared:
                if n and (rc := lib.rt_trigger(rt, tno, n, ptrs)) != 0:
                    if rc == RT_OVERFLOW:
                        rel, sign = self.module.triggers[tno]
                        raise IntOverflow(f"map {self.module.maps[lib.rt_overflow_map(rt)]}, "
                                          f"trigger {'+' if sign > 0 else '-'}{rel}")
                    raise RuntimeStateError("native trigger failed (out of memory or an injected failure); "
                                            "the batch was rolled back")
        except BaseException:
            lib.rt_rollback(rt)
            raise
        lib.rt_commit(rt)

    def touched(self) -> None:
        """The C maps change (a batch, a load, entries set or imported by codes): codes read before are stale."""
        self.stamp += 1
        self._closed.clear()

    def fail_after(self, updates: int) -> None:
        """Testing: make the ``updates``-th map update from now fail (0: never)."""
        self.lib.rt_fail_after(self.rt, updates)

    # -- entries out -----------------------------------------------------------
    def decode_keys(self, name: str, flat: array, n: int) -> list[tuple]:
        """``n`` keys of map ``name`` given as codes, row-major (``arity`` int64 each), as Python key tuples."""
        return self.codec.decode_keys(name, flat, n)

    def set_codes(self, name: str, flat: array, values: array) -> None:
        """Set entries of map ``name`` at keys given as codes (row-major), value bits ``values`` (0 removes one);
        no journal, as :meth:`load`: the member runtime drops what it does not own this way."""
        self._closed.pop(name, None)  # (only this map changes: another map's codes read stay valid)
        if len(values) and self.lib.rt_load(self.rt, self.map_no[name], len(values), _i64(flat), _i64(values)):
            raise MemoryError(f"setting entries of map {name}")

    def reload_pending(self, name: str) -> None:
        """Make the mirror reload map ``name`` whole when next read (it changed by codes: :meth:`set_codes`)."""
        self.lib.rt_pending_reload(self.rt, self.map_no[name])

    def pending(self, name: str) -> list[tuple] | None:
        """The keys written since :meth:`clear_pending` (no repeats), or None: too many, reload the map."""
        m = self.map_no[name]
        n = self.lib.rt_pending(self.rt, m, ffi.NULL)
        if n < 0:
            return None
        if self.arity[name] == 0:
            return [()] if n else []
        flat = array("q", bytes(8 * n))
        self.lib.rt_pending(self.rt, m, _i64(flat))
        return list(dict.fromkeys(self.codec.decode_keys(name, flat, n // self.arity[name])))

    def clear_pending(self) -> None:
        self.lib.rt_pending_clear(self.rt)

    def drop_pending(self, name: str) -> None:
        """:meth:`clear_pending` for map ``name`` alone (its mirror caught up from :meth:`changed_entries`)."""
        self.lib.rt_pending_drop(self.rt, self.map_no[name])

    def lags_one_batch(self, name: str) -> bool:
        """Whether the keys written to map ``name`` since its pending list was cleared are exactly the last
        committed batch's (its journal's, repeats included): then a mirror current before that batch catches up
        from :meth:`changed_entries` alone.  Never for a map without key columns (its pending list is a flag)."""
        arity = self.arity[name]
        m = self.map_no[name]
        return bool(arity) and self.lib.rt_pending(self.rt, m, ffi.NULL) == \
            self.lib.rt_last(self.rt, m, ffi.NULL) // (arity + 1) * arity

    def changed_entries(self, name: str) -> tuple[list[tuple], Sequence, Sequence]:
        """The keys the last committed batch wrote in map ``name`` (each once, in the order first written; a key
        written back to its value kept: a TRACK map's entries are written so that their rows are named), their
        values before the batch (the first journal record's) and now: the journal made distinct, with the values
        now, by one C call (``rt_last_distinct``: a hash pass, no sort, no key encoded again), the keys decoded."""
        m, arity = self.map_no[name], self.arity[name]
        cap = self.lib.rt_last(self.rt, m, ffi.NULL) // (arity + 1)
        if not cap:
            return [], [], []
        keys = array("q", bytes(8 * max(1, cap * arity)))
        olds, news = array("q", bytes(8 * cap)), array("q", bytes(8 * cap))
        n = self.lib.rt_last_distinct(self.rt, m, cap, _i64(keys), _i64(olds), _i64(news))
        if n < 0:
            raise MemoryError("rt_last_distinct")
        del keys[max(1, n * arity):], olds[n:], news[n:]
        decoded = self.codec.decode_keys(name, keys, n)
        return decoded, self.codec.decode_values(name, olds), self.codec.decode_values(name, news)

    def get_many(self, name: str, keys: Sequence[tuple]) -> Sequence:
        """The current values at ``keys`` (0 where absent)."""
        if not keys:
            return []
        flat = self.codec.encode_keys(name, keys)
        out = array("q", bytes(8 * len(keys)))
        self.lib.rt_get_many(self.rt, self.map_no[name], len(keys), _i64(flat), _i64(out))
        return self.codec.decode_values(name, out)

    def written(self, name: str) -> bool:
        """Whether the last committed batch wrote map ``name`` (one C call: a reader skips the maps it did not)."""
        return bool(self.lib.rt_last(self.rt, self.map_no[name], ffi.NULL))

    def changed(self, names: Sequence[str]) -> Changed:
        """The keys the last committed batch changed in maps ``names`` (a plain view's maps: one key arity),
        each once, with every map's value bits before the batch and now (a key whose values all stayed is left
        out): one C call over the journals, no Python object per key (:class:`Changed`)."""
        nos = ffi.new("int[]", [self.map_no[name] for name in names])
        cap = self.lib.rt_changes_cap(self.rt, len(names), nos)
        arity = self.arity[names[0]] if names else 0
        if any(self.arity[name] != arity for name in names):
            raise ValueError(f"maps {', '.join(names)} differ in key arity")
        keys, olds, news = (array("q", bytes(8 * max(1, cap * w))) for w in (arity, len(names), len(names)))
        n = self.lib.rt_changes(self.rt, len(names), nos, cap, _i64(keys), _i64(olds), _i64(news)) if cap else 0
        if n < 0:
            raise MemoryError("rt_changes")
        return Changed(n, cap, arity, keys, olds, news)

    def changelog(self, names: Sequence[str]) -> Changelog:
        """:meth:`changed` as the changelog of a view whose values are the values of maps ``names`` (no
        quotient): a row is in the view unless each of them is 0, the rows that leave come first (one C call,
        ``rt_changelog``, so a reader makes the view's out columns without a kernel per row)."""
        nos = ffi.new("int[]", [self.map_no[name] for name in names])
        cap = self.lib.rt_changes_cap(self.rt, len(names), nos)
        arity = self.arity[names[0]] if names else 0
        if any(self.arity[name] != arity for name in names):
            raise ValueError(f"maps {', '.join(names)} differ in key arity")
        # Room for 2*cap rows, of which C writes only the n it emits, packed (stride n): uninitialised
        # (np.empty), so the pages it does not write are neither zeroed nor faulted in; the n rows are then
        # copied out, so what travels downstream is the rows, not buffers the size of the journals (a view
        # written many times per key in a batch has far more writes than changed rows).
        room = 2 * cap
        scratch = [np.empty(max(1, room * w), np.int64) for w in (arity, len(names), 1)]
        leaving = ffi.new("int64_t *")
        n = self.lib.rt_changelog(self.rt, len(names), nos, cap, *(ffi.from_buffer("int64_t[]", a) for a in scratch),
                                  leaving) if cap else 0
        if n < 0:
            raise MemoryError("rt_changelog")
        keys, vals, weights = (a[:n * w].tobytes() for a, w in zip(scratch, (arity, len(names), 1)))
        return Changelog(n, leaving[0], n, keys, vals, weights)

    def dump(self, name: str) -> list[tuple[tuple, object]]:
        """Every entry of map ``name``."""
        m = self.map_no[name]
        n = self.lib.rt_count(self.rt, m)
        keys, vals = array("q", bytes(8 * n * max(1, self.arity[name]))), array("q", bytes(8 * n))
        got = self.lib.rt_dump(self.rt, m, _i64(keys), _i64(vals))
        return list(zip(self.codec.decode_keys(name, keys, got), self.codec.decode_values(name, vals)))

    def columns_at_most(self, name: str, position: int, bound: float) -> tuple[np.ndarray, np.ndarray]:
        """The codes and value bits of map ``name``'s entries whose INT key column ``position`` is at most
        ``bound`` (:meth:`entry_codes`, one numpy mask).  The codes are kept until the maps next change, so that
        :meth:`remove_at_most` of the same entries (a closing reads its windows, then deletes them) dumps the map
        no second time.  Undecoded, the codes are a window join's closed leaf rows as columns (.closed_columns)."""
        table, vals = self.entry_codes(name)
        mask = table[:, position] <= bound
        picked = table[mask]
        self._closed[name] = (position, bound, self.stamp, picked)
        return picked, vals[mask]

    def entry_codes(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """Map ``name``'s entries undecoded, one dump: ``(n, arity)`` key codes and ``n`` value bits."""
        m, arity = self.map_no[name], self.arity[name]
        n = self.lib.rt_count(self.rt, m)
        keys, vals = np.empty(max(1, n * arity), np.int64), np.empty(max(1, n), np.int64)
        got = self.lib.rt_dump(self.rt, m, *(ffi.from_buffer("int64_t[]", a) for a in (keys, vals)))
        return keys[:got * arity].reshape(got, arity), vals[:got]

    def items_at_most(self, name: str, position: int, bound: float, keep=None) -> dict[tuple, object]:
        """The entries of map ``name`` whose INT key column ``position`` is at most ``bound`` (the entries of
        closed event-time windows: node/operators/m3windows.py): one dump and one numpy mask, only those keys
        decoded, their values from the same dump (no key encoded to read it back); ``keep``
        (:class:`..closed.Keep`): only the codes its ``mask`` keeps are decoded."""
        picked, vals = self.columns_at_most(name, position, bound)
        if keep is not None:
            kept = keep.mask(picked)
            picked, vals = picked[kept], vals[kept]
        keys = self.codec.decode_keys(name, array("q", picked.tobytes()), len(picked))
        return dict(zip(keys, self.codec.decode_values(name, array("q", vals.tobytes()))))

    def remove_at_most(self, name: str, position: int, bound: float) -> int:
        """Remove the entries :meth:`items_at_most` gives, by their codes (no key decoded or encoded); how many.
        The codes of the last :meth:`items_at_most` of the same map and bound, when the maps have not changed
        since (the closing that read them): one dump per closing, not two."""
        last = self._closed.pop(name, None)
        if last is not None and last[:3] == (position, bound, self.stamp):  # read since the maps last changed
            picked = last[3]
        else:
            picked, _ = self.columns_at_most(name, position, bound)
        if len(picked):
            self.set_codes(name, array("q", picked.tobytes()), array("q", bytes(8 * len(picked))))
        return len(picked)

    def load(self, name: str, entries: Sequence[tuple[tuple, object]]) -> None:
        """Set entries of map ``name`` (no journal: loading state, not a batch)."""
        if not entries:
            return
        keys = self.codec.encode_keys(name, [k for k, _ in entries])
        self.send_strings()
        vals = self.codec.encode_values(name, [v for _, v in entries])
        self.touched()
        if self.lib.rt_load(self.rt, self.map_no[name], len(entries), _i64(keys), _i64(vals)):
            raise MemoryError(f"loading map {name}")

    def clear(self) -> None:
        self.touched()
        self.lib.rt_clear(self.rt)

    def entries(self) -> int:
        return self.lib.rt_entries(self.rt)


def open_native(program: Program, epsilon: float) -> NativeMaps:
    """Generate, build (or find in the cache) and load ``program``'s C module.

    Raises :class:`.cexpr.Unsupported` or :class:`.build.NoCompiler` with the reason it cannot.
    """
    module = generate(program)
    built = build(module.source)
    with _LIBS_LOCK:
        lib = _LIBS.get(str(built.path))
        if lib is None:
            lib = _LIBS[str(built.path)] = ffi.dlopen(str(built.path))
    return NativeMaps(program, module, lib, built, epsilon)
