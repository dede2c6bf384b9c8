"""The intern table compacted between batches: strings no C map holds any more leave it (issue 34).

Why: a STRING key lives in the C maps as its id in the runtime's intern
table (:class:`.codes.Interner`), which otherwise only grows: every distinct
string a box ever saw kept its id and its Python ``str`` after the entries
holding it were gone (closed windows dropped, rows deleted), so an unbounded
stream of nearly unique strings (Nexmark q7's ``extra``, a window join keyed
by a string) grew memory without bound.

When the table has grown past ``max(2 x the live count at the last
compaction, FLOOR)`` the runtime (m3/runtime/program.py, before a batch's
columns are prepared: never inside a batch, whose journals and columns are
read within it) calls :func:`compact`: the live ids are the program's string
constants (their fixed first ids, which the generated C code names), the
STRING key columns of every C map (one ``rt_dump`` each) and the STRING
columns of the batch about to run that already carry ids (made by
``Runtime.string_ids``); they are renumbered densely in their old order
(constants first, so they keep their ids), each map holding a STRING key is
rewritten by its codes (``rt_load``: old keys removed, renumbered ones set)
and reloaded whole by the mirror when next read, the batch's id columns are
renumbered, ``stamp`` is bumped (codes read before are stale) and the
strings are sent to C again when its conditions order strings.  Cost: O(the
live entries and strings) per compaction, at most once per doubling of the
table, so amortised O(1) per string interned.

The old string list is left as it was (a new list replaces it): a reader
that took codes with their list (:class:`.export.Exported`,
``node/operators/m3changes.StringTable``, :class:`.export.StringSlots`)
still decodes them, and notices the new one by its identity.  A Cumulus
member runtime keeps codes across batches (a pre-copy's dirty keys, a
staging's entries) and does not compact (``MemberRuntime.compacts_strings``
is False).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from .codes import packed

if TYPE_CHECKING:
    from .backend import NativeMaps


def _string_positions(native: NativeMaps) -> dict[str, list[int]]:
    return {name: [i for i, t in enumerate(types) if t == "STRING"] for name, types in native.key_types.items()
            if "STRING" in types}


def native_ptr(a: np.ndarray):
    from .backend import ffi

    return ffi.from_buffer("int64_t[]", a)


def _id_columns(native: NativeMaps, batches: Sequence[tuple]) -> list[tuple[int, int]]:
    """``(batch index, column index)`` of the batch's STRING columns that carry intern ids (int64, packed)."""
    out = []
    for b, (rel, _sign, cols) in enumerate(batches):
        for i, (col, t) in enumerate(zip(cols, native.column_types[rel])):
            if t == "STRING" and col is not None and packed(col, "q"):
                out.append((b, i))
    return out


def compact(native: NativeMaps, batches: Sequence[tuple]) -> list[tuple]:
    """Compact ``native``'s intern table (see the module's docstring); returns ``batches`` (``(relation, sign,
    columns)`` about to be prepared) with their id columns renumbered.  Call between batches only."""
    strings = native.ids.strings
    constants = len(native.module.strings)
    positions = _string_positions(native)
    dumps = {name: native.entry_codes(name) for name in positions}
    id_cols = _id_columns(native, batches)
    used = [np.arange(constants, dtype=np.int64)]
    used += [table[:, p] for name, (table, _) in dumps.items() for p in positions[name]]
    used += [np.frombuffer(batches[b][2][i], dtype=np.int64) for b, i in id_cols]
    live = np.unique(np.concatenate(used))  # sorted: the constants (ids 0 .. constants-1) keep their ids
    remap = np.full(len(strings), -1, dtype=np.int64)
    remap[live] = np.arange(len(live), dtype=np.int64)
    kept = [strings[i] for i in live.tolist()]
    for name, (table, vals) in dumps.items():
        m = native.map_no[name]
        native.lib.rt_pending_reload(native.rt, m)  # its pending keys are codes of the old table (empty or not)
        if not len(vals):
            continue
        renumbered = table.copy()
        for p in positions[name]:
            renumbered[:, p] = remap[table[:, p]]
        old, new = np.ascontiguousarray(table).ravel(), np.ascontiguousarray(renumbered).ravel()
        zeros, vals = np.zeros(len(vals), np.int64), np.ascontiguousarray(vals)
        lib = native.lib
        if lib.rt_load(native.rt, m, len(vals), native_ptr(old), native_ptr(zeros)) or \
                lib.rt_load(native.rt, m, len(vals), native_ptr(new), native_ptr(vals)):
            raise MemoryError(f"rewriting map {name} while compacting the intern table")
    native.ids.replace(kept)
    native.touched()
    native.send_strings(again=True)
    native.compactor.live, native.compactor.done = len(kept), native.compactor.done + 1
    out = [(rel, sign, list(cols)) for rel, sign, cols in batches]
    for b, i in id_cols:
        col = array("q")
        col.frombytes(remap[np.frombuffer(batches[b][2][i], dtype=np.int64)].tobytes())
        out[b][2][i] = col
    return out


def before_batch(runtime, native: NativeMaps, batches: list, columnar: bool) -> list:
    """``batches`` (``(relation, sign, columns)``, or rows: not ``columnar``) as the runtime prepares them,
    after compacting ``native``'s table if it is due (:meth:`.codes.Compactor.due`), their id columns
    renumbered; the last batch's view changes are read first (its journals hold codes of the old table).  A
    runtime whose class says ``compacts_strings = False`` (a Cumulus member: it keeps codes across batches) is
    left alone."""
    if not native.compactor.due(len(native.ids.strings)) or not getattr(runtime, "compacts_strings", True):
        return batches
    runtime.changes()
    if columnar:
        return compact(native, batches)
    compact(native, [])  # rows hold strings, not ids
    return batches
