r"""The intern table's strings indexed in C by their UTF-8 bytes: a column's intern ids found without a Python ``str``.

Why: a STRING column enters the C maps as the intern ids of its values
(:class:`.codes.Interner`, a Python dict), found once per distinct value of
a batch (node/operators/m3columns.py ``relation_columns``).  Each of those
lookups made a Python ``str`` of an Arrow value and hashed it in a dict of
every interned string: about 0.3 µs each on the shared machine (memory
bound: the dict's entries and string objects are scattered), Nexmark q22's
largest Python cost (four STRING columns of about 9,500 distinct values per
60,000 bids, docs/benchmarks.md).  Here the C side keeps a copy of the
interned strings' bytes and an open-addressing hash of them
(``rt_strings_add``), and ``rt_strings_find`` reads an Arrow string array's
offsets and bytes as they are and writes each value's id, or -1 where the
string is not interned yet; :class:`StringIndex` interns those few in Python
(the table's one owner stays :class:`.codes.Interner`) and tells the C side
of them before its next lookup.

The index is derived state, never saved: it follows the table by its length
(strings are only appended) and by the identity of its list (a compaction,
:mod:`.compaction`, replaces the list: the index is emptied and built again).

>>> "rt_strings_find(" in STRINGS and "rt_strings_find(" in STRINGS_CDEF
True
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .codes import Interner

STRINGS_CDEF = """
void rt_strings_reset(rt_t *rt);
int rt_strings_add(rt_t *rt, int64_t n, const int32_t *offsets, const char *data);
int64_t rt_strings_find(rt_t *rt, int64_t n, const int32_t *offsets, const char *data, int64_t *ids);
"""

STRINGS = r"""
/* the interned strings by their bytes: id i's bytes are bytes[off[i]..off[i+1]); slots hold ids (-1: empty) */
typedef struct { char *bytes; int64_t nbytes, bcap; int64_t *off; int64_t n, ocap; int64_t *slots; int64_t scap; } sidx_t;

static void sidx_free(void *p) {
    sidx_t *x = p;
    if (!x) return;
    free(x->bytes); free(x->off); free(x->slots); free(x);
}

static inline uint64_t sidx_hash(const char *p, int64_t n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int64_t i = 0; i < n; i++) { h ^= (unsigned char)p[i]; h *= 0x100000001b3ULL; }
    return h ^ (h >> 29);
}

static void sidx_place(sidx_t *x, int64_t id) {
    int64_t s = (int64_t)(sidx_hash(x->bytes + x->off[id], x->off[id + 1] - x->off[id]) & (uint64_t)(x->scap - 1));
    while (x->slots[s] >= 0) s = (s + 1) & (x->scap - 1);
    x->slots[s] = id;
}

void rt_strings_reset(rt_t *rt) { sidx_free(rt->sidx); rt->sidx = NULL; }

/* The next n ids' strings (an Arrow string array's int32 offsets, from its first, and its bytes).  0, or -1: out
   of memory (the index is then emptied: the caller stops using it). */
int rt_strings_add(rt_t *rt, int64_t n, const int32_t *offsets, const char *data) {
    sidx_t *x = rt->sidx;
    if (!x) {
        x = rt->sidx = calloc(1, sizeof(sidx_t));
        if (!x || !(x->off = calloc(64, sizeof(int64_t)))) { rt_strings_reset(rt); return -1; }
        x->ocap = 64;
    }
    int64_t add = (int64_t)offsets[n] - offsets[0];
    if (x->nbytes + add > x->bcap) {
        int64_t cap = x->bcap ? x->bcap : 4096;
        while (cap < x->nbytes + add) cap *= 2;
        char *b = realloc(x->bytes, cap); if (!b) { rt_strings_reset(rt); return -1; }
        x->bytes = b; x->bcap = cap;
    }
    if (x->n + n + 1 > x->ocap) {
        int64_t cap = x->ocap;
        while (cap < x->n + n + 1) cap *= 2;
        int64_t *o = realloc(x->off, sizeof(int64_t) * cap); if (!o) { rt_strings_reset(rt); return -1; }
        x->off = o; x->ocap = cap;
    }
    if (add) memcpy(x->bytes + x->nbytes, data + offsets[0], add);
    for (int64_t j = 0; j < n; j++) x->off[x->n + j + 1] = x->nbytes + (offsets[j + 1] - offsets[0]);
    x->nbytes += add;
    int64_t first = x->n;
    x->n += n;
    if (x->n * 2 > x->scap) {  /* grown past half full: a table of at least four slots per string, all placed again */
        int64_t cap = 64;
        while (cap < 4 * x->n) cap *= 2;
        int64_t *s = realloc(x->slots, sizeof(int64_t) * cap); if (!s) { rt_strings_reset(rt); return -1; }
        x->slots = s; x->scap = cap; first = 0;
        for (int64_t i = 0; i < cap; i++) s[i] = -1;
    }
    for (int64_t id = first; id < x->n; id++) sidx_place(x, id);
    return 0;
}

/* Each of n strings' id (an Arrow string array's int32 offsets, from its first, and its bytes), -1 for one not
   in the index; returns the number of those. */
int64_t rt_strings_find(rt_t *rt, int64_t n, const int32_t *offsets, const char *data, int64_t *ids) {
    sidx_t *x = rt->sidx;
    int64_t missed = 0;
    for (int64_t j = 0; j < n; j++) {
        const char *p = data + offsets[j];
        int64_t len = (int64_t)offsets[j + 1] - offsets[j], r = -1;
        if (x && x->scap) {
            int64_t s = (int64_t)(sidx_hash(p, len) & (uint64_t)(x->scap - 1));
            while ((r = x->slots[s]) >= 0) {
                if (x->off[r + 1] - x->off[r] == len && !memcmp(x->bytes + x->off[r], p, len)) break;
                s = (s + 1) & (x->scap - 1);
            }
        }
        missed += r < 0;
        ids[j] = r;
    }
    return missed;
}
"""


class StringIndex:
    """Owns what the C index of one native runtime's intern table holds (module docstring); the table itself is
    ``ids``'s (:class:`.codes.Interner`)."""

    def __init__(self, ffi, lib, rt, ids: Interner):
        self._ffi, self._lib, self._rt, self.ids = ffi, lib, rt, ids
        self._of: list[str] | None = None  # the table's list the index follows (a compaction makes a new one)
        self._n = 0  # its strings the index holds
        self.working = True  # False after a string Arrow cannot hold or C ran out of memory: the dict alone

    def ids_of(self, strings) -> list[int] | np.ndarray:
        """The intern ids of ``strings`` (interned now where new): a list of ``str`` by the table's dict, an Arrow
        string array without nulls by the C index (its new strings by the dict)."""
        if not isinstance(strings, pa.Array):
            return list(map(self.ids.__getitem__, strings))
        if not (self.working and strings.type == pa.string() and not strings.null_count and self._sync()):
            return list(map(self.ids.__getitem__, strings.to_pylist()))
        ffi, n = self._ffi, len(strings)
        out = np.empty(n, np.int64)
        if n:
            _, offsets, data = strings.buffers()
            starts = ffi.cast("int32_t *", ffi.from_buffer(offsets)) + strings.offset
            chars = ffi.from_buffer(data) if data is not None and data.size else ffi.new("char[1]")
            if self._lib.rt_strings_find(self._rt, n, starts, chars, ffi.from_buffer("int64_t[]", out)):
                at = np.flatnonzero(out < 0)
                out[at] = list(map(self.ids.__getitem__, strings.take(pa.array(at)).to_pylist()))
        return out

    def _sync(self) -> bool:
        """Tell the C side the strings interned since the last call (all of them after a compaction)."""
        strings = self.ids.strings
        if strings is not self._of:
            self._lib.rt_strings_reset(self._rt)
            self._of, self._n = strings, 0
        if len(strings) > self._n:
            try:
                more = pa.array(strings[self._n:], pa.string())
            except (pa.ArrowException, UnicodeError):  # (a lone surrogate, past 2 GB of text)
                self.working = False
                return False
            ffi = self._ffi
            _, offsets, data = more.buffers()
            chars = ffi.from_buffer(data) if data is not None and data.size else ffi.new("char[1]")
            if self._lib.rt_strings_add(self._rt, len(more), ffi.cast("int32_t *", ffi.from_buffer(offsets)), chars):
                self.working = False
                return False
            self._n = len(strings)
        return True
